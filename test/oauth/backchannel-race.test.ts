// A back-channel logout that lands while a sign-in of the same person is under way: after the
// provider's tokens came back and before the new session is in the back-channel index, so the
// logout's read of the index misses it. Such a sign-in lived on after the logout, a browser's and
// an agent's grant alike (an attacker's finding: the grant then worked for session.maxAge). The
// logout now marks the provider session before it reads the index, and a sign-in checks that mark
// once it is indexed (SessionIndex.addSignIn): one of the two sees the other. Instance A's store
// commands pass through a proxy that holds them from a known point (test/helpers/hold-proxy.ts);
// the logout reaches instance B, on the same Redis. And the other way round (an outside tester's
// finding, fixed: each ended session's renames are followed): the logout has read the index and is
// about to delete the session when a sign-in in that browser renames it (GETDEL of the old id, the
// new id listed under the same sub); the renamed session went on.
import { randomBytes } from 'node:crypto'
import { expect } from 'vitest'
import { Browser, signIn } from '../helpers/browser.js'
import { pkcePair } from '../helpers/agent-grant.js'
import { oidcClient, sessionStatus, type TestGateway } from '../helpers/gateway.js'
import { reachCallback } from '../helpers/callback.js'
import { heldInstance, type HoldProxy } from '../helpers/hold-proxy.js'
import { logoutToken, type TestProvider } from '../helpers/oidc.js'
import { test as it } from '../helpers/stack.js'

const REDIRECT = 'http://127.0.0.1:8976/callback'
let b: TestGateway
let a: TestGateway
let proxy: HoldProxy
let closeA: () => Promise<void>
let bcl: TestProvider
/** Instance A's clock: Redis's and B's, or ahead of or behind them by `offset` (clocks of two machines). */
const clockA = { offset: 0, now: () => Date.now() + clockA.offset }
/** The provider session (`sid`) of bcl's last code. */
let lastSid: string | undefined

it.beforeAll(async ({ startStack, upstream, redis, op, bcl: provider }) => {
  bcl = provider
  bcl.provider.on('authorization_code.saved', (code: { sid?: string }) => { lastSid = code.sid })
  const raw = {
    session: { cacheTtl: 0 },
    providers: { demo: oidcClient(op.issuer, 'c', 's'), bcl: oidcClient(bcl.issuer, 'c2', 's', 'openid email') },
    routes: [{ path: '/bcl/', upstream: upstream.url, provider: 'bcl', agents: true }],
  }
  // B keeps an agent's sign-in for an hour, A for five minutes (a change of config rolling out):
  // an Allow at A reads the length B kept it for (an attacker's finding: A's own put when it began in the future).
  b = await startStack({ ...raw, state: { ttl: '1h' } })
  ;({ gateway: a, proxy, close: closeA } = await heldInstance(redis.url, { ...raw, server: { baseUrl: b.url } }, { clock: clockA }))
})

it.afterAll(async () => { await closeA?.() })
it.afterEach(() => { clockA.offset = 0 })

/** The provider ends every session of `login` (by `sub`), or the one session `{ sid }`, at instance B. */
async function logout (login: string | { sid: string }): Promise<number> {
  const answer = await fetch(`${b.url}/oauth/backchannel-logout/bcl/`, { method: 'POST', headers: { 'content-type': 'application/x-www-form-urlencoded', accept: 'application/json' }, body: `logout_token=${await logoutToken(bcl, 'c2', login)}` })
  await answer.arrayBuffer()
  return answer.status
}

/** `send`'s answer, the provider having logged `login` out while A's store commands after one holding every string of `after` were held. */
async function loggedOutDuring (after: string[], login: string, send: () => Promise<Response>): Promise<Response> {
  const held = proxy.arm(after, [''])
  const answer = send()
  await held
  expect(await logout(login)).toBe(200)
  proxy.release()
  return await answer
}

it('a back-channel logout ends a session renamed between its index read and its delete', async () => {
  const phone = await signIn(`${b.url}/bcl/`, 'bcl-rename')
  expect(await sessionStatus(b, phone.value, '/bcl/x')).toBe(200)
  const callback = await reachCallback(phone.browser, `${b.url}/oauth/login/bcl/?next=/bcl/`, { login: 'bcl-rename' })
  const token = await logoutToken(bcl, 'c2', 'bcl-rename')

  const held = proxy.arm(['smembers'], ['del', 'session:'])
  const answered = fetch(`http://127.0.0.1:${a.config.server.port}/oauth/backchannel-logout/bcl/`, { method: 'POST', headers: { 'content-type': 'application/x-www-form-urlencoded', accept: 'application/json' }, body: `logout_token=${token}` })
  await held
  const landed = await phone.browser.fetch(callback.href)
  await landed.arrayBuffer()
  expect(landed.status).toBe(302)
  const renamed = phone.browser.cookies.get('gw_session')!.value
  expect(renamed).not.toBe(phone.value)
  proxy.release()
  expect((await answered).status).toBe(200)
  expect(await sessionStatus(b, renamed, '/bcl/x'), 'the renamed session after the provider\'s logout').toBe(401)
})

// A's clock 2 s ahead of Redis's and B's: the marks are read on the store's clock (an attacker's
// finding: 100 ms of skew defeated marks of instance times).
it('a browser\'s sign-in whose session is written when the logout reads the index ends, whatever the instances\' clocks; signing in after the logout works, on an instance whose clock is behind', async () => {
  clockA.offset = 2000
  const login = 'bcl-browser-race'
  const browser = new Browser()
  const callback = await reachCallback(browser, `${b.url}/oauth/login/bcl/?next=/bcl/`, { login })
  // A's next store command after it writes the new session (its entry in the index) waits.
  const landed = await loggedOutDuring(['session:'], login, async () => await browser.fetch(`http://127.0.0.1:${a.config.server.port}${callback.pathname}${callback.search}`, { headers: { accept: 'text/html' } }))
  expect(landed.status).toBe(400)
  expect(await landed.text()).toContain('You were signed out at bcl (its back-channel logout) while this sign-in was being completed: sign in again.')
  const cookie = browser.cookies.get('gw_session')?.value
  if (cookie !== undefined) expect(await sessionStatus(b, cookie, '/bcl/x')).toBe(401)
  // A sign-in begun after the logout is not ended by its mark, at A 2 s behind.
  clockA.offset = -2000
  const again = await reachCallback(browser, `${b.url}/oauth/login/bcl/?next=/bcl/`, { login })
  expect((await browser.fetch(`http://127.0.0.1:${a.config.server.port}${again.pathname}${again.search}`)).status).toBe(302)
  expect(await sessionStatus(b, browser.cookies.get('gw_session')!.value, '/bcl/x')).toBe(200)
})

it('a callback of a provider session logged out before it came is refused (a sid logged out never comes back; an attacker\'s finding)', async () => {
  const login = 'bcl-sid-before-callback'
  const browser = new Browser()
  lastSid = undefined
  const callback = await reachCallback(browser, `${b.url}/oauth/login/bcl/?next=/bcl/`, { login })
  expect(lastSid).toBeDefined()
  expect(await logout({ sid: lastSid! })).toBe(200)
  const landed = await browser.fetch(callback.href, { headers: { accept: 'text/html' } })
  expect(landed.status).toBe(400)
  expect(await landed.text()).toContain('You were signed out at bcl')
})

// What the browser's earlier session carries is checked too: the provider signed in at is demo, the
// one logged out bcl (attackers' findings: refused naming demo; then, checking demo only, a `sid`
// logout of the carried bcl racing the rename left it in the new session).
it('a sign-in at another provider, in a browser whose bcl session a logout ends meanwhile, is refused naming bcl; signed in again, it holds demo alone', async () => {
  const login = 'bcl-other-provider'
  const browser = new Browser()
  expect((await browser.navigate(`${b.url}/bcl/x`, { login })).status).toBe(200)
  const demo = await reachCallback(browser, `${b.url}/oauth/login/demo/?next=/`, { login })
  // Held once the new session, which carries the bcl sign-in, is written.
  const landed = await loggedOutDuring(['set', 'session:'], login, async () => await browser.fetch(`http://127.0.0.1:${a.config.server.port}${demo.pathname}${demo.search}`, { headers: { accept: 'text/html' } }))
  expect(landed.status).toBe(400)
  expect(await landed.text()).toContain('You were signed out at bcl (its back-channel logout)')
  expect((await browser.navigate(`${b.url}/oauth/login/demo/?next=/`, { login })).status).toBe(200)
  const cookie = browser.cookies.get('gw_session')!.value
  expect(await sessionStatus(b, cookie, '/bcl/x')).toBe(401)
  const identities = await (await fetch(`${b.url}/oauth/userinfo/`, { headers: { cookie: `gw_session=${cookie}` } })).json() as { identities: Record<string, unknown> }
  expect(Object.keys(identities.identities)).toEqual(['demo'])
})

it('a sid logout of the bcl session a browser carries, come while its sign-in at demo renames it: the sign-in is refused naming bcl', async () => {
  const login = 'bcl-sid-carried'
  const browser = new Browser()
  lastSid = undefined
  expect((await browser.navigate(`${b.url}/bcl/x`, { login })).status).toBe(200)
  const sid = lastSid!
  const demo = await reachCallback(browser, `${b.url}/oauth/login/demo/?next=/`, { login })
  // The logout, at A: marked and the index read, its delete held; the sign-in at B meanwhile.
  const held = proxy.arm(['smembers'], ['del', 'session:'])
  const answered = fetch(`http://127.0.0.1:${a.config.server.port}/oauth/backchannel-logout/bcl/`, { method: 'POST', headers: { 'content-type': 'application/x-www-form-urlencoded', accept: 'application/json' }, body: `logout_token=${await logoutToken(bcl, 'c2', { sid })}` })
  await held
  const landed = await browser.fetch(demo.href, { headers: { accept: 'text/html' } })
  expect(landed.status).toBe(400)
  expect(await landed.text()).toContain('You were signed out at bcl (its back-channel logout)')
  proxy.release()
  expect((await answered).status).toBe(200)
  const cookie = browser.cookies.get('gw_session')?.value
  if (cookie !== undefined) expect(await sessionStatus(b, cookie, '/bcl/x')).toBe(401)
})

/** An agent's authorization for `login` up to its consent page (the sign-in's callback at B), and where its Allow goes: instance A. */
async function toConsent (login: string): Promise<{ browser: Browser, allow: () => Promise<Response> }> {
  const registered = await fetch(`${b.url}/oauth/agents/register`, { method: 'POST', headers: { 'content-type': 'application/json', 'x-forwarded-for': randomBytes(4).join('.') }, body: JSON.stringify({ client_name: 'Race', redirect_uris: [REDIRECT], token_endpoint_auth_method: 'none' }) })
  const id = (await registered.json() as { client_id: string }).client_id
  const { challenge } = pkcePair()
  const query = new URLSearchParams({ response_type: 'code', client_id: id, redirect_uri: REDIRECT, code_challenge: challenge, code_challenge_method: 'S256', resource: `${b.url}/bcl` })
  const browser = new Browser()
  const page = await browser.navigate(`${b.url}/oauth/agents/authorize?${query.toString()}`, { login })
  const body = await page.text()
  expect(page.status, body).toBe(200)
  const csrf = /name="csrf" value="([^"]+)"/.exec(body)![1]!
  const url = `http://127.0.0.1:${a.config.server.port}${/<form method="post" action="([^"]+)"/.exec(body)![1]!}`
  return { browser, allow: async () => await browser.fetch(url, { method: 'POST', headers: { 'content-type': 'application/x-www-form-urlencoded', origin: b.url, accept: 'text/html' }, body: new URLSearchParams({ csrf, decision: 'allow' }) }) }
}

// The sign-in was kept by B, the Allow is answered by A, whose clock is 5 s behind: when it was kept
// is read on the store's clock (an attacker's finding: B's time against A's let the grant through).
it('an agent\'s grant whose session is written when the logout reads the index is no grant, at an instance whose clock is behind: the Allow is refused, with no code', async () => {
  const login = 'bcl-allow-race'
  const { allow } = await toConsent(login)
  clockA.offset = -5000
  // A's next store command after it labels the grant's session (its entry in the index) waits. The
  // logout finds the kept sign-in only (the Allow has claimed it), and deletes it.
  const allowed = await loggedOutDuring(['agents:grant-label'], login, allow)
  expect(allowed.status).toBe(403)
  expect(await allowed.text()).toContain('This sign-in was ended by its provider (a back-channel logout) before it was allowed')
})

it('an agent authorized right after a logout of its person is allowed at an instance whose clock is ahead', async () => {
  const login = 'bcl-allow-after'
  expect(await logout(login)).toBe(200)
  const { allow } = await toConsent(login)
  clockA.offset = 5000
  const allowed = await allow()
  expect(allowed.status).toBe(303)
  expect(allowed.headers.get('location')).toContain('/oauth/agents/authorize/')
})
