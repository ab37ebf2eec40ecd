// Fault: an upstream whose answer breaks off. Before the answer's headers have gone out to the
// client, a body that does not come within the route's timeout is a 504 gateway_timeout (and a body
// the upstream drops a 502), like every other upstream failure, without any of the upstream's
// headers. The upstream is a raw TCP server; the client a raw socket that sees exactly what the
// gateway wrote, and when the connection ended.
import { createServer, connect, type Server, type Socket } from 'node:net'
import type { AddressInfo } from 'node:net'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { startGateway, type TestGateway } from '../helpers/gateway.js'

/** The route's timeout: how long the gateway waits for the answer's headers and then for each body chunk. */
const TIMEOUT_MS = 300
const HALF = 64 * 1024
/** Over the gateway's buffered-body limit (64 KiB), so the answer streams as it arrives. */
const DECLARED = 2 * HALF

interface RawUpstream {
  url: string
  /** The upstream's socket of the request for `path`, once that request has arrived. */
  socketFor (path: string): Promise<Socket>
  close (): Promise<void>
}

/** Heads of the answers, by path; each is sent at once, its body (if any) as the test decides. */
const HEADS: Record<string, string> = {
  '/up/late-chunked': 'HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nTransfer-Encoding: chunked\r\nX-Upstream: yes\r\n\r\n',
  '/up/late-declared': `HTTP/1.1 200 OK\r\nContent-Type: application/octet-stream\r\nContent-Length: ${DECLARED}\r\nX-Upstream: yes\r\n\r\n`,
  '/up/late-closed': 'HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nTransfer-Encoding: chunked\r\nX-Upstream: yes\r\n\r\n',
}

/** An HTTP/1.1 upstream written by hand: it answers each path's head and then leaves the socket to the test. */
async function startRawUpstream (): Promise<RawUpstream> {
  const arrived = new Map<string, { socket?: Socket, waiters: Array<(socket: Socket) => void> }>()
  const entry = (path: string) => arrived.get(path) ?? arrived.set(path, { waiters: [] }).get(path)!
  const sockets = new Set<Socket>()
  const server: Server = createServer((socket) => {
    sockets.add(socket)
    socket.on('close', () => sockets.delete(socket))
    socket.on('error', () => {})
    let head = ''
    const onData = (chunk: Buffer) => {
      head += chunk.toString('latin1')
      if (!head.includes('\r\n\r\n')) return
      socket.off('data', onData)
      const path = /^GET (\S+) /.exec(head)?.[1] ?? ''
      socket.write(HEADS[path] ?? 'HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n')
      const it = entry(path)
      it.socket = socket
      for (const resolve of it.waiters.splice(0)) resolve(socket)
    }
    socket.on('data', onData)
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    socketFor: async (path) => {
      const it = entry(path)
      return it.socket ?? await new Promise((resolve) => it.waiters.push(resolve))
    },
    close: async () => {
      for (const socket of sockets) socket.destroy()
      await new Promise<void>((resolve) => server.close(() => resolve()))
    },
  }
}

/** One GET on a raw socket: what the client received, head and body apart, as the gateway wrote them. */
interface Received { status: number, head: string, body: Buffer, ended: Promise<{ head: string, body: Buffer }> }

/**
 * Sends `GET path` and resolves once the answer's head and at least `bodyBytes` bytes after it
 * have arrived (the body as it came on the wire: chunked framing included); `ended` settles when
 * the gateway ends the connection.
 */
async function get (gateway: TestGateway, path: string, bodyBytes = 0): Promise<Received & { socket: Socket }> {
  const { port } = new URL(gateway.url)
  const socket = connect(Number(port), '127.0.0.1')
  socket.on('error', () => {})
  socket.write(`GET ${path} HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\nAccept: application/json\r\nConnection: close\r\n\r\n`)
  let data = Buffer.alloc(0)
  const split = () => {
    const at = data.indexOf('\r\n\r\n')
    return at === -1 ? undefined : { head: data.subarray(0, at).toString('latin1'), body: data.subarray(at + 4) }
  }
  const ended = new Promise<{ head: string, body: Buffer }>((resolve) => socket.on('close', () => resolve(split() ?? { head: data.toString('latin1'), body: Buffer.alloc(0) })))
  const first = await new Promise<{ head: string, body: Buffer }>((resolve, reject) => {
    const onData = (chunk: Buffer) => {
      data = Buffer.concat([data, chunk])
      const parts = split()
      if (parts !== undefined && parts.body.length >= bodyBytes) {
        socket.off('data', onData)
        socket.on('data', (more: Buffer) => { data = Buffer.concat([data, more]) })
        resolve(parts)
      }
    }
    socket.on('data', onData)
    void ended.then(() => reject(new Error(`the connection ended after ${data.length} bytes: ${data.subarray(0, 200).toString('latin1')}`)))
  })
  return { status: Number(/^HTTP\/1\.1 (\d{3})/.exec(first.head)?.[1] ?? 0), ...first, ended, socket }
}

/** The gateway's log lines for the request whose url is `url`, parsed. */
function linesFor (gateway: TestGateway, url: string): Array<Record<string, unknown>> {
  const lines = gateway.logs.map((line) => JSON.parse(line) as Record<string, unknown>)
  const ids = new Set(lines.filter((line) => line.url === url).map((line) => line.reqId))
  return lines.filter((line) => ids.has(line.reqId))
}

describe('fault: an upstream that breaks off its answer', () => {
  let upstream: RawUpstream
  let gateway: TestGateway

  beforeAll(async () => {
    upstream = await startRawUpstream()
    gateway = await startGateway({ routes: [{ path: '/up/', upstream: upstream.url, auth: 'none', timeout: `${TIMEOUT_MS}ms` }] })
  })

  afterAll(async () => {
    await gateway?.close()
    await upstream?.close()
  })

  describe('before the answer\'s headers went out', () => {
    it.each(['/up/late-chunked', '/up/late-declared'])('answers %s, whose first body byte is later than the route timeout, 504 gateway_timeout without the upstream\'s headers', async (path) => {
      const started = performance.now()
      const response = await get(gateway, path)
      const { body } = await response.ended
      // Not before the route's timeout: the gateway waited for the body as long as the route says.
      expect(performance.now() - started).toBeGreaterThanOrEqual(TIMEOUT_MS)
      expect(response.status).toBe(504)
      expect(response.head.toLowerCase()).not.toContain('x-upstream')
      expect(JSON.parse(body.toString())).toEqual({ error: 'gateway_timeout', message: 'The application did not answer in time.' })
      const lines = linesFor(gateway, path)
      expect(lines.find((line) => line.msg === 'upstream timed out')).toMatchObject({ level: 40, error: 'gateway_timeout', route: '/up', upstream: upstream.url, timeoutMs: TIMEOUT_MS })
      // No error-level line (an "unexpected error" 500 was one), no stack.
      expect(lines.filter((line) => (line.level as number) >= 50)).toEqual([])
      expect(JSON.stringify(lines)).not.toContain('"stack"')
    })

    it('answers 502 bad_gateway without the upstream\'s headers when the upstream closes after its headers and before any body byte', async () => {
      const answer = get(gateway, '/up/late-closed')
      ;(await upstream.socketFor('/up/late-closed')).end()
      const response = await answer
      const { body } = await response.ended
      expect(response.status).toBe(502)
      expect(response.head.toLowerCase()).not.toContain('x-upstream')
      expect(JSON.parse(body.toString())).toEqual({ error: 'bad_gateway', message: 'The application could not be reached.' })
      const lines = linesFor(gateway, '/up/late-closed')
      expect(lines.find((line) => line.msg === 'upstream failed')).toMatchObject({ level: 40, error: 'bad_gateway', route: '/up', errno: 'UND_ERR_SOCKET', reason: 'other side closed' })
      expect(lines.filter((line) => (line.level as number) >= 50)).toEqual([])
    })
  })
})
