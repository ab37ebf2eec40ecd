// Sign-out that signs out, against a real authorization server that keeps its own sign-in (single
// sign-on): RP-initiated logout with id_token_hint, post_logout_redirect_uri and a bound state,
// chained over every provider of the session, then to `next`; refresh tokens revoked (RFC 7009);
// `endSession: false` signs out locally only; a provider failure never keeps anyone signed in; and
// the return address refuses a missing, forged, expired, replayed or other browser's state.
import { SignJWT } from 'jose'
import { MESSAGES } from '../../src/errors.js'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { deriveKey, keyIdOf, Sealer } from '../../src/session/seal.js'
import { type SessionRecord } from '../../src/session/session.js'
import { decodeRecord } from '../../src/session/sealed-record.js'
import { RedisStore } from '../../src/store/redis.js'
import { Browser } from '../helpers/browser.js'
import { TEST_SECRET, oidcClient, reserveBaseUrl, startGateway, type TestGateway } from '../helpers/gateway.js'
import { gatewayClient, startOidcProvider, walk, type TestProvider } from '../helpers/oidc.js'
import { startRedis, type TestRedis } from '../helpers/redis.js'
import { startUpstream, type Upstream } from '../helpers/upstream.js'

let redis: TestRedis
let op: TestProvider
let flaky: TestProvider
let upstream: Upstream
let gateway: TestGateway
let store: RedisStore

// demo and second: RP-initiated logout; local: endSession false; flaky: a provider that goes away.
const CLIENTS = { demo: 'c', second: 'c2', local: 'c3', flaky: 'c4' } as const

beforeAll(async () => {
  redis = await startRedis()
  upstream = await startUpstream()
  const { port, baseUrl } = await reserveBaseUrl()
  const client = (provider: keyof typeof CLIENTS) => gatewayClient(baseUrl, provider, CLIENTS[provider])
  op = await startOidcProvider([client('demo'), client('second'), client('local')], { logout: true })
  flaky = await startOidcProvider([client('flaky')], { logout: true })
  gateway = await startGateway({
    server: { port, baseUrl },
    store: { type: 'redis', url: redis.url },
    providers: {
      demo: oidcClient(op.issuer, 'c', 's', 'openid email'),
      second: oidcClient(op.issuer, 'c2', 's', 'openid email'),
      local: { ...oidcClient(op.issuer, 'c3', 's', 'openid email'), endSession: false },
      flaky: oidcClient(flaky.issuer, 'c4', 's', 'openid email'),
    },
    routes: [
      { path: '/app/', upstream: upstream.url, provider: 'demo' },
      { path: '/second/', upstream: upstream.url, provider: 'second' },
      { path: '/local/', upstream: upstream.url, provider: 'local' },
      { path: '/flaky/', upstream: upstream.url, provider: 'flaky' },
    ],
  })
  store = new RedisStore({ type: 'redis', url: redis.url, cluster: undefined, sentinel: undefined, keyPrefix: 'gw:', timeoutMs: 500, readiness: 'required', waitForReplica: 0 }, gateway.app.log)
})

afterAll(async () => {
  await gateway?.close()
  await store?.close()
  await Promise.all([op?.close(), flaky?.close(), upstream?.close()])
  await redis?.release()
})

/** Signs `browser` in on `path` (login and consent as `login`), ending on the upstream's answer. */
async function signIn (browser: Browser, path: string, login = 'alice'): Promise<void> {
  const response = await browser.navigate(`${gateway.url}${path}`, { login })
  expect(response.status).toBe(200)
}

function sessionCookie (browser: Browser): string {
  return browser.cookies.get('gw_session')!.value
}

async function sessionWorks (cookie: string, path = '/app/'): Promise<boolean> {
  const response = await fetch(`${gateway.url}${path}x`, { headers: { accept: 'application/json', cookie: `gw_session=${cookie}` } })
  await response.arrayBuffer()
  return response.status === 200
}

/** The session record as the store holds it (opened the way the gateway opens it). */
async function record (cookie: string): Promise<SessionRecord> {
  const sealer = new Sealer(TEST_SECRET)
  return decodeRecord(sealer, cookie, await store.getBytes(`session:${sealer.idFor('session', cookie)}`))!
}

/** The same-origin sign-out a page's button sends. */
function signOut (browser: Browser, next?: string): Promise<Response> {
  return browser.fetch(`${gateway.url}/oauth/logout/`, {
    method: 'POST',
    body: new URLSearchParams(next === undefined ? {} : { next }),
    headers: { 'content-type': 'application/x-www-form-urlencoded', 'sec-fetch-site': 'same-origin' },
  })
}

/** Whether a sign-in from `path` reaches the upstream without the provider asking who the user is. */
async function signsInSilently (browser: Browser, path: string): Promise<boolean> {
  const end = await walk(browser, `${gateway.url}${path}`)
  return end.response.status === 200 && !/name="prompt" value="login"/.test(end.body)
}

async function refreshWorks (provider: TestProvider, clientId: string, refreshToken: string): Promise<boolean> {
  const response = await fetch(`${provider.issuer}/token`, {
    method: 'POST',
    headers: { 'content-type': 'application/x-www-form-urlencoded' },
    body: new URLSearchParams({ grant_type: 'refresh_token', refresh_token: refreshToken, client_id: clientId, client_secret: 's' }),
  })
  await response.arrayBuffer()
  return response.status === 200
}

describe('RP-initiated logout', () => {
  it('without a sign-out, a second sign-in at this provider is silent (so the next test can fail)', async () => {
    const browser = new Browser()
    await signIn(browser, '/app/')
    browser.cookies.delete('gw_session')
    expect(await signsInSilently(browser, '/app/')).toBe(true)
  })

  it('ends the gateway session first, sends the browser to end_session_endpoint, comes back to next, and the next sign-in asks for the user again', async () => {
    const browser = new Browser()
    await signIn(browser, '/app/')
    const cookie = sessionCookie(browser)
    const idToken = (await record(cookie)).providerSessions?.demo?.idToken
    expect(idToken).toMatch(/^ey/)

    const response = await signOut(browser, '/app/bye')
    expect(response.status).toBe(302)
    expect(response.headers.get('cache-control')).toBe('no-store')
    const location = new URL(response.headers.get('location')!)
    expect(`${location.origin}${location.pathname}`).toBe(`${op.issuer}/session/end`)
    expect(location.searchParams.get('id_token_hint')).toBe(idToken)
    expect(location.searchParams.get('post_logout_redirect_uri')).toBe(`${gateway.url}/oauth/logout/demo/`)
    expect(location.searchParams.get('client_id')).toBe('c')
    expect(location.searchParams.get('state')).toMatch(/^ey/)
    // Signed out here before the provider is even asked.
    expect(browser.cookies.has('gw_session')).toBe(false)
    expect(await sessionWorks(cookie)).toBe(false)

    const end = await walk(browser, location.href)
    expect(end.visited.some((url) => url.startsWith(`${gateway.url}/oauth/logout/demo/?state=`))).toBe(true)
    // Back at next (a protected page, so on to the sign-in), and the provider asks who this is.
    expect(end.visited).toContain(`${gateway.url}/app/bye`)
    expect(end.body).toMatch(/name="prompt" value="login"/)
    expect(browser.cookies.has('gw_session_signout')).toBe(false)
    // Neither the ID token nor the state reaches a log line.
    const logs = gateway.logs.join('\n')
    expect(logs).not.toContain(idToken)
    expect(logs).not.toContain(location.searchParams.get('state'))
  })

  it('keeps the ID token only for a provider with an end-session endpoint, and sub for all OIDC providers', async () => {
    const browser = new Browser()
    await signIn(browser, '/local/')
    const kept = (await record(sessionCookie(browser))).providerSessions?.local
    expect(kept?.idToken).toBeUndefined()
    expect(kept?.sub).toBe('alice')
  })

  it('chains over every provider of the session, then goes to next', async () => {
    const browser = new Browser()
    await signIn(browser, '/app/')
    await signIn(browser, '/second/')
    const response = await signOut(browser, '/app/done')
    const end = await walk(browser, new URL(response.headers.get('location')!).href)
    const returns = end.visited.filter((url) => url.startsWith(`${gateway.url}/oauth/logout/`)).map((url) => new URL(url).pathname)
    expect(returns).toEqual(['/oauth/logout/demo/', '/oauth/logout/second/'])
    expect(end.visited.filter((url) => url.startsWith(`${op.issuer}/session/end?`))).toHaveLength(2)
    expect(end.visited).toContain(`${gateway.url}/app/done`)
    expect(end.body).toMatch(/name="prompt" value="login"/)
    expect(await signsInSilently(browser, '/second/')).toBe(false)
  })

  it('a sign-out sent with the cookie a sign-in in another tab just renamed ends the renamed session (it found none before)', async () => {
    const browser = new Browser()
    await signIn(browser, '/app/')
    const before = sessionCookie(browser)
    // Tab A adds a provider: the session gets a new id and cookie. Tab B's sign-out left with the old one.
    await signIn(browser, '/second/')
    const renamed = sessionCookie(browser)
    expect(renamed).not.toBe(before)
    const response = await fetch(`${gateway.url}/oauth/logout/`, {
      method: 'POST',
      body: new URLSearchParams(),
      headers: { 'content-type': 'application/x-www-form-urlencoded', 'sec-fetch-site': 'same-origin', accept: 'text/html', cookie: `gw_session=${before}` },
      redirect: 'manual',
    })
    await response.arrayBuffer()
    expect(response.headers.get('set-cookie')).toMatch(/^gw_session=;/)
    expect(await sessionWorks(renamed, '/second/')).toBe(false)
    expect(await sessionWorks(before)).toBe(false)
  })

  it('"sign out everywhere" from that tab does not claim what it could not do: the page says only this browser is signed out', async () => {
    // An outside tester's row: the page said "signed out everywhere" while the person's phone stayed
    // signed in. The old cookie never opens the renamed session, so whose others to end is unknown.
    const phone = new Browser()
    await signIn(phone, '/app/')
    const laptop = new Browser()
    await signIn(laptop, '/app/')
    const before = sessionCookie(laptop)
    await signIn(laptop, '/second/')
    const response = await fetch(`${gateway.url}/oauth/logout/`, {
      method: 'POST',
      body: new URLSearchParams({ everywhere: '1' }),
      headers: { 'content-type': 'application/x-www-form-urlencoded', 'sec-fetch-site': 'same-origin', accept: 'text/html', cookie: `gw_session=${before}` },
      redirect: 'manual',
    })
    const page = await response.text()
    expect(response.status).toBe(200)
    expect(page).toContain('Only this browser is signed out')
    expect(page).not.toContain('signed out everywhere')
    expect(await sessionWorks(sessionCookie(laptop), '/second/')).toBe(false)
    expect(await sessionWorks(sessionCookie(phone))).toBe(true)
  })

  it('the sign-out cookie never reaches an upstream', async () => {
    const browser = new Browser()
    await signIn(browser, '/app/')
    const response = await fetch(`${gateway.url}/app/x`, { headers: { accept: 'application/json', cookie: `gw_session=${sessionCookie(browser)}; gw_session_signout=${'a'.repeat(43)}; theme=dark` } })
    expect(response.status).toBe(200)
    expect(((await response.json()) as { headers: Record<string, string> }).headers.cookie).toBe('theme=dark')
  })

  it('without next, ends on the signed-out page', async () => {
    const browser = new Browser()
    await signIn(browser, '/app/')
    const end = await walk(browser, new URL((await signOut(browser)).headers.get('location')!).href)
    expect(end.url).toMatch(/\/oauth\/logout\/demo\/\?state=/)
    expect(end.response.status).toBe(200)
    expect(end.body).toContain('You are signed out')
  })

  it('sign out everywhere: this browser is signed out at the provider too, and the end says the provider may still remember the others', async () => {
    const browser = new Browser()
    await signIn(browser, '/app/')
    const other = new Browser()
    await signIn(other, '/app/')
    const started = await browser.fetch(`${gateway.url}/oauth/logout/?everywhere=1`, {
      method: 'POST', body: '', headers: { 'content-type': 'application/x-www-form-urlencoded', 'sec-fetch-site': 'same-origin' },
    })
    const end = await walk(browser, new URL(started.headers.get('location')!).href)
    expect(end.visited.some((url) => url.includes('/session/end'))).toBe(true)
    expect(end.body).toContain('You are signed out everywhere')
    expect(end.body).toContain('Other browsers are signed out of this gateway, but not of your provider')
    expect(await sessionWorks(other.cookies.get('gw_session')!.value)).toBe(false)
    // What the page warns of: the other browser's provider session still signs it in without asking.
    expect(await signsInSilently(other, '/app/')).toBe(true)
  })

  it('revokes the refresh token at the provider (RFC 7009): it no longer works at the token endpoint', async () => {
    const browser = new Browser()
    await signIn(browser, '/app/')
    const { refresh_token: refreshToken, access_token: accessToken } = (await record(sessionCookie(browser))).tokens.demo!
    expect(refreshToken).toBeTruthy()
    // Not followed to the provider: the revocation alone must have done it.
    expect((await signOut(browser)).status).toBe(302)
    expect(await refreshWorks(op, 'c', refreshToken!)).toBe(false)
    const userinfo = await fetch(`${op.issuer}/me`, { headers: { authorization: `Bearer ${accessToken}` } })
    expect(userinfo.status).toBe(401)
  })

  it('with endSession: false signs out locally only: no provider visit, no revocation', async () => {
    const browser = new Browser()
    await signIn(browser, '/local/')
    const cookie = sessionCookie(browser)
    const { refresh_token: refreshToken } = (await record(cookie)).tokens.local!
    const response = await signOut(browser, '/local/bye')
    expect(response.status).toBe(302)
    expect(response.headers.get('location')).toBe('/local/bye')
    expect(await sessionWorks(cookie, '/local/')).toBe(false)
    expect(await refreshWorks(op, 'c3', refreshToken!)).toBe(true)
  })

  it('when the provider cannot be reached, sign-out still ends the session and logs one warn line', async () => {
    const browser = new Browser()
    await signIn(browser, '/flaky/')
    const cookie = sessionCookie(browser)
    await flaky.close()
    const before = gateway.logs.length
    const response = await signOut(browser, '/flaky/bye')
    expect(response.status).toBe(302)
    expect(response.headers.get('location')).toMatch(new RegExp(`^${flaky.issuer}/session/end\\?`))
    expect(await sessionWorks(cookie, '/flaky/')).toBe(false)
    const warnings = gateway.logs.slice(before).map((line) => JSON.parse(line) as { level: number, msg: string, provider?: string })
      .filter((line) => line.level === 40)
    expect(warnings).toEqual([expect.objectContaining({ provider: 'flaky', msg: 'token revocation failed; the gateway session has ended anyway' })])
  })
})

describe('the return address refuses a bad state', () => {
  const stateKey = deriveKey(TEST_SECRET, 'signout-state')

  /** A browser in the middle of a sign-out: its state for demo and its sign-out cookie. */
  async function midway (): Promise<{ browser: Browser, state: string }> {
    const browser = new Browser()
    await signIn(browser, '/app/')
    const location = new URL((await signOut(browser)).headers.get('location')!)
    return { browser, state: location.searchParams.get('state')! }
  }

  /** The answer, and which check failed: the person reads one sentence, the log says which (the cause). */
  async function returnWith (browser: Browser, query: string, provider = 'demo'): Promise<{ status: number, error: string, message: string, reason: unknown }> {
    const before = gateway.logs.length
    const response = await browser.fetch(`${gateway.url}/oauth/logout/${provider}/${query}`, { headers: { accept: 'application/json' } })
    expect(response.headers.get('cache-control')).toBe('no-store')
    const body = await response.json() as { error: string, message: string }
    const rejected = gateway.logs.slice(before).map((line) => JSON.parse(line) as { msg: string, cause?: { message: string } }).find((line) => line.msg === 'request rejected')
    return { status: response.status, ...body, reason: rejected?.cause?.message }
  }

  const forged = (key: Uint8Array, claims: Record<string, unknown>, exp = Math.floor(Date.now() / 1000) + 300) =>
    new SignJWT({ typ: 'signout', p: 'demo', n: 'x'.repeat(22), b: 'y'.repeat(22), ...claims }).setProtectedHeader({ alg: 'HS256', kid: keyIdOf(TEST_SECRET) }).setIssuedAt().setExpirationTime(exp).sign(key)

  it.each([
    ['no state', async () => '', 'the state parameter is missing'],
    ['a state signed with another key', async () => `?state=${await forged(new Uint8Array(32).fill(7), {})}`, 'the state is invalid'],
    ['an expired state', async () => `?state=${await forged(stateKey, {}, Math.floor(Date.now() / 1000) - 10)}`, 'the state has expired'],
    ['a sign-in state (another kind)', async () => `?state=${await forged(stateKey, { typ: undefined })}`, 'the state is invalid'],
    ['garbage', async () => '?state=not-a-jws', 'the state is invalid'],
  ])('%s: 400 invalid_state', async (_name, query, reason) => {
    const { browser } = await midway()
    expect(await returnWith(browser, await query())).toEqual({ status: 400, error: 'invalid_state', message: MESSAGES.staleSignOut, reason })
  })

  it('a state of another browser: 400 invalid_state', async () => {
    const { state } = await midway()
    const other = new Browser()
    expect(await returnWith(other, `?state=${state}`)).toEqual({ status: 400, error: 'invalid_state', message: MESSAGES.staleSignOut, reason: 'no sign-out cookie: the sign-out was started in another browser, or has already ended' })
    const { browser } = await midway()
    expect(await returnWith(browser, `?state=${state}`)).toEqual({ status: 400, error: 'invalid_state', message: MESSAGES.staleSignOut, reason: 'the sign-out was started in another browser' })
  })

  it('a state brought back to another provider\'s address: 400 invalid_state', async () => {
    const { browser, state } = await midway()
    expect(await returnWith(browser, `?state=${state}`, 'second')).toEqual({ status: 400, error: 'invalid_state', message: MESSAGES.staleSignOut, reason: 'the state was issued for another provider' })
  })

  it('a state used twice: the second time 400 invalid_state', async () => {
    const { browser, state } = await midway()
    const signOutCookie = browser.cookies.get('gw_session_signout')!.value
    const first = await browser.fetch(`${gateway.url}/oauth/logout/demo/?state=${state}`, { headers: { accept: 'application/json' } })
    expect(first.status).toBe(302)
    // The walk's end clears the cookie; a replay with a copy of it is still refused.
    expect(browser.cookies.has('gw_session_signout')).toBe(false)
    browser.cookies.set('gw_session_signout', { value: signOutCookie, path: '/' })
    expect(await returnWith(browser, `?state=${state}`)).toEqual({ status: 400, error: 'invalid_state', message: MESSAGES.staleSignOut, reason: 'the state has already been used' })
  })

  it('an unknown provider: 404 unknown_provider', async () => {
    const { browser, state } = await midway()
    expect((await returnWith(browser, `?state=${state}`, 'nope')).error).toBe('unknown_provider')
  })
})
