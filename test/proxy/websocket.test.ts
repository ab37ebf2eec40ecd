// WebSocket routes (websocket: true): the upgrade passes the same auth gate, and the upstream
// handshake carries the bearer token (and never the gateway's cookies). Real sockets, `ws` upstream.
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

beforeAll(async () => {
  redis = await startRedis()
  // Echo upstream: answers each message with the message and the Authorization of its handshake.
  const wss = new WebSocketServer({ server: upstreamServer })
  wss.on('connection', (socket, request) => {
    handshakes.push(request.headers)
    socket.on('message', (data) => socket.send(JSON.stringify({ echo: data.toString(), authorization: request.headers.authorization, path: request.url })))
  })
  wsUpstream = await listen(upstreamServer)
  stack = await startGatewayWithProvider({
    store: { type: 'redis', url: redis.url },
    routes: [{ path: '/live/', upstream: wsUpstream, provider: 'demo', websocket: true, rewritePrefix: '/', allowedOrigins: ['https://app.example.com'] }],
  })
  ;({ gateway, op } = stack)
})

afterAll(async () => {
  await stack?.close()
  await close(upstreamServer)
  await redis?.release()
})

/** Opens /live/feed as a page of `origin` would (the gateway's own by default; null: no Origin). */
function connect (cookie?: string, origin: string | null = gateway.url): Promise<WebSocket> {
  const headers: Record<string, string> = { ...(cookie ? { cookie } : {}), ...(origin ? { origin } : {}) }
  const socket = new WebSocket(`${gateway.url.replace('http', 'ws')}/live/feed`, { headers })
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
