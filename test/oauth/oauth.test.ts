// The sign-in endpoints (docs/endpoints.md): the authorize redirect, state checks (tampered, expired,
// replayed, cross-browser, other provider), callback branches, token endpoint faults, sessions
// (cookie flags, no fixation, several tabs, several providers) and logout. Real Redis; the real
// oidc-provider for sign-ins; a stub token endpoint only where a fault is injected.
import { createSecretKey } from 'node:crypto'
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest'
import { deriveKey, keyIdOf, Sealer } from '../../src/session/seal.js'
import { stateKey } from '../../src/oauth/signed-state.js'
import { issueState } from '../../src/oauth/state.js'
import { safeNext } from '../../src/oauth/urls.js'
import { ONE_ANSWER_MS } from '../helpers/bounds.js'
import { Browser } from '../helpers/browser.js'
import { oidcClient, reserveBaseUrl, startGateway, TEST_SECRET, type TestGateway } from '../helpers/gateway.js'
import { startOidcProvider, type TestProvider } from '../helpers/oidc.js'
import { startRedis, type TestRedis } from '../helpers/redis.js'
import { startTokenStub, type TokenStub } from '../helpers/token-stub.js'
import { startUpstream, type Upstream } from '../helpers/upstream.js'

/** The stub provider's timeout: each call to its token endpoint, hung or not, ends within it. */
const STUB_TIMEOUT_MS = 500

let redis: TestRedis
let op: TestProvider
let stub: TokenStub
let upstream: Upstream
let gateway: TestGateway

beforeAll(async () => {
  redis = await startRedis()
  stub = await startTokenStub()
  upstream = await startUpstream()
  const { port, baseUrl } = await reserveBaseUrl()
  op = await startOidcProvider([
    { client_id: 'demo-client', client_secret: 'demo-secret', redirect_uris: [`${baseUrl}/oauth/authorized/demo/`] },
    { client_id: 'other-client', client_secret: 'other-secret', redirect_uris: [`${baseUrl}/oauth/authorized/other/`] },
  ])
  const fromOp = (clientId: string, secret: string) => ({
    ...oidcClient(op.issuer, clientId, secret, 'openid profile'),
  })
  gateway = await startGateway({
    server: { port, baseUrl },
    session: { cookieSecure: true },
    store: { type: 'redis', url: redis.url },
    providers: {
      demo: fromOp('demo-client', 'demo-secret'),
      other: fromOp('other-client', 'other-secret'),
      stub: { clientId: 'stub-client', clientSecret: 'stub-secret', authorizeUrl: `${stub.url}/authorize`, tokenUrl: `${stub.url}/token`, scope: 'read', timeout: `${STUB_TIMEOUT_MS}ms` },
      nopkce: { clientId: 'np', clientSecret: 'np-secret', authorizeUrl: `${stub.url}/authorize`, tokenUrl: `${stub.url}/token`, scope: 'read', pkce: false },
    },
    routes: [
      { path: '/app/', upstream: upstream.url, provider: 'demo' },
      { path: '/other/', upstream: upstream.url, provider: 'other' },
      { path: '/stub/', upstream: upstream.url, provider: 'stub' },
    ],
  })
})

afterAll(async () => {
  await gateway?.close()
  await Promise.all([op?.close(), stub?.close(), upstream?.close()])
  await redis?.release()
})

beforeEach(() => {
  stub.mode = 'ok'
  stub.extra = {}
  stub.requests.length = 0
})

const json = { accept: 'application/json' }

/** Starts a login in `browser`; returns the state and the authorize URL. */
async function startLogin (browser: Browser, provider = 'stub', next = '/stub/page'): Promise<{ state: string, authorize: URL }> {
  const response = await browser.fetch(`${gateway.url}/oauth/login/${provider}/?next=${encodeURIComponent(next)}`)
  expect(response.status).toBe(302)
  const authorize = new URL(response.headers.get('location')!)
  return { state: authorize.searchParams.get('state')!, authorize }
}

function callback (browser: Browser, query: Record<string, string>, provider = 'stub', accept = 'application/json') {
  return browser.fetch(`${gateway.url}/oauth/authorized/${provider}/?${new URLSearchParams(query)}`, { headers: { accept } })
}

async function expectError (response: Response, status: number, error: string, message?: RegExp) {
  expect(response.status).toBe(status)
  const body = await response.json() as { error: string, message: string }
  expect(body.error).toBe(error)
  if (message) expect(body.message).toMatch(message)
}

describe('GET /oauth/login/<provider>/', () => {
  it('redirects to the authorize URL with response_type, client_id, redirect_uri, scope, state and PKCE S256', async () => {
    const browser = new Browser()
    const { state, authorize } = await startLogin(browser)
    expect(authorize.origin + authorize.pathname).toBe(`${stub.url}/authorize`)
    const params = Object.fromEntries(authorize.searchParams)
    expect(params).toMatchObject({
      response_type: 'code', client_id: 'stub-client', redirect_uri: `${gateway.url}/oauth/authorized/stub/`, scope: 'read', code_challenge_method: 'S256',
    })
    expect(params.code_challenge).toMatch(/^[A-Za-z0-9_-]{43}$/)
    expect(params.code_verifier).toBeUndefined()
    // The state is a JWS whose payload carries the provider, its id, a tag of the browser's binding,
    // a sequence number and, sealed (x), where the sign-in goes back to; never the verifier, and
    // nothing the provider can read of `next`.
    const [, payload] = state.split('.')
    const claims = JSON.parse(Buffer.from(payload!, 'base64url').toString()) as Record<string, unknown>
    expect(Object.keys(claims).sort()).toEqual(['b', 'exp', 'iat', 'n', 'p', 's', 'x'])
    expect((claims.exp as number) - (claims.iat as number)).toBe(300)
  })

  it('sets one small HttpOnly, SameSite=Lax binding cookie per browser, reused by every tab', async () => {
    const browser = new Browser()
    const first = await browser.fetch(`${gateway.url}/oauth/login/stub/`)
    const cookie = first.headers.getSetCookie()[0]!
    expect(cookie).toMatch(/^gw_session_flow=[A-Za-z0-9_-]{43}.1; Max-Age=3900; Path=\/oauth\/; HttpOnly; Secure; SameSite=Lax$/)
    await startLogin(browser)
    await startLogin(browser)
    expect([...browser.cookies.keys()]).toEqual(['gw_session_flow'])
    // The same binding; only the count of sign-ins started moves.
    expect(browser.cookies.get('gw_session_flow')!.value).toBe(cookie.split(/[=;]/)[1]!.replace(/\.1$/, '.3'))
  })

  it('omits PKCE when the provider has pkce: false', async () => {
    const { authorize } = await startLogin(new Browser(), 'nopkce')
    expect(authorize.searchParams.has('code_challenge')).toBe(false)
  })

  it('answers 404 unknown_provider for an unknown remote app (JSON, or HTML for browsers)', async () => {
    await expectError(await fetch(`${gateway.url}/oauth/login/nope/`, { headers: json, redirect: 'manual' }), 404, 'unknown_provider')
    const html = await fetch(`${gateway.url}/oauth/login/nope/`, { headers: { accept: 'text/html' }, redirect: 'manual' })
    expect(html.status).toBe(404)
    expect(html.headers.get('content-type')).toMatch(/^text\/html/)
    expect(await html.text()).toContain('unknown_provider')
  })
})

describe('safeNext: only same-origin relative paths', () => {
  it.each([
    ['/app/x?y=1#z', '/app/x?y=1#z'],
    ['/', '/'],
    [['/a', '/b'], '/oauth/'],
    ['//evil.example', '/oauth/'],
    ['//evil.example/path', '/oauth/'],
    ['/\\evil.example', '/oauth/'],
    ['\\\\evil.example', '/oauth/'],
    ['/\t/evil.example', '/oauth/'],
    ['https://evil.example', '/oauth/'],
    ['http:/evil.example', '/oauth/'],
    ['javascript:alert(1)', '/oauth/'],
    ['evil.example', '/oauth/'],
    ['', '/oauth/'],
    [undefined, '/oauth/'],
  ])('%j -> %j', (input, expected) => {
    expect(safeNext(input)).toBe(expected)
  })
})

// Whatever check failed, a person reads one sentence; which one is the log's (the error's cause).
const STALE = /^This sign-in link has expired or was already used; start again\.$/

/** The stale-state answer to `request`, and the check the log says failed. */
async function expectStale (request: Promise<Response>, reason: RegExp, message = STALE) {
  const before = gateway.logs.length
  await expectError(await request, 400, 'invalid_state', message)
  const rejected = gateway.logs.slice(before).map((line) => JSON.parse(line) as { msg: string, cause?: { message: string } }).find((line) => line.msg === 'request rejected')
  expect(rejected?.cause?.message).toMatch(reason)
}

describe('GET /oauth/authorized/<provider>/: state', () => {
  it('rejects a missing state with 400 invalid_state', async () => {
    const browser = new Browser()
    await startLogin(browser)
    // Nothing expired or was used: the address was opened without a sign-in (a newcomer's point).
    await expectStale(callback(browser, { code: 'c' }), /missing/, /^This address finishes a sign-in, and works only when the sign-in provider sends you here; start again\.$/)
  })

  it('rejects a tampered state with 400 invalid_state', async () => {
    const browser = new Browser()
    const { state } = await startLogin(browser)
    const [header, payload, signature] = state.split('.')
    const forged = Buffer.from(JSON.stringify({ ...JSON.parse(Buffer.from(payload!, 'base64url').toString()), next: '/elsewhere' })).toString('base64url')
    await expectStale(callback(browser, { code: 'c', state: `${header}.${forged}.${signature}` }), /invalid/)
    expect(stub.requests).toHaveLength(0)
  })

  it('rejects an expired state with 400 invalid_state', async () => {
    const browser = new Browser()
    await startLogin(browser)
    const expired = issueState(stateKey(keyIdOf(TEST_SECRET), createSecretKey(deriveKey(TEST_SECRET, 'state'))), new Sealer(TEST_SECRET).current, { p: 'stub', next: '/', n: 'x', b: 'x', s: 1 }, 300_000, Date.now() - 600_000)
    await expectStale(callback(browser, { code: 'c', state: expired }), /expired/)
  })

  it('a replayed state: 400 invalid_state without the session its first use made, on to next with it (each state is usable once)', async () => {
    const browser = new Browser()
    const { state } = await startLogin(browser)
    expect((await callback(browser, { code: 'c', state })).status).toBe(302)
    // The browser without the session the first use made (signed out since, say): the error.
    const session = 'gw_session'
    const kept = browser.cookies.get(session)!
    browser.cookies.delete(session)
    await expectStale(callback(browser, { code: 'c', state }), /already been used/)
    // With it (a Back or a reload of the callback once signed in): on to where the sign-in was going, no second exchange.
    browser.cookies.set(session, kept)
    const again = await callback(browser, { code: 'c', state }, 'stub', 'text/html')
    expect(again.status).toBe(302)
    expect(again.headers.get('location')).toBe('/stub/page')
    expect(stub.requests).toHaveLength(1)
  })

  it('a used state of a browser signed in at another provider only: 400 invalid_state, not sent on', async () => {
    const browser = new Browser()
    const { state } = await startLogin(browser)
    expect((await callback(browser, { code: 'c', state })).status).toBe(302)
    const nopkce = await startLogin(browser, 'nopkce', '/stub/np')
    const session = 'gw_session'
    const signedInAtStub = browser.cookies.get(session)!
    expect((await callback(browser, { code: 'c', state: nopkce.state }, 'nopkce')).status).toBe(302)
    // The session as it was before the second sign-in: stub only; nopkce's used state does not send it on.
    browser.cookies.set(session, signedInAtStub)
    await expectStale(callback(browser, { code: 'c', state: nopkce.state }, 'nopkce'), /already been used/)
  })

  it('rejects a state from another browser with 400 invalid_state, with or without a flow cookie', async () => {
    const victim = new Browser()
    const { state } = await startLogin(victim)
    await expectStale(callback(new Browser(), { code: 'c', state }), /another browser/)
    const attacker = new Browser()
    await startLogin(attacker)
    await expectStale(callback(attacker, { code: 'c', state }), /another browser/)
    expect(stub.requests).toHaveLength(0)
  })

  it('rejects a state issued for another provider with 400 invalid_state', async () => {
    const browser = new Browser()
    const { state } = await startLogin(browser, 'stub')
    await expectStale(callback(browser, { code: 'c', state }, 'nopkce'), /another provider/)
  })

  it('checks the state before the error branch', async () => {
    await expectError(await callback(new Browser(), { error: 'access_denied', state: 'garbage' }), 400, 'invalid_state')
  })
})

describe('GET /oauth/authorized/<provider>/: callback and code exchange', () => {
  it('answers 403 access_denied, keeping the provider error code, when the provider sent error=', async () => {
    const browser = new Browser()
    const { state } = await startLogin(browser)
    await expectError(await callback(browser, { error: 'access_denied', error_description: '<script>', state }), 403, 'access_denied', /"access_denied"/)
  })

  it('answers 400 invalid_request when the callback has no code', async () => {
    const browser = new Browser()
    const { state } = await startLogin(browser)
    await expectError(await callback(browser, { state }), 400, 'invalid_request', /no code/)
  })

  it('POSTs a form with grant_type, code, redirect_uri, client_id, client_secret and the PKCE verifier', async () => {
    const browser = new Browser()
    const { state } = await startLogin(browser)
    const response = await callback(browser, { code: 'the-code', state })
    expect(response.status).toBe(302)
    expect(response.headers.get('location')).toBe('/stub/page')
    const [request] = stub.requests
    expect(request!.method).toBe('POST')
    expect(request!.headers['content-type']).toBe('application/x-www-form-urlencoded;charset=UTF-8')
    expect(request!.headers.accept).toBe('application/json')
    expect(request!.headers.authorization).toBeUndefined()
    const form = Object.fromEntries(new URLSearchParams(request!.body))
    expect(form).toMatchObject({
      grant_type: 'authorization_code', code: 'the-code', redirect_uri: `${gateway.url}/oauth/authorized/stub/`, client_id: 'stub-client', client_secret: 'stub-secret',
    })
    expect(form.code_verifier).toMatch(/^[A-Za-z0-9_-]{43,128}$/)
  })

  it.each([
    ['error500', /did not return a usable access token/],
    ['hang', /did not answer within 0.5s/],
    ['not-json', /did not return a usable access token/],
    ['no-access-token', /did not return a usable access token/],
    ['invalid-grant', /refused the request \(invalid_grant\)/],
  ] as const)('answers 502 token_exchange_failed and makes no session when the token endpoint gives %s', async (mode, message) => {
    stub.mode = mode
    const browser = new Browser()
    const { state } = await startLogin(browser)
    const started = Date.now()
    const response = await callback(browser, { code: 'c', state })
    await expectError(response, 502, 'token_exchange_failed', message)
    // The stub provider's timeout bounds the one token call, hung or not; the rest is one answer.
    expect(Date.now() - started).toBeLessThan(STUB_TIMEOUT_MS + ONE_ANSWER_MS)
    expect(browser.cookies.has('gw_session')).toBe(false)
  })

  it('after a failed sign-in, the HTML error page links to sign in again', async () => {
    stub.mode = 'error500'
    const browser = new Browser()
    const { state } = await startLogin(browser)
    const page = await (await callback(browser, { code: 'c', state }, 'stub', 'text/html')).text()
    expect(page).toContain(`href="${gateway.url}/oauth/login/stub/?next=%2Fstub%2Fpage"`)
    expect(page).not.toContain('stub-secret')
  })

  it('sends next=//evil.example to /oauth/ after sign-in', async () => {
    const browser = new Browser()
    const { state } = await startLogin(browser, 'stub', '//evil.example')
    expect((await callback(browser, { code: 'c', state })).headers.get('location')).toBe('/oauth/')
  })
})

describe('sessions', () => {
  it('sets an opaque 256-bit session cookie that names the key id of its secret: HttpOnly, SameSite=Lax, Secure per config, Path=/', async () => {
    const browser = new Browser()
    const { state } = await startLogin(browser)
    const response = await callback(browser, { code: 'c', state })
    const cookie = response.headers.getSetCookie().find((c) => c.startsWith('gw_session='))!
    expect(cookie).toMatch(/^gw_session=[A-Za-z0-9_-]{43}\.[A-Za-z0-9_-]{8}; Path=\/; HttpOnly; Secure; SameSite=Lax$/)
  })

  it('issues a new session id at every sign-in, and the old id stops working (no fixation)', async () => {
    const browser = new Browser()
    await browser.navigate(`${gateway.url}/app/`)
    const first = browser.cookies.get('gw_session')!.value
    await browser.navigate(`${gateway.url}/oauth/login/demo/?next=/app/`)
    const second = browser.cookies.get('gw_session')!.value
    expect(second).not.toBe(first)
    const old = await fetch(`${gateway.url}/app/`, { headers: { ...json, cookie: `gw_session=${first}` } })
    await expectError(old, 401, 'unauthenticated')
    expect((await browser.fetch(`${gateway.url}/app/`, { headers: json })).status).toBe(200)
  })

  it('lets several tabs sign in at the same time', async () => {
    const browser = new Browser()
    const one = await startLogin(browser, 'stub', '/stub/one')
    const two = await startLogin(browser, 'stub', '/stub/two')
    // Both flows are in flight at once; they come back in the other order.
    const second = await callback(browser, { code: 'c2', state: two.state })
    const first = await callback(browser, { code: 'c1', state: one.state })
    expect([first.status, first.headers.get('location')]).toEqual([302, '/stub/one'])
    expect([second.status, second.headers.get('location')]).toEqual([302, '/stub/two'])
  })

  it('keeps one provider\'s token when signing in to a second one', async () => {
    const browser = new Browser()
    await browser.navigate(`${gateway.url}/app/`)
    await browser.navigate(`${gateway.url}/other/`)
    const app = await (await browser.fetch(`${gateway.url}/app/x`, { headers: json })).json() as { headers: Record<string, string> }
    const other = await (await browser.fetch(`${gateway.url}/other/x`, { headers: json })).json() as { headers: Record<string, string> }
    expect(app.headers.authorization).toMatch(/^Bearer /)
    expect(other.headers.authorization).toMatch(/^Bearer /)
    expect(app.headers.authorization).not.toBe(other.headers.authorization)
  })

  it('shows a browser the signed-out page, with a sign-in link per provider, when logout has no next', async () => {
    const browser = new Browser()
    await browser.navigate(`${gateway.url}/app/`)
    const response = await browser.fetch(`${gateway.url}/oauth/logout/`)
    expect(response.status).toBe(200)
    const page = await response.text()
    expect(page).toContain('You are signed out')
    expect(page).toContain(`href="${gateway.url}/oauth/login/demo/?next=%2Fapp%2F"`)
    expect(page).toContain(`href="${gateway.url}/oauth/login/stub/?next=%2Fstub%2F"`)
    expect(browser.cookies.has('gw_session')).toBe(false)
    const api = await fetch(`${gateway.url}/oauth/logout/`, { headers: json, redirect: 'manual' })
    expect([api.status, api.headers.get('location')]).toEqual([302, '/oauth/'])
  })

  it('GET and POST /oauth/logout/ delete the session and the cookie, then redirect to a safe next', async () => {
    for (const method of ['GET', 'POST']) {
      const browser = new Browser()
      await browser.navigate(`${gateway.url}/app/`)
      const cookie = browser.cookies.get('gw_session')!.value
      const response = await browser.fetch(`${gateway.url}/oauth/logout/?next=${encodeURIComponent('//evil.example')}`, { method })
      expect(response.status).toBe(302)
      expect(response.headers.get('location')).toBe('/oauth/')
      expect(response.headers.getSetCookie()[0]).toMatch(/^gw_session=; Max-Age=0; Path=\/; Expires=Thu, 01 Jan 1970 00:00:00 GMT; HttpOnly; Secure; SameSite=Lax$/)
      await expectError(await fetch(`${gateway.url}/app/`, { headers: { ...json, cookie: `gw_session=${cookie}` } }), 401, 'unauthenticated')
    }
  })
})
