// A websocket route whose upstream is down fails the upgrade as HTTP would (reliability round 3):
// the gateway opens the upstream's leg before it answers the client's upgrade, so a refused
// connection or an upstream that answers its upgrade with anything but 101 is a 502 `bad_gateway`,
// and one that does not answer within the route's timeout a 504 `gateway_timeout`, each logged with
// the route; never a 101 followed by a close. Once both legs are open, an upstream that vanishes
// (its connection cut, no close frame) closes the client's socket with 1014 (bad gateway), not
// the proxy library's 4006. Real sockets, real `ws` upstreams.
import { createServer as createHttpServer } from 'node:http'
import { connect as connectTcp, createServer as createTcpServer, type Socket } from 'node:net'
import { WebSocket, WebSocketServer } from 'ws'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { ONE_ANSWER_MS } from '../helpers/bounds.js'
import { startGateway, type TestGateway } from '../helpers/gateway.js'
import { metricValue } from '../helpers/metrics.js'
import { close, listen, refusedUrl, waitFor } from '../helpers/net.js'

/** The /hung/ route's timeout: how long its upstream's handshake may take. */
const HUNG_TIMEOUT_MS = 500

let gateway: TestGateway
/** A real ws upstream; its sockets, newest last. */
const liveServer = createHttpServer()
const live = new WebSocketServer({ server: liveServer })
const upstreamSockets: WebSocket[] = []
/** An upstream that answers every upgrade 503. */
const refusing = createHttpServer((_req, res) => res.end())
/** An upstream that takes connections, reads them (so it sees them end) and never answers. */
const hung = createTcpServer((socket) => {
  hungSockets.push(socket)
  socket.resume()
})
const hungSockets: Socket[] = []

beforeAll(async () => {
  live.on('connection', (socket) => {
    upstreamSockets.push(socket)
    socket.on('message', (data, binary) => socket.send(data, { binary }))
  })
  refusing.on('upgrade', (_request, socket) => {
    socket.end('HTTP/1.1 503 Service Unavailable\r\ncontent-length: 0\r\nconnection: close\r\n\r\n')
  })
  const hungUrl = await new Promise<string>((resolve) => hung.listen(0, '127.0.0.1', () => {
    const address = hung.address() as { port: number }
    resolve(`http://127.0.0.1:${address.port}`)
  }))
  gateway = await startGateway({
    routes: [
      { path: '/live/', upstream: await listen(liveServer), auth: 'none', websocket: true, rewritePrefix: '/' },
      { path: '/down/', upstream: await refusedUrl(), auth: 'none', websocket: true, rewritePrefix: '/' },
      { path: '/refusing/', upstream: await listen(refusing), auth: 'none', websocket: true, rewritePrefix: '/' },
      { path: '/hung/', upstream: hungUrl, auth: 'none', websocket: true, rewritePrefix: '/', timeout: `${HUNG_TIMEOUT_MS}ms` },
      // The same upstream with a timeout far past the test's own: only the client's leaving can end its wait.
      { path: '/hung-long/', upstream: hungUrl, auth: 'none', websocket: true, rewritePrefix: '/', timeout: '1h' },
    ],
  })
})

afterAll(async () => {
  await gateway?.close()
  for (const socket of upstreamSockets) socket.terminate()
  await close(liveServer)
  await close(refusing)
  for (const socket of hungSockets) socket.destroy()
  await new Promise((resolve) => hung.close(resolve))
})

/** What the client saw of its upgrade: opened (101, with the socket), or the status and body it got instead. */
interface Outcome { status: number, socket?: WebSocket, body?: string }

function upgrade (path: string, base = gateway.url): Promise<Outcome> {
  const socket = new WebSocket(`${base.replace('http', 'ws')}${path}`, { headers: { origin: base } })
  return new Promise((resolve, reject) => {
    socket.once('open', () => resolve({ status: 101, socket }))
    socket.once('unexpected-response', (_request, response) => {
      const chunks: Buffer[] = []
      response.on('data', (chunk: Buffer) => chunks.push(chunk))
      response.on('end', () => resolve({ status: response.statusCode ?? 0, body: Buffer.concat(chunks).toString() }))
    })
    socket.once('error', reject)
  })
}

function linesOf (url: string): Array<Record<string, unknown>> {
  return gateway.logs.map((line) => JSON.parse(line) as Record<string, unknown>).filter((line) => line.url === url || line.route !== undefined)
}

describe('an upgrade to an upstream that is down', () => {
  it('is answered 502 bad_gateway when the upstream refuses the connection, never 101, and logged with the route', async () => {
    const outcome = await upgrade('/down/feed')
    outcome.socket?.close()
    expect(outcome.status).toBe(502)
    expect(JSON.parse(outcome.body!)).toMatchObject({ error: 'bad_gateway' })
    await expect.poll(() => linesOf('/down/feed')).toContainEqual(expect.objectContaining({ msg: 'upstream refused the connection', route: '/down' }))
    expect(linesOf('/down/feed')).toContainEqual(expect.objectContaining({ msg: 'request completed', url: '/down/feed', statusCode: 502 }))
    expect(linesOf('/down/feed')).not.toContainEqual(expect.objectContaining({ msg: 'request upgraded' }))
    const metrics = await (await fetch(`${gateway.url}/metrics`)).text()
    expect(metricValue(metrics, 'gateway_proxied_requests_total{route="/down",status_class="5xx"}')).toBe(1)
  })

  it('is answered 502 bad_gateway when the upstream answers its upgrade 503', async () => {
    const outcome = await upgrade('/refusing/feed')
    outcome.socket?.close()
    expect(outcome.status).toBe(502)
    expect(JSON.parse(outcome.body!)).toMatchObject({ error: 'bad_gateway' })
    await expect.poll(() => linesOf('/refusing/feed')).toContainEqual(expect.objectContaining({ msg: 'upstream failed', route: '/refusing', status: 503 }))
  })

  it('is answered 504 gateway_timeout once the route\'s timeout has passed when the upstream never answers its upgrade', async () => {
    const started = performance.now()
    const outcome = await upgrade('/hung/feed')
    const elapsed = performance.now() - started
    outcome.socket?.close()
    expect(outcome.status).toBe(504)
    expect(JSON.parse(outcome.body!)).toMatchObject({ error: 'gateway_timeout' })
    expect(elapsed).toBeGreaterThanOrEqual(HUNG_TIMEOUT_MS * 0.9)
    expect(elapsed).toBeLessThan(HUNG_TIMEOUT_MS + ONE_ANSWER_MS)
    await expect.poll(() => linesOf('/hung/feed')).toContainEqual(expect.objectContaining({ msg: 'upstream timed out', route: '/hung' }))
  })
})

describe('a client that leaves while the upstream is connecting', () => {
  it('makes the gateway give the upstream\'s connection up, not hold it until the route\'s timeout', async () => {
    const before = hungSockets.length
    const port = Number(new URL(gateway.url).port)
    const client = connectTcp(port, '127.0.0.1')
    client.on('error', () => {})
    client.write(`GET /hung-long/feed HTTP/1.1\r\nhost: 127.0.0.1:${port}\r\norigin: ${gateway.url}\r\nconnection: Upgrade\r\nupgrade: websocket\r\nsec-websocket-version: 13\r\nsec-websocket-key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n`)
    await waitFor(async () => hungSockets.length > before, 5000, 'the gateway to connect to the upstream')
    const upstreamClosed = new Promise((resolve) => hungSockets[before]!.once('close', resolve))
    client.destroy()
    await upstreamClosed
  })
})

describe('the close codes a client sees', () => {
  /** An open socket on /live/, the upstream's leg of it, and how the client's socket closes. */
  async function opened () {
    const before = upstreamSockets.length
    const outcome = await upgrade('/live/feed')
    if (outcome.socket === undefined) throw new Error(`upgrade answered ${outcome.status}`)
    const { socket } = outcome
    const closed = new Promise<{ code: number, reason: string }>((resolve) => socket.once('close', (code, reason) => resolve({ code, reason: reason.toString() })))
    const echo = new Promise((resolve) => socket.once('message', resolve))
    socket.send('hello')
    await echo
    return { socket, upstream: upstreamSockets[before]!, closed }
  }

  it('an upstream whose connection is cut (no close frame) closes the client\'s socket with 1014 bad gateway', async () => {
    const { upstream, closed } = await opened()
    upstream.terminate()
    expect(await closed).toEqual({ code: 1014, reason: 'bad gateway' })
  })

  it('an upstream that closes with a code of its own passes that code and reason on', async () => {
    const { upstream, closed } = await opened()
    upstream.close(4000, 'shift over')
    expect(await closed).toEqual({ code: 4000, reason: 'shift over' })
  })

  it('a client whose connection is cut closes the upstream\'s socket with 1001 going away', async () => {
    const { socket, upstream } = await opened()
    const upstreamClosed = new Promise<number>((resolve) => upstream.once('close', resolve))
    socket.terminate()
    expect(await upstreamClosed).toBe(1001)
  })
})

describe('a gateway that shuts down', () => {
  it('closes its open websockets with 1001 going away, both ways, and then closes', async () => {
    const closing = await startGateway({
      routes: [{ path: '/live/', upstream: `http://127.0.0.1:${(liveServer.address() as { port: number }).port}`, auth: 'none', websocket: true, rewritePrefix: '/' }],
    })
    const before = upstreamSockets.length
    const socket = new WebSocket(`${closing.url.replace('http', 'ws')}/live/feed`, { headers: { origin: closing.url } })
    await new Promise((resolve, reject) => {
      socket.once('open', resolve)
      socket.once('error', reject)
    })
    const upstream = upstreamSockets[before]!
    const clientClosed = new Promise<number>((resolve) => socket.once('close', resolve))
    const upstreamClosed = new Promise<number>((resolve) => upstream.once('close', resolve))
    await closing.close()
    expect(await clientClosed).toBe(1001)
    expect(await upstreamClosed).toBe(1001)
  })
  it('gives up an upgrade still waiting for its upstream\'s handshake, answers it 503 shutting_down, and closes', async () => {
    // The upstream's timeout is far past the test's own: without giving it up, close() would wait for it.
    const closing = await startGateway({
      routes: [{ path: '/hung-long/', upstream: `http://127.0.0.1:${(hung.address() as { port: number }).port}`, auth: 'none', websocket: true, rewritePrefix: '/', timeout: '1h' }],
    })
    const connected = new Promise<Socket>((resolve) => hung.once('connection', resolve))
    const outcome = upgrade('/hung-long/feed', closing.url)
    const upstreamClosed = new Promise((resolve) => { void connected.then((socket) => socket.once('close', resolve)) })
    await connected
    await closing.close()
    const { status, body, socket } = await outcome
    socket?.close()
    expect(status).toBe(503)
    expect(JSON.parse(body!)).toMatchObject({ error: 'shutting_down' })
    await upstreamClosed
    // What every rolling restart with an upgrade under way does: an info line, not an error.
    const lines = closing.logs.map((line) => JSON.parse(line) as Record<string, unknown>)
    expect(lines).toContainEqual(expect.objectContaining({ msg: 'request failed: the gateway is shutting down', level: 30 }))
    expect(lines.filter((line) => line.level === 50)).toEqual([])
  })
})

describe('a client handshake ws would refuse (proxy/websocket-handshake.ts)', () => {
  /** The status line and body the gateway answers to an upgrade of /live/feed with these header lines, once it has closed the socket. */
  async function rawUpgrade (method: string, lines: string[]): Promise<{ status: number, body: string }> {
    const port = new URL(gateway.url).port
    return await new Promise((resolve, reject) => {
      const socket = connectTcp(Number(port), '127.0.0.1', () => {
        socket.write([`${method} /live/feed HTTP/1.1`, `Host: 127.0.0.1:${port}`, `Origin: ${gateway.url}`, 'Accept: application/json', 'Upgrade: websocket', 'Connection: Upgrade', ...lines, '', ''].join('\r\n'))
      })
      let data = ''
      socket.setEncoding('latin1')
      socket.on('data', (chunk: string) => { data += chunk })
      socket.on('error', reject)
      socket.on('close', () => resolve({ status: Number(/^HTTP\/1\.1 (\d{3})/.exec(data)?.[1] ?? 0), body: data.slice(data.indexOf('\r\n\r\n') + 4) }))
    })
  }

  it.each([
    ['no key', 'GET', ['Sec-WebSocket-Version: 13']],
    ['a key that is no 16 bytes', 'GET', ['Sec-WebSocket-Key: c2hvcnQ=', 'Sec-WebSocket-Version: 13']],
    ['version 7', 'GET', ['Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==', 'Sec-WebSocket-Version: 7']],
    ['a sub-protocol twice', 'GET', ['Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==', 'Sec-WebSocket-Version: 13', 'Sec-WebSocket-Protocol: chat, chat']],
    ['POST', 'POST', ['Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==', 'Sec-WebSocket-Version: 13', 'Content-Length: 0']],
  ])('%s: 400 invalid_request, and the upstream is never asked', async (_, method, lines) => {
    let asked = 0
    const count = () => { asked++ }
    liveServer.on('upgrade', count)
    try {
      const answer = await rawUpgrade(method, lines)
      expect(answer.status).toBe(400)
      expect(JSON.parse(answer.body)).toMatchObject({ error: 'invalid_request' })
      expect(asked).toBe(0)
    } finally {
      liveServer.off('upgrade', count)
    }
  })

  it('a valid one is still linked', async () => {
    const outcome = await upgrade('/live/feed')
    expect(outcome.status).toBe(101)
    outcome.socket!.close()
  })
})
