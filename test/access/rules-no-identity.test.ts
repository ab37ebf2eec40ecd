// Review finding: a session whose provider gave no identity (its `claims.user` path is missing from
// the account's claims: identityFrom answers undefined and the session is still made) passes every
// `deny` rule that names a person (users, emails, domains, groups, claims), since each such
// condition is false for nobody-known, and with no `allow` list nothing else stops it. The code
// before rule lists refused it wherever any rule was given (access/rules.ts rulesAdmit: "passes only
// where no rule is given: there is nothing to judge"), and the new judge refuses what it cannot tell
// of a method or path, but not of the person. Here the provider maps the user to `nickname`, which
// the accounts lack: bob (staff) signs in without an identity and the route's `deny: [{ groups:
// [staff] }]` no longer keeps him out. The suggested fix: with any rule given, an undefined identity
// is refused (a deny condition on the person counts as holding, as `unknown` does for method/path).
import { afterAll, describe, expect } from 'vitest'
import { compileRules } from '../../src/access/rules.js'
import { signIn } from '../helpers/browser.js'
import { oidcClient, type TestGateway } from '../helpers/gateway.js'
import { test as it } from '../helpers/stack.js'
import type { TestProvider } from '../helpers/oidc.js'
import type { TestRedis } from '../helpers/redis.js'
import { lists } from '../helpers/rules.js'
import { startUpstream, type Upstream } from '../helpers/upstream.js'

describe('the judge, with no identity', () => {
  it.each([
    [{ users: ['mallory'] }],
    [{ emails: ['mallory@evil.test'] }],
    [{ domains: ['contractor.example'] }],
    [{ groups: ['contractors'] }],
    [{ claims: { 'realm_access.roles': ['external'] } }],
    [{ groups: ['contractors'], paths: ['/app/admin/*'] }],
  ])('refuses where a deny rule on the person (%j) cannot be told', (deny) => {
    expect(compileRules(lists(undefined, [deny]))(undefined, 'GET', '/app/admin/x', undefined).admit).toBe(false)
  })
})

let redis: TestRedis
let upstream: Upstream
let op: TestProvider
let gateway: TestGateway

it.beforeAll(async ({ startStack, op: workerOp, redis: fileRedis }) => {
  redis = fileRedis
  op = workerOp
  upstream = await startUpstream()
  gateway = await startStack({
    store: { type: 'redis', url: redis.url },
    providers: { demo: { ...oidcClient(op.issuer, 'c', 's', 'openid email groups'), claims: { user: 'nickname' } } },
    routes: [{ path: '/app/', upstream: upstream.url, provider: 'demo', deny: [{ groups: ['staff'] }] }],
  })
})

afterAll(async () => {
  await gateway?.close()
  await upstream?.close()
})

describe('a route that denies staff, and a provider that gives no identity', () => {
  it('keeps bob (staff) out, though his session holds no identity', async () => {
    const { browser: bob, cookie } = await signIn(`${gateway.url}/oauth/login/demo/?next=/oauth/`, 'bob')
    const session = await gateway.app.sessions.load(cookie)
    expect(session?.record.identities?.demo).toBeUndefined()
    const before = upstream.seen.length
    const response = await bob.fetch(`${gateway.url}/app/x`, { headers: { accept: 'application/json' } })
    await response.arrayBuffer()
    expect(upstream.seen.slice(before)).toEqual([])
    expect(response.status).toBe(403)
  })
})
