// Token refresh: an expired access token (30 s early) is refreshed with its refresh token before the
// request is proxied, exactly once per session and provider even across gateway instances; a
// refused refresh drops the token (sign in again), a failed one answers 502 and keeps it; without a
// refresh token an expired token means signing in again; a session signed out while its refresh
// waits on the provider stays signed out when the answer lands. Real Redis, real oidc-provider; the
// stub token endpoint only for the refused, failing and held cases.
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest'
import { Browser } from '../helpers/browser.js'
import { oidcClient, startGateway, type TestGateway } from '../helpers/gateway.js'
import { freePort, waitFor } from '../helpers/net.js'
import { startOidcProvider, type TestProvider } from '../helpers/oidc.js'
import { startRedis, type TestRedis } from '../helpers/redis.js'
import { startTokenStub, type TokenStub } from '../helpers/token-stub.js'
import { startUpstream, type SeenRequest, type Upstream } from '../helpers/upstream.js'

const json = { accept: 'application/json' }
/** Short-lived tokens: usable for 3 s of the gateways' clock (30 s skew), then expired. */
const SHORT_S = 33
/** The gateways' clock: the wall clock plus an offset the tests move (no waiting for expiry). */
const clock = { offset: 0, now: () => Date.now() + clock.offset }
/** Moves the gateways' clock past the short tokens' expiry. */
const expireShortTokens = () => { clock.offset += 4000 }

let redis: TestRedis
let op: TestProvider
let stub: TokenStub
let upstream: Upstream
let a: TestGateway
let b: TestGateway
let refreshGrants = 0

beforeAll(async () => {
  redis = await startRedis()
  upstream = await startUpstream()
  stub = await startTokenStub()
  const [portA, portB] = [await freePort(), await freePort()]
  const urls = [`http://127.0.0.1:${portA}`, `http://127.0.0.1:${portB}`]
  // Tokens from the code exchange live SHORT_S, so they count as expired (30 s skew) after
  // SHORT_S - 30 s; refreshed ones live an hour.
  op = await startOidcProvider([
    { client_id: 'rt-client', client_secret: 'rt-secret', redirect_uris: urls.map((url) => `${url}/oauth/authorized/demo/`) },
  ], { accessTokenTtl: (_client, grantType) => grantType === 'refresh_token' ? 3600 : SHORT_S })
  op.provider.on('grant.success', (ctx) => { if (ctx.oidc.params?.grant_type === 'refresh_token') refreshGrants++ })
  const shared = (port: number, url: string) => ({
    server: { port, baseUrl: url },
    store: { type: 'redis', url: redis.url },
    providers: {
      demo: oidcClient(op.issuer, 'rt-client', 'rt-secret', 'openid offline_access'),
      stub: { clientId: 'stub-client', clientSecret: 'stub-secret', authorizeUrl: `${stub.url}/authorize`, tokenUrl: `${stub.url}/token`, scope: 'read' },
    },
    routes: [
      { path: '/app/', upstream: upstream.url, provider: 'demo' },
      { path: '/stub/', upstream: upstream.url, provider: 'stub' },
    ],
  })
  a = await startGateway(shared(portA, urls[0]!), { deps: { clock } })
  b = await startGateway(shared(portB, urls[1]!), { deps: { clock } })
})

afterAll(async () => {
  await Promise.all([a?.close(), b?.close()])
  await Promise.all([op?.close(), stub?.close(), upstream?.close()])
  await redis?.release()
})

/** Signs in at the stub provider (its token response shaped by `extra`). */
async function stubSignIn (extra: Record<string, unknown>): Promise<Browser> {
  stub.mode = 'ok'
  stub.extra = extra
  const browser = new Browser()
  const login = await browser.fetch(`${a.url}/oauth/login/stub/?next=/stub/`)
  const state = new URL(login.headers.get('location')!).searchParams.get('state')!
  const callback = await browser.fetch(`${a.url}/oauth/authorized/stub/?code=c&state=${encodeURIComponent(state)}`)
  expect(callback.status).toBe(302)
  return browser
}

// Each test starts with the gateways' clock agreeing with the provider's (the wall clock).
beforeEach(() => { clock.offset = 0 })

/** Holds the stub's token answers until the returned function is called. */
function holdTokenAnswers (): () => void {
  let answer!: () => void
  stub.hold = new Promise((resolve) => { answer = resolve })
  return () => {
    stub.hold = undefined
    answer()
  }
}

/** The status `gateway` answers an API client's request to the stub route with the session cookie `cookie`. */
async function stubStatus (gateway: TestGateway, cookie: string): Promise<number> {
  const response = await fetch(`${gateway.url}/stub/after`, { headers: { ...json, cookie } })
  await response.arrayBuffer()
  return response.status
}

describe('token refresh', () => {
  it('refreshes once for 50 concurrent requests over two instances, and every request carries the new token', async () => {
    const browser = new Browser()
    const first = await browser.navigate(`${a.url}/app/`)
    const original = (await first.json() as SeenRequest).headers.authorization
    expireShortTokens()

    const before = refreshGrants
    const cookie = browser.cookieHeader(`${a.url}/app/`)!
    const responses = await Promise.all(Array.from({ length: 50 }, (_, i) =>
      fetch(`${(i % 2 === 0 ? a : b).url}/app/r${i}`, { headers: { ...json, cookie } })))
    expect(responses.map((r) => r.status)).toEqual(Array(50).fill(200))
    const tokens = new Set(await Promise.all(responses.map(async (r) => (await r.json() as SeenRequest).headers.authorization)))
    expect(refreshGrants - before).toBe(1)
    expect(tokens.size).toBe(1)
    expect([...tokens][0]).not.toBe(original)

    // The refreshed token is one the provider accepts.
    const userinfo = await fetch(`${op.issuer}/me`, { headers: { authorization: [...tokens][0]! } })
    expect(userinfo.status).toBe(200)
    const metrics = await (await fetch(`${a.url}/metrics`)).text() + await (await fetch(`${b.url}/metrics`)).text()
    expect(metrics).toMatch(/gateway_token_refreshes_total\{provider="demo",result="refreshed"\} 1/)
  })

  it('without a refresh token, an expired token means signing in again', async () => {
    const browser = await stubSignIn({ expires_in: SHORT_S })
    expect((await browser.fetch(`${a.url}/stub/`, { headers: json })).status).toBe(200)
    expireShortTokens()
    const api = await browser.fetch(`${a.url}/stub/`, { headers: json })
    expect(api.status).toBe(401)
    const page = await browser.fetch(`${b.url}/stub/`)
    expect(page.headers.get('location')).toBe(`${b.url}/oauth/login/stub/?next=%2Fstub%2F`)
    expect(stub.requests).toHaveLength(1)
  })

  it('drops the token when the provider refuses the refresh: 401 for API clients, login for browsers', async () => {
    stub.requests.length = 0
    const browser = await stubSignIn({ expires_in: SHORT_S, refresh_token: 'refresh-1' })
    expireShortTokens()
    stub.mode = 'invalid-grant'
    expect((await browser.fetch(`${a.url}/stub/`, { headers: json })).status).toBe(401)
    const refresh = new URLSearchParams(stub.requests[1]!.body)
    expect(Object.fromEntries(refresh)).toMatchObject({ grant_type: 'refresh_token', refresh_token: 'refresh-1', client_id: 'stub-client', client_secret: 'stub-secret' })
    // The token is gone: no second refresh attempt, the browser is sent to sign in.
    const page = await browser.fetch(`${b.url}/stub/`)
    expect(page.status).toBe(302)
    expect(stub.requests).toHaveLength(2)
    expect(await (await fetch(`${a.url}/metrics`)).text()).toMatch(/gateway_token_refreshes_total\{provider="stub",result="refused"\} 1/)
  })

  it('answers 502 token_exchange_failed when the refresh of an expired token fails, keeps the token, and succeeds on a later try', async () => {
    const browser = await stubSignIn({ expires_in: SHORT_S, refresh_token: 'refresh-2' })
    // Expired, not only due (one still valid goes on when its refresh fails: token-endpoint-answers.test.ts).
    clock.offset += SHORT_S * 1000
    stub.mode = 'error500'
    const failed = await browser.fetch(`${a.url}/stub/`, { headers: json })
    expect(failed.status).toBe(502)
    expect((await failed.json() as { error: string }).error).toBe('token_exchange_failed')
    stub.mode = 'ok'
    stub.extra = { expires_in: 3600 }
    const ok = await browser.fetch(`${b.url}/stub/`, { headers: json })
    expect(ok.status).toBe(200)
    expect((await ok.json() as SeenRequest).headers.authorization).toMatch(/^Bearer stub-token-\d+$/)
  })

  it.each([
    ['the refreshing instance', () => a],
    ['another instance', () => b],
  ])('a sign-out on %s while the refresh waits on the provider is not undone when the answer lands', async (_name, signOutOn) => {
    const browser = await stubSignIn({ expires_in: SHORT_S, refresh_token: 'refresh-held' })
    const cookie = browser.cookieHeader(`${a.url}/stub/`)!
    expect(await stubStatus(a, cookie)).toBe(200)
    expect(await stubStatus(b, cookie)).toBe(200)
    expireShortTokens()
    stub.extra = { expires_in: 3600, refresh_token: 'refresh-rotated' }
    const asked = stub.requests.length
    const answer = holdTokenAnswers()
    const refreshing = fetch(`${a.url}/stub/during`, { headers: { ...json, cookie } })
    await waitFor(async () => stub.requests.length > asked, 5000, 'the refresh to reach the token endpoint')

    const signOut = await fetch(`${signOutOn().url}/oauth/logout/?next=%2F`, { redirect: 'manual', headers: { cookie } })
    expect(signOut.status).toBe(302)
    // Signed out everywhere before the answer lands: the other instance hears of it through Redis's
    // broadcast, and each forgets its cached copy at the latest when session.cacheTtl (1 s) runs out.
    // Only then is a asked: while it still held the session, a request there would join the
    // refresh that is being held.
    await waitFor(async () => a.app.sessions.cached(cookie) === undefined && b.app.sessions.cached(cookie) === undefined, 2000, 'both instances to forget the session')
    expect(await stubStatus(b, cookie)).toBe(401)
    expect(await stubStatus(a, cookie)).toBe(401)
    answer()
    // The request that waited on the refresh answers as for no session, not with the new token.
    const during = await refreshing
    expect(during.status).toBe(401)
    await during.arrayBuffer()
    // And the old cookie opens nothing, on either instance, now and on the next requests.
    for (const gateway of [a, b, a, b]) expect(await stubStatus(gateway, cookie)).toBe(401)
    expect(stub.requests).toHaveLength(asked + 1)
    expect(a.logs.join('\n')).toContain('session ended during its token refresh')
  })

  it('a sign-in at another provider on the other instance while a refresh waits on the provider waits for it: the renamed session has the new refresh token, the redeemed one is never sent again', async () => {
    // Found by an outside tester: the sign-in (a new id for the session, the old one ended) was built
    // on the record read before the refresh landed; the refresh's write over the old id failed, and
    // the session went on with the refresh token the provider had just redeemed.
    const browser = await stubSignIn({ expires_in: SHORT_S, refresh_token: 'refresh-renamed' })
    const cookie = browser.cookieHeader(`${a.url}/stub/`)!
    expireShortTokens()
    stub.extra = { expires_in: 3600, refresh_token: 'refresh-after-rename' }
    const asked = stub.requests.length
    const answer = holdTokenAnswers()
    const refreshing = stubStatus(a, cookie)
    await waitFor(async () => stub.requests.length > asked, 5000, 'the refresh to reach the token endpoint')
    // The browser signs in at demo on B: let its code exchange finish, then answer the refresh.
    let exchanged = 0
    const count = (ctx: { oidc: { params?: { grant_type?: unknown } } }) => { if (ctx.oidc.params?.grant_type === 'authorization_code') exchanged++ }
    op.provider.on('grant.success', count)
    try {
      const signingIn = browser.navigate(`${b.url}/oauth/login/demo/?next=/app/`)
      await waitFor(async () => exchanged > 0, 10_000, 'the sign-in\'s code exchange')
      answer()
      const [during, signedIn] = await Promise.all([refreshing, signingIn])
      expect([during, signedIn.status]).toEqual([200, 200])
      await signedIn.arrayBuffer()
    } finally {
      op.provider.off('grant.success', count)
    }
    const renamed = browser.cookieHeader(`${b.url}/stub/`)!
    expect(renamed).not.toBe(cookie)
    expect(await stubStatus(a, renamed)).toBe(200)
    expect(await stubStatus(b, renamed)).toBe(200)
    // One refresh with refresh-renamed, and none since: the renamed session holds the new token.
    const used = stub.requests.slice(asked).map((request) => new URLSearchParams(request.body).get('refresh_token'))
    expect(used).toEqual(['refresh-renamed'])
  })

  it('logs no token, refresh token or client secret along the way', () => {
    const logs = [...a.logs, ...b.logs].join('\n')
    for (const secret of ['refresh-1', 'refresh-2', 'refresh-held', 'refresh-rotated', 'refresh-renamed', 'refresh-after-rename', 'rt-secret', 'stub-secret', 'stub-token-']) expect(logs).not.toContain(secret)
    expect(logs).toContain('token refresh refused')
  })
})
