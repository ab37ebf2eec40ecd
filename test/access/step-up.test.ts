// Step-up (a route's `reauth:`) through a real gateway, Redis and oidc-provider: the login asks
// for `max_age` (and `acr_values`) only when the route `next` is for needs them, found from `next`
// and never from the login address; a sign-in older than the route allows sends a browser through
// the provider again and answers an API client 401 with RFC 9470's challenge, while other routes
// keep the session; a provider that does not honour the fresh sign-in gets a 403, with no loop
// and no session change. Sign-in times are set at the provider (its interaction's `ts`), so a
// sign-in "30 minutes old" needs no waiting.
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest'
import { Browser } from '../helpers/browser.js'
import { oidcClient, reserveBaseUrl, startGateway, type TestGateway } from '../helpers/gateway.js'
import { gatewayClient, startOidcProvider, type TestProvider } from '../helpers/oidc.js'
import { startRedis, type TestRedis } from '../helpers/redis.js'
import { startUpstream, type Upstream } from '../helpers/upstream.js'

const HALF_AN_HOUR = 1800

let redis: TestRedis
let upstream: Upstream
let op: TestProvider
let gateway: TestGateway
/** How the provider's next sign-in is recorded: this many seconds old, with this `acr`. */
let signIn: { age: number, acr?: string }

beforeAll(async () => {
  redis = await startRedis()
  upstream = await startUpstream()
  const { port, baseUrl } = await reserveBaseUrl()
  op = await startOidcProvider([{ ...gatewayClient(baseUrl, 'demo', 'c'), require_auth_time: true }], {
    // The provider's own clock: a sign-in `age` seconds before now, as it would have been made then.
    signIn: () => ({ ts: Math.floor(Date.now() / 1000) - signIn.age, ...(signIn.acr === undefined ? {} : { acr: signIn.acr }) }),
    acrValues: ['urn:silver', 'urn:gold'],
  })
  gateway = await startGateway({
    server: { port, baseUrl },
    store: { type: 'redis', url: redis.url },
    providers: { demo: oidcClient(op.issuer, 'c', 's', 'openid email') },
    routes: [
      { path: '/app/', upstream: upstream.url, provider: 'demo' },
      { path: '/admin/', upstream: upstream.url, provider: 'demo', reauth: { maxAge: '15m' } },
      { path: '/vault/', upstream: upstream.url, provider: 'demo', reauth: { maxAge: '15m', acr: ['urn:gold'] } },
    ],
  })
}, 60_000)

afterAll(async () => {
  await gateway?.close()
  await op?.close()
  await upstream?.close()
  await redis?.release()
})

beforeEach(() => { signIn = { age: 0 } })

/** A browser signed in at /app/ (no step-up asked) with a sign-in `age` seconds old. */
async function signedInBrowser (age: number, acr?: string): Promise<Browser> {
  signIn = { age, ...(acr === undefined ? {} : { acr }) }
  const browser = new Browser()
  const response = await browser.navigate(`${gateway.url}/app/`)
  expect(response.status).toBe(200)
  await response.arrayBuffer()
  return browser
}

/** The authorization request the browser's last login (from hop `since` on) sent it to. */
function lastAuthorizationRequest (browser: Browser, since: number): URLSearchParams {
  const login = browser.hops.slice(since).filter((hop) => hop.url.startsWith(`${gateway.url}/oauth/login/`)).at(-1)!
  return new URL(login.location!).searchParams
}

/** An API client's GET of `path` with `browser`'s session cookie. */
async function apiGet (browser: Browser, path: string): Promise<Response> {
  const url = `${gateway.url}${path}`
  return await fetch(url, { headers: { accept: 'application/json', cookie: browser.cookieHeader(url) ?? '' } })
}

/** The authorization request parameters of the login at `gateway` toward `next` (raw, as a link would carry it). */
async function authorizationRequest (query: string): Promise<URLSearchParams> {
  const response = await fetch(`${gateway.url}/oauth/login/demo/?${query}`, { redirect: 'manual' })
  expect(response.status).toBe(302)
  return new URL(response.headers.get('location')!).searchParams
}

describe('the login finds the step-up from the route `next` is for', () => {
  // [login query, max_age, acr_values]
  const cases: Array<[string, string | null, string | null]> = [
    ['next=/app/x', null, null],
    ['next=/admin/x', '900', null],
    ['next=/admin', '900', null],
    ['next=/vault/x%3Fy%3D1', '900', 'urn:gold'],
    // Spelled otherwise, the same canonical path the router serves.
    ['next=/%61dmin/x', '900', null],
    // Hostile: a query of its own on the login address neither weakens nor makes up a requirement.
    ['next=/admin/x&max_age=99999&acr_values=urn:none', '900', null],
    ['next=/app/x&max_age=0&acr_values=urn:gold', null, null],
    ['next=/app/..%2Fadmin/', null, null],
    ['next=/app/../admin/', null, null],
    ['next=//evil.example/admin/', null, null],
    ['next=https://evil.example/admin/', null, null],
    ['next=/ADMIN/x', null, null],
    ['next=/administrator/x', null, null],
    ['next=%2Fadmin%2Fx', '900', null],
    ['', null, null],
  ]
  it.each(cases)('login?%s asks max_age=%s acr_values=%s', async (query, maxAge, acrValues) => {
    const request = await authorizationRequest(query)
    expect(request.get('max_age')).toBe(maxAge)
    expect(request.get('acr_values')).toBe(acrValues)
  })
})

describe('step-up on a route with reauth', () => {
  it('an API client whose sign-in is 30 minutes old gets 401 insufficient_user_authentication with RFC 9470\'s challenge; other routes keep the session', async () => {
    const browser = await signedInBrowser(HALF_AN_HOUR)
    expect((await apiGet(browser, '/app/x')).status).toBe(200)
    const admin = await apiGet(browser, '/admin/x')
    expect(admin.status).toBe(401)
    expect(admin.headers.get('www-authenticate')).toBe('Bearer realm="demo", error="insufficient_user_authentication", max_age="900"')
    const body = await admin.json() as { error: string, login_url: string }
    expect(body.error).toBe('insufficient_user_authentication')
    expect(body.login_url).toBe(`${gateway.url}/oauth/login/demo/?next=${encodeURIComponent('/admin/x')}`)
    const vault = await apiGet(browser, '/vault/x')
    expect(vault.status).toBe(401)
    expect(vault.headers.get('www-authenticate')).toBe('Bearer realm="demo", error="insufficient_user_authentication", max_age="900", acr_values="urn:gold"')
    expect(upstream.seen.some((seen) => seen.url.startsWith('/admin/') || seen.url.startsWith('/vault/'))).toBe(false)
  })

  it('a browser whose sign-in is 30 minutes old goes through the provider again with max_age, and reaches the page once it signed in afresh', async () => {
    const browser = await signedInBrowser(HALF_AN_HOUR)
    signIn = { age: 0 }
    const before = upstream.seen.length
    const since = browser.hops.length
    const page = await browser.navigate(`${gateway.url}/admin/x`)
    expect(page.status).toBe(200)
    expect(upstream.seen.slice(before).map((seen) => seen.url)).toEqual(['/admin/x'])
    expect(lastAuthorizationRequest(browser, since).get('max_age')).toBe('900')
    // The same session serves every route now, without asking again.
    expect((await apiGet(browser, '/admin/y')).status).toBe(200)
    expect((await apiGet(browser, '/app/y')).status).toBe(200)
  })

  it('a provider that ignores max_age (the old sign-in again) gets a clear 403, once, and the session is left as it was', async () => {
    const browser = await signedInBrowser(HALF_AN_HOUR)
    const cookie = browser.cookies.get('gw_session')!.value
    const since = browser.hops.length
    const page = await browser.navigate(`${gateway.url}/admin/x`, { maxSteps: 12 })
    expect(page.status).toBe(403)
    const text = await page.text()
    expect(text).toContain('access_denied')
    expect(text).toContain('did not honour the fresh sign-in')
    // One pass through the provider, not a loop.
    expect(browser.hops.slice(since).filter((hop) => hop.url.startsWith(`${gateway.url}/oauth/authorized/`))).toHaveLength(1)
    expect(browser.cookies.get('gw_session')!.value).toBe(cookie)
    expect((await apiGet(browser, '/app/x')).status).toBe(200)
    expect((await apiGet(browser, '/admin/x')).status).toBe(401)
  })

  it('a route that lists acr values needs one of them: another acr is sent through the provider with acr_values, and refused if it comes back the same', async () => {
    const browser = await signedInBrowser(0, 'urn:silver')
    expect((await apiGet(browser, '/admin/x')).status).toBe(200)
    expect((await apiGet(browser, '/vault/x')).status).toBe(401)
    const since = browser.hops.length
    const refused = await browser.navigate(`${gateway.url}/vault/x`)
    expect(refused.status).toBe(403)
    expect(await refused.text()).toContain('did not sign you in with one of: urn:gold')
    expect(lastAuthorizationRequest(browser, since).get('acr_values')).toBe('urn:gold')
    signIn = { age: 0, acr: 'urn:gold' }
    const page = await browser.navigate(`${gateway.url}/vault/x`)
    expect(page.status).toBe(200)
    expect((await apiGet(browser, '/vault/y')).status).toBe(200)
  })
})
