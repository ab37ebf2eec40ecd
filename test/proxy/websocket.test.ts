// WebSocket routes (websocket: true): the upgrade passes the same auth gate, and the upstream
// handshake carries the bearer token (and never the gateway's cookies); a message larger than
// websocketMaxMessage, either way, closes both sockets with 1009. Real sockets, `ws` upstream.
import { createServer, type IncomingHttpHeaders } from 'node:http'
import { WebSocket, WebSocketServer } from 'ws'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { Browser } from '../helpers/browser.js'
import { startGatewayWithProvider, type TestGateway } from '../helpers/gateway.js'
import { close, listen, waitFor } from '../helpers/net.js'
import type { TestProvider } from '../helpers/oidc.js'
import { startRedis, type TestRedis } from '../helpers/redis.js'

let redis: TestRedis
let op: TestProvider
let stack: Awaited<ReturnType<typeof startGatewayWithProvider>>
let gateway: TestGateway
let wsUpstream: string
const upstreamServer = createServer((_req, res) => res.end('plain HTTP ok'))
const handshakes: IncomingHttpHeaders[] = []
/** How each upstream socket closed, in the order they opened. */
const upstreamClosed: Array<Promise<number>> = []

beforeAll(async () => {
  redis = await startRedis()
  // Echo upstream: answers each message with the message (its length only past 1000 bytes) and the
  // Authorization of its handshake; `send:N` makes it send a message of N bytes.
  const wss = new WebSocketServer({ server: upstreamServer })
  wss.on('connection', (socket, request) => {
    handshakes.push(request.headers)
    upstreamClosed.push(new Promise((resolve) => socket.once('close', resolve)))
    socket.on('message', (raw) => {
      const data = raw as Buffer
      const order = /^send:(\d+)$/.exec(data.toString('latin1', 0, 20))
      if (order) {
        socket.send(Buffer.alloc(Number(order[1]), 'x'))
        return
      }
      socket.send(JSON.stringify({ echo: data.length <= 1000 ? data.toString() : undefined, length: data.length, authorization: request.headers.authorization, path: request.url }))
    })
  })
  wsUpstream = await listen(upstreamServer)
  stack = await startGatewayWithProvider({
    store: { type: 'redis', url: redis.url },
    routes: [
      { path: '/live/', upstream: wsUpstream, provider: 'demo', websocket: true, rewritePrefix: '/', allowedOrigins: ['https://app.example.com'] },
      { path: '/small/', upstream: wsUpstream, provider: 'demo', websocket: true, rewritePrefix: '/', websocketMaxMessage: '1KiB' },
    ],
  })
  ;({ gateway, op } = stack)
})

afterAll(async () => {
  await stack?.close()
  await close(upstreamServer)
  await redis?.release()
})

/** Opens /live/feed as a page of `origin` would (the gateway's own by default; null: no Origin). */
function connect (cookie?: string, origin: string | null = gateway.url, path = '/live/feed'): Promise<WebSocket> {
  const headers: Record<string, string> = { ...(cookie ? { cookie } : {}), ...(origin ? { origin } : {}) }
  const socket = new WebSocket(`${gateway.url.replace('http', 'ws')}${path}`, { headers })
  return new Promise((resolve, reject) => {
    socket.once('open', () => resolve(socket))
    socket.once('unexpected-response', (_req, res) => reject(new Error(`handshake answered ${res.statusCode}`)))
    socket.once('error', reject)
  })
}

describe('websocket: true', () => {
  it('round-trips a message to the upstream with the bearer injected', async () => {
    const browser = new Browser()
    await browser.navigate(`${gateway.url}/live/`)
    const cookie = `gw_session=${browser.cookies.get('gw_session')!.value}; other=1`
    const socket = await connect(cookie)
    const reply = new Promise<string>((resolve) => socket.once('message', (data) => resolve(data.toString())))
    socket.send('hello')
    const answer = JSON.parse(await reply) as { echo: string, authorization: string, path: string }
    socket.close()
    expect(answer.echo).toBe('hello')
    expect(answer.path).toBe('/feed')
    expect(answer.authorization).toMatch(/^Bearer \S+$/)
    expect((await fetch(`${op.issuer}/me`, { headers: { authorization: answer.authorization } })).status).toBe(200)
    const handshake = handshakes.at(-1)!
    expect(handshake.cookie).toBe('other=1')
    expect(handshake['x-forwarded-for']).toBe('127.0.0.1')
    expect(handshake.origin).toBe(gateway.url)
  })

  it.each([
    ['another site', 'https://evil.example'],
    ['a look-alike of the gateway', gateway?.url.replace('127.0.0.1', '127.0.0.1.evil.example') ?? 'http://127.0.0.1.evil.example'],
    ['no Origin at all', null],
  ])('refuses an upgrade from %s with 403 forbidden, even signed in', async (_name, origin) => {
    const browser = new Browser()
    await browser.navigate(`${gateway.url}/live/`)
    const before = handshakes.length
    await expect(connect(`gw_session=${browser.cookies.get('gw_session')!.value}`, origin)).rejects.toThrow('handshake answered 403')
    expect(handshakes.length).toBe(before)
  })

  it('accepts an upgrade from an origin in allowedOrigins and forwards that Origin', async () => {
    const browser = new Browser()
    await browser.navigate(`${gateway.url}/live/`)
    const before = handshakes.length
    const socket = await connect(`gw_session=${browser.cookies.get('gw_session')!.value}`, 'https://app.example.com')
    // The gateway opens the upstream's socket once the client's is open.
    await waitFor(async () => handshakes.length > before, 5000, 'the upstream handshake')
    socket.close()
    expect(handshakes.at(-1)!.origin).toBe('https://app.example.com')
  })

  it('refuses the upgrade with 401 without a session, and the upstream never sees it', async () => {
    const before = handshakes.length
    await expect(connect()).rejects.toThrow('handshake answered 401')
    expect(handshakes.length).toBe(before)
  })
})

describe('websocketMaxMessage bounds each message, both ways', () => {
  const MiB = 1024 * 1024

  /** A signed-in client socket on `path`, and the upstream socket the gateway opened for it. */
  async function open (path: string): Promise<{ socket: WebSocket, upstream: Promise<number> }> {
    const browser = new Browser()
    await browser.navigate(`${gateway.url}/live/`)
    const before = upstreamClosed.length
    const socket = await connect(`gw_session=${browser.cookies.get('gw_session')!.value}`, gateway.url, path)
    await waitFor(async () => upstreamClosed.length > before, 5000, 'the upstream socket')
    return { socket, upstream: upstreamClosed[before]! }
  }

  const closed = (socket: WebSocket) => new Promise<number>((resolve) => socket.once('close', resolve))
  const next = (socket: WebSocket) => new Promise<Buffer>((resolve) => socket.once('message', (data) => resolve(data as Buffer)))

  it.each([
    ['the default (1 MiB)', '/live/feed', MiB],
    ['websocketMaxMessage: 1KiB', '/small/feed', 1024],
  ])('%s: a message of exactly the limit reaches the upstream; one byte more closes both sockets with 1009', async (_name, path, limit) => {
    const { socket, upstream } = await open(path)
    const answer = next(socket)
    socket.send(Buffer.alloc(limit, 'a'))
    expect(JSON.parse((await answer).toString())).toMatchObject({ length: limit })

    const clientClosed = closed(socket)
    socket.send(Buffer.alloc(limit + 1, 'a'))
    expect(await clientClosed).toBe(1009)
    expect(await upstream).toBe(1009)
  })

  it.each([
    ['the default (1 MiB)', '/live/feed', MiB],
    ['websocketMaxMessage: 1KiB', '/small/feed', 1024],
  ])('%s: the upstream\'s message of exactly the limit reaches the client; one byte more closes both sockets with 1009', async (_name, path, limit) => {
    const { socket, upstream } = await open(path)
    const message = next(socket)
    socket.send(`send:${limit}`)
    expect((await message).length).toBe(limit)

    const clientClosed = closed(socket)
    socket.send(`send:${limit + 1}`)
    expect(await clientClosed).toBe(1009)
    expect(await upstream).toBe(1009)
  })
})
