// A refresh that fails while the access token is still valid lets the request go on with that token
// (one warn line, a failure mark for the provider's timeout plus 5 s), and where that meets the
// rest: a sign-out during the refresh, the token's expiry while the mark stands, a 429's pause, two
// providers, a store that refuses the writes (an ACL that lets the gateway write its refresh locks
// only, as writes-refused.test.ts makes one). An attacker's file: each finding failed before its fix.
// Two stub providers (p1, p2) on one small token endpoint whose answers the tests set per provider;
// routes /p1/ and /p2/ (one provider each, so one session can hold tokens of both) and /both/
// (providers p1 then p2). A spawned Redis of the file's own (its ACL is changed), no session cache.
// The gateway's clock is injected.
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http'
import { Redis } from 'ioredis'
import { expect } from 'vitest'
import { ONE_ANSWER_MS } from '../helpers/bounds.js'
import { Browser } from '../helpers/browser.js'
import type { TestGateway } from '../helpers/gateway.js'
import { close, listen, waitFor } from '../helpers/net.js'
import { startRedis, type TestRedis } from '../helpers/redis.js'
import { test as it } from '../helpers/stack.js'
import { STILL_VALID_FLOOR_S } from '../../src/oauth/refresh.js'

const TIMEOUT_MS = 500
const WITHIN_MS = TIMEOUT_MS + ONE_ANSWER_MS
const TOKEN_TTL_S = 60
const clock = { offset: 0, now: () => Date.now() + clock.offset }
/** Each test starts 2 minutes after the last one's clock (a 429's pause is on the gateway's clock, and must not reach the next test). */
let base = 0
const at = (ms: number) => { clock.offset = base + ms }
const CLIENT_SECRET = 'attack-client-secret-DO-NOT-LOG'

type Mode = 'ok' | 'error500' | 'error503' | 'held500' | 'rate-limited' | 'invalid-grant' | 'trickle'
const modes: Record<string, Mode> = { p1: 'ok', p2: 'ok' }
const calls: Record<string, number> = { p1: 0, p2: 0 }
let issued = 0
/** Answers of mode held500 wait for this. */
let release: () => void = () => {}
let held: Promise<void> = Promise.resolve()
const timers = new Set<NodeJS.Timeout>()

function answer (provider: string, req: IncomingMessage, res: ServerResponse): void {
  res.on('error', () => {})
  req.socket.on('error', () => {})
  const json = (status: number, value: unknown, headers: Record<string, string> = {}) => { res.writeHead(status, { 'content-type': 'application/json', ...headers }); res.end(JSON.stringify(value)) }
  switch (modes[provider]) {
    case 'ok': {
      issued++
      return json(200, { access_token: `at-secret-${provider}-${issued}`, token_type: 'Bearer', expires_in: TOKEN_TTL_S, refresh_token: `rt-secret-${provider}-${issued}` })
    }
    case 'error500': return json(500, { error: 'server_error' })
    case 'error503': return json(503, { message: 'upstream connect error' })
    case 'held500': { void held.then(() => json(500, { error: 'server_error' })); return }
    case 'rate-limited': return json(429, { error: 'too_many_requests' }, { 'retry-after': '2' })
    case 'invalid-grant': return json(400, { error: 'invalid_grant' })
    case 'trickle': {
      res.writeHead(200, { 'content-type': 'application/json', 'content-length': '1000' })
      const timer = setInterval(() => res.write(' '), 100)
      timers.add(timer)
      res.on('close', () => { clearInterval(timer); timers.delete(timer) })
    }
  }
}

const server = createServer((req, res) => {
  const provider = req.url!.split('/')[1]!
  calls[provider] = (calls[provider] ?? 0) + 1
  req.resume()
  req.on('end', () => answer(provider, req, res))
})
let gateway: TestGateway
let upstreamSeen: () => number
let redis: TestRedis
let admin: Redis

it.beforeAll(async ({ startStack, upstream }) => {
  const url = await listen(server)
  const provider = (name: string) => ({ clientId: `${name}-client`, clientSecret: CLIENT_SECRET, authorizeUrl: `${url}/${name}/authorize`, tokenUrl: `${url}/${name}/token`, scope: 'read', timeout: `${TIMEOUT_MS}ms` })
  upstreamSeen = () => upstream.seen.length
  redis = await startRedis('spawn')
  admin = new Redis(redis.url)
  gateway = await startStack({
    store: { type: 'redis', url: redis.url },
    // Every request reads the store.
    session: { cacheTtl: '0s' },
    providers: { p1: provider('p1'), p2: provider('p2') },
    routes: [
      { path: '/p1/', upstream: upstream.url, provider: 'p1' },
      { path: '/p2/', upstream: upstream.url, provider: 'p2' },
      { path: '/both/', upstream: upstream.url, providers: ['p1', 'p2'] },
    ],
  }, { deps: { clock } })
})

it.afterAll(async () => {
  release()
  for (const timer of timers) clearInterval(timer)
  await gateway?.close()
  server.closeAllConnections()
  await close(server)
  admin?.disconnect()
  await redis?.release()
})

it.beforeEach(() => {
  modes.p1 = 'ok'
  modes.p2 = 'ok'
  base = clock.offset + 120_000
  clock.offset = base
  held = new Promise((resolve) => { release = resolve })
})

async function signIn (browser: Browser, provider: string): Promise<void> {
  const login = await browser.fetch(`${gateway.url}/oauth/login/${provider}/?next=/${provider}/`)
  const state = new URL(login.headers.get('location')!).searchParams.get('state')!
  const response = await browser.fetch(`${gateway.url}/oauth/authorized/${provider}/?code=c-${provider}&state=${encodeURIComponent(state)}`)
  expect(response.status).toBe(302)
}

async function signedIn (...providers: string[]): Promise<Browser> {
  const browser = new Browser()
  for (const provider of providers) await signIn(browser, provider)
  return browser
}

/** Status, error and the token the upstream got for a request of `browser` at `path`. */
async function ask (browser: Browser, path: string): Promise<{ status: number, token?: string, error?: string }> {
  const response = await browser.fetch(`${gateway.url}${path}`, { headers: { accept: 'application/json' } })
  const body = await response.json() as { headers?: Record<string, string>, error?: string }
  return response.status === 200 ? { status: 200, token: body.headers!.authorization } : { status: response.status, error: body.error }
}

const lines = (from: number) => gateway.logs.slice(from).map((line) => JSON.parse(line) as Record<string, unknown>)
const warned = (from: number) => lines(from).filter((line) => String(line.msg).startsWith('token refresh failed; the current token is still valid'))

// docs/operations.md "Token refresh": a 429 is among the failures after which "while the token is
// still valid ... the request goes on with it, and one warn line says so" with provider, reason,
// cause and expiresInS. refreshOrKeep returns the token for a 429 before the line is written: a
// provider throttling the gateway's refreshes leaves no line at all.
it('a 429 on the refresh of a token still valid is logged as the documented warn line', async () => {
  const browser = await signedIn('p1')
  const { token } = await ask(browser, '/p1/x')
  at((TOKEN_TTL_S - 20) * 1000)
  modes.p1 = 'rate-limited'
  const from = gateway.logs.length
  const before = calls.p1!
  expect(await ask(browser, '/p1/x')).toEqual({ status: 200, token })
  expect(calls.p1! - before).toBe(1)
  const line = warned(from)
  expect(line).toHaveLength(1)
  expect(line[0]).toMatchObject({ level: 40, provider: 'p1' })
  expect(JSON.stringify(line[0])).toMatch(/too_many_requests|429/)
})

// A session that signs out while its refresh is under way stays signed out (refresh.ts: "a session
// ended while the provider answered (sign-out, back-channel logout) stays ended"): a refresh that
// succeeds then is not written and its request gets no token (401). One that fails now hands the
// request the session's old token, and it goes to the upstream after the sign-out has finished:
// the person was told they are signed out, and the application then serves them as signed in.
it('a session signed out while its failing refresh is under way sends no token upstream after the sign-out', async () => {
  const browser = await signedIn('p1')
  expect((await ask(browser, '/p1/x')).status).toBe(200)
  at((TOKEN_TTL_S - 20) * 1000)
  modes.p1 = 'held500'
  const before = calls.p1!
  const pending = ask(browser, '/p1/during-sign-out')
  await waitFor(async () => calls.p1! > before, 5000, 'the refresh to reach the token endpoint')
  const signOut = await browser.fetch(`${gateway.url}/oauth/logout/`, { method: 'POST', headers: { accept: 'application/json' } })
  await signOut.arrayBuffer()
  expect(signOut.status).toBeLessThan(400)
  // Signed out: the session is gone for its next requests.
  expect((await ask(browser, '/p1/x')).status).toBe(401)
  const seen = upstreamSeen()
  release()
  const during = await pending
  expect(during.token).toBeUndefined()
  expect(during.status).toBe(401)
  expect(upstreamSeen()).toBe(seen)
})

// The failure mark (failureKey) lives the provider's timeout plus 5 s in the store, on the store's
// clock; the token's expiry is judged on the gateway's. Across the expiry while the mark stands, an
// expired token must never go upstream: the next request asks again (and gets 502 while failing).
// Nor one with less than 5 s left (it would expire on its way).
it('an expired token, or one about to expire, is not sent upstream while a failure mark stands; the provider is asked again', async () => {
  const browser = await signedIn('p1')
  const { token } = await ask(browser, '/p1/x')
  at((TOKEN_TTL_S - 20) * 1000)
  modes.p1 = 'error500'
  const before = calls.p1!
  expect(await ask(browser, '/p1/x')).toEqual({ status: 200, token })
  expect(await ask(browser, '/p1/x')).toEqual({ status: 200, token })
  expect(calls.p1! - before).toBe(1)
  // Still valid (more than STILL_VALID_FLOOR_S left), the mark stands. The token's expiry is whole
  // seconds (the sign-in's time rounded down: up to 1 s sooner than sign-in + TTL), and the asks so
  // far took real time (within ONE_ANSWER_MS): 6 s before the TTL was, for a sign-in late in its
  // second, under 5 s before the expiry (CI saw the 502 of an expired token once).
  at((TOKEN_TTL_S - STILL_VALID_FLOOR_S - 1) * 1000 - ONE_ANSWER_MS)
  expect(await ask(browser, '/p1/x')).toEqual({ status: 200, token })
  expect(calls.p1! - before).toBe(1)
  const seen = upstreamSeen()
  // 3 s before, and 1 s after: asked again, 502, nothing upstream.
  at((TOKEN_TTL_S - 3) * 1000)
  expect(await ask(browser, '/p1/x')).toEqual({ status: 502, error: 'token_exchange_failed' })
  expect(calls.p1! - before).toBe(2)
  at((TOKEN_TTL_S + 1) * 1000)
  expect(await ask(browser, '/p1/x')).toEqual({ status: 502, error: 'token_exchange_failed' })
  expect(calls.p1! - before).toBe(3)
  expect(upstreamSeen()).toBe(seen)
})

it('a 429 pause that outlives the token does not send it upstream once expired', async () => {
  const browser = await signedIn('p1')
  const { token } = await ask(browser, '/p1/x')
  at((TOKEN_TTL_S - 10) * 1000)
  modes.p1 = 'rate-limited'
  expect(await ask(browser, '/p1/x')).toEqual({ status: 200, token })
  at(TOKEN_TTL_S * 1000 + 500)
  const seen = upstreamSeen()
  expect((await ask(browser, '/p1/x')).status).toBe(502)
  expect(upstreamSeen()).toBe(seen)
})

it('the failure mark of p1 does not keep the same session from refreshing p2, nor another session from refreshing p1', async () => {
  const browser = await signedIn('p1', 'p2')
  const other = await signedIn('p1')
  const t1 = (await ask(browser, '/p1/x')).token
  const t2 = (await ask(browser, '/p2/x')).token
  at((TOKEN_TTL_S - 20) * 1000)
  modes.p1 = 'error500'
  expect(await ask(browser, '/p1/x')).toEqual({ status: 200, token: t1 })
  // p2 of the same session: asked, refreshed.
  const b2 = calls.p2!
  const p2 = await ask(browser, '/p2/x')
  expect(p2.status).toBe(200)
  expect(p2.token).not.toBe(t2)
  expect(calls.p2! - b2).toBe(1)
  // Another session at p1: asks p1 itself (and gets its own token back, p1 failing).
  const b1 = calls.p1!
  const o = await ask(other, '/p1/x')
  expect(o.status).toBe(200)
  expect(o.token).not.toBe(t1)
  expect(calls.p1! - b1).toBe(1)
})

it('on a route of two providers, a failing p1 with a still-valid token serves p1\'s token; expired, 502 (p2 is not asked in its place)', async () => {
  const browser = await signedIn('p1', 'p2')
  const t1 = (await ask(browser, '/both/x')).token
  at((TOKEN_TTL_S - 20) * 1000)
  modes.p1 = 'error500'
  expect(await ask(browser, '/both/x')).toEqual({ status: 200, token: t1 })
  at((TOKEN_TTL_S + 1) * 1000)
  const b2 = calls.p2!
  expect(await ask(browser, '/both/x')).toEqual({ status: 502, error: 'token_exchange_failed' })
  expect(calls.p2! - b2).toBe(0)
})

it('many requests of a session whose refresh trickles wait at most the timeout and ask once', async () => {
  const browser = await signedIn('p1')
  const { token } = await ask(browser, '/p1/x')
  at((TOKEN_TTL_S - 20) * 1000)
  modes.p1 = 'trickle'
  const before = calls.p1!
  const start = performance.now()
  const answers = await Promise.all(Array.from({ length: 8 }, async () => await ask(browser, '/p1/x')))
  expect(performance.now() - start).toBeLessThan(WITHIN_MS)
  expect(answers.every((a) => a.status === 200 && a.token === token)).toBe(true)
  const start2 = performance.now()
  for (let i = 0; i < 5; i++) expect(await ask(browser, '/p1/x')).toEqual({ status: 200, token })
  expect(performance.now() - start2).toBeLessThan(ONE_ANSWER_MS)
  expect(calls.p1! - before).toBe(1)
})

it('the warn line carries no token, refresh token, secret or cookie value', async () => {
  const browser = await signedIn('p1')
  await ask(browser, '/p1/x')
  at((TOKEN_TTL_S - 20) * 1000)
  modes.p1 = 'error500'
  const from = gateway.logs.length
  await ask(browser, '/p1/x')
  const text = gateway.logs.slice(from).join('\n')
  expect(warned(from)).toHaveLength(1)
  const cookie = browser.cookies.get('gw_session')!.value
  for (const secret of [CLIENT_SECRET, 'at-secret-', 'rt-secret-', cookie]) expect(text).not.toContain(secret)
})

// The warn line is the operator's one trace of a provider failing while tokens are still valid
// ("one warn line names the cause"). For a token endpoint answering 500 (or 502, 503, 504) it says
// "did not return a usable access token", cause "unexpected HTTP status code": which status, the
// one thing that tells an outage from a proxy's error page or a bad deployment, is not there
// (describeCause drops oauth4webapi's cause, the Response, which is not an Error).
it('the warn line of a refresh answered 503 names the status', async () => {
  const browser = await signedIn('p1')
  await ask(browser, '/p1/x')
  at((TOKEN_TTL_S - 20) * 1000)
  modes.p1 = 'error503'
  const from = gateway.logs.length
  expect((await ask(browser, '/p1/x')).status).toBe(200)
  expect(warned(from)).toHaveLength(1)
  expect(JSON.stringify(warned(from)[0])).toMatch(/\b503\b/)
})

it('invalid_grant on a still-valid token sends it nowhere: 401', async () => {
  const browser = await signedIn('p1')
  await ask(browser, '/p1/x')
  at((TOKEN_TTL_S - 20) * 1000)
  modes.p1 = 'invalid-grant'
  const seen = upstreamSeen()
  expect((await ask(browser, '/p1/x')).status).toBe(401)
  expect(upstreamSeen()).toBe(seen)
})

const gatewayUser = () => new URL(redis.url).username || 'default'

/** Runs `fn` while the gateway's user may write refresh locks only (the test's client is another user, with every right). */
async function locksOnly<T> (fn: () => Promise<T>): Promise<T> {
  await admin.call('ACL', 'SETUSER', 'test-admin', 'on', '>test-admin-password', '~*', '&*', '+@all')
  await admin.call('AUTH', 'test-admin', 'test-admin-password')
  await admin.call('ACL', 'SETUSER', gatewayUser(), 'resetkeys', '~gw:refresh:*', '%R~*')
  try {
    return await fn()
  } finally {
    await admin.call('ACL', 'SETUSER', gatewayUser(), 'resetkeys', '~*')
  }
}

// docs/operations.md "Token refresh": "If the provider refuses the grant (invalid_grant, ...), the
// token is dropped: browsers sign in again, API clients get 401." When the store refuses the write
// that drops it, refreshOrKeep takes the refusal for "the store refused the refresh" and hands the
// request the token whose grant the provider has just refused: it goes upstream, and every next
// request sends the refused refresh token to the provider again (no mark, nothing kept in-process).
it('a grant the provider refused (invalid_grant) sends its access token nowhere, even when the store cannot write the drop', async () => {
  const browser = await signedIn('p1')
  const { token } = await ask(browser, '/p1/x')
  expect(token).toBeDefined()
  at((TOKEN_TTL_S - 20) * 1000)
  modes.p1 = 'invalid-grant'
  const before = calls.p1!
  const answers = await locksOnly(async () => {
    const seen = upstreamSeen()
    const out = [await ask(browser, '/p1/x'), await ask(browser, '/p1/x'), await ask(browser, '/p1/x')]
    return { out, upstream: upstreamSeen() - seen }
  })
  // The provider's verdict is known: no request goes upstream with that grant's token, and the
  // refused refresh token is not sent again and again.
  expect(answers.out.map((a) => a.status)).toEqual([401, 401, 401])
  expect(answers.upstream).toBe(0)
  expect(calls.p1! - before).toBe(1)
})

// daab985: "the session's requests do not ask the failing provider again while the store's failure
// mark stands". When the mark cannot be written (the store refuses it, but took the lock), each
// request of the session asks the failing provider again, as before that commit.
it('a failing provider is not asked by every request when the failure mark cannot be written', async () => {
  const browser = await signedIn('p1')
  const { token } = await ask(browser, '/p1/x')
  at((TOKEN_TTL_S - 20) * 1000)
  modes.p1 = 'error500'
  const before = calls.p1!
  const out = await locksOnly(async () => [await ask(browser, '/p1/x'), await ask(browser, '/p1/x'), await ask(browser, '/p1/x'), await ask(browser, '/p1/x')])
  expect(out.every((a) => a.status === 200 && a.token === token)).toBe(true)
  expect(calls.p1! - before).toBe(1)
})
