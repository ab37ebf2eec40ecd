// What an operator sees of machine clients' tokens: gateway_bearer_tokens_total by route and result,
// a `bearer token refused` line per refused token (info for the first of a burst, debug for the
// rest, info again after a minute with how many went to debug), and the request line's
// `credential` that tells a CI job from a person. A real authorization server issuing
// client-credentials tokens, real Redis, a real upstream; the gateway's clock is the test's.
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { Browser } from '../helpers/browser.js'
import { oidcClient, reserveBaseUrl, startGateway, type TestGateway } from '../helpers/gateway.js'
import { CI, clientCredentialsToken, RESOURCES, startMachineProvider } from '../helpers/machine.js'
import { metricValue } from '../helpers/metrics.js'
import type { TestProvider } from '../helpers/oidc.js'
import { startRedis, type TestRedis } from '../helpers/redis.js'
import { startUpstream, type Upstream } from '../helpers/upstream.js'

let redis: TestRedis
let upstream: Upstream
let op: TestProvider
let gateway: TestGateway
let now = Date.now()
/** Every token a test sent: none may appear in a log line or in /metrics. */
const sent: string[] = []

beforeAll(async () => {
  redis = await startRedis()
  upstream = await startUpstream()
  const { port, baseUrl } = await reserveBaseUrl()
  // Ledger tokens as JWTs here: a valid token for another audience (wrong_audience).
  op = await startMachineProvider(baseUrl, { resources: { ...RESOURCES, 'api://ledger': { scope: 'ledger.read' } } })
  gateway = await startGateway({
    server: { port, baseUrl },
    store: { type: 'redis', url: redis.url },
    providers: { demo: oidcClient(op.issuer, 'c', 's', 'openid email groups') },
    routes: [
      { path: '/orders/', upstream: upstream.url, provider: 'demo', bearer: { audience: 'api://orders', scopes: ['orders.read'] } },
      { path: '/burst/', upstream: upstream.url, provider: 'demo', bearer: { audience: 'api://orders' } },
      { path: '/people/', upstream: upstream.url, provider: 'demo' },
    ],
  }, { deps: { clock: { now: () => now } } })
})

afterAll(async () => {
  await gateway?.close()
  await Promise.all([op?.close(), upstream?.close()])
  await redis?.release()
})

async function call (path: string, token: string): Promise<number> {
  sent.push(token)
  const response = await fetch(`${gateway.url}${path}`, { headers: { authorization: `Bearer ${token}`, accept: 'application/json' } })
  await response.arrayBuffer()
  return response.status
}

async function scrape (): Promise<string> {
  return await (await fetch(`${gateway.url}/metrics`)).text()
}

const series = (route: string, result: string) => `gateway_bearer_tokens_total{route="${route}",result="${result}"}`

type Line = Record<string, unknown>
const lines = (): Line[] => gateway.logs.map((text) => JSON.parse(text) as Line)
const refusals = (route: string): Line[] => lines().filter((line) => line.msg === 'bearer token refused' && line.route === route)
const requestLine = (url: string): Line | undefined => lines().filter((line) => line.msg === 'request completed' && line.url === url).at(-1)

/** `token` with one character of its signature changed. */
function tampered (token: string): string {
  const last = token.at(-2) === 'A' ? 'B' : 'A'
  return `${token.slice(0, -2)}${last}${token.at(-1)!}`
}

describe('gateway_bearer_tokens_total', () => {
  it('shows every bearer route at accepted 0 from the start, and no series for a route without bearer:', async () => {
    const text = await scrape()
    expect(metricValue(text, series('/orders', 'accepted'))).toBe(0)
    expect(metricValue(text, series('/burst', 'accepted'))).toBe(0)
    expect(text).not.toContain('route="/people",result=')
  })

  it('counts accepted tokens (a cached one too) and refused ones by reason, with no token, subject or client id in it', async () => {
    const good = await clientCredentialsToken(op, CI, 'api://orders', 'orders.read')
    const short = await clientCredentialsToken(op, CI, 'api://orders', 'orders.write')
    const ledger = await clientCredentialsToken(op, CI, 'api://ledger', 'ledger.read')
    expect(await call('/orders/a', good)).toBe(200)
    expect(await call('/orders/b', good)).toBe(200)
    expect(await call('/orders/c', short)).toBe(403)
    expect(await call('/orders/d', ledger)).toBe(401)
    expect(await call('/orders/e', ledger)).toBe(401)
    expect(await call('/orders/f', tampered(good))).toBe(401)
    expect(await call('/orders/g', 'not-a-jwt-at-all')).toBe(401)

    const text = await scrape()
    expect(metricValue(text, series('/orders', 'accepted'))).toBe(2)
    expect(metricValue(text, series('/orders', 'insufficient_scope'))).toBe(1)
    expect(metricValue(text, series('/orders', 'wrong_audience'))).toBe(2)
    expect(metricValue(text, series('/orders', 'bad_signature'))).toBe(1)
    expect(metricValue(text, series('/orders', 'not_a_jwt'))).toBe(1)
    expect(metricValue(text, series('/burst', 'accepted'))).toBe(0)
    expect(text).not.toContain(CI.id)
    for (const token of sent) expect(text).not.toContain(token)
  })

  it('counts a Bearer header with two tokens as malformed, and one with nothing or `null` as no_token', async () => {
    const response = await fetch(`${gateway.url}/orders/empty`, { headers: { authorization: 'Bearer a b', accept: 'application/json' } })
    expect(response.status).toBe(401)
    expect(metricValue(await scrape(), series('/orders', 'malformed'))).toBe(1)
    expect(refusals('/orders').filter((line) => line.reason === 'malformed')).toHaveLength(1)
    for (const authorization of ['Bearer ', 'Bearer null']) {
      expect((await fetch(`${gateway.url}/orders/empty`, { headers: { authorization, accept: 'application/json' } })).status).toBe(401)
    }
    expect(metricValue(await scrape(), series('/orders', 'no_token'))).toBe(2)
  })
})

describe('the log lines of machine clients', () => {
  it('writes one `bearer token refused` line per refused token, with route and reason and nothing of the token', async () => {
    const logged = refusals('/orders')
    // Of the tests above: 1 insufficient_scope, 2 wrong_audience, 1 bad_signature, 1 not_a_jwt, 1 malformed, 2 no_token.
    expect(logged.map((line) => line.reason).sort()).toEqual(['bad_signature', 'insufficient_scope', 'malformed', 'no_token', 'no_token', 'not_a_jwt', 'wrong_audience', 'wrong_audience'])
    for (const line of logged) expect(Object.keys(line).filter((key) => !['level', 'time', 'pid', 'hostname', 'msg', 'route', 'reason', 'suppressed'].includes(key))).toEqual([])
    // The first of each reason at info, the second wrong_audience (within the minute) at debug.
    expect(logged.filter((line) => line.reason === 'wrong_audience').map((line) => line.level)).toEqual([30, 20])
  })

  it('never writes a token, or a part of one, in any line', () => {
    const text = gateway.logs.join('\n')
    for (const token of sent) {
      for (const part of token.split('.')) if (part.length > 8) expect(text).not.toContain(part)
    }
  })

  it('tells a machine client from a person in the request line: credential, user, decision and reason', async () => {
    expect(requestLine('/orders/a')).toMatchObject({ decision: 'allow', credential: 'bearer', user: CI.id, statusCode: 200 })
    expect(requestLine('/orders/d')).toMatchObject({ decision: 'token_refused', credential: 'bearer', user: null, reason: 'wrong_audience', statusCode: 401 })
    expect(requestLine('/orders/c')).toMatchObject({ decision: 'token_refused', credential: 'bearer', reason: 'insufficient_scope', statusCode: 403 })
    const browser = new Browser()
    expect((await browser.navigate(`${gateway.url}/orders/home`, { login: 'alice' })).status).toBe(200)
    expect(requestLine('/orders/home')).toMatchObject({ decision: 'allow', credential: 'session', user: 'alice' })
    expect(requestLine('/orders/home')).not.toHaveProperty('reason')
    const anonymous = await fetch(`${gateway.url}/people/x`, { headers: { accept: 'application/json' } })
    expect(anonymous.status).toBe(401)
    expect(requestLine('/people/x')).toMatchObject({ decision: 'unauthenticated', user: null, credential: null })
  })
})

describe('a burst of refused tokens', () => {
  it('is one info line, then debug lines, then after 60 s one info line with how many went to debug', async () => {
    const start = now
    for (const [at, path] of [[0, '/burst/1'], [1000, '/burst/2'], [2000, '/burst/3'], [61_000, '/burst/4']] as const) {
      now = start + at
      expect(await call(path, 'opaque-token-of-a-retrying-job')).toBe(401)
    }
    const logged = refusals('/burst').map(({ level, reason, suppressed }) => ({ level, reason, suppressed }))
    expect(logged).toEqual([
      { level: 30, reason: 'not_a_jwt', suppressed: 0 },
      { level: 20, reason: 'not_a_jwt', suppressed: undefined },
      { level: 20, reason: 'not_a_jwt', suppressed: undefined },
      { level: 30, reason: 'not_a_jwt', suppressed: 2 },
    ])
    expect(metricValue(await scrape(), series('/burst', 'not_a_jwt'))).toBe(4)
  })
})
