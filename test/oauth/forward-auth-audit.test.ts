// Review finding (low): the forward-auth request's log line carries user and rule, but not what was
// asked for: its `url` is /oauth/auth/<provider>/ (and the query's parameter names), never the
// original request's method and path that the rules judged (X-Forwarded-Method, X-Forwarded-Uri).
// docs/operations.md's "who opened /admin/ yesterday, and which rule let them" therefore finds no
// forward-auth request at all, though forwardAuth.hosts rules decide on that path. The suggested
// fix: the forward-auth line also names the original method and path (canonical, without query
// values, as `url` is logged), e.g. `originalMethod` and `originalUrl`.
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { sessionCookie, startForwardAuthGateway, type TestGateway } from '../helpers/gateway.js'
import type { TestProvider } from '../helpers/oidc.js'
import { startRedis, type TestRedis } from '../helpers/redis.js'

const PAYROLL = 'payroll.example.com'
let redis: TestRedis
let op: TestProvider
let gateway: TestGateway
let cookie = ''

beforeAll(async () => {
  redis = await startRedis()
  ;({ gateway, op } = await startForwardAuthGateway(redis.url, {
    forwardAuth: { allowedRedirectHosts: [PAYROLL], hosts: { [PAYROLL]: { deny: [{ paths: ['/admin/*'], users: ['bob'] }] } } },
  }))
  cookie = await sessionCookie(gateway, 'alice')
})

afterAll(async () => {
  await gateway?.close()
  await op?.close()
  await redis?.release()
})

describe('the audit line of a forward-auth request', () => {
  it('says which original path alice opened, with who and which rule', async () => {
    const response = await fetch(`${gateway.url}/oauth/auth/demo/`, {
      headers: { cookie, 'x-forwarded-proto': 'https', 'x-forwarded-host': PAYROLL, 'x-forwarded-uri': '/admin/salaries?year=2026', 'x-forwarded-method': 'GET' },
    })
    expect(response.status).toBe(200)
    await response.arrayBuffer()
    const line = gateway.logs.map((text) => JSON.parse(text) as Record<string, unknown>).filter((entry) => entry.msg === 'request completed' && String(entry.url).startsWith('/oauth/auth/demo/')).at(-1)
    expect(line).toMatchObject({ user: 'alice', rule: 'none', statusCode: 200 })
    expect(Object.values(line!)).toContain('/admin/salaries?year')
  })

  // An attacker's finding: `/%61dmin/pay`, judged as /admin/pay by the rules, was logged as sent, and
  // an audit of /admin/ missed it. The canonical path, as a proxied request's `url`; as sent (query
  // names only) where the rules could not tell it.
  it.each([
    ['/%61dmin/pay?x=1', '/admin/pay?x'],
    ['/%61dmin/%7Euser', '/admin/~user'],
    ['/a/../admin/pay?y=2', '/a/../admin/pay?y'],
  ])('logs %s as the rules judged it: %s', async (uri, logged) => {
    const before = gateway.logs.length
    const response = await fetch(`${gateway.url}/oauth/auth/demo/`, {
      headers: { cookie, 'x-forwarded-proto': 'https', 'x-forwarded-host': PAYROLL, 'x-forwarded-uri': uri, 'x-forwarded-method': 'GET' },
    })
    await response.arrayBuffer()
    const line = gateway.logs.slice(before).map((text) => JSON.parse(text) as Record<string, unknown>).find((entry) => entry.msg === 'request completed')
    expect(line).toMatchObject({ user: 'alice', originalMethod: 'GET', originalUrl: logged })
  })

  // An attacker's finding: an original URL or method the rules could not tell (an absolute URI, two
  // headers that disagree, a method that is no token) left the admitted request's line without it.
  // What the proxy sent is logged apart (`originalSent`), never as the original URL.
  it.each<[Record<string, string>, Record<string, unknown>]>([
    // A URL not told leaves the method untold too (the rules judge neither): both as sent.
    [{ 'x-forwarded-uri': 'https://payroll.example.com/admin/pay?k=1' }, { originalSent: 'x-forwarded-method: GET; x-forwarded-uri: https://payroll.example.com/admin/pay?k' }],
    [{ 'x-forwarded-uri': '/public', 'x-original-uri': '/admin/pay' }, { originalSent: 'x-forwarded-method: GET; x-forwarded-uri: /public; x-original-uri: /admin/pay' }],
    [{ 'x-forwarded-uri': '/admin/pay', 'x-forwarded-method': 'G E T' }, { originalUrl: '/admin/pay', originalSent: 'x-forwarded-method: G E T' }],
  ])('an admitted request whose original %j could not be told: its line says what was sent', async (headers, fields) => {
    const before = gateway.logs.length
    const response = await fetch(`${gateway.url}/oauth/auth/demo/`, {
      headers: { cookie, 'x-forwarded-proto': 'https', 'x-forwarded-host': PAYROLL, 'x-forwarded-method': 'GET', ...headers },
    })
    expect(response.status).toBe(200)
    await response.arrayBuffer()
    const line = gateway.logs.slice(before).map((text) => JSON.parse(text) as Record<string, unknown>).find((entry) => entry.msg === 'request completed')
    expect(line).toMatchObject({ decision: 'allow', user: 'alice', ...fields })
    if (!('originalUrl' in fields)) expect(line).not.toHaveProperty('originalUrl')
    if (!('originalMethod' in fields)) expect(line).not.toHaveProperty('originalMethod')
  })
})

// A newcomer's finding: allowedRedirectHosts: [127.0.0.1] for an application served on a port sent
// every sign-in back to /oauth/, and no line said why.
describe('a return address the sign-in does not take', () => {
  const lines = () => gateway.logs.map((text) => JSON.parse(text) as Record<string, unknown>)
  async function nobody (host: string): Promise<Record<string, unknown> | undefined> {
    const response = await fetch(`${gateway.url}/oauth/auth/demo/`, { headers: { 'x-forwarded-proto': 'https', 'x-forwarded-host': host, 'x-forwarded-uri': '/page', 'x-forwarded-method': 'GET' } })
    expect(response.status).toBe(401)
    await response.arrayBuffer()
    return lines().filter((entry) => entry.msg === 'request completed' && String(entry.url).startsWith('/oauth/auth/demo/')).at(-1)
  }

  it('is named on forward-auth\'s 401 line (returnTo: refused), and not where the host is listed', async () => {
    expect(await nobody(`${PAYROLL}:8443`)).toMatchObject({ decision: 'unauthenticated', returnTo: 'refused' })
    expect(await nobody(PAYROLL)).not.toHaveProperty('returnTo')
  })

  it('is said at /oauth/login/, without the address itself', async () => {
    const before = lines().length
    const next = `https://${PAYROLL}:8443/page?token=t0p-s3cret`
    const response = await fetch(`${gateway.url}/oauth/login/demo/?next=${encodeURIComponent(next)}`, { redirect: 'manual' })
    expect(response.status).toBe(302)
    const said = lines().slice(before).filter((entry) => entry.returnTo === 'refused')
    expect(said).toEqual([expect.objectContaining({ msg: expect.stringMatching(/^sign-in return address refused, the sign-in ends at \/oauth\/: .*allowedRedirectHosts/) })])
    expect(gateway.logs.slice(before).join('\n')).not.toContain('t0p-s3cret')
    const listed = lines().length
    await (await fetch(`${gateway.url}/oauth/login/demo/?next=${encodeURIComponent(`https://${PAYROLL}/page`)}`, { redirect: 'manual' })).arrayBuffer()
    expect(lines().slice(listed).filter((entry) => entry.returnTo === 'refused')).toEqual([])
  })
})
