// Fault: an upstream whose answer breaks off. Before the answer's headers have gone out to the
// client, a body that does not come within the route's timeout is a 504 gateway_timeout (and a body
// the upstream drops a 502), like every other upstream failure, without any of the upstream's
// headers. Once the headers went out, nothing but the end of the connection can tell the client:
// the gateway writes one `request errored` line (route, body bytes sent, the upstream's error) and
// counts it in gateway_upstream_aborted_total. The upstream is a raw TCP server; the client a raw
// socket that sees exactly what the gateway wrote, and when the connection ended.
import { createServer, connect, type Server, type Socket } from 'node:net'
import type { AddressInfo } from 'node:net'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { startGateway, type TestGateway } from '../helpers/gateway.js'
import { metricValue } from '../helpers/metrics.js'

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
  '/up/half': `HTTP/1.1 200 OK\r\nContent-Type: application/octet-stream\r\nContent-Length: ${DECLARED}\r\nX-Upstream: yes\r\n\r\n`,
  '/up/chunk-cut': 'HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nTransfer-Encoding: chunked\r\nX-Upstream: yes\r\n\r\n5\r\nhello\r\n',
  '/up/chunk-stall': 'HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nTransfer-Encoding: chunked\r\nX-Upstream: yes\r\n\r\n5\r\nhello\r\n',
  '/up/client-leaves': 'HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nTransfer-Encoding: chunked\r\nX-Upstream: yes\r\n\r\n5\r\nhello\r\n',
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

/** The route's count of cut-off answers, and of its 2xx answers, on /metrics. */
async function counts (gateway: TestGateway): Promise<{ aborted: number | undefined, ok: number }> {
  const text = await (await fetch(`${gateway.url}/metrics`)).text()
  return {
    aborted: metricValue(text, 'gateway_upstream_aborted_total{route="/up"}'),
    ok: metricValue(text, 'gateway_proxied_requests_total{route="/up",status_class="2xx"}') ?? 0,
  }
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
      expect(JSON.parse(body.toString())).toEqual({ error: 'gateway_timeout', message: 'The application behind this gateway did not answer in time.' })
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
      expect(JSON.parse(body.toString())).toEqual({ error: 'bad_gateway', message: 'The application behind this gateway could not be reached.' })
      const lines = linesFor(gateway, '/up/late-closed')
      expect(lines.find((line) => line.msg === 'upstream failed')).toMatchObject({ level: 40, error: 'bad_gateway', route: '/up', errno: 'UND_ERR_SOCKET', reason: 'other side closed' })
      expect(lines.filter((line) => (line.level as number) >= 50)).toEqual([])
    })
  })

  describe('after the answer\'s headers went out', () => {
    it('ends the connection of a declared-length answer the upstream cut off halfway, with one request errored line, and counts it', async () => {
      const before = await counts(gateway)
      // Shown before anything was cut off, so that a rate over it exists from the start.
      expect(before.aborted).toBe(0)
      const answer = get(gateway, '/up/half', HALF)
      // The upstream sends half the body; once the client has all of it, the upstream goes away.
      ;(await upstream.socketFor('/up/half')).write(Buffer.alloc(HALF, 'x'))
      const response = await answer
      expect(response.status).toBe(200)
      ;(await upstream.socketFor('/up/half')).end()
      const { body } = await response.ended
      expect(body.length).toBe(HALF)
      expectOneErroredLine('/up/half', { bytesSent: HALF, errno: 'UND_ERR_SOCKET', reason: 'other side closed' })
      // Counted as cut off, and among the route's answers under the status it began with.
      expect(await counts(gateway)).toEqual({ aborted: 1, ok: before.ok + 1 })
    })

    it('ends the connection of a chunked answer the upstream cut off in the middle of a chunk, with one request errored line, and counts it', async () => {
      const before = await counts(gateway)
      const response = await get(gateway, '/up/chunk-cut', '5\r\nhello\r\n'.length)
      expect(response.status).toBe(200)
      const socket = await upstream.socketFor('/up/chunk-cut')
      socket.end('a\r\nabc')
      const { body } = await response.ended
      // The chunk the gateway began to pass on is never finished, and no last chunk says the answer is whole.
      expect(body.toString()).not.toMatch(/0\r\n\r\n$/)
      expectOneErroredLine('/up/chunk-cut', { bytesSent: 8, errno: 'UND_ERR_SOCKET', reason: 'other side closed' })
      expect((await counts(gateway)).aborted).toBe((before.aborted ?? 0) + 1)
    })

    it('ends the connection of a chunked answer whose next chunk is later than the route timeout, with one request errored line, and counts it', async () => {
      const before = await counts(gateway)
      const response = await get(gateway, '/up/chunk-stall', '5\r\nhello\r\n'.length)
      const afterFirst = performance.now()
      expect(response.status).toBe(200)
      await response.ended
      expect(performance.now() - afterFirst).toBeGreaterThanOrEqual(TIMEOUT_MS)
      expectOneErroredLine('/up/chunk-stall', { bytesSent: 5, errno: 'UND_ERR_BODY_TIMEOUT', reason: 'Body Timeout Error' })
      expect((await counts(gateway)).aborted).toBe((before.aborted ?? 0) + 1)
    })

    it('does not count or log as the upstream\'s a client that leaves in the middle of an answer', async () => {
      const before = await counts(gateway)
      const response = await get(gateway, '/up/client-leaves', '5\r\nhello\r\n'.length)
      const upstreamSocket = await upstream.socketFor('/up/client-leaves')
      const upstreamGone = new Promise((resolve) => upstreamSocket.on('close', resolve))
      response.socket.destroy()
      // The gateway lets the upstream's connection go once it sees the client leave.
      await upstreamGone
      expect(linesFor(gateway, '/up/client-leaves').filter((line) => line.msg === 'request errored')).toEqual([])
      expect((await counts(gateway)).aborted).toBe(before.aborted)
    })
  })

  /** The one `request errored` line of the request for `url`: at error level, naming the route, never the upstream's headers or body. */
  function expectOneErroredLine (url: string, fields: Record<string, unknown>): void {
    const lines = linesFor(gateway, url)
    const errored = lines.filter((line) => line.msg === 'request errored')
    expect(errored).toHaveLength(1)
    expect(errored[0]).toMatchObject({ level: 50, route: '/up', upstream: upstream.url, method: 'GET', url, statusCode: 200, ...fields })
    expect(lines.filter((line) => line.msg !== 'request errored')).toEqual([])
    const text = JSON.stringify(errored[0])
    for (const leak of ['x-upstream', 'hello', 'xxxx', 'stack']) expect(text).not.toContain(leak)
  }
})
