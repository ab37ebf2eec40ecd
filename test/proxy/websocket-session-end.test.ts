// Proxied websockets end with their session (proxy/session-sockets.ts): two gateway instances on
// one Redis with sockets on both; a sign-out on one and a back-channel logout close the session's
// sockets on both with 1008 within a second (the store's broadcast); idle expiry, maxAge and a token
// the provider will no longer refresh close them when the injected clock reaches the deadline
// (timers fired by the test, never waited for). Another session's sockets and a machine client's
// stay open, and each instance's registry is empty once its sockets have closed.
import { createServer } from 'node:http'
import { Redis } from 'ioredis'
import { WebSocket, WebSocketServer } from 'ws'
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest'
import { SESSION_ENDED_CODE, SESSION_ENDED_REASON } from '../../src/proxy/session-sockets.js'
import { Browser, signIn as signInAt } from '../helpers/browser.js'
import { oidcClient, reserveBaseUrl, startGateway, type TestGateway } from '../helpers/gateway.js'
import { CI, clientCredentialsToken, RESOURCES } from '../helpers/machine.js'
import { ManualTimers } from '../helpers/manual-timers.js'
import { close, listen, waitFor } from '../helpers/net.js'
import { gatewayClient, startOidcProvider, walk, type TestProvider } from '../helpers/oidc.js'
import { startRedis, type TestRedis } from '../helpers/redis.js'
import { startTokenStub, type TokenStub } from '../helpers/token-stub.js'
import { ONE_ANSWER_MS } from '../helpers/bounds.js'
import { openEcho, settledWithin } from '../helpers/websocket.js'

const MINUTE = 60_000
const TTL_MS = 30 * MINUTE
const MAX_AGE_MS = 45 * MINUTE

let redis: TestRedis
let client: Redis
let op: TestProvider
let stub: TokenStub
let first: TestGateway
let second: TestGateway
/** The gateways' clock and the timers of their sockets' deadlines: moved by the tests only. */
const timers = new ManualTimers()
timers.time = Date.now()
const upstreamServer = createServer((_req, res) => res.end('plain HTTP'))
/** How each upstream socket closed, by the path it was opened for. */
const upstreamClosed: Array<{ path: string, closed: Promise<number> }> = []
/** Every socket the tests opened, closed after each test. */
const opened: WebSocket[] = []

beforeAll(async () => {
  redis = await startRedis()
  client = new Redis(redis.url)
  stub = await startTokenStub()
  const wss = new WebSocketServer({ server: upstreamServer })
  wss.on('connection', (socket, request) => {
    upstreamClosed.push({ path: request.url ?? '', closed: new Promise((resolve) => socket.once('close', resolve)) })
    socket.on('message', (data) => socket.send(`echo ${String(data)}`))
  })
  const upstream = await listen(upstreamServer)
  const { port, baseUrl } = await reserveBaseUrl()
  op = await startOidcProvider([gatewayClient(baseUrl, 'demo', 'c', { backchannel: true })], {
    logout: true,
    // Tokens outlive maxAge: the sessions' deadlines are their idle time and lifetime.
    accessTokenTtl: () => 4 * 3600,
    machineClients: [{ client_id: CI.id, client_secret: CI.secret }],
    resources: RESOURCES,
  })
  const raw = {
    session: { ttl: '30m', maxAge: '45m', cacheTtl: '10s' },
    store: { type: 'redis', url: redis.url },
    providers: {
      demo: oidcClient(op.issuer, 'c', 's', 'openid email'),
      stub: { clientId: 'stub-client', clientSecret: 'stub-secret', authorizeUrl: `${stub.url}/authorize`, tokenUrl: `${stub.url}/token`, scope: 'read' },
    },
    routes: [
      { path: '/live/', upstream, provider: 'demo', websocket: true, bearer: { audience: 'api://orders', scopes: ['orders.read'] } },
      { path: '/stub/', upstream, provider: 'stub', websocket: true },
    ],
  }
  const deps = { clock: timers, timers }
  first = await startGateway({ ...raw, server: { port, baseUrl } }, { deps })
  second = await startGateway(raw, { deps })
})

afterEach(async () => {
  for (const socket of opened.splice(0)) socket.close()
  // No leak: once every socket has closed, neither registry keeps a session, nor a timer.
  await waitFor(async () => [first, second].every((gateway) => gateway.app.sessionSockets.size.sessions === 0), ONE_ANSWER_MS, 'the registries to empty')
  expect(first.app.sessionSockets.size).toEqual({ sessions: 0, sockets: 0 })
  expect(second.app.sessionSockets.size).toEqual({ sessions: 0, sockets: 0 })
  expect(timers.live()).toEqual([])
})

afterAll(async () => {
  await Promise.all([first?.close(), second?.close()])
  await Promise.all([op?.close(), stub?.close(), close(upstreamServer)])
  client?.disconnect()
  await redis?.release()
})

/** A browser signed in at the provider `demo` as `login` through the first instance, and its session cookie. */
async function signIn (login: string): Promise<{ browser: Browser, cookie: string }> {
  return await signInAt(`${first.url}/oauth/login/demo/?next=/oauth/`, login)
}

/** A browser signed in at the token stub (its token answer shaped by `extra`), and its session cookie. */
async function stubSignIn (extra: Record<string, unknown>): Promise<string> {
  stub.mode = 'ok'
  stub.extra = extra
  const browser = new Browser()
  const login = await browser.fetch(`${first.url}/oauth/login/stub/?next=/stub/`)
  const state = new URL(login.headers.get('location')!).searchParams.get('state')!
  expect((await browser.fetch(`${first.url}/oauth/authorized/stub/?code=c&state=${encodeURIComponent(state)}`)).status).toBe(302)
  return `gw_session=${browser.cookies.get('gw_session')!.value}`
}

interface Open {
  socket: WebSocket
  /** How the gateway closed the client's socket: code and reason. */
  closed: Promise<{ code: number, reason: string }>
  /** How the gateway closed the upstream's socket. */
  upstreamClosed: Promise<number>
  /** Sends `text` and resolves with the upstream's echo. */
  echo (text: string): Promise<string>
}

/**
 * Opens a websocket at `path` of `gateway` with `headers` (a session cookie, as a page of the
 * gateway's origin; or a bearer token, as a CLI), once an echo has gone through (both legs open).
 */
async function open (gateway: TestGateway, path: string, headers: Record<string, string>): Promise<Open> {
  const { socket, closed, echo } = await openEcho(`${gateway.url.replace('http', 'ws')}${path}`, { ...('cookie' in headers ? { origin: gateway.url } : {}), ...headers }, opened)
  const upstream = upstreamClosed.at(-1)!
  return { socket, closed, upstreamClosed: upstream.closed, echo }
}

const ENDED = { code: SESSION_ENDED_CODE, reason: SESSION_ENDED_REASON }

/**
 * Waits until both instances keep `sessions` sessions with open sockets, each session checked once
 * (its timer set); `tokens`: machine clients' sockets, each with its token's timer (proxy/bearer-sockets.ts).
 */
async function kept (sessions: number, tokens = 0): Promise<void> {
  await waitFor(async () => first.app.sessionSockets.size.sessions === sessions && second.app.sessionSockets.size.sessions === sessions && timers.live().length === 2 * sessions + tokens, 2000, 'both instances to keep the sockets')
}

/** The store's key of the session whose cookie header is `cookie` (under the default key prefix), from the first instance's cache, where its sign-in put it. */
function sessionKey (cookie: string): string {
  const session = first.app.sessions.cached(cookie)
  if (session === undefined) throw new Error('the session is not in the first instance\'s cache')
  return `gw:session:${session.id}`
}

/** The status the gateway answers an upgrade of /live/feed on the first instance with `headers` (101: opened, then closed). */
async function upgradeStatus (headers: Record<string, string>): Promise<number> {
  const socket = new WebSocket(`${first.url.replace('http', 'ws')}/live/feed`, { headers })
  opened.push(socket)
  return await new Promise((resolve) => {
    socket.once('open', () => resolve(101))
    socket.once('unexpected-response', (_request, response) => resolve(response.statusCode ?? 0))
    socket.once('error', () => resolve(0))
  })
}

/** A session cookie header signed out through the first instance. */
async function signedOutCookie (): Promise<string> {
  const { browser, cookie } = await signIn('mallory')
  await browser.fetch(`${first.url}/oauth/logout/`, { method: 'POST', body: new URLSearchParams({}), headers: { 'content-type': 'application/x-www-form-urlencoded', 'sec-fetch-site': 'same-origin' } })
  return cookie
}

describe('upgrades a stranger makes', () => {
  // Each is refused before any upstream leg exists, and neither instance keeps anything for it.
  it.each<[string, () => Promise<Record<string, string>>, number]>([
    ['no cookie', async () => ({ origin: first.url }), 401],
    ['a made-up session cookie', async () => ({ origin: first.url, cookie: `gw_session=${'A'.repeat(43)}` }), 401],
    ['a malformed session cookie', async () => ({ origin: first.url, cookie: 'gw_session=../../x' }), 401],
    ['a session cookie signed out already', async () => ({ origin: first.url, cookie: await signedOutCookie() }), 401],
    ['a bearer token the provider never issued', async () => ({ authorization: 'Bearer not-a-token' }), 401],
    ['a live session cookie from a foreign page', async () => ({ origin: 'https://evil.example', cookie: (await signIn('trudy')).cookie }), 403],
  ])('%s: refused, nothing kept', async (_name, headers, status) => {
    const upstreams = upstreamClosed.length
    expect(await upgradeStatus(await headers())).toBe(status)
    expect(upstreamClosed.length).toBe(upstreams)
    expect(first.app.sessionSockets.size).toEqual({ sessions: 0, sockets: 0 })
  })
})

describe('websockets end with their session', () => {
  it('a sign-out on one instance closes the session\'s sockets on both with 1008 within a second; another session\'s and a machine client\'s stay open', async () => {
    const alice = await signIn('alice')
    const bob = await signIn('bob')
    const aliceHere = await open(first, '/live/feed', { cookie: alice.cookie })
    const aliceThere = await open(second, '/live/feed', { cookie: alice.cookie })
    const bobHere = await open(first, '/live/feed', { cookie: bob.cookie })
    const bobThere = await open(second, '/live/feed', { cookie: bob.cookie })
    const token = await clientCredentialsToken(op, CI, 'api://orders', 'orders.read')
    // A machine client's socket, with alice's cookie too: its token decides, and no session is kept for it.
    const machine = await open(second, '/live/feed', { authorization: `Bearer ${token}`, cookie: alice.cookie })
    await kept(2, 1)
    expect(second.app.sessionSockets.size).toEqual({ sessions: 2, sockets: 2 })

    const signOut = await alice.browser.fetch(`${first.url}/oauth/logout/`, {
      method: 'POST',
      body: new URLSearchParams({}),
      headers: { 'content-type': 'application/x-www-form-urlencoded', 'sec-fetch-site': 'same-origin' },
    })
    expect(signOut.status).toBe(302)
    const [here, there] = await Promise.all([settledWithin(aliceHere.closed), settledWithin(aliceThere.closed)])
    expect(here).toEqual(ENDED)
    expect(there).toEqual(ENDED)
    // The upstream hears why too.
    expect(await aliceHere.upstreamClosed).toBe(SESSION_ENDED_CODE)
    expect(await aliceThere.upstreamClosed).toBe(SESSION_ENDED_CODE)

    expect(await bobHere.echo('still')).toBe('echo still')
    expect(await bobThere.echo('still')).toBe('echo still')
    expect(await machine.echo('still')).toBe('echo still')
    expect(first.app.sessionSockets.size).toEqual({ sessions: 1, sockets: 1 })
    expect(second.app.sessionSockets.size).toEqual({ sessions: 1, sockets: 1 })
    expect(first.logs.some((line) => line.includes('"msg":"websockets closed: their session ended"') && line.includes('"why":"ended"'))).toBe(true)
  })

  it('revoking a session from the sessions list, and signing out everywhere, close its sockets on both instances within a second', async () => {
    const laptop = await signIn('carol')
    const phone = await signIn('carol')
    const tablet = await signIn('carol')
    const dave = await signIn('dave')
    const phoneThere = await open(second, '/live/feed', { cookie: phone.cookie })
    const tabletHere = await open(first, '/live/feed', { cookie: tablet.cookie })
    const laptopThere = await open(second, '/live/feed', { cookie: laptop.cookie })
    const daveThere = await open(second, '/live/feed', { cookie: dave.cookie })
    await waitFor(async () => first.app.sessionSockets.size.sessions === 1 && second.app.sessionSockets.size.sessions === 3 && timers.live().length === 4, 2000, 'the instances to keep the sockets')
    const same = { accept: 'application/json', 'sec-fetch-site': 'same-origin' }

    // From the laptop, revoke the phone: its socket on the other instance ends.
    const listed = await (await laptop.browser.fetch(`${first.url}/oauth/sessions/`, { headers: same })).json() as { sessions: Array<{ id: string, current: boolean }> }
    expect(listed.sessions).toHaveLength(3)
    const phoneId = (await (await phone.browser.fetch(`${first.url}/oauth/sessions/`, { headers: same })).json() as typeof listed).sessions.find((entry) => entry.current)!.id
    expect((await laptop.browser.fetch(`${first.url}/oauth/sessions/${phoneId}/revoke`, { method: 'POST', headers: same })).status).toBe(200)
    expect(await settledWithin(phoneThere.closed)).toEqual(ENDED)
    expect(await tabletHere.echo('still')).toBe('echo still')

    // From the laptop, sign out everywhere: the tablet's socket and the laptop's own end; dave's stays.
    const everywhere = await laptop.browser.fetch(`${first.url}/oauth/logout/?everywhere=1`, {
      method: 'POST',
      body: new URLSearchParams({}),
      headers: { 'content-type': 'application/x-www-form-urlencoded', 'sec-fetch-site': 'same-origin' },
    })
    expect(everywhere.status).toBe(302)
    const [tablet2, laptop2] = await Promise.all([settledWithin(tabletHere.closed), settledWithin(laptopThere.closed)])
    expect(tablet2).toEqual(ENDED)
    expect(laptop2).toEqual(ENDED)
    expect(await daveThere.echo('still')).toBe('echo still')
  })

  it('a back-channel logout closes the session\'s sockets on both instances within a second', async () => {
    const carol = await signIn('carol')
    const dave = await signIn('dave')
    const carolHere = await open(first, '/live/feed', { cookie: carol.cookie })
    const carolThere = await open(second, '/live/feed', { cookie: carol.cookie })
    const daveHere = await open(first, '/live/feed', { cookie: dave.cookie })
    const daveThere = await open(second, '/live/feed', { cookie: dave.cookie })
    await kept(2)

    // Carol signs out at the provider itself, which posts a logout token to the first instance.
    const end = await walk(carol.browser, `${op.issuer}/session/end`)
    expect(end.body).toContain('You are signed out')
    expect(await settledWithin(carolHere.closed)).toEqual(ENDED)
    expect(await settledWithin(carolThere.closed)).toEqual(ENDED)
    expect(await daveHere.echo('still')).toBe('echo still')
    expect(await daveThere.echo('still')).toBe('echo still')
  })

  it('a token the provider no longer refreshes closes the sockets at its expiry; one it refreshes keeps them to the next', async () => {
    const cookie = await stubSignIn({ expires_in: 600, refresh_token: 'refresh-1' })
    const key = sessionKey(cookie)
    const start = timers.time
    const here = await open(first, '/stub/feed', { cookie })
    const there = await open(second, '/stub/feed', { cookie })
    await kept(1)
    // The token's expiry comes first (idle 30 min, lifetime 45 min).
    const expiry = (Math.floor(start / 1000) + 600) * 1000
    expect(timers.live()).toEqual([expiry, expiry])

    // Refreshed at its expiry: the sockets stay, checked again at the new token's. The refresh's
    // write renews no idle time: 20 minutes left in the store before it, at most 20 after.
    expect(await client.pexpire(key, 20 * MINUTE)).toBe(1)
    stub.extra = { expires_in: 600, refresh_token: 'refresh-2' }
    const asked = stub.requests.length
    timers.advance(expiry)
    await waitFor(async () => timers.live().length === 2, 2000, 'the next deadline')
    expect(stub.requests.length - asked).toBe(1)
    expect(await client.pttl(key)).toBeLessThanOrEqual(20 * MINUTE)
    const renewed = (Math.floor(expiry / 1000) + 600) * 1000
    expect(timers.live()).toEqual([renewed, renewed])
    expect(await here.echo('still')).toBe('echo still')
    expect(await there.echo('still')).toBe('echo still')

    // Refused at the next: both close.
    stub.mode = 'invalid-grant'
    timers.advance(renewed - 1)
    expect(await there.echo('still')).toBe('echo still')
    timers.advance(renewed)
    expect(await settledWithin(here.closed)).toEqual(ENDED)
    expect(await settledWithin(there.closed)).toEqual(ENDED)
    expect(first.logs.concat(second.logs).some((line) => line.includes('"why":"token"'))).toBe(true)
  })

  it('idle expiry (as the store decides) and maxAge close the sockets at their deadlines, on both instances', async () => {
    const idle = await signIn('erin')
    const active = await signIn('frank')
    const start = timers.time
    const idleSockets = [await open(first, '/live/feed', { cookie: idle.cookie }), await open(second, '/live/feed', { cookie: idle.cookie })]
    const activeSockets = [await open(first, '/live/feed', { cookie: active.cookie }), await open(second, '/live/feed', { cookie: active.cookie })]
    await kept(2)
    // Each deadline is the idle time the store counts (under a second of it has passed in the store).
    for (const at of timers.live()) {
      expect(at).toBeLessThanOrEqual(start + TTL_MS)
      expect(at).toBeGreaterThan(start + TTL_MS - 1000)
    }
    const idleAt = Math.max(...timers.live())

    // Erin's session reaches its idle timeout: the store lets it go (as Redis does at its expiry).
    expect(await client.del(sessionKey(idle.cookie))).toBe(1)
    timers.advance(idleAt - 1000)
    expect(await idleSockets[1]!.echo('still')).toBe('echo still')
    timers.advance(idleAt)
    for (const socket of idleSockets) expect(await settledWithin(socket.closed)).toEqual(ENDED)
    // Frank's is still in the store: its next deadline is its lifetime's end, sooner than its idle time.
    await waitFor(async () => timers.live().length === 2, 2000, 'the next deadline')
    expect(timers.live()).toEqual([start + MAX_AGE_MS, start + MAX_AGE_MS])
    for (const socket of activeSockets) expect(await socket.echo('still')).toBe('echo still')

    timers.advance(start + MAX_AGE_MS - 1)
    expect(await activeSockets[0]!.echo('still')).toBe('echo still')
    timers.advance(start + MAX_AGE_MS)
    for (const socket of activeSockets) expect(await settledWithin(socket.closed)).toEqual(ENDED)
    expect(first.logs.concat(second.logs).some((line) => line.includes('"why":"maxAge"'))).toBe(true)
  })
})
