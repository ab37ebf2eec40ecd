// The whole flow over real sockets: a browser-like client opens a protected route, signs in at a
// real oidc-provider (login and consent), comes back through the callback, and reaches the
// upstream with a bearer token that the provider's userinfo endpoint accepts.
import { Redis } from 'ioredis'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { Sealer } from '../src/session/seal.js'
import { decodeRecord } from '../src/session/sealed-record.js'
import { Browser } from './helpers/browser.js'
import { metricValue } from './helpers/metrics.js'
import { reserveBaseUrl, startGateway, TEST_SECRET, type TestGateway } from './helpers/gateway.js'
import { startOidcProvider, type TestProvider } from './helpers/oidc.js'
import { startRedis, type TestRedis } from './helpers/redis.js'
import { startUpstream, type Upstream } from './helpers/upstream.js'

const CLIENT_SECRET = 'e2e-client-secret-value-9f8e7d6c5b4a'

describe('end to end: sign-in through oidc-provider, Redis sessions, bearer-injecting proxy', () => {
  let redis: TestRedis
  let op: TestProvider
  let upstream: Upstream
  let gateway: TestGateway
  /** The gateway's clock: the wall clock plus an offset a test moves (the session cache's 1 s window). */
  const clock = { offset: 0, now: () => Date.now() + clock.offset }

  beforeAll(async () => {
    redis = await startRedis()
    upstream = await startUpstream()
    const { port, baseUrl } = await reserveBaseUrl()
    op = await startOidcProvider([{ client_id: 'e2e', client_secret: CLIENT_SECRET, redirect_uris: [`${baseUrl}/oauth/authorized/demo/`] }])
    gateway = await startGateway({
      server: { port, baseUrl },
      store: { type: 'redis', url: redis.url },
      providers: {
        demo: { clientId: 'e2e', clientSecret: CLIENT_SECRET, issuer: op.issuer, authorizeUrl: `${op.issuer}/auth`, tokenUrl: `${op.issuer}/token`, scope: 'openid profile email' },
      },
      routes: [{ path: '/app/', upstream: upstream.url, provider: 'demo', rewritePrefix: '/' }],
    }, { deps: { clock } })
  })

  afterAll(async () => {
    await gateway?.close()
    await op?.close()
    await upstream?.close()
    await redis?.release()
  })

  it('signs in and proxies with a bearer token the provider accepts, and logs no secret', async () => {
    const browser = new Browser()
    const response = await browser.navigate(`${gateway.url}/app/hello?x=1`, { login: 'alice' })
    expect(response.status).toBe(200)
    const seen = await response.json() as { url: string, headers: Record<string, string> }
    expect(seen.url).toBe('/hello?x=1')

    // The path went: protected route -> gateway login -> provider -> ... -> callback -> next.
    const hops = browser.hops.map((hop) => new URL(hop.url).pathname)
    expect(hops[0]).toBe('/app/hello')
    expect(hops[1]).toBe('/oauth/login/demo/')
    expect(hops).toContain('/oauth/authorized/demo/')

    const authorization = seen.headers.authorization!
    expect(authorization).toMatch(/^Bearer \S+$/)
    const userinfo = await fetch(`${op.issuer}/me`, { headers: { authorization } })
    expect(userinfo.status).toBe(200)
    expect(await userinfo.json()).toMatchObject({ sub: 'alice' })

    // Nothing secret in the logs: client secret, code, state, access and refresh tokens, cookie values.
    const callback = browser.hops.find((hop) => hop.url.includes('/oauth/authorized/'))!
    const params = new URL(callback.url).searchParams
    const client = new Redis(redis.url)
    const cookie = browser.cookies.get('gw_session')!.value
    const sealer = new Sealer(TEST_SECRET)
    const record = decodeRecord(sealer, cookie, await client.getBuffer(`gw:session:${sealer.idFor('session', cookie)}`))!
    const refreshToken = record.tokens.demo!.refresh_token!
    expect(refreshToken.length).toBeGreaterThan(10)
    // What the token answer brought and nothing reads (token_type, scope) is not kept.
    expect(Object.keys(record.tokens.demo!).sort()).toEqual(['access_token', 'expires_at', 'refresh_token'])
    const secrets = [CLIENT_SECRET, TEST_SECRET, params.get('code')!, params.get('state')!, authorization.slice(7), refreshToken,
      ...[...browser.cookies.values()].map((c) => c.value)]
    const logs = gateway.logs.join('\n')
    for (const secret of secrets) expect(logs).not.toContain(secret)
    expect(logs).toContain('sign-in succeeded')
    // Every line about a request carries its request id.
    const requestLines = gateway.logs.map((line) => JSON.parse(line) as Record<string, unknown>).filter((line) => /^(request completed|sign-in)/.test(String(line.msg)))
    expect(requestLines.length).toBeGreaterThan(3)
    for (const line of requestLines) expect(line.reqId).toMatch(/^req-/)

    // Neither the token nor the cookie is readable from the raw Redis keys and values.
    const keys = await client.keys('gw:*')
    expect(keys.length).toBeGreaterThan(0)
    for (const key of keys) {
      expect(key).not.toContain(cookie)
      const values = await client.type(key) === 'zset' ? (await client.zrangeBuffer(key, 0, -1)) : [(await client.getBuffer(key))!]
      for (const value of values) expect(value.includes(authorization.slice(7))).toBe(false)
    }
    await client.quit()
  })

  it('renews the session\'s idle lifetime whenever it reads the store (at least once a second in use)', async () => {
    const browser = new Browser()
    await browser.navigate(`${gateway.url}/app/`, { login: 'bob' })
    const client = new Redis(redis.url)
    const sessionKeys = await client.keys('gw:session:*')
    for (const key of sessionKeys) await client.pexpire(key, 10_000)
    // Past the session cache's window: the next request reads (and renews) the record in the store.
    clock.offset += 1100
    expect((await browser.fetch(`${gateway.url}/app/`, { headers: { accept: 'application/json' } })).status).toBe(200)
    const ttls = await Promise.all(sessionKeys.map((key) => client.pttl(key)))
    // Exactly bob's session went back to the configured 8 h; the others kept their 10 s.
    expect(ttls.filter((ttl) => ttl > 8 * 3_600_000 - 60_000)).toHaveLength(1)
    expect(ttls.filter((ttl) => ttl <= 10_000)).toHaveLength(sessionKeys.length - 1)
    await client.quit()
  })

  it('serves a busy session from memory: the store is read about once a second, not per request', async () => {
    const browser = new Browser()
    await browser.navigate(`${gateway.url}/app/`, { login: 'frank' })
    const client = new Redis(redis.url)
    const reads = async () => Number(/cmdstat_getex:calls=(\d+)/.exec(await client.info('commandstats'))?.[1] ?? 0)
    const before = await reads()
    for (let i = 0; i < 30; i++) expect((await browser.fetch(`${gateway.url}/app/`, { headers: { accept: 'application/json' } })).status).toBe(200)
    expect(await reads() - before).toBeLessThanOrEqual(2)
    await client.quit()
  })

  it('counts sign-ins, proxied requests, upstream latency and failures on /metrics', async () => {
    const browser = new Browser()
    await browser.navigate(`${gateway.url}/app/`, { login: 'erin' })
    await fetch(`${gateway.url}/oauth/authorized/demo/?code=x&state=forged`, { headers: { accept: 'application/json' } })
    await fetch(`${gateway.url}/app/`, { headers: { accept: 'application/json' } })
    const response = await fetch(`${gateway.url}/metrics`)
    expect(response.headers.get('content-type')).toMatch(/^text\/plain/)
    const text = await response.text()
    const value = (series: string) => metricValue(text, series)
    expect(value('gateway_signins_started_total{provider="demo"}')).toBeGreaterThanOrEqual(3)
    expect(value('gateway_signins_succeeded_total{provider="demo"}')).toBeGreaterThanOrEqual(3)
    expect(value('gateway_signins_failed_total{provider="demo",reason="invalid_state"}')).toBe(1)
    expect(value('gateway_proxied_requests_total{route="/app",status_class="2xx"}')).toBeGreaterThanOrEqual(3)
    expect(value('gateway_proxied_requests_total{route="/app",status_class="4xx"}')).toBeGreaterThanOrEqual(1)
    expect(value('gateway_upstream_duration_seconds_count{route="/app"}')).toBeGreaterThanOrEqual(3)
    expect(text).toMatch(/^process_cpu_user_seconds_total /m)
    expect(text).toContain('gateway_store_errors_total 0')
  })
})
