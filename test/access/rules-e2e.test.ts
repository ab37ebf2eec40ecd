// Rule lists end to end: a real authorization server releasing Keycloak-style roles, a number and a
// boolean as claims, a gateway whose routes' `allow` and `deny` name users, groups, claims, methods
// and paths, real Redis, a real upstream. Each request's one log line names who asked and the rule
// that decided; the session keeps only the claims some rule names.
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { Browser } from '../helpers/browser.js'
import { oidcClient, reserveBaseUrl, startGateway, type TestGateway } from '../helpers/gateway.js'
import { startOidcProvider, type TestProvider } from '../helpers/oidc.js'
import { startRedis, type TestRedis } from '../helpers/redis.js'
import { startUpstream, type Upstream } from '../helpers/upstream.js'

const json = { accept: 'application/json' }
let redis: TestRedis
let upstream: Upstream
let op: TestProvider
let gateway: TestGateway

/** Per account: realm roles (an array inside an object), a clearance level (a number), a flag (a boolean), and a claim no rule names. */
const CLAIMS: Record<string, Record<string, unknown>> = {
  alice: { realm_access: { roles: ['reporter', 'auditor'] }, level: 3, onsite: true, unnamed: 'x'.repeat(500) },
  bob: { realm_access: { roles: ['viewer'] }, level: 1, onsite: false, unnamed: 'x'.repeat(500) },
  mallory: { realm_access: { roles: ['reporter'] }, level: 3, onsite: true, unnamed: 'x'.repeat(500) },
}

beforeAll(async () => {
  redis = await startRedis()
  upstream = await startUpstream()
  const { port, baseUrl } = await reserveBaseUrl()
  op = await startOidcProvider([{ client_id: 'c', client_secret: 's', redirect_uris: [`${baseUrl}/oauth/authorized/demo/`] }], {
    scopeClaims: { openid: ['sub'], email: ['email', 'email_verified'], groups: ['groups'], roles: ['realm_access', 'level', 'onsite', 'unnamed'] },
    extraClaims: (id) => CLAIMS[id] ?? {},
  })
  gateway = await startGateway({
    server: { port, baseUrl },
    store: { type: 'redis', url: redis.url },
    providers: { demo: oidcClient(op.issuer, 'c', 's', 'openid email groups roles') },
    routes: [
      { path: '/reports/', upstream: upstream.url, provider: 'demo', allow: [{ claims: { 'realm_access.roles': ['reporter'] } }], deny: { users: ['mallory'] } },
      { path: '/vault/', upstream: upstream.url, provider: 'demo', allow: { claims: { level: [3], onsite: [true] } } },
      {
        path: '/wiki/',
        upstream: upstream.url,
        provider: 'demo',
        allow: [{ groups: ['staff'], methods: ['GET', 'HEAD'] }, { groups: ['admins'] }],
        deny: [{ paths: ['/wiki/admin/*'], groups: ['staff'] }, { paths: ['/wiki/admin/*'], users: ['bob'] }],
      },
    ],
  })
})

afterAll(async () => {
  await gateway?.close()
  await Promise.all([op?.close(), upstream?.close()])
  await redis?.release()
})

async function signedIn (login: string): Promise<Browser> {
  const browser = new Browser()
  expect((await browser.navigate(`${gateway.url}/oauth/login/demo/?next=/oauth/`, { login })).status).toBe(200)
  return browser
}

/** The log line of the last request to `url` (path and query as logged). */
function lineOf (url: string): Record<string, unknown> {
  const lines = gateway.logs.map((line) => JSON.parse(line) as Record<string, unknown>).filter((line) => line.msg === 'request completed' && line.url === url)
  return lines.at(-1)!
}

describe('rule lists through a real provider', () => {
  let alice: Browser
  let bob: Browser
  let mallory: Browser

  beforeAll(async () => {
    [alice, bob, mallory] = await Promise.all([signedIn('alice'), signedIn('bob'), signedIn('mallory')])
  })

  it.each([
    // who, method, path, status, the rule the log line names
    ['alice', 'GET', '/reports/q3', 200, 'allow[0]'],
    ['bob', 'GET', '/reports/q3', 403, 'none'],
    ['mallory', 'GET', '/reports/q3', 403, 'deny'],
    ['alice', 'GET', '/vault/x', 200, 'allow'],
    ['bob', 'GET', '/vault/x', 403, 'none'],
    ['bob', 'GET', '/wiki/page', 200, 'allow[0]'],
    ['bob', 'HEAD', '/wiki/page', 200, 'allow[0]'],
    ['bob', 'POST', '/wiki/page', 403, 'none'],
    ['alice', 'POST', '/wiki/page', 200, 'allow[1]'],
    ['alice', 'GET', '/wiki/admin/x', 403, 'deny[0]'],
    ['bob', 'GET', '/wiki/admin/x', 403, 'deny[0]'],
    // /wiki/admin/* covers /wiki/admin itself (with or without a query), and a deny's GET covers HEAD.
    ['bob', 'GET', '/wiki/admin', 403, 'deny[0]'],
    ['bob', 'GET', '/wiki/admin?tab=users', 403, 'deny[0]'],
    ['mallory', 'GET', '/wiki/admin/x', 403, 'none'],
    // The same path spelt otherwise (fetch sends %61 as it is) is judged as its canonical form.
    ['alice', 'GET', '/wiki/%61dmin/y', 403, 'deny[0]'],
  ] as const)('%s %s %s: %i, rule %s', async (who, method, path, status, rule) => {
    const browser = { alice, bob, mallory }[who]
    const response = await browser.fetch(`${gateway.url}${path}`, { method, headers: json })
    expect(response.status).toBe(status)
    await response.arrayBuffer()
    const url = new URL(path, 'http://x')
    const canonical = url.pathname.replace('%61', 'a') + (url.search === '' ? '' : url.search.replace(/=[^&]*/g, ''))
    await expect.poll(() => lineOf(canonical)).toMatchObject({ method, statusCode: status, decision: status === 200 ? 'allow' : 'forbidden', user: who, rule })
  })

  it('a 403 names the deny rule and what was seen, never the rule\'s values', async () => {
    const response = await mallory.fetch(`${gateway.url}/reports/q3`, { headers: json })
    const body = await response.json() as Record<string, unknown>
    expect(body).toMatchObject({ error: 'forbidden', rule: 'deny', seen: { user: 'mallory' } })
    expect(JSON.stringify(body)).not.toContain('reporter')
  })

  it('an API client without a session is logged as nobody, rule none', async () => {
    expect((await fetch(`${gateway.url}/reports/anon`, { headers: json })).status).toBe(401)
    await expect.poll(() => lineOf('/reports/anon')).toMatchObject({ statusCode: 401, decision: 'unauthenticated', user: null, rule: 'none' })
  })

  it('the session keeps only the claims some rule names, as text', async () => {
    expect(gateway.config.providers.demo!.keptClaims).toEqual(['level', 'onsite', 'realm_access.roles'])
    const session = await gateway.app.sessions.load(`gw_session=${alice.cookies.get('gw_session')!.value}`)
    expect(session?.record.identities?.demo?.claims).toEqual({ level: ['3'], onsite: ['true'], 'realm_access.roles': ['reporter', 'auditor'] })
  })
})
