// Forward-auth at /oauth/auth/<provider>/ (docs/forward-auth.md): 200 with the bearer token and the
// identity headers in the response, 401 `unauthenticated` with login_url (its `next` taken from
// X-Forwarded-Uri / X-Original-URI only when a trusted proxy sent them), 403 when the allow rules in
// the query or forwardAuth.hosts' rules for the forwarded host do not match (AND), an assertion only
// for listed hosts and the gateway's own origin, a cache that thousands of hosts do not grow, a
// refresh as a proxied request would do it; never proxied. Then
// session.cookieDomain, and the end-to-end runs behind a real nginx (auth_request) and a real Caddy
// (forward_auth) whose configs are the files in docs/forward-auth/, as docs/forward-auth.md shows them.
import fc from 'fast-check'
import { decodeJwt } from 'jose'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { stringify } from 'yaml'
import { ConfigError, parseConfig } from '../../src/config/config.js'
import { readFile } from 'node:fs/promises'
import { Browser } from '../helpers/browser.js'
import { FRONT_TEMPLATES, frontBinary, holdFrontPort, startFrontProxy, type FrontKind, type FrontProxy } from '../helpers/front-proxy.js'
import { oidcClient, reserveBaseUrl, startGateway, TEST_SECRET, type TestGateway } from '../helpers/gateway.js'
import { startOidcProvider, type TestProvider } from '../helpers/oidc.js'
import { startRedis, type TestRedis } from '../helpers/redis.js'
import { startTokenStub, type TokenStub } from '../helpers/token-stub.js'
import { startUpstream, type SeenRequest, type Upstream } from '../helpers/upstream.js'

const json = { accept: 'application/json' }

let redis: TestRedis
let op: TestProvider
let stub: TokenStub
let upstream: Upstream
/** Trusts 127.0.0.1 (where the tests connect from) to set X-Forwarded-*. */
let trusting: TestGateway
/** Same store and secret, but trusts only 10.1.2.3: the tests' X-Forwarded-* are a stranger's. */
let untrusting: TestGateway
const browsers: Record<string, Browser> = {}
/** The base URL of the gateway behind nginx and Caddy (registered at the provider with the others). */
let behindFronts: { port: number, baseUrl: string }

beforeAll(async () => {
  redis = await startRedis()
  upstream = await startUpstream()
  stub = await startTokenStub()
  const [a, b] = [await reserveBaseUrl(), await reserveBaseUrl()]
  behindFronts = await reserveBaseUrl()
  op = await startOidcProvider([{ client_id: 'fa', client_secret: 'fa-secret', redirect_uris: [a, b, behindFronts].map(({ baseUrl }) => `${baseUrl}/oauth/authorized/demo/`) }])
  const shared = {
    store: { type: 'redis', url: redis.url },
    providers: {
      demo: oidcClient(op.issuer, 'fa', 'fa-secret', 'openid email groups'),
      stub: { clientId: 'stub-client', clientSecret: 'stub-secret', authorizeUrl: `${stub.url}/authorize`, tokenUrl: `${stub.url}/token`, scope: 'read' },
    },
    routes: [{ path: '/app/', upstream: upstream.url, provider: 'demo' }],
    forwardAuth: {
      allowedRedirectHosts: ['.example.com', 'app.example.org'],
      hosts: {
        'app.example.com': {},
        'payroll.example.com': { allow: { groups: ['admins'] } },
        'wiki.example.com': { allow: [{ groups: ['staff'], domains: ['example.test'] }, { emails: ['mallory@evil.test'] }], deny: { emails: ['bob@example.test'] } },
      },
    },
    assertion: {},
  }
  trusting = await startGateway({ ...shared, server: { ...a, trustProxy: ['127.0.0.1'] } })
  untrusting = await startGateway({ ...shared, server: { ...b, trustProxy: ['10.1.2.3'] } })
  for (const login of ['alice', 'bob', 'eve', 'mallory']) {
    browsers[login] = new Browser()
    expect((await browsers[login].navigate(`${trusting.url}/oauth/login/demo/?next=/oauth/`, { login })).status).toBe(200)
  }
})

afterAll(async () => {
  await Promise.all([trusting?.close(), untrusting?.close()])
  await Promise.all([op?.close(), stub?.close(), upstream?.close()])
  await redis?.release()
})

/** GET /oauth/auth/<provider>/ at `gateway` as `who` (a signed-in browser's cookies, or nobody). */
async function auth (gateway: TestGateway, who: string | undefined, query = '', headers: Record<string, string> = {}, provider = 'demo'): Promise<Response> {
  const url = `${gateway.url}/oauth/auth/${provider}/${query}`
  const cookie = who ? browsers[who]!.cookieHeader(url) : undefined
  return await fetch(url, { headers: { ...json, ...headers, ...(cookie ? { cookie } : {}) }, redirect: 'manual' })
}

/** The `next` of a 401's login_url (and the same login URL in X-Login-Url). */
async function nextOf (response: Response): Promise<string | null> {
  expect(response.status).toBe(401)
  const body = await response.json() as { error: string, login_url: string }
  expect(body.error).toBe('unauthenticated')
  expect(response.headers.get('x-login-url')).toBe(body.login_url)
  return new URL(body.login_url).searchParams.get('next')
}

describe('forward-auth: the signed identity assertion', () => {
  const from = (host: string) => ({ 'x-forwarded-uri': '/x', 'x-forwarded-host': host, 'x-forwarded-proto': 'https' })

  it('comes with a 200 for the original URL\'s origin, and verifies against the JWKS as an upstream would', async () => {
    const response = await auth(trusting, 'alice', '', from('app.example.com'))
    expect(response.status).toBe(200)
    const assertion = response.headers.get('x-gateway-assertion')
    expect(assertion).toBeTruthy()
    const { jwtVerify, createRemoteJWKSet } = await import('jose')
    const jwks = createRemoteJWKSet(new URL(`${trusting.url}/.well-known/jwks.json`))
    const { payload } = await jwtVerify(assertion!, jwks, { issuer: trusting.url, audience: 'https://app.example.com' })
    expect(payload).toMatchObject({ sub: 'alice', provider: 'demo' })
  })

  it('is not made for an origin the gateway would not redirect to, nor when the caller is not a trusted proxy', async () => {
    const foreign = await auth(trusting, 'alice', '', from('evil.example.net'))
    expect(foreign.status).toBe(200)
    expect(foreign.headers.get('x-gateway-assertion')).toBeNull()
    // A stranger is refused while forwardAuth.hosts has rules (which host it asks for cannot be told).
    const stranger = await auth(untrusting, 'alice', '', from('app.example.com'))
    expect(stranger.status).toBe(403)
    expect(stranger.headers.get('x-gateway-assertion')).toBeNull()
  })
})

describe('forward-auth: forwardAuth.hosts', () => {
  const from = (host: string, uri = '/x') => ({ 'x-forwarded-uri': uri, 'x-forwarded-host': host, 'x-forwarded-proto': 'https' })

  it('refuses bob at payroll with or without the query rules, and gives him no payroll assertion', async () => {
    for (const query of ['', '?groups=admins', '?groups=staff']) {
      const response = await auth(trusting, 'bob', query, from('payroll.example.com'))
      expect(response.status).toBe(403)
      expect((await response.json() as { error: string }).error).toBe('forbidden')
      expect(response.headers.get('x-gateway-assertion')).toBeNull()
      expect(response.headers.get('authorization')).toBeNull()
      expect(response.headers.get('x-forwarded-user')).toBeNull()
    }
  })

  // An outside tester's finding: a sibling host under a shared cookieDomain plants its own session
  // cookie with a longer Path, which the browser sends first; read first-wins, bob's requests there
  // went on as mallory. Which value is bob's cannot be told: neither opens.
  it('opens neither of two session cookies (one a sibling host planted), and answers as no session', async () => {
    const url = `${trusting.url}/oauth/auth/demo/`
    const session = (who: string) => browsers[who]!.cookieHeader(url)!.split('; ').find((cookie) => cookie.startsWith('gw_session='))!
    const response = await fetch(url, { headers: { ...json, ...from('app.example.com'), cookie: `${session('mallory')}; ${session('bob')}` }, redirect: 'manual' })
    expect(response.status).toBe(401)
    expect(response.headers.get('x-forwarded-user')).toBeNull()
    // Either alone is its person's.
    for (const who of ['mallory', 'bob']) {
      const alone = await fetch(url, { headers: { ...json, ...from('app.example.com'), cookie: session(who) }, redirect: 'manual' })
      expect([alone.status, alone.headers.get('x-forwarded-user')]).toEqual([200, who])
    }
  })

  it('lets alice into payroll with an assertion for its origin, and still applies the query (AND)', async () => {
    const response = await auth(trusting, 'alice', '', from('payroll.example.com'))
    expect(response.status).toBe(200)
    expect(decodeJwt(response.headers.get('x-gateway-assertion')!)).toMatchObject({ sub: 'alice', aud: 'https://payroll.example.com' })
    expect((await auth(trusting, 'alice', '?emails=bob@example.test', from('payroll.example.com'))).status).toBe(403)
  })

  it.each([
    // The spellings a proxy may forward for payroll: its rules hold on each.
    'PAYROLL.example.COM',
    'payroll.example.com.',
    'payroll.example.com:8443',
    'payroll.example.com.:443',
    'Payroll.Example.Com.:8443',
    'payroll%2Eexample.com',
    'payroll.example.com:0',
    // Fastify reads the last of a list (the one the proxy in front appended).
    'evil.example.net, payroll.example.com',
    // What the URL parser reads as payroll is payroll (the original URL is read the same way).
    'bob@payroll.example.com',
    'payroll.example.com/x',
    'payroll.example.com?x',
    'payroll.example.com#x',
  ])('applies payroll\'s rules to the forwarded host %j (bob 403, alice 200)', async (host) => {
    expect((await auth(trusting, 'bob', '', from(host))).status).toBe(403)
    expect((await auth(trusting, 'alice', '', from(host))).status).toBe(200)
  })

  it.each([
    ['a host that is not one', 'pay roll.example.com'],
    ['a bracketed non-address', '[payroll.example.com]'],
    ['a bad port', 'payroll.example.com:99999'],
    ['a forbidden code point', 'payroll.example.com%00'],
    // An outside tester's: with two trailing dots it matched no entry, so payroll's rules did not apply.
    ['two trailing dots', 'payroll.example.com..'],
    ['three, in upper case', 'PAYROLL.EXAMPLE.COM...'],
    ['two trailing dots and a port', 'payroll.example.com..:8443'],
    ['an empty label inside', 'payroll..example.com'],
    ['a leading dot', '.payroll.example.com'],
  ])('answers 400 invalid_request to %s from a trusted proxy', async (_name, host) => {
    const response = await auth(trusting, 'alice', '', from(host))
    expect(response.status).toBe(400)
    expect((await response.json() as { error: string }).error).toBe('invalid_request')
  })

  it.each([
    // who, status at wiki: staff AND example.test, or the one listed address; bob is denied.
    ['alice', 200],
    ['bob', 403],
    ['eve', 403],
    ['mallory', 200],
  ])('wiki (allow is a list of rules, each all of its conditions; deny wins): %s answers %i', async (who, status) => {
    const response = await auth(trusting, who, '', from('wiki.example.com'))
    expect(response.status).toBe(status)
  })

  it('lets any signed-in person into a listed host without rules, and mints its assertion', async () => {
    const response = await auth(trusting, 'bob', '', from('app.example.com'))
    expect(response.status).toBe(200)
    expect(response.headers.get('x-gateway-assertion')).toBeTruthy()
  })

  it('answers an unlisted host as before (query rules only), without an assertion', async () => {
    const response = await auth(trusting, 'bob', '', from('other.example.com'))
    expect(response.status).toBe(200)
    expect(response.headers.get('x-forwarded-user')).toBe('bob')
    expect(response.headers.get('x-gateway-assertion')).toBeNull()
  })

  // An outside tester's finding: a caller trustProxy does not admit (a proxy moved out of the listed
  // range) was answered 200 with bob's token for payroll, whose rules refuse him: its X-Forwarded-Host
  // names nothing, so no host's rules applied. Which host it asks for cannot be told: refused.
  it('refuses a caller trustProxy does not admit while forwardAuth.hosts has rules: no token, no assertion', async () => {
    for (const who of ['bob', 'alice', undefined]) {
      const response = await auth(untrusting, who, '', from('payroll.example.com'))
      expect(response.status).toBe(403)
      expect(((await response.json()) as { message: string }).message).toMatch(/^Forward-auth cannot tell which host this request is for: .*list the proxy in server\.trustProxy/)
      expect([response.headers.get('authorization'), response.headers.get('x-gateway-assertion'), response.headers.get('x-login-url')]).toEqual([null, null, null])
    }
  })

  it('never mints for a host whose rules it did not apply, however the host is spelt (fast-check)', async () => {
    const listed = ['app.example.com', 'payroll.example.com', 'wiki.example.com']
    const spelling = fc.record({
      user: fc.constantFrom('', 'bob@', 'a:b@'),
      name: fc.constantFrom('payroll', 'PAYROLL', 'Payroll', 'app', 'wiki', 'other'),
      domain: fc.constantFrom('.example.com', '.EXAMPLE.com', '.example.com.', '.example.net', ''),
      port: fc.constantFrom('', ':443', ':8443', ':0'),
      tail: fc.constantFrom('', '/x', '?y', '#z'),
    })
    await fc.assert(fc.asyncProperty(spelling, fc.constantFrom('alice', 'bob', 'eve'), async (h, who) => {
      const response = await auth(trusting, who, '', from(`${h.user}${h.name}${h.domain}${h.port}${h.tail}`))
      // The oracle, written apart from the code: payroll whatever the case, with or without the final dot.
      const payroll = h.name.toLowerCase() === 'payroll' && h.domain.toLowerCase().replace(/\.$/, '') === '.example.com'
      if (payroll && who !== 'alice') expect(response.status).toBe(403)
      const assertion = response.headers.get('x-gateway-assertion')
      if (assertion !== null) {
        const audience = new URL(decodeJwt(assertion).aud as string)
        expect(listed).toContain(audience.hostname.replace(/\.$/, ''))
        if (audience.hostname.startsWith('payroll.')) expect(who).toBe('alice')
      }
    }), { numRuns: 150 })
  })

  it('keeps the assertion cache bounded whatever hosts and ports a proxy names (300 hosts, 300 ports; 20,000 keys in test/assertion/assertion-cache.test.ts)', async () => {
    const assertions = trusting.app.assertions!
    const before = assertions.cached
    // More hosts than the cache holds (256): had each minted, the count would show it.
    for (let i = 0; i < 300; i++) {
      expect((await auth(trusting, 'alice', '', from(`h${i}.example.com`))).status).toBe(200)
    }
    // Hosts that are not listed mint nothing: nothing is kept.
    expect(assertions.cached).toEqual(before)
    for (let i = 1; i <= 300; i++) {
      expect((await auth(trusting, 'alice', '', from(`app.example.com:${i}`))).headers.get('x-gateway-assertion')).toBeTruthy()
    }
    // A listed host on 300 ports is 300 audiences: the LRU keeps its cap (256) of them.
    expect(assertions.cached.audiences).toBe(256)
  })
})

describe('forward-auth: signed in', () => {
  it('answers 200 with the bearer token and the identity headers in the response, and calls no upstream', async () => {
    const before = upstream.seen.length
    const response = await auth(trusting, 'alice')
    expect(response.status).toBe(200)
    expect(response.headers.get('authorization')).toMatch(/^Bearer \S+$/)
    expect(response.headers.get('x-forwarded-user')).toBe('alice')
    expect(response.headers.get('x-forwarded-email')).toBe('alice@example.test')
    expect(response.headers.get('x-forwarded-groups')).toBe('admins,staff')
    expect(response.headers.get('cache-control')).toBe('no-store')
    expect(await response.text()).toBe('')
    expect(upstream.seen.length).toBe(before)
  })

  it('sends the same token the proxy injects on a route of that provider', async () => {
    const proxied = await browsers.alice!.fetch(`${trusting.url}/app/x`, { headers: json })
    const seen = await proxied.json() as { headers: Record<string, string> }
    expect((await auth(trusting, 'alice')).headers.get('authorization')).toBe(seen.headers.authorization)
  })

  it('leaves out an e-mail address the provider did not verify', async () => {
    const response = await auth(trusting, 'eve')
    expect(response.status).toBe(200)
    expect(response.headers.get('x-forwarded-user')).toBe('eve')
    expect(response.headers.get('x-forwarded-email')).toBeNull()
    expect(response.headers.get('x-forwarded-groups')).toBe('staff')
  })

  it('answers HEAD like GET', async () => {
    const url = `${trusting.url}/oauth/auth/demo/`
    const response = await fetch(url, { method: 'HEAD', headers: { cookie: browsers.alice!.cookieHeader(url)! } })
    expect(response.status).toBe(200)
    expect(response.headers.get('x-forwarded-user')).toBe('alice')
  })

  it('answers 404 unknown_provider for a provider that is not configured', async () => {
    const response = await auth(trusting, 'alice', '', {}, 'nope')
    expect(response.status).toBe(404)
    expect((await response.json() as { error: string }).error).toBe('unknown_provider')
  })
})

describe('forward-auth: allow rules in the query', () => {
  it.each([
    ['groups=admins', 'alice', 200],
    ['groups=admins', 'bob', 403],
    ['groups=nobody,staff', 'bob', 200],
    ['emails=bob@example.test', 'bob', 200],
    ['emails=Bob@Example.test', 'bob', 200],
    ['emails=bob@example.test', 'alice', 403],
    ['domains=example.test', 'alice', 200],
    ['domains=@example.test', 'bob', 200],
    ['domains=other.test', 'alice', 403],
    ['domains=example.test', 'eve', 403],
    ['emails=eve@example.test', 'eve', 403],
    ['emails=x@y.test&groups=staff', 'eve', 200],
    ['groups=admins&groups=staff', 'bob', 200],
    ['groups=', 'alice', 403],
    ['groups=,', 'alice', 403],
  ])('?%s for %s answers %i', async (query, who, status) => {
    const response = await auth(trusting, who, `?${query}`)
    expect(response.status).toBe(status)
    if (status === 403) {
      expect((await response.json() as { error: string }).error).toBe('forbidden')
      expect(response.headers.get('authorization')).toBeNull()
      expect(response.headers.get('x-forwarded-user')).toBeNull()
    }
  })

  it('answers 401, not 403, when nobody is signed in', async () => {
    expect((await auth(trusting, undefined, '?groups=admins')).status).toBe(401)
  })

  // An outside tester's finding: each of these was dropped, and bob (staff, not admins) passed.
  it.each([
    'group=admins', 'Groups=admins', 'groups[]=admins', 'allowed_groups=admins', 'users=alice', 'providers=nobody',
    'claims=level:5', 'network=10.0.0.0/8', 'email=alice@example.test', 'domain=example.org', 'groups=staff&user=alice',
  ])('answers ?%s, a parameter it does not read, 400 naming it, whoever asks', async (query) => {
    for (const who of ['bob', undefined]) {
      const response = await auth(trusting, who, `?${query}`)
      expect(response.status).toBe(400)
      const body = await response.json() as { error: string, message: string }
      expect(body.error).toBe('invalid_request')
      expect(body.message).toContain(`${JSON.stringify([...new URLSearchParams(query).keys()].find((key) => !['groups'].includes(key)))} is none of them`)
      expect(response.headers.get('authorization')).toBeNull()
    }
  })

  // A re-reading's finding: the 400 quoted what the log hides (a bare name, a long one: a token).
  it.each([
    ['a bare token as the whole query', '?eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJhbGljZSJ9.BareTokSig123', 'eyJhbGciOiJIUzI1NiJ9'],
    ['a name longer than the log keeps', '?AccessTokenAsNameXq1w2e3r4t5y6u7i8o9p0a1s2d3f=1', 'AccessTokenAsNameXq1w'],
    ['a value after a name it does not read', '?access_token=ValueSecretMm9n8b7v6c5x4z3', 'ValueSecretMm9n8b7v6c5x4z3'],
  ])('answers %s 400 without quoting it, in the answer or the log', async (_what, query, secret) => {
    const before = trusting.logs.length
    const response = await auth(trusting, 'bob', query)
    expect(response.status).toBe(400)
    expect(await response.text()).not.toContain(secret)
    const logs = trusting.logs.slice(before).join('\n')
    expect(logs).toContain('is none of them')
    expect(logs).not.toContain(secret)
  })
})

describe('forward-auth: not signed in', () => {
  it('answers 401 unauthenticated with login_url, X-Login-Url and WWW-Authenticate', async () => {
    const response = await auth(trusting, undefined)
    expect(response.headers.get('www-authenticate')).toBe('Bearer realm="demo"')
    expect(response.headers.get('cache-control')).toBe('no-store')
    expect(await nextOf(response)).toBe('/oauth/')
    expect(response.headers.get('x-login-url')!.startsWith(`${trusting.url}/oauth/login/demo/?next=`)).toBe(true)
  })

  it('returns to the original URL a trusted proxy names with X-Forwarded-Proto/-Host/-Uri', async () => {
    const response = await auth(trusting, undefined, '', { 'x-forwarded-proto': 'https', 'x-forwarded-host': 'app.example.com', 'x-forwarded-uri': '/reports/q?year=2026&a=%2F' })
    expect(await nextOf(response)).toBe('https://app.example.com/reports/q?year=2026&a=%2F')
  })

  it('reads X-Original-URI (nginx) when there is no X-Forwarded-Uri', async () => {
    const response = await auth(trusting, undefined, '', { 'x-forwarded-proto': 'https', 'x-forwarded-host': 'app.example.org', 'x-original-uri': '/dash/' })
    expect(await nextOf(response)).toBe('https://app.example.org/dash/')
  })

  it('keeps a relative next when the original URL is on the gateway\'s own origin', async () => {
    const own = new URL(trusting.url)
    const response = await auth(trusting, undefined, '', { 'x-forwarded-proto': 'http', 'x-forwarded-host': own.host, 'x-forwarded-uri': '/app/page?x=1' })
    expect(await nextOf(response)).toBe('/app/page?x=1')
  })

  it.each([
    ['a host not in allowedRedirectHosts', { 'x-forwarded-proto': 'https', 'x-forwarded-host': 'evil.net', 'x-forwarded-uri': '/x' }],
    ['a look-alike host', { 'x-forwarded-proto': 'https', 'x-forwarded-host': 'example.com.evil.net', 'x-forwarded-uri': '/x' }],
    ['userinfo smuggled in the host', { 'x-forwarded-proto': 'https', 'x-forwarded-host': 'app.example.com@evil.net', 'x-forwarded-uri': '/x' }],
    ['an absolute URI', { 'x-forwarded-proto': 'https', 'x-forwarded-host': 'app.example.com', 'x-forwarded-uri': 'https://evil.net/' }],
    ['a protocol-relative URI', { 'x-forwarded-proto': 'https', 'x-forwarded-host': 'app.example.com', 'x-forwarded-uri': '//evil.net/' }],
    ['dot segments in the URI', { 'x-forwarded-proto': 'https', 'x-forwarded-host': 'app.example.com', 'x-forwarded-uri': '/a/../../b' }],
    ['a scheme other than http(s)', { 'x-forwarded-proto': 'javascript', 'x-forwarded-host': 'app.example.com', 'x-forwarded-uri': '/x' }],
  ])('falls back to /oauth/ for %s', async (_name, headers) => {
    expect(await nextOf(await auth(trusting, undefined, '', headers))).toBe('/oauth/')
  })

  it('sends no sign-in address naming X-Forwarded-Uri, X-Original-URI or X-Forwarded-Host of a caller trustProxy does not admit', async () => {
    const headers = { 'x-forwarded-proto': 'https', 'x-forwarded-host': 'app.example.com', 'x-forwarded-uri': '/reports/', 'x-original-uri': '/other/' }
    const response = await auth(untrusting, undefined, '', headers)
    expect(response.status).toBe(403)
    expect(response.headers.get('x-login-url')).toBeNull()
  })

  it('answers 401 to a session that has no token for that provider', async () => {
    const response = await auth(trusting, 'alice', '', {}, 'stub')
    expect(await nextOf(response)).toBe('/oauth/')
  })
})

describe('forward-auth: refresh', () => {
  it('refreshes an expired token with its refresh token, as a proxied request would, and answers with the new one', async () => {
    stub.mode = 'ok'
    // Expired on arrival (30 s skew), with a refresh token; the refreshed token lives an hour.
    stub.extra = { refresh_token: 'stub-refresh', expires_in: 1 }
    const browser = new Browser()
    const login = await browser.fetch(`${trusting.url}/oauth/login/stub/?next=/oauth/`)
    const state = new URL(login.headers.get('location')!).searchParams.get('state')!
    expect((await browser.fetch(`${trusting.url}/oauth/authorized/stub/?code=c&state=${encodeURIComponent(state)}`)).status).toBe(302)
    const issued = stub.requests.length
    stub.extra = { expires_in: 3600 }
    browsers.stubbed = browser
    const response = await auth(trusting, 'stubbed', '', {}, 'stub')
    expect(response.status).toBe(200)
    expect(stub.requests.length).toBe(issued + 1)
    expect(stub.requests.at(-1)!.body).toContain('grant_type=refresh_token')
    expect(response.headers.get('authorization')).toBe(`Bearer stub-token-${issued + 1}`)
    // The refreshed token was stored: the next call refreshes nothing.
    expect((await auth(trusting, 'stubbed', '', {}, 'stub')).headers.get('authorization')).toBe(`Bearer stub-token-${issued + 1}`)
    expect(stub.requests.length).toBe(issued + 1)
  })
})

describe('session.cookieDomain', () => {
  const base = { providers: { demo: { clientId: 'c', clientSecret: 's', authorizeUrl: 'http://127.0.0.1:1/a', tokenUrl: 'http://127.0.0.1:1/t', scope: 'x' } } }
  const parse = (server: Record<string, unknown>, session: Record<string, unknown>) =>
    parseConfig(stringify({ ...base, server, session: { secret: TEST_SECRET, ...session } }), {}, 'test.yaml')
  const problems = (server: Record<string, unknown>, session: Record<string, unknown>): string[] => {
    try {
      parse(server, session)
      return []
    } catch (error) {
      if (error instanceof ConfigError) return error.issues.map((issue) => issue.replace(/ \(line \d+\)$/, ''))
      throw error
    }
  }

  it.each([
    ['.example.com', 'https://auth.example.com', 'example.com'],
    ['example.com', 'https://auth.example.com', 'example.com'],
    ['Auth.Example.com', 'https://auth.example.com', 'auth.example.com'],
  ])('accepts %s with baseUrl %s', (domain, baseUrl, kept) => {
    expect(parse({ baseUrl }, { cookieDomain: domain }).session.cookieDomain).toBe(kept)
  })

  it.each([
    ['a domain the baseUrl is not under', { baseUrl: 'https://auth.example.com' }, { cookieDomain: '.example.org' },
      'session.cookieDomain: must be server.baseUrl\'s host "auth.example.com" or a parent domain of it, got "example.org"'],
    ['a look-alike suffix', { baseUrl: 'https://auth.myexample.com' }, { cookieDomain: 'example.com' },
      'session.cookieDomain: must be server.baseUrl\'s host "auth.myexample.com" or a parent domain of it, got "example.com"'],
    ['a URL', { baseUrl: 'https://auth.example.com' }, { cookieDomain: 'https://example.com' },
      'session.cookieDomain: must be a domain name such as .example.com, got "https://example.com"'],
    ['an IP address', { baseUrl: 'https://10.0.0.1' }, { cookieDomain: '10.0.0.1' },
      'session.cookieDomain: must be a domain name such as .example.com, got "10.0.0.1"'],
    ['a __Host- cookie name', { baseUrl: 'https://auth.example.com' }, { cookieDomain: '.example.com', cookieName: '__Host-gw' },
      'session.cookieDomain: cannot be used with a "__Host-" cookie name, which browsers only keep without a Domain: rename session.cookieName (for example to __Secure-gw) or remove cookieDomain'],
  ])('refuses %s', (_name, server, session, message) => {
    expect(problems(server, session)).toContain(message)
  })

  it('gives the session cookie that Domain at sign-in and when it is cleared at sign-out', async () => {
    const gateway = await startGateway({
      server: { baseUrl: 'http://auth.example.test:8080' },
      session: { cookieDomain: '.example.test' },
      store: { type: 'redis', url: redis.url },
      providers: { stub: { clientId: 'stub-client', clientSecret: 'stub-secret', authorizeUrl: `${stub.url}/authorize`, tokenUrl: `${stub.url}/token`, scope: 'read' } },
      routes: [],
    })
    try {
      stub.mode = 'ok'
      stub.extra = {}
      const browser = new Browser()
      const listening = `http://127.0.0.1:${gateway.config.server.port}`
      const login = await browser.fetch(`${listening}/oauth/login/stub/?next=/oauth/`)
      const state = new URL(login.headers.get('location')!).searchParams.get('state')!
      const callback = await browser.fetch(`${listening}/oauth/authorized/stub/?code=c&state=${encodeURIComponent(state)}`)
      const sessionLines = (response: Response) => response.headers.getSetCookie().filter((line) => line.startsWith('gw_session='))
      const [session, hostOnly] = sessionLines(callback)
      expect(session).toMatch(/; Domain=example\.test(;|$)/)
      // The session cookie an earlier configuration left on the gateway's own host is cleared beside
      // it, or the two would be two values of one cookie, which open nothing.
      expect(hostOnly).toMatch(/^gw_session=; Max-Age=0; /)
      expect(hostOnly).not.toMatch(/Domain=/i)
      // The flow cookie stays on the gateway's own host.
      expect(login.headers.getSetCookie().find((line) => line.startsWith('gw_session_flow='))).not.toMatch(/Domain=/i)
      const logout = await browser.fetch(`${listening}/oauth/logout/?next=/`, { method: 'POST' })
      expect(sessionLines(logout).map((line) => /Domain=/i.test(line))).toEqual([true, false])
    } finally {
      await gateway.close()
    }
  })
})

describe('forwardAuth.allowedRedirectHosts', () => {
  const parse = (hosts: unknown) => parseConfig(stringify({ session: { secret: TEST_SECRET }, forwardAuth: { allowedRedirectHosts: hosts } }), {}, 'test.yaml')
  const problems = (hosts: unknown): string[] => {
    try {
      parse(hosts)
      return []
    } catch (error) {
      if (error instanceof ConfigError) return error.issues.map((issue) => issue.replace(/ \(line \d+\)$/, ''))
      throw error
    }
  }

  it('keeps hosts in lower case, with their port and leading dot', () => {
    expect(parse(['.Example.com', 'app.example.org', 'x.example.net:8443', '127.0.0.1:9000']).forwardAuth.allowedRedirectHosts)
      .toEqual(['.example.com', 'app.example.org', 'x.example.net:8443', '127.0.0.1:9000'])
  })

  it('is empty by default', () => {
    expect(parseConfig(stringify({ session: { secret: TEST_SECRET } }), {}, 'test.yaml').forwardAuth.allowedRedirectHosts).toEqual([])
  })

  it.each([
    ['https://app.example.com', 'forwardAuth.allowedRedirectHosts[0]: must be a host name, optionally with a leading dot (and its subdomains) or a :port, such as .example.com or app.example.org:8443, got "https://app.example.com"'],
    ['*.example.com', 'forwardAuth.allowedRedirectHosts[0]: must be a host name, optionally with a leading dot (and its subdomains) or a :port, such as .example.com or app.example.org:8443, got "*.example.com"'],
    ['user@example.com', 'forwardAuth.allowedRedirectHosts[0]: must be a host name, optionally with a leading dot (and its subdomains) or a :port, such as .example.com or app.example.org:8443, got "user@example.com"'],
    ['example.com/path', 'forwardAuth.allowedRedirectHosts[0]: must be a host name, optionally with a leading dot (and its subdomains) or a :port, such as .example.com or app.example.org:8443, got "example.com/path"'],
    ['.', 'forwardAuth.allowedRedirectHosts[0]: must be a host name, optionally with a leading dot (and its subdomains) or a :port, such as .example.com or app.example.org:8443, got "."'],
    ['.com', 'forwardAuth.allowedRedirectHosts[0]: ".com" would allow every host under a top-level domain: name your own domain, such as .example.com'],
    ['bücher.example', 'forwardAuth.allowedRedirectHosts[0]: must be written in ASCII (punycode, such as xn--bcher-kva.example), got "bücher.example"'],
    ['example.com:99999', 'forwardAuth.allowedRedirectHosts[0]: must be a host name, optionally with a leading dot (and its subdomains) or a :port, such as .example.com or app.example.org:8443, got "example.com:99999"'],
  ])('refuses %s', (entry, message) => {
    expect(problems([entry])).toEqual([message])
  })
})

describe('forwardAuth.hosts (config)', () => {
  const parse = (hosts: unknown) => parseConfig(stringify({ server: { trustProxy: ['10.0.0.5'] }, session: { secret: TEST_SECRET }, forwardAuth: { hosts } }), {}, 'test.yaml')
  const problems = (hosts: unknown): string[] => {
    try {
      parse(hosts)
      return []
    } catch (error) {
      if (error instanceof ConfigError) return error.issues.map((issue) => issue.replace(/ \(line \d+\)$/, ''))
      throw error
    }
  }
  const rule = (name: string, over: Partial<{ emails: string[], domains: string[], groups: string[] }>) => ({ name, users: [], emails: [], domains: [], groups: [], claims: [], methods: [], paths: [], networks: [], providers: [], ...over })

  it('is empty by default', () => {
    expect(parseConfig(stringify({ session: { secret: TEST_SECRET } }), {}, 'test.yaml').forwardAuth.hosts).toEqual(new Map())
  })

  it('reads one rule or a list of rules, normalised as a route\'s allow, under lower-case host names', () => {
    const hosts = parse({
      'Payroll.Example.com': { allow: { groups: ['payroll'] } },
      'wiki.example.com': { allow: [{ emails: ['A@X.org'] }, { domains: ['@Y.org'], groups: ['staff'] }], deny: { emails: ['b@y.org'] } },
      '10.0.0.7': {},
    }).forwardAuth.hosts
    expect(hosts).toEqual(new Map([
      ['payroll.example.com', { allow: [rule('hosts.payroll.example.com.allow', { groups: ['payroll'] })], deny: [] }],
      ['wiki.example.com', { allow: [rule('hosts.wiki.example.com.allow[0]', { emails: ['a@x.org'] }), rule('hosts.wiki.example.com.allow[1]', { domains: ['y.org'], groups: ['staff'] })], deny: [rule('hosts.wiki.example.com.deny', { emails: ['b@y.org'] })] }],
      ['10.0.0.7', { allow: undefined, deny: [] }],
    ]))
  })

  it('shares the route allow\'s normaliser: a route allow of only blank values is refused, not a route nobody may pass', () => {
    const route = (allow: unknown) => stringify({ session: { secret: TEST_SECRET }, providers: { demo: { clientId: 'c', clientSecret: 's', authorizeUrl: 'https://op.example/a', tokenUrl: 'https://op.example/t', scope: 'read' } }, routes: [{ path: '/app/', upstream: 'http://127.0.0.1:9100', provider: 'demo', allow }] })
    expect(() => parseConfig(route({ groups: [' '] }), {}, 'test.yaml')).toThrow(/routes\[0\]\.allow: gives no condition/)
    expect(parseConfig(route({ groups: [' staff ', ' '], emails: [' A@X.org '] }), {}, 'test.yaml').routes[0]!.rules.allow)
      .toEqual([rule('allow.emails', { emails: ['a@x.org'] }), rule('allow.groups', { groups: ['staff'] })])
  })

  it('is a Map: a host named like an Object property is not listed', () => {
    const hosts = parse({ 'a.example.com': {} }).forwardAuth.hosts
    for (const name of ['constructor', '__proto__', 'toString', 'hasOwnProperty']) expect(hosts.has(name)).toBe(false)
  })

  it.each([
    [{ 'payroll.example.com:8443': {} }, 'forwardAuth.hosts.payroll.example.com:8443: must be a host name without port or leading dot, such as payroll.example.com (its rules hold on every port), got "payroll.example.com:8443"'],
    [{ '.example.com': {} }, 'forwardAuth.hosts..example.com: must be a host name without port or leading dot, such as payroll.example.com (its rules hold on every port), got ".example.com"'],
    [{ '*.example.com': {} }, 'forwardAuth.hosts.*.example.com: must be a host name without port or leading dot, such as payroll.example.com (its rules hold on every port), got "*.example.com"'],
    [{ 'https://a.example.com': {} }, 'forwardAuth.hosts.https://a.example.com: must be a host name without port or leading dot, such as payroll.example.com (its rules hold on every port), got "https://a.example.com"'],
    [{ 'bücher.example': {} }, 'forwardAuth.hosts.bücher.example: must be a host name without port or leading dot, such as payroll.example.com (its rules hold on every port), got "bücher.example"'],
    [{ 'a.example.com': {}, 'A.example.com': {} }, 'forwardAuth.hosts.A.example.com: names the host "a.example.com" a second time'],
    [{ 'a.example.com': { allow: [] } }, 'forwardAuth.hosts.a.example.com.allow: allows nobody: give a rule (or remove allow to let any signed-in person in)'],
    [{ 'a.example.com': { allow: {} } }, 'forwardAuth.hosts.a.example.com.allow: gives no condition: give users, emails, domains, groups, claims, methods, paths, networks or providers'],
    [{ 'a.example.com': { allow: { groups: [' '] } } }, 'forwardAuth.hosts.a.example.com.allow: gives no condition: give users, emails, domains, groups, claims, methods, paths, networks or providers'],
    [{ 'a.example.com': { deny: [{ groups: ['x'] }, {}] } }, 'forwardAuth.hosts.a.example.com.deny[1]: gives no condition: give users, emails, domains, groups, claims, methods, paths, networks or providers'],
  ])('refuses %j', (hosts, message) => {
    expect(problems(hosts)).toEqual([message])
  })

  it.each([
    [{ 'a.example.com': { allow: { group: ['x'] } } }, 'forwardAuth.hosts.a.example.com.allow'],
    [{ 'a.example.com': { permit: {} } }, 'forwardAuth.hosts.a.example.com'],
    [{ 'a.example.com': { allow: 'admins' } }, 'forwardAuth.hosts.a.example.com.allow'],
  ])('refuses the shape %j at its key path', (hosts, path) => {
    const found = problems(hosts)
    expect(found.length).toBeGreaterThan(0)
    expect(found[0]).toContain(path)
  })
})

const FRONTS: FrontKind[] = ['nginx', 'caddy']
const missing = FRONTS.filter((kind) => !frontBinary(kind))
if (missing.length > 0) {
  console.warn(`!!! ${missing.join(' and ')} not installed: the forward-auth end-to-end tests behind ${missing.join(' and ')} are SKIPPED (.ci/run installs them) !!!`)
}

describe.each(FRONTS)('forward-auth behind a real %s', (kind) => {
  let gateway: TestGateway
  let front: FrontProxy

  beforeAll(async () => {
    if (missing.includes(kind)) return
    const port = await holdFrontPort()
    gateway = await startGateway({
      server: { ...behindFronts, trustProxy: ['127.0.0.1'] },
      store: { type: 'redis', url: redis.url },
      providers: { demo: oidcClient(op.issuer, 'fa', 'fa-secret', 'openid email groups') },
      routes: [],
      // The front's host is listed: its application gets the assertion, through the shipped file.
      assertion: {},
      forwardAuth: { allowedRedirectHosts: [`127.0.0.1:${port.port}`], hosts: { '127.0.0.1': {} } },
    })
    front = await startFrontProxy(kind, { port, gateway: `127.0.0.1:${gateway.config.server.port}`, upstream: new URL(upstream.url).host })
  })

  afterAll(async () => {
    await front?.stop()
    await gateway?.close()
  })

  it.skipIf(missing.includes(kind))('sends a browser to sign in at the authorization server and back, and the upstream receives the bearer token and identity', async () => {
    const browser = new Browser()
    const response = await browser.navigate(`${front.url}/app/page?x=1`)
    expect(response.status).toBe(200)
    const seen = await response.json() as SeenRequest
    expect(seen.url).toBe('/app/page?x=1')
    expect(seen.headers.authorization).toMatch(/^Bearer \S+$/)
    expect(seen.headers['x-forwarded-user']).toBe('alice')
    expect(seen.headers['x-forwarded-email']).toBe('alice@example.test')
    expect(seen.headers['x-forwarded-groups']).toBe('admins,staff')
    // The shipped file passes the gateway's assertion on, for the application's own origin.
    const { jwtVerify, createRemoteJWKSet } = await import('jose')
    const jwks = createRemoteJWKSet(new URL(`${gateway.url}/.well-known/jwks.json`))
    const { payload } = await jwtVerify(seen.headers['x-gateway-assertion'] as string, jwks, { issuer: gateway.url, audience: front.url })
    expect(payload.sub).toBe('alice')
    // The application never sees the gateway's session cookie.
    expect(seen.headers.cookie ?? '').not.toContain('gw_session')
    // The way there: the proxy's redirect to the gateway's sign-in, whose next is the original URL.
    const first = browser.hops[0]!
    expect(first.status).toBe(302)
    const login = new URL(first.location!)
    expect(login.origin + login.pathname).toBe(`${gateway.url}/oauth/login/demo/`)
    expect(login.searchParams.get('next')).toBe(`${front.url}/app/page?x=1`)
    expect(browser.hops.some((hop) => hop.url.startsWith(op.issuer))).toBe(true)
    // And back from the callback to the original URL.
    const callback = browser.hops.find((hop) => hop.url.startsWith(`${gateway.url}/oauth/authorized/demo/`))!
    expect(callback.location).toBe(`${front.url}/app/page?x=1`)
  })

  it.skipIf(missing.includes(kind))('replaces identity headers a client sends with what the gateway vouches for, and sends no unverified e-mail', async () => {
    const browser = new Browser()
    await browser.navigate(`${front.url}/app/`, { login: 'eve' })
    const response = await browser.fetch(`${front.url}/app/spoof`, {
      headers: { accept: 'application/json', 'x-forwarded-user': 'admin', 'x-forwarded-email': 'ceo@example.test', 'x-forwarded-groups': 'admins', authorization: 'Bearer forged', 'x-gateway-assertion': 'forged' },
    })
    const seen = await response.json() as SeenRequest
    expect(seen.headers['x-gateway-assertion']).not.toBe('forged')
    expect(seen.headers['x-forwarded-user']).toBe('eve')
    expect(seen.headers['x-forwarded-email']).toBeUndefined()
    expect(seen.headers['x-forwarded-groups']).toBe('staff')
    expect(seen.headers.authorization).not.toBe('Bearer forged')
  })

  it.skipIf(missing.includes(kind))('answers an API client 401 unauthenticated with login_url, and calls no upstream', async () => {
    const before = upstream.seen.length
    const response = await fetch(`${front.url}/app/data`, { headers: { accept: 'application/json' }, redirect: 'manual' })
    expect(response.status).toBe(401)
    const body = await response.json() as { error: string, login_url: string }
    expect(body.error).toBe('unauthenticated')
    expect(new URL(body.login_url).searchParams.get('next')).toBe(`${front.url}/app/data`)
    expect(upstream.seen.length).toBe(before)
  })

  it('runs the file docs/forward-auth.md shows, verbatim', async () => {
    const [doc, file] = await Promise.all([readFile('docs/forward-auth.md', 'utf8'), readFile(FRONT_TEMPLATES[kind], 'utf8')])
    const blocks = [...doc.matchAll(/^```[a-z]*\n([\s\S]*?)^```$/gm)].map((match) => match[1])
    expect(blocks).toContain(file)
  })
})
