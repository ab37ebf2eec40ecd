// A store that answers reads but refuses writes: a real redis-server at its `maxmemory` with
// `noeviction` (OOM), made a replica of nothing (READONLY), and given an ACL that lets the gateway
// write its refresh locks only (NOPERM on the session record), set at run time. The refusal is
// logged at warn with Redis's own text, one line per reason per interval with the count of those
// left out, and counted by reason; a session whose access token is due for a refresh but still
// valid keeps passing with that token while the refresh cannot be written; sign-ins are refused
// (503); once the store writes again the token is refreshed; a refresh the provider answered but
// whose result cannot be stored serves its request with the new token. Time is the gateway's
// injected clock.
import { readFile } from 'node:fs/promises'
import { Redis } from 'ioredis'
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest'
import { COMMAND_REFUSAL_LOG_INTERVAL_MS } from '../../src/store/command-refusal-log.js'
import { Browser, signIn as signInAt } from '../helpers/browser.js'
import { oidcClient, reserveBaseUrl, startGateway, type TestGateway } from '../helpers/gateway.js'
import { metricValue } from '../helpers/metrics.js'
import { refusedUrl } from '../helpers/net.js'
import { startOidcProvider, type TestProvider } from '../helpers/oidc.js'
import { startRedis, type TestRedis } from '../helpers/redis.js'
import { startUpstream, type SeenRequest, type Upstream } from '../helpers/upstream.js'

/** Access tokens from a sign-in live 60 s: due for a refresh (30 s early) from 30 s on, expired at 60 s. */
const TOKEN_S = 60
/** The gateway's clock: the wall clock plus an offset the test moves. */
const clock = { offset: 0, now: () => Date.now() + clock.offset }
const at = (seconds: number) => { clock.offset = seconds * 1000 }

let redis: TestRedis
let admin: Redis
let op: TestProvider
let upstream: Upstream
let gateway: TestGateway
let refreshGrants = 0

beforeAll(async () => {
  redis = await startRedis('spawn')
  admin = new Redis(redis.url)
  upstream = await startUpstream()
  const { port, baseUrl } = await reserveBaseUrl()
  op = await startOidcProvider([{ client_id: 'c', client_secret: 's', redirect_uris: [`${baseUrl}/oauth/authorized/demo/`] }],
    // It rotates refresh tokens: a redeemed one used again is refused and ends the grant.
    { accessTokenTtl: (_client, grantType) => grantType === 'refresh_token' ? 3600 : TOKEN_S, rotateRefreshTokens: true })
  op.provider.on('grant.success', (ctx) => { if (ctx.oidc.params?.grant_type === 'refresh_token') refreshGrants++ })
  gateway = await startGateway({
    server: { port, baseUrl },
    // No session cache: every request reads the store.
    session: { cacheTtl: '0s' },
    store: { type: 'redis', url: redis.url },
    providers: { demo: oidcClient(op.issuer, 'c', 's', 'openid offline_access') },
    routes: [{ path: '/app/', upstream: upstream.url, provider: 'demo' }],
  }, { deps: { clock } })
})

afterAll(async () => {
  await gateway?.close()
  await op?.close()
  await upstream?.close()
  admin?.disconnect()
  await redis?.release()
})

beforeEach(async () => {
  at(0)
  await admin.config('SET', 'maxmemory', '0')
  await admin.call('REPLICAOF', 'NO', 'ONE')
})

/** The user the gateway signs in as: the URL's (a spawned server's own user), else Redis's default. */
const gatewayUser = () => new URL(redis.url).username || 'default'

interface Line { level: number, msg: string, refusal?: string, reason?: string, suppressed?: number, [field: string]: unknown }
const refusalLines = () => gateway.logs.map((line) => JSON.parse(line) as Line).filter((line) => line.msg.startsWith('session store refused a command'))

async function signIn (): Promise<{ cookie: string, token: string }> {
  const { cookie, response } = await signInAt(`${gateway.url}/app/`)
  return { cookie, token: (await response.json() as SeenRequest).headers.authorization as string }
}

/** Status and the bearer token the upstream got (if it was reached). */
async function ask (cookie: string): Promise<{ status: number, token?: string, error?: string }> {
  const response = await fetch(`${gateway.url}/app/x`, { headers: { cookie, accept: 'application/json' } })
  const body = await response.json() as SeenRequest & { error?: string }
  return response.status === 200 ? { status: 200, token: body.headers.authorization as string } : { status: response.status, error: body.error }
}

/** The line as docs/operations.md shows it: the test's port as 6379; time, pid and hostname left out. */
function asDocumented (line: Line): Record<string, unknown> {
  const { time: _time, pid: _pid, hostname: _hostname, ...rest } = line
  return JSON.parse(JSON.stringify(rest).replaceAll(`:${new URL(redis.url).port}`, ':6379')) as Record<string, unknown>
}

async function expectDocumented (line: Line): Promise<void> {
  const text = await readFile('docs/operations.md', 'utf8')
  const documented = [...text.matchAll(/^\{"level":.*\}$/gm)].map(([doc]) => JSON.parse(doc) as Record<string, unknown>)
  expect(documented).toContainEqual(asDocumented(line))
}

async function metrics (): Promise<string> {
  return await (await fetch(`${gateway.url}/metrics`)).text()
}

describe('writes refused (OOM under noeviction)', () => {
  it('lets a still-valid token pass while its refresh cannot be written, logs the refusal once per interval, counts it, and refreshes once writes work', async () => {
    const { cookie, token } = await signIn()
    const lines = refusalLines().length
    expect(lines).toBe(0)
    const unavailable = metricValue(await metrics(), 'gateway_store_unavailable_requests_total')!
    await admin.config('SET', 'maxmemory-policy', 'noeviction')
    await admin.config('SET', 'maxmemory', '1')

    // Reads work: a fresh token passes.
    expect(await ask(cookie)).toEqual({ status: 200, token })
    // Due for a refresh (25 s left): the lock write is refused; the request goes on with the token it has.
    at(TOKEN_S - 25)
    const grants = refreshGrants
    for (let i = 0; i < 5; i++) expect(await ask(cookie)).toEqual({ status: 200, token })
    expect(refreshGrants).toBe(grants)

    const first = refusalLines()
    expect(first).toHaveLength(1)
    expect(first[0]).toMatchObject({ level: 40, refusal: 'OOM', suppressed: 0 })
    expect(first[0]!.reason).toBe('OOM command not allowed when used memory > \'maxmemory\'.')
    await expectDocumented(first[0]!)
    // A sign-in must write: it is refused, with the store's 503.
    const refused = await new Browser().navigate(`${gateway.url}/app/`)
    expect(refused.status).toBe(503)

    // One interval later (the gateway's clock), the next refusal is logged with the count left out.
    at(TOKEN_S - 25 + COMMAND_REFUSAL_LOG_INTERVAL_MS / 1000)
    expect(await ask(cookie)).toEqual({ status: 200, token })
    const second = refusalLines()
    expect(second).toHaveLength(2)
    expect(second[1]).toMatchObject({ level: 40, refusal: 'OOM' })
    expect(second[1]!.suppressed).toBeGreaterThanOrEqual(4)
    const text = await metrics()
    expect(metricValue(text, 'gateway_store_refusals_total{reason="OOM"}')).toBeGreaterThanOrEqual(1 + second[1]!.suppressed! + 1)
    expect(metricValue(text, 'gateway_store_refusals_total{reason="READONLY"}')).toBe(0)
    // Of the requests, only the sign-in was answered 503: the refused commands are not requests.
    expect(metricValue(text, 'gateway_store_unavailable_requests_total')).toBe(unavailable + 1)

    // Expired: a refresh is needed, and the store cannot take it.
    at(TOKEN_S + 1)
    expect(await ask(cookie)).toEqual({ status: 503, error: 'session_store_unavailable' })
    expect(metricValue(await metrics(), 'gateway_store_unavailable_requests_total')).toBe(unavailable + 2)

    // Writes work again: the token is refreshed.
    await admin.config('SET', 'maxmemory', '0')
    const after = await ask(cookie)
    expect(after.status).toBe(200)
    expect(after.token).not.toBe(token)
    expect(refreshGrants).toBe(grants + 1)
  })
})

describe('writes refused (READONLY: a replica)', () => {
  it('reads the session without renewing it and lets a still-valid token pass, logging READONLY', async () => {
    const { cookie, token } = await signIn()
    // A replica of a master that is not there: it keeps its data and refuses every write.
    const absent = new URL(await refusedUrl())
    await admin.call('REPLICAOF', absent.hostname, absent.port)

    // Fresh (2 s before it is due), then due 7 s later: both within one refusal-line interval.
    at(TOKEN_S - 32)
    expect(await ask(cookie)).toEqual({ status: 200, token })
    at(TOKEN_S - 25)
    expect(await ask(cookie)).toEqual({ status: 200, token })
    const readonly = refusalLines().filter((line) => line.refusal === 'READONLY')
    expect(readonly).toHaveLength(1)
    expect(readonly[0]!.reason).toBe('READONLY You can\'t write against a read only replica.')
    await expectDocumented(readonly[0]!)
    expect(metricValue(await metrics(), 'gateway_store_refusals_total{reason="READONLY"}')).toBeGreaterThanOrEqual(2)
  })
})

describe('writes refused (NOPERM: an ACL that lets the gateway write its refresh locks only)', () => {
  it('refreshes, and when the new tokens cannot be stored the request goes on with them; the next requests use them, never the redeemed refresh token', async () => {
    const { cookie, token } = await signIn()
    // The test's own client keeps every permission as another user; the gateway's (its URL's
    // user) may read every key and write only refresh locks.
    await admin.call('ACL', 'SETUSER', 'test-admin', 'on', '>test-admin-password', '~*', '&*', '+@all')
    await admin.call('AUTH', 'test-admin', 'test-admin-password')
    await admin.call('ACL', 'SETUSER', gatewayUser(), 'resetkeys', '~gw:refresh:*', '%R~*')
    try {
      at(TOKEN_S - 25)
      const grants = refreshGrants
      const answer = await ask(cookie)
      expect(answer.status).toBe(200)
      expect(refreshGrants).toBe(grants + 1)
      expect(answer.token).not.toBe(token)
      const noperm = refusalLines().filter((line) => line.refusal === 'NOPERM')
      expect(noperm).toHaveLength(1)
      expect(noperm[0]!.reason).toMatch(/^NOPERM /)
      expect(gateway.logs.some((line) => line.includes('token refreshed but not stored'))).toBe(true)
      expect(metricValue(await metrics(), 'gateway_store_refusals_total{reason="NOPERM"}')).toBeGreaterThanOrEqual(2)
      // Still refused: the next request goes on with the new token, not a second refresh.
      expect(await ask(cookie)).toEqual({ status: 200, token: answer.token })
      expect(refreshGrants).toBe(grants + 1)
    } finally {
      await admin.call('ACL', 'SETUSER', gatewayUser(), 'resetkeys', '~*')
    }
    // The store writes again. An outside tester's finding: the store still held the refresh token
    // the provider had redeemed; past the old access token's expiry it was sent again, the provider
    // (rotating refresh tokens) refused it and ended the grant, and the person had to sign in again.
    at(TOKEN_S + 1)
    const kept = await ask(cookie)
    expect(kept.status).toBe(200)
    // ...and the new tokens are in the store now: past their own expiry, a refresh with the new refresh token.
    at(3600 + 60)
    const grants = refreshGrants
    const later = await ask(cookie)
    expect(later.status).toBe(200)
    expect(refreshGrants).toBe(grants + 1)
  })
})

describe("writes refused after the session's own (NOPERM on a person's index)", () => {
  it('a sign-in is 503 with no session cookie, and the session it started does not stay', async () => {
    // The gateway (its URL's user) may write every key but a person's index: its session record
    // is written (and acknowledged), then the index that sign-out everywhere reads is refused.
    await admin.call('ACL', 'SETUSER', 'test-admin', 'on', '>test-admin-password', '~*', '&*', '+@all')
    await admin.call('AUTH', 'test-admin', 'test-admin-password')
    await admin.call('ACL', 'SETUSER', gatewayUser(), 'resetkeys', '%R~*', '%W~gw:[^p]*')
    try {
      const sessions = new Set(await admin.keys('gw:session:*'))
      const browser = new Browser()
      const response = await browser.navigate(`${gateway.url}/app/`)
      expect(response.status).toBe(503)
      expect(browser.cookieHeader(`${gateway.url}/app/`) ?? '').not.toContain('gw_session=')
      expect((await admin.keys('gw:session:*')).filter((key) => !sessions.has(key))).toEqual([])
    } finally {
      await admin.call('ACL', 'SETUSER', gatewayUser(), 'resetkeys', '~*')
    }
  })
})
