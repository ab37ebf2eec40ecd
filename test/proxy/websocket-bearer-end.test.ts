// A websocket opened with a machine client's bearer token ends with the token (security round 4),
// as a session's websockets end with the session: a JWT's socket closes (1008, both legs) when the
// injected clock reaches the token's `exp`, and not a moment before; an introspected token's socket
// is checked again at its issuer each time the answer's 60 s are up, stays open while the token is
// active, and closes once the issuer has revoked it. Real ws clients through the gateway to a real
// websocket upstream, real tokens from the real authorization server; timers fired by the test.
import { createServer } from 'node:http'
import { decodeJwt } from 'jose'
import { WebSocket, WebSocketServer } from 'ws'
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest'
import { TOKEN_ENDED_CODE, TOKEN_ENDED_REASON } from '../../src/proxy/bearer-sockets.js'
import { oidcClient, reserveBaseUrl, startGateway, type TestGateway } from '../helpers/gateway.js'
import { CI, clientCredentialsToken, startMachineProvider } from '../helpers/machine.js'
import { ManualTimers } from '../helpers/manual-timers.js'
import { close, listen, waitFor } from '../helpers/net.js'
import type { TestProvider } from '../helpers/oidc.js'
import { startRedis, type TestRedis } from '../helpers/redis.js'
import { ONE_ANSWER_MS } from '../helpers/bounds.js'
import { openEcho, settledWithin } from '../helpers/websocket.js'
import { metricValue } from '../helpers/metrics.js'

const TOKEN_TTL_S = 600
const ENDED = { code: TOKEN_ENDED_CODE, reason: TOKEN_ENDED_REASON }

let redis: TestRedis
let op: TestProvider
let gateway: TestGateway
/** The gateway's clock and its sockets' timers: moved by the tests only. */
const timers = new ManualTimers()
timers.time = Date.now()
const upstreamServer = createServer((_req, res) => res.end('plain HTTP'))
/** How each upstream socket closed, in the order they were opened. */
const upstreamClosed: Array<Promise<number>> = []
const opened: WebSocket[] = []

beforeAll(async () => {
  redis = await startRedis()
  const wss = new WebSocketServer({ server: upstreamServer })
  wss.on('connection', (socket) => {
    upstreamClosed.push(new Promise((resolve) => socket.once('close', resolve)))
    socket.on('message', (data) => socket.send(`echo ${String(data)}`))
  })
  const upstream = await listen(upstreamServer)
  const { port, baseUrl } = await reserveBaseUrl()
  op = await startMachineProvider(baseUrl, { logout: true, accessTokenTtl: () => TOKEN_TTL_S })
  gateway = await startGateway({
    server: { port, baseUrl },
    store: { type: 'redis', url: redis.url },
    providers: { demo: oidcClient(op.issuer, 'c', 's', 'openid') },
    routes: [
      { path: '/orders/', upstream, provider: 'demo', websocket: true, bearer: { audience: 'api://orders', scopes: ['orders.read'] } },
      { path: '/ledger/', upstream, provider: 'demo', websocket: true, bearer: { audience: 'api://ledger', introspect: true } },
    ],
  }, { deps: { clock: timers, timers } })
})

afterEach(async () => {
  for (const socket of opened.splice(0)) socket.close()
  // No leak: once the sockets have closed, no timer is left.
  await waitFor(async () => timers.live().length === 0, ONE_ANSWER_MS, 'the sockets\' timers to be cancelled')
})

afterAll(async () => {
  await gateway?.close()
  await Promise.all([op?.close(), close(upstreamServer)])
  await redis?.release()
})

interface Open {
  closed: Promise<{ code: number, reason: string }>
  upstreamClosed: Promise<number>
  echo (text: string): Promise<string>
}

/** Opens a websocket at `path` with `token`, as a CLI does (no Origin), once an echo has gone through. */
async function open (path: string, token: string): Promise<Open> {
  const { closed, echo } = await openEcho(`${gateway.url.replace('http', 'ws')}${path}`, { authorization: `Bearer ${token}` }, opened)
  return { closed, upstreamClosed: upstreamClosed.at(-1)!, echo }
}

/** gateway_bearer_tokens_total's `accepted` count on `route`. */
async function acceptedOn (route: string): Promise<number> {
  return metricValue(await (await fetch(`${gateway.url}/metrics`)).text(), `gateway_bearer_tokens_total{route="${route}",result="accepted"}`) ?? 0
}

/** The one live timer's time, once the gateway has set it. */
async function nextCheck (): Promise<number> {
  await waitFor(async () => timers.live().length === 1, ONE_ANSWER_MS, 'the socket\'s timer')
  return timers.live()[0]!
}

describe('a websocket opened with a bearer token', () => {
  it('a JWT\'s closes with 1008 at the token\'s exp, on both legs, and not before', async () => {
    const token = await clientCredentialsToken(op, CI, 'api://orders', 'orders.read')
    const expMs = decodeJwt(token).exp! * 1000
    const before = await acceptedOn('/orders')
    const socket = await open('/orders/feed', token)
    // One upgrade, one token counted (a new user's finding: the socket's hold counted it again).
    expect(await acceptedOn('/orders')).toBe(before + 1)
    expect(await nextCheck()).toBe(expMs)
    timers.advance(expMs - 1)
    expect(await socket.echo('still')).toBe('echo still')
    timers.advance(expMs)
    expect(await settledWithin(socket.closed)).toEqual(ENDED)
    expect(await socket.upstreamClosed).toBe(TOKEN_ENDED_CODE)
  })

  it('an introspected token\'s stays open while its issuer calls it active, and closes with 1008 once it is revoked', async () => {
    // The provider's clock is the wall clock: the gateway's starts there again (no timer is live), so
    // the token's exp (10 minutes away) is past the checks this test makes.
    timers.time = Date.now()
    const token = await clientCredentialsToken(op, CI, 'api://ledger', 'ledger.read')
    const socket = await open('/ledger/feed', token)
    // Checked again when the introspection's answer may no longer be reused (60 s).
    const first = await nextCheck()
    expect(first).toBe(timers.time + 60_000)
    timers.advance(first)
    await waitFor(async () => timers.live().length === 1 && timers.live()[0]! > first, 2000, 'the second check to be set')
    expect(await socket.echo('active')).toBe('echo active')

    const revoked = await fetch(`${op.issuer}/token/revocation`, {
      method: 'POST',
      body: new URLSearchParams({ token, client_id: CI.id, client_secret: CI.secret }),
    })
    expect(revoked.status).toBe(200)
    timers.advance(timers.live()[0]!)
    expect(await settledWithin(socket.closed)).toEqual(ENDED)
    expect(await socket.upstreamClosed).toBe(TOKEN_ENDED_CODE)
  })

  // A JWT passes for 60 s past its exp (clock tolerance), but its socket would close at once: the
  // upgrade is refused, so that the client refreshes first (it opened, then closed at once).
  it('a JWT past its exp, within the clock tolerance: a request passes, the upgrade is answered 401', async () => {
    const token = await clientCredentialsToken(op, CI, 'api://orders', 'orders.read')
    try {
      timers.advance(decodeJwt(token).exp! * 1000 + 30_000)
      expect((await fetch(`${gateway.url}/orders/x`, { headers: { authorization: `Bearer ${token}` } })).status).toBe(200)
      const logged = gateway.logs.length
      const refused = await new Promise<{ status: number | undefined, body: string }>((resolve, reject) => {
        const socket = new WebSocket(`${gateway.url.replace('http', 'ws')}/orders/feed`, { headers: { authorization: `Bearer ${token}` } })
        opened.push(socket)
        socket.once('open', () => { reject(new Error('the websocket opened')) })
        socket.once('unexpected-response', (_request, response) => {
          let body = ''
          response.on('data', (chunk: Buffer) => { body += chunk.toString() })
          response.on('end', () => { resolve({ status: response.statusCode, body }) })
        })
        socket.once('error', reject)
      })
      expect(refused.status).toBe(401)
      expect(JSON.parse(refused.body)).toMatchObject({ error: 'unauthenticated', message: 'The token has expired: refresh it before opening a websocket, which ends with its token.' })
      // Its log line says it was refused, and why: an audit selecting on `decision` does not list it as admitted (a new user's finding).
      const line = gateway.logs.slice(logged).map((text) => JSON.parse(text) as Record<string, unknown>).find((entry) => entry.url === '/orders/feed' && entry.decision !== undefined)
      expect(line).toMatchObject({ statusCode: 401, decision: 'token_refused', reason: 'expired', credential: 'bearer' })
    } finally {
      timers.time = Date.now()
    }
  })
})
