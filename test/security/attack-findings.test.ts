// Attacks on today's surfaces that SUCCEED on the current code. Each test asserts the SAFE
// behaviour, so each fails until the fault named in its comment is fixed (see the report on branch
// h-attack). Real parts: the real router and proxy over real sockets, real Redis, the real
// authorization server (oidc-provider) for sign-ins.
import fc from 'fast-check'
import { Redis } from 'ioredis'
import { SignJWT } from 'jose'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { cameFrom } from '../../src/http/error-handler.js'
import { BACKCHANNEL_LOGOUT_EVENT } from '../../src/oauth/backchannel.js'
import { ONE_ANSWER_MS } from '../helpers/bounds.js'
import { Browser } from '../helpers/browser.js'
import { oidcClient, reserveBaseUrl, startGateway, type TestGateway } from '../helpers/gateway.js'
import { waitFor } from '../helpers/net.js'
import { gatewayClient, startOidcProvider, type TestProvider } from '../helpers/oidc.js'
import { startRedis, type TestRedis } from '../helpers/redis.js'
import { startUpstream, type Upstream } from '../helpers/upstream.js'

const json = { accept: 'application/json' }

// FINDING 1 (medium): the router and the gate match route prefixes case-sensitively, and nothing
// else looks at a path's letter case. With a protected `/admin/` and a public catch-all `/` on the
// same application (the usual "protect only the admin area" setup), `/ADMIN/x` is routed to the
// public route and proxied without any sign-in. Express (its default), ASP.NET and IIS route
// case-insensitively, so the application serves its admin area. SPEC, Security floor: "Forms that
// common upstreams read as another path ... are normalised before the decision or rejected."
describe('a protected prefix in another letter case', () => {
  let upstream: Upstream
  let gateway: TestGateway

  beforeAll(async () => {
    upstream = await startUpstream()
    gateway = await startGateway({
      store: { type: 'memory' },
      providers: {
        // Never called: nobody signs in here.
        demo: { clientId: 'c', clientSecret: 's', authorizeUrl: 'http://127.0.0.1:9/auth', tokenUrl: 'http://127.0.0.1:9/token', scope: 'profile' },
      },
      routes: [
        { path: '/admin/', upstream: upstream.url, provider: 'demo' },
        { path: '/', upstream: upstream.url, auth: 'none' },
      ],
    })
  })

  afterAll(async () => {
    await gateway?.close()
    await upstream?.close()
  })

  /** What the (case-insensitive) application would serve as its admin area, reached without credentials. */
  async function reachesAdminUnauthenticated (path: string): Promise<boolean> {
    upstream.seen.length = 0
    const response = await fetch(`${gateway.url}${path}`, { headers: json, redirect: 'manual' })
    await response.arrayBuffer()
    return upstream.seen.some((seen) => seen.url.toLowerCase().startsWith('/admin') && seen.headers.authorization === undefined)
  }

  it.each(['/ADMIN/users', '/Admin/users', '/aDmIn/', '/ADMIN', '/%41dmin/users'])('%s does not reach the application without a sign-in', async (path) => {
    // The control: the exact spelling is refused (401) before the upstream is called.
    expect(await reachesAdminUnauthenticated('/admin/users')).toBe(false)
    expect(await reachesAdminUnauthenticated(path)).toBe(false)
  })

  it('no letter-case variant of the protected prefix reaches the application unauthenticated (fast-check)', async () => {
    const variant = fc.tuple(
      fc.array(fc.boolean(), { minLength: 5, maxLength: 5 }),
      fc.constantFrom('', '/', '/users', '/x?y=1', '/a/b')
    ).map(([upper, rest]) => `/${[...'admin'].map((c, i) => (upper[i] ? c.toUpperCase() : c)).join('')}${rest}`)
    await fc.assert(fc.asyncProperty(variant, async (path) => !(await reachesAdminUnauthenticated(path))), { numRuns: 60 })
  })
})

// FINDING 2 (medium): back-channel logout does not end a session kept busy for more than 24 h.
// src/gateway.ts:97 gives the sid/sub index entries a fixed lifetime of max(session.ttl, 24h),
// set at sign-in (src/oauth/session-index.ts:48) and never renewed, while the session's own idle
// timeout slides on every request (src/session/session.ts:196, GETEX). Once the entry has expired
// the logout token names a session the gateway can no longer find: a user the provider has signed
// out (or disabled) stays signed in at the gateway for as long as the session is used.
// FINDING 3 (low): the index keeps the 64 newest sessions of a sub (session-index.ts:15, :48): a
// sub-only logout token misses the oldest ones; someone holding a stolen password signs in once,
// then 64 more times, and the first session outlives "sign this user out everywhere".
describe('back-channel logout of a long-lived or crowded subject', () => {
  let redis: TestRedis
  let client: Redis
  let op: TestProvider
  let upstream: Upstream
  let gateway: TestGateway
  let kid: string

  beforeAll(async () => {
    redis = await startRedis()
    client = new Redis(redis.url)
    upstream = await startUpstream()
    const { port, baseUrl } = await reserveBaseUrl()
    op = await startOidcProvider([gatewayClient(baseUrl, 'demo', 'c')], { logout: true })
    gateway = await startGateway({
      server: { port, baseUrl },
      // No cache: every request below reads (and so touches) the session in the store.
      session: { cacheTtl: 0 },
      store: { type: 'redis', url: redis.url },
      providers: { demo: oidcClient(op.issuer, 'c', 's', 'openid email') },
      routes: [{ path: '/app/', upstream: upstream.url, provider: 'demo' }],
    })
    kid = ((await (await fetch(`${op.issuer}/jwks`)).json()) as { keys: Array<{ kid: string }> }).keys[0]!.kid
  })

  afterAll(async () => {
    await gateway?.close()
    client?.disconnect()
    await Promise.all([op?.close(), upstream?.close()])
    await redis?.release()
  })

  /** Moves the store's clock on by `ms`: every key's remaining lifetime shrinks by it; the expired ones go. */
  async function elapse (ms: number): Promise<void> {
    for (const key of await client.keys('*')) {
      const left = await client.pttl(key)
      if (left < 0) continue
      if (left <= ms) await client.del(key)
      else await client.pexpire(key, left - ms)
    }
  }

  /** The shortest lifetime left of the back-channel logout index's keys. */
  async function logoutIndexLeftMs (): Promise<number> {
    const keys = await client.keys('*logout:*')
    expect(keys.length).toBeGreaterThan(0)
    return Math.min(...await Promise.all(keys.map(async (key) => await client.pttl(key))))
  }

  async function signedIn (login: string): Promise<string> {
    const browser = new Browser()
    expect((await browser.navigate(`${gateway.url}/app/`, { login })).status).toBe(200)
    return browser.cookies.get('gw_session')!.value
  }

  async function sessionWorks (cookie: string): Promise<boolean> {
    const response = await fetch(`${gateway.url}/app/x`, { headers: { ...json, cookie: `gw_session=${cookie}` } })
    await response.arrayBuffer()
    return response.status === 200
  }

  async function logoutToken (sub: string): Promise<string> {
    const now = Math.floor(Date.now() / 1000)
    return await new SignJWT({ iss: op.issuer, aud: 'c', iat: now, exp: now + 120, jti: crypto.randomUUID(), sub, events: { [BACKCHANNEL_LOGOUT_EVENT]: {} } })
      .setProtectedHeader({ alg: 'RS256', kid, typ: 'logout+jwt' }).sign(op.signingKey)
  }

  async function backchannelLogout (sub: string): Promise<number> {
    const response = await fetch(`${gateway.url}/oauth/backchannel-logout/demo/`, {
      method: 'POST', headers: { 'content-type': 'application/x-www-form-urlencoded' }, body: `logout_token=${await logoutToken(sub)}`,
    })
    await response.arrayBuffer()
    return response.status
  }

  it('ends a session that has been in use for 28 hours (used every 7 hours, well within session.ttl 8h)', async () => {
    const cookie = await signedIn('busy')
    for (let i = 0; i < 4; i++) {
      await elapse(7 * 3600_000)
      expect(await sessionWorks(cookie)).toBe(true)
      // The session's use renews its logout index off the request's path: the next elapse must
      // not read the index's lifetime before that renewal has landed.
      await waitFor(async () => await logoutIndexLeftMs() > 7 * 3600_000, ONE_ANSWER_MS, 'the logout index to be renewed')
    }
    expect(await backchannelLogout('busy')).toBe(200)
    expect(await sessionWorks(cookie), 'the session after the logout token').toBe(false)
  })

  it('a sub-only logout token ends every session of the subject, the oldest of 65 included', async () => {
    // One browser signed in at the provider: each further sign-in at the gateway is a new session
    // of the same subject, without the provider's login and consent forms each time.
    const browser = new Browser()
    const signInAgain = async () => {
      browser.cookies.delete('gw_session')
      expect((await browser.navigate(`${gateway.url}/app/`, { login: 'crowd' })).status).toBe(200)
      return browser.cookies.get('gw_session')!.value
    }
    const first = await signInAgain()
    const others: string[] = []
    for (let i = 0; i < 64; i++) others.push(await signInAgain())
    expect(new Set([first, ...others]).size, 'a session per sign-in').toBe(65)
    expect(await backchannelLogout('crowd')).toBe(200)
    expect(await sessionWorks(others.at(-1)!), 'the newest session').toBe(false)
    expect(await sessionWorks(first), 'the oldest session').toBe(false)
  }, 120_000)
})

// FINDING 4 (low): `cameFrom` (src/http/error-handler.ts:48) keeps the sign-in and sign-out
// endpoints out of "Go back" by comparing the Referer's raw path with `/oauth/`, but the gateway
// decodes percent-encoded unreserved characters before routing (src/config/canonical.ts): a Referer
// path `/%6Fauth/logout/?next=/` passes the check, and the "Go back" link on the error page then
// signs the person out (a same-origin GET of /oauth/logout/) or replays a callback address.
describe('cameFrom refuses the gateway\'s own endpoints however they are spelled', () => {
  const own = 'https://gw.example.test'
  it.each([
    ['the sign-out endpoint, an encoded letter', `${own}/%6Fauth/logout/?next=/`],
    ['the sign-out endpoint, upper-case hex', `${own}/%6fauth/logout/`],
    ['the sign-in callback, an encoded letter', `${own}/o%61uth/authorized/demo/?code=abc&state=x`],
  ])('%s', (_what, referer) => {
    expect(cameFrom(referer, own, '/broken')).toBeUndefined()
  })
})
