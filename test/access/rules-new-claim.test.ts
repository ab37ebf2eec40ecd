// Review finding: a session keeps only the claims some rule named when it was made (keptClaims at
// sign-in). A `deny` on a claim added later (a rolling config change, or a restart with the new
// rule) finds the claim absent from every session made before, and an absent claim never matches:
// the person it was written to keep out passes until they sign in again (session.maxAge, 7 days by
// default). An `allow` on it fails closed, a deny on groups (always kept) works at once; a deny on a
// claim silently does nothing. Here alice (realm role `suspended`) signs in at an instance with no
// claim rule; the instance with `deny: [{ claims: { realm_access.roles: [suspended] } }]`, on the
// same store and secret, still lets her in. The suggested fix: keep in the session which claim
// paths were read at sign-in, and count a claim a rule names but the session never read as
// "cannot be told" (deny holds, allow does not), or ask for a new sign-in.
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { signIn } from '../helpers/browser.js'
import { oidcClient, reserveBaseUrl, startGateway, type TestGateway } from '../helpers/gateway.js'
import { startOidcProvider, type TestProvider } from '../helpers/oidc.js'
import { startRedis, type TestRedis } from '../helpers/redis.js'
import { startUpstream, type Upstream } from '../helpers/upstream.js'

let redis: TestRedis
let upstream: Upstream
let op: TestProvider
let before: TestGateway
let after: TestGateway
let cookie = ''

beforeAll(async () => {
  redis = await startRedis()
  upstream = await startUpstream()
  const { port, baseUrl } = await reserveBaseUrl()
  op = await startOidcProvider([{ client_id: 'c', client_secret: 's', redirect_uris: [`${baseUrl}/oauth/authorized/demo/`] }], {
    scopeClaims: { openid: ['sub'], email: ['email', 'email_verified'], groups: ['groups'], roles: ['realm_access'] },
    extraClaims: (id) => id === 'alice' ? { realm_access: { roles: ['suspended'] } } : {},
  })
  const common = {
    store: { type: 'redis', url: redis.url },
    providers: { demo: oidcClient(op.issuer, 'c', 's', 'openid email groups roles') },
  }
  before = await startGateway({ ...common, server: { port, baseUrl }, routes: [{ path: '/app/', upstream: upstream.url, provider: 'demo' }] })
  after = await startGateway({
    ...common,
    routes: [{ path: '/app/', upstream: upstream.url, provider: 'demo', deny: [{ claims: { 'realm_access.roles': ['suspended'] } }] }],
  })
  cookie = (await signIn(`${before.url}/oauth/login/demo/?next=/oauth/`, 'alice')).cookie
})

afterAll(async () => {
  await Promise.all([before?.close(), after?.close()])
  await Promise.all([op?.close(), upstream?.close()])
  await redis?.release()
})

describe('a deny on a claim, added after the session was made', () => {
  it('reads the same session on the instance with the rule, without the claim (no rule named it at sign-in)', async () => {
    const session = await after.app.sessions.load(cookie)
    expect(session?.record.identities?.demo?.sub).toBe('alice')
    expect(session?.record.identities?.demo?.claims).toBeUndefined()
  })

  it('keeps alice (suspended) out', async () => {
    const seen = upstream.seen.length
    const response = await fetch(`${after.url}/app/x`, { headers: { accept: 'application/json', cookie } })
    await response.arrayBuffer()
    expect(upstream.seen.slice(seen)).toEqual([])
    expect(response.status).toBe(403)
  })
})
