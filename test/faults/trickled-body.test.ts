// Fault: an upstream that sends its headers at once and then trickles a small body, one byte at a
// time, each byte well within the route's timeout of the one before. A body of declared length
// 64 KiB or less is read whole before anything goes to the client, so the whole read is bounded by
// the route's timeout from the headers' arrival: the client gets a clean 504 gateway_timeout (none
// of the upstream's headers, never a 200 with part of the body), one warn line, and the upstream's
// connection is closed. (undici's body timeout bounds only the gaps, so this used to wait until
// the upstream had sent every byte: 205 timeouts here.) The upstream is a raw TCP server; the
// client a raw socket that sees exactly what the gateway wrote.
import { connect, createServer, type AddressInfo, type Server, type Socket } from 'node:net'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { startGateway, type TestGateway } from '../helpers/gateway.js'

/** The route's timeout. */
const TIMEOUT_MS = 1000
/** The upstream sends one body byte this often: five bytes per timeout, no gap near it. */
const STEP_MS = TIMEOUT_MS / 5
/** The body's declared length: well under the gateway's buffered-body limit (64 KiB). */
const DECLARED = 1024

interface Trickle {
  /** When the upstream wrote the answer's headers (performance.now()). */
  headAt: number
  /** How many body bytes it had written. */
  written: number
  /** Settles when the upstream's connection closes, with how many body bytes it had written by then. */
  closed: Promise<number>
}

interface TrickleUpstream { url: string, trickles: Trickle[], server: Server }

/** An HTTP/1.1 upstream written by hand: headers at once, then one body byte every STEP_MS until the connection closes. */
async function startTrickleUpstream (): Promise<TrickleUpstream> {
  const trickles: Trickle[] = []
  const server = createServer((socket: Socket) => {
    socket.on('error', () => {})
    let head = ''
    const onData = (chunk: Buffer) => {
      head += chunk.toString('latin1')
      if (!head.includes('\r\n\r\n')) return
      socket.off('data', onData)
      socket.write(`HTTP/1.1 200 OK\r\nContent-Type: application/octet-stream\r\nContent-Length: ${DECLARED}\r\nX-Upstream: yes\r\n\r\n`)
      const trickle: Trickle = { headAt: performance.now(), written: 0, closed: new Promise((resolve) => socket.on('close', () => resolve(trickle.written))) }
      trickles.push(trickle)
      const timer = setInterval(() => {
        if (trickle.written === DECLARED) return clearInterval(timer)
        socket.write('x')
        trickle.written++
      }, STEP_MS)
      socket.on('close', () => clearInterval(timer))
    }
    socket.on('data', onData)
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, trickles, server }
}

/** What a raw client received for `GET path`, and when its first byte came (performance.now()). */
interface Answer { status: number, head: string, body: string, firstByteAt: number }

/**
 * Sends `GET path` on a raw socket and settles with everything the gateway wrote once it ends the
 * connection, or with undefined once the upstream has trickled two timeouts' worth of bytes with
 * nothing sent to the client yet (the gateway is waiting for the whole body).
 */
async function get (gateway: TestGateway, path: string, upstream: TrickleUpstream): Promise<Answer | undefined> {
  const { port } = new URL(gateway.url)
  const socket = connect(Number(port), '127.0.0.1')
  socket.on('error', () => {})
  socket.write(`GET ${path} HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\nAccept: application/json\r\nConnection: close\r\n\r\n`)
  let data = Buffer.alloc(0)
  let firstByteAt = 0
  socket.on('data', (chunk: Buffer) => {
    firstByteAt ||= performance.now()
    data = Buffer.concat([data, chunk])
  })
  return await new Promise((resolve) => {
    const watch = setInterval(() => {
      const trickle = upstream.trickles.at(-1)
      if (firstByteAt === 0 && trickle !== undefined && trickle.written >= 10) {
        clearInterval(watch)
        socket.destroy()
        resolve(undefined)
      }
    }, STEP_MS)
    socket.on('close', () => {
      clearInterval(watch)
      const text = data.toString('latin1')
      const at = text.indexOf('\r\n\r\n')
      resolve({ status: Number(/^HTTP\/1\.1 (\d{3})/.exec(text)?.[1] ?? 0), head: text.slice(0, at), body: text.slice(at + 4), firstByteAt })
    })
  })
}

describe('fault: an upstream that trickles a small body', () => {
  let upstream: TrickleUpstream
  let gateway: TestGateway

  beforeAll(async () => {
    upstream = await startTrickleUpstream()
    gateway = await startGateway({ routes: [{ path: '/up/', upstream: upstream.url, auth: 'none', timeout: `${TIMEOUT_MS}ms` }] })
  })

  afterAll(async () => {
    await gateway?.close()
    await new Promise<void>((resolve) => upstream ? upstream.server.close(() => resolve()) : resolve())
  })

  it('answers 504 gateway_timeout at the route timeout after the headers, without the upstream\'s headers, and closes the upstream\'s connection', async () => {
    const answer = await get(gateway, '/up/trickle', upstream)
    const trickle = upstream.trickles.at(-1)!
    expect(answer, `nothing sent to the client after ${trickle.written} body bytes over ${Math.round(performance.now() - trickle.headAt)} ms`).toBeDefined()
    const { status, head, body, firstByteAt } = answer!
    expect(status).toBe(504)
    expect(head.toLowerCase()).not.toContain('x-upstream')
    expect(JSON.parse(body)).toEqual({ error: 'gateway_timeout', message: 'The application behind this gateway did not answer in time.' })
    // Not before the route's timeout, counted from the headers (the gateway got them after the
    // upstream wrote them), and within a second timeout: before the fix nothing came in two.
    const waited = firstByteAt - trickle.headAt
    expect(waited).toBeGreaterThanOrEqual(TIMEOUT_MS)
    expect(waited).toBeLessThan(2 * TIMEOUT_MS)
    // The gateway dropped the upstream's connection: no more bytes are read for nobody.
    expect(await trickle.closed).toBeLessThan(2 * TIMEOUT_MS / STEP_MS)

    const lines = gateway.logs.map((line) => JSON.parse(line) as Record<string, unknown>)
    const reqIds = new Set(lines.filter((line) => line.url === '/up/trickle').map((line) => line.reqId))
    const mine = lines.filter((line) => reqIds.has(line.reqId))
    expect(mine.filter((line) => line.msg === 'upstream timed out')).toEqual([
      expect.objectContaining({ level: 40, error: 'gateway_timeout', route: '/up', upstream: upstream.url, timeoutMs: TIMEOUT_MS }),
    ])
    expect(mine.find((line) => line.msg === 'request completed')).toMatchObject({ statusCode: 504 })
    expect(mine.filter((line) => (line.level as number) >= 50)).toEqual([])
    expect(JSON.stringify(mine)).not.toContain('"stack"')
  })
})
