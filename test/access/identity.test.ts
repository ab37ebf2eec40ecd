// Who may pass: OIDC discovery, ID token validation (forged tokens fail the sign-in), identity from
// ID token + userinfo (or a plain OAuth 2.0 provider's userinfo through a claims mapping), identity
// headers that clients cannot spoof, allow rules (403, upstream never called), public paths, and
// /oauth/userinfo/, and no sign-in whose user name is an e-mail address the provider did not verify,
// or text with an `@` that is not one address.
// Real oidc-provider with several accounts; the stub only for forged ID tokens and the GitHub-like
// userinfo.
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest'
import { untakenUser } from '../../src/oauth/claims.js'
import { Browser } from '../helpers/browser.js'
import { oidcClient, reserveBaseUrl, startGateway, type TestGateway } from '../helpers/gateway.js'
import { refusedUrl, waitFor } from '../helpers/net.js'
import { startOidcProvider, type TestProvider } from '../helpers/oidc.js'
import { startRedis, type TestRedis } from '../helpers/redis.js'
import { startTokenStub, type TokenStub } from '../helpers/token-stub.js'
import { startUpstream, type SeenRequest, type Upstream } from '../helpers/upstream.js'

const json = { accept: 'application/json' }
let redis: TestRedis
let op: TestProvider
let stub: TokenStub
let upstream: Upstream
let gateway: TestGateway
let deadIssuer: string

beforeAll(async () => {
  redis = await startRedis()
  upstream = await startUpstream()
  stub = await startTokenStub()
  const { port, baseUrl } = await reserveBaseUrl()
  deadIssuer = await refusedUrl()
  // A plain OAuth 2.0 provider (GitHub-like), at the stub.
  const plain = { clientId: 'gh', clientSecret: 'gh-secret', authorizeUrl: `${stub.url}/authorize`, tokenUrl: `${stub.url}/token`, scope: 'read:user', userinfoUrl: `${stub.url}/userinfo` }
  op = await startOidcProvider([{ client_id: 'id-client', client_secret: 'id-secret', redirect_uris: [`${baseUrl}/oauth/authorized/demo/`, `${baseUrl}/oauth/authorized/byemail/`] }])
  gateway = await startGateway({
    server: { port, baseUrl },
    store: { type: 'redis', url: redis.url },
    providers: {
      // Discovery only: no authorizeUrl or tokenUrl.
      demo: oidcClient(op.issuer, 'id-client', 'id-secret', 'openid profile email groups'),
      // The user is the e-mail address, as preset: google maps it.
      byemail: { ...oidcClient(op.issuer, 'id-client', 'id-secret', 'openid email'), claims: { user: 'email' } },
      down: { clientId: 'x', clientSecret: 'y', issuer: deadIssuer, scope: 'openid' },
      oidcstub: { clientId: 'stub-client', clientSecret: 'stub-secret', issuer: stub.url, scope: 'openid' },
      plain: { ...plain, claims: { user: 'login', email: 'contact.email', name: '/profile/display name', groups: 'teams.slug' } },
      // The same provider, whose user is the e-mail address it names.
      plainmail: { ...plain, claims: { user: 'contact.email', email: 'contact.email' } },
    },
    routes: [
      { path: '/app/', upstream: upstream.url, provider: 'demo', public: ['OPTIONS *', 'GET /app/static/*'] },
      { path: '/admins/', upstream: upstream.url, provider: 'demo', allow: { groups: ['admins'] } },
      { path: '/example/', upstream: upstream.url, provider: 'demo', allow: { domains: ['example.test'] } },
      { path: '/bob/', upstream: upstream.url, provider: 'demo', allow: { emails: ['Bob@Example.test'] } },
      { path: '/custom/', upstream: upstream.url, provider: 'demo', identityHeaders: { user: 'Remote-User', email: 'Remote-Email', groups: 'Remote-Groups' } },
      { path: '/plain/', upstream: upstream.url, provider: 'plain' },
      { path: '/oidcstub/', upstream: upstream.url, provider: 'oidcstub' },
      { path: '/open/', upstream: upstream.url, auth: 'none' },
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
})

const signedIn: Record<string, Browser> = {}
async function as (login: string): Promise<Browser> {
  if (!signedIn[login]) {
    const browser = new Browser()
    expect((await browser.navigate(`${gateway.url}/app/`, { login })).status).toBe(200)
    signedIn[login] = browser
  }
  return signedIn[login]
}

async function seen (response: Response): Promise<SeenRequest> {
  expect(response.status).toBe(200)
  return await response.json() as SeenRequest
}

describe('discovery and identity', () => {
  it('signs in with an issuer-only provider and sends identity headers upstream', async () => {
    const alice = await as('alice')
    const request = await seen(await alice.fetch(`${gateway.url}/app/x`, { headers: json }))
    expect(request.headers['x-forwarded-user']).toBe('alice')
    expect(request.headers['x-forwarded-email']).toBe('alice@example.test')
    expect(request.headers['x-forwarded-groups']).toBe('admins,staff')
    expect(request.headers.authorization).toMatch(/^Bearer /)
  })

  it('sends the identity under configured header names', async () => {
    const request = await seen(await (await as('alice')).fetch(`${gateway.url}/custom/x`, { headers: json }))
    expect(request.headers['remote-user']).toBe('alice')
    expect(request.headers['remote-email']).toBe('alice@example.test')
    expect(request.headers['remote-groups']).toBe('admins,staff')
    expect(request.headers['x-forwarded-user']).toBeUndefined()
  })

  it('never lets a client-sent identity header reach an upstream, on any route', async () => {
    const spoof = { 'x-forwarded-user': 'root', 'x-forwarded-email': 'root@corp', 'x-forwarded-groups': 'admins', 'remote-user': 'root' }
    const bob = await as('bob')
    const own = await seen(await bob.fetch(`${gateway.url}/app/x`, { headers: { ...json, ...spoof } }))
    expect(own.headers['x-forwarded-user']).toBe('bob')
    expect(own.headers['x-forwarded-groups']).toBe('staff')
    expect(own.headers['remote-user']).toBeUndefined()
    const open = await seen(await fetch(`${gateway.url}/open/x`, { headers: { ...json, ...spoof } }))
    for (const name of Object.keys(spoof)) expect(open.headers[name]).toBeUndefined()
  })

  it('GET /oauth/userinfo/ returns the signed-in identities, and 401 without one', async () => {
    const response = await (await as('alice')).fetch(`${gateway.url}/oauth/userinfo/`, { headers: json })
    expect(response.status).toBe(200)
    expect(await response.json()).toEqual({ identities: { demo: { sub: 'alice', subject: 'alice', iss: op.issuer, email: 'alice@example.test', name: 'Alice', groups: ['admins', 'staff'] } } })
    const none = await fetch(`${gateway.url}/oauth/userinfo/`, { headers: json })
    expect(none.status).toBe(401)
    expect((await none.json() as { error: string }).error).toBe('unauthenticated')
  })

  it('maps a plain OAuth 2.0 provider\'s userinfo through dotted paths and JSON pointers', async () => {
    stub.userinfo = { login: 'octocat', contact: { email: 'Octo@Cat.test' }, profile: { 'display name': 'The Octocat' }, teams: [{ slug: 'devs' }, { slug: 'ops' }] }
    const browser = new Browser()
    const login = await browser.fetch(`${gateway.url}/oauth/login/plain/?next=/plain/`)
    const state = new URL(login.headers.get('location')!).searchParams.get('state')!
    expect((await browser.fetch(`${gateway.url}/oauth/authorized/plain/?code=c&state=${encodeURIComponent(state)}`)).status).toBe(302)
    const request = await seen(await browser.fetch(`${gateway.url}/plain/x`, { headers: json }))
    expect(request.headers['x-forwarded-user']).toBe('octocat')
    expect(request.headers['x-forwarded-email']).toBe('octo@cat.test')
    expect(request.headers['x-forwarded-groups']).toBe('devs,ops')
    const info = await (await browser.fetch(`${gateway.url}/oauth/userinfo/`, { headers: json })).json()
    // No `sub` in its userinfo: the user name is the nearest to a subject it gives; no issuer: its origin.
    expect(info).toEqual({ identities: { plain: { sub: 'octocat', subject: 'octocat', iss: new URL(stub.url).origin, email: 'octo@cat.test', name: 'The Octocat', groups: ['devs', 'ops'] } } })
  })

  // An application splitting X-Forwarded-Email at its first `@` read `example.test"` of it, while
  // rules read attacker.example: an address two readers could read apart is sent to no one.
  it('sends no e-mail header for an address holding two @ ("a@example.test"@attacker.example), and shows none', async () => {
    stub.userinfo = { login: 'quoted', contact: { email: '"a@example.test"@attacker.example' } }
    const browser = new Browser()
    const login = await browser.fetch(`${gateway.url}/oauth/login/plain/?next=/plain/`)
    const state = new URL(login.headers.get('location')!).searchParams.get('state')!
    expect((await browser.fetch(`${gateway.url}/oauth/authorized/plain/?code=c&state=${encodeURIComponent(state)}`)).status).toBe(302)
    const request = await seen(await browser.fetch(`${gateway.url}/plain/x`, { headers: json }))
    expect({ user: request.headers['x-forwarded-user'], email: request.headers['x-forwarded-email'] }).toEqual({ user: 'quoted', email: undefined })
    const info = await (await browser.fetch(`${gateway.url}/oauth/userinfo/`, { headers: json })).json() as { identities: { plain: Record<string, unknown> } }
    expect(info.identities.plain.email).toBeUndefined()
  })
})

describe('discovery failures', () => {
  it('keep the gateway up; sign-ins with that provider answer 502 provider_unavailable at once', async () => {
    const started = Date.now()
    const response = await fetch(`${gateway.url}/oauth/login/down/`, { headers: json, redirect: 'manual' })
    expect(response.status).toBe(502)
    expect((await response.json() as { error: string }).error).toBe('provider_unavailable')
    // "At once": no call to the dead issuer is waited for, which would take its timeout
    // (providers.down.timeout) at least.
    expect(Date.now() - started).toBeLessThan(gateway.config.providers.down!.timeoutMs)
    expect((await fetch(`${gateway.url}/healthz`)).status).toBe(200)
    await waitFor(async () => gateway.logs.some((line) => line.includes('OIDC discovery failed for provider down')), 10_000, 'the discovery failure to be logged')
  })
})

describe('allow rules', () => {
  it.each([
    ['alice', '/admins/', 200], ['bob', '/admins/', 403], ['mallory', '/admins/', 403],
    ['alice', '/example/', 200], ['bob', '/example/', 200], ['mallory', '/example/', 403],
    ['bob', '/bob/', 200], ['alice', '/bob/', 403],
  ] as const)('%s on %s gets %d', async (login, path, status) => {
    const browser = await as(login)
    const before = upstream.seen.length
    // Twice: the second request finds the session in the in-process cache (the gate's fast path).
    for (const attempt of [1, 2]) {
      const response = await browser.fetch(`${gateway.url}${path}x`, { headers: json })
      expect(response.status, `attempt ${attempt}`).toBe(status)
      if (status === 403) {
        expect((await response.json() as { error: string }).error).toBe('forbidden')
        expect(upstream.seen.length).toBe(before)
      }
    }
  })

  it('shows a browser the forbidden page with a way to sign in with another account', async () => {
    const response = await (await as('mallory')).fetch(`${gateway.url}/admins/`)
    expect(response.status).toBe(403)
    const page = await response.text()
    expect(page).toContain('<code>forbidden</code>')
    expect(page).toContain(`<form method="post" action="${gateway.url}/oauth/logout/?next=%2Fadmins%2F&#38;switch=demo">`)
  })
})

describe('a user name that is an unverified e-mail address, or not one address', () => {
  const google = { user: 'email', email: 'email', name: 'name', groups: 'groups' }
  const defaults = { user: 'sub', email: 'email', name: 'name', groups: 'groups' }
  it.each([
    ['user: email, email_verified false', true, google, { email: 'eve@x.test', email_verified: false }],
    ['user: email, email_verified "false"', true, google, { email: 'eve@x.test', email_verified: 'false' }],
    ['user: email, email_verified " FALSE "', true, google, { email: 'eve@x.test', email_verified: ' FALSE ' }],
    ['user: /email (JSON pointer)', true, { ...google, user: '/email' }, { email: 'eve@x.test', email_verified: false }],
    ['user and email on one custom path', true, { ...defaults, user: 'mail', email: 'mail' }, { mail: 'eve@x.test', email_verified: false }],
    ['user: email, email_verified true', false, google, { email: 'eve@x.test', email_verified: true }],
    ['user: email, email_verified absent (counts as verified, as for headers and rules)', false, google, { email: 'eve@x.test' }],
    ['user: email, email_verified 0 (not the yes OIDC defines)', true, google, { email: 'eve@x.test', email_verified: 0 }],
    ['user: email, email_verified null', true, google, { email: 'eve@x.test', email_verified: null }],
    ['user: email, email_verified "TRUE"', false, google, { email: 'eve@x.test', email_verified: 'TRUE' }],
    ['user: sub, email_verified false (the address is not the name)', false, defaults, { sub: 'eve', email: 'eve@x.test', email_verified: false }],
    ['user: email, two @ ("a@corp.example"@attacker.example)', true, google, { email: '"a@corp.example"@attacker.example' }],
    ['user: email, two addresses', true, google, { email: 'a@corp.example,b@attacker.example' }],
    ['user: email, a display name', true, google, { email: 'Alice <a@corp.example>' }],
    ['user: email, nothing before the @', true, google, { email: '@corp.example' }],
    ['user: email, a stray quote', true, google, { email: 'a"b@corp.example' }],
    ['user: email, a quoted local part around the whole of it', false, google, { email: '"alice"@corp.example' }],
    ['user: email, no @ at all (a name, not an address read apart)', false, google, { email: 'alice' }],
    ['user: email, only a fullwidth @ (U+FF20: an @ to a reader folding it)', true, google, { email: 'alice\uff20corp.example' }],
    ['user: email, an encoded-word holding an @', true, google, { email: '=?utf-8?q?a=40corp.example?=@attacker.example' }],
    ['user: sub, two @ in the address (the address is not the name)', false, defaults, { sub: 'eve', email: '"a@corp.example"@attacker.example' }],
    ['user: sub, a sub holding two @ (whatever claim names the user)', true, defaults, { sub: '"a@corp.example"@attacker.example' }],
    ['user: sub, a sub that is one address', false, defaults, { sub: 'alice@corp.example' }],
  ] as const)('%s: refused %s', (_name, refused, mapping, claims) => {
    expect(untakenUser(claims, mapping) !== undefined).toBe(refused)
  })

  // An application splitting X-Forwarded-User at its first `@` read corp.example" of it, while rules read attacker.example.
  it('ends a sign-in whose user is an address holding two @ in 403 forbidden, and makes no session', async () => {
    stub.userinfo = { contact: { email: '"a@corp.example"@attacker.example' } }
    const browser = new Browser()
    const login = await browser.fetch(`${gateway.url}/oauth/login/plainmail/?next=/oauth/`)
    const state = new URL(login.headers.get('location')!).searchParams.get('state')!
    const response = await browser.fetch(`${gateway.url}/oauth/authorized/plainmail/?code=c&state=${encodeURIComponent(state)}`)
    expect(response.status).toBe(403)
    expect(await response.text()).toContain('the user name the provider gives holds an @ but is not one e-mail address')
    expect((await browser.fetch(`${gateway.url}/oauth/userinfo/`, { headers: json })).status).toBe(401)
  })

  it('ends the sign-in in 403 forbidden with a plain message, and makes no session', async () => {
    const eve = new Browser()
    const response = await eve.navigate(`${gateway.url}/oauth/login/byemail/?next=/oauth/`, { login: 'eve' })
    expect(response.status).toBe(403)
    const page = await response.text()
    expect(page).toContain('<code>forbidden</code>')
    expect(page).toContain('the provider has not verified this e-mail address')
    const info = await eve.fetch(`${gateway.url}/oauth/userinfo/`, { headers: json })
    expect(info.status).toBe(401)
    expect((await info.json() as { error: string }).error).toBe('unauthenticated')
  })

  it('signs in a verified address as the user', async () => {
    const alice = new Browser()
    expect((await alice.navigate(`${gateway.url}/oauth/login/byemail/?next=/oauth/`, { login: 'alice' })).status).toBe(200)
    const info = await (await alice.fetch(`${gateway.url}/oauth/userinfo/`, { headers: json })).json() as { identities: Record<string, { sub: string }> }
    expect(info.identities.byemail?.sub).toBe('alice@example.test')
  })
})

describe('public paths', () => {
  it('pass without a session for the listed methods and paths only', async () => {
    expect((await fetch(`${gateway.url}/app/static/logo.png`, { headers: json })).status).toBe(200)
    expect((await fetch(`${gateway.url}/app/anything/here`, { method: 'OPTIONS', headers: json })).status).toBe(200)
    expect((await fetch(`${gateway.url}/app/static/logo.png`, { method: 'POST', headers: json })).status).toBe(401)
    expect((await fetch(`${gateway.url}/app/private`, { headers: json })).status).toBe(401)
    // On a public path of a protected route, a client's own Authorization is not passed on.
    const request = await seen(await fetch(`${gateway.url}/app/static/x.css`, { headers: { ...json, authorization: 'Bearer forged' } }))
    expect(request.headers.authorization).toBeUndefined()
  })
})

describe('ID token validation', () => {
  /** Runs a sign-in at the OIDC stub whose token response carries the ID token `forge` makes. */
  async function signInWith (forge: (nonce: string) => Promise<string>): Promise<Response> {
    const browser = new Browser()
    const login = await browser.fetch(`${gateway.url}/oauth/login/oidcstub/?next=/oidcstub/`)
    const authorize = new URL(login.headers.get('location')!)
    const nonce = authorize.searchParams.get('nonce')!
    expect(nonce).toMatch(/^[A-Za-z0-9_-]{43}$/)
    stub.extra = { id_token: await forge(nonce) }
    const response = await browser.fetch(`${gateway.url}/oauth/authorized/oidcstub/?code=c&state=${encodeURIComponent(authorize.searchParams.get('state')!)}`, { headers: json })
    expect(browser.cookies.has('gw_session')).toBe(response.status === 302)
    return response
  }
  const now = () => Math.floor(Date.now() / 1000)
  const claims = (nonce: string) => ({ iss: stub.url, aud: 'stub-client', sub: 'u1', iat: now(), exp: now() + 300, nonce })

  it('accepts a valid ID token', async () => {
    stub.userinfo = { sub: 'u1', email: 'u1@example.test' }
    expect((await signInWith((nonce) => stub.signIdToken(claims(nonce)))).status).toBe(302)
  })

  it.each([
    ['a wrong signature', (nonce: string) => stub.signIdToken(claims(nonce), { foreignKey: true })],
    ['a wrong audience', (nonce: string) => stub.signIdToken({ ...claims(nonce), aud: 'someone-else' })],
    ['an expired token', (nonce: string) => stub.signIdToken({ ...claims(nonce), iat: now() - 600, exp: now() - 300 })],
    ['a wrong nonce', (nonce: string) => stub.signIdToken({ ...claims(nonce), nonce: `${nonce}x` })],
    ['a wrong issuer', (nonce: string) => stub.signIdToken({ ...claims(nonce), iss: 'https://evil.example' })],
    ['no ID token at all', async () => ''],
  ])('fails the sign-in with 502 token_exchange_failed and no session for %s', async (_name, forge) => {
    const response = await signInWith(forge)
    expect(response.status).toBe(502)
    expect((await response.json() as { error: string }).error).toBe('token_exchange_failed')
  })
})
