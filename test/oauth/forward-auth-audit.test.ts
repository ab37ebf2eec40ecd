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
    forwardAuth: { hosts: { [PAYROLL]: { deny: [{ paths: ['/admin/*'], users: ['bob'] }] } } },
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
})
