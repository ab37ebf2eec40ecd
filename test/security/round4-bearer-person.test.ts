// Security round 4: a token is judged as its person. A real authorization server issues RFC 9068
// access tokens (client credentials, whose subject is the client: a person's own service account
// or CLI) that carry no e-mail or groups claims, for people whom the browser's `deny` refuses by
// e-mail, domain, groups or a claim. Such a token must not pass where the person's session does
// not: a person condition the token cannot answer fails closed, unless the route reads the claims
// from the issuer's userinfo endpoint or its introspection answer (`bearer.claimsFrom`).
//
// The userinfo endpoint here stands in for one that accepts resource tokens (Keycloak's, Auth0's:
// oidc-provider's own refuses any token with an audience); it is set as the provider's
// `userinfoUrl` and answers for the account named by the token's subject, as the issuer would.
import { createServer, type Server } from 'node:http'
import { decodeJwt } from 'jose'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { Browser } from '../helpers/browser.js'
import { oidcClient, reserveBaseUrl, startGateway, type TestGateway } from '../helpers/gateway.js'
import { CI, clientCredentialsToken, startMachineProvider } from '../helpers/machine.js'
import { close, listen } from '../helpers/net.js'
import type { TestProvider } from '../helpers/oidc.js'
import { startRedis, type TestRedis } from '../helpers/redis.js'
import { startUpstream, type Upstream } from '../helpers/upstream.js'

/** Machine clients named as the demo provider's accounts: their tokens' subject is the person. */
const client = (id: string) => ({ id, secret: `${id}-secret` })
const MALLORY = client('mallory')
const ALICE = client('alice')
const BOB = client('bob')
/** Whose userinfo answer names another subject than the token's. */
const EVE = client('eve')
/** Opaque-token clients whose introspection answer carries an e-mail address (the JWT clients' carry none). */
const CAROL = client('carol')
const DAVE = client('dave')
/** A token whose groups claim is in a shape the gateway does not read (a list of lists). */
const FRANK = client('frank')
/** A token whose address is the denied one with the root's dot written twice. */
const GRACE = client('grace')

/** What the stand-in userinfo endpoint says of each account (as the demo provider's ID tokens do). */
const PEOPLE: Record<string, Record<string, unknown>> = {
  mallory: { email: 'mallory@evil.test', groups: [], preferred_username: 'mallory.m' },
  alice: { email: 'alice@example.test', groups: ['admins', 'staff'], preferred_username: 'alice.a' },
  bob: { email: 'bob@example.test', groups: ['staff'], preferred_username: 'bob.b' },
}

let redis: TestRedis
let upstream: Upstream
let op: TestProvider
let userinfo: Server
let userinfoUrl: string
let userinfoCalls = 0
let gateway: TestGateway

beforeAll(async () => {
  redis = await startRedis()
  upstream = await startUpstream()
  userinfo = createServer((req, res) => {
    userinfoCalls++
    const sub = String(decodeJwt(String(req.headers.authorization).slice('Bearer '.length)).sub)
    res.setHeader('content-type', 'application/json')
    res.end(JSON.stringify(sub === 'eve' ? { sub: 'alice', ...PEOPLE.alice } : { sub, ...PEOPLE[sub] }))
  })
  userinfoUrl = `${await listen(userinfo)}/userinfo`
  const { port, baseUrl } = await reserveBaseUrl()
  op = await startMachineProvider(baseUrl, {
    machineClients: [CI, MALLORY, ALICE, BOB, EVE, CAROL, DAVE, FRANK, GRACE].map((c) => ({ client_id: c.id, client_secret: c.secret })),
    tokenClaims: (id) => ({
      [CAROL.id]: { email: 'carol@evil.test' },
      [DAVE.id]: { email: 'dave@example.test' },
      [FRANK.id]: { email: 'frank@example.test', groups: [['admins']] },
      [GRACE.id]: { email: 'mallory@evil.test..', groups: ['staff'] },
    })[id],
  })
  const orders = { audience: 'api://orders' }
  const people = { ...orders, issuers: ['people'], claimsFrom: 'userinfo' }
  gateway = await startGateway({
    server: { port, baseUrl },
    store: { type: 'redis', url: redis.url },
    providers: {
      demo: oidcClient(op.issuer, 'c', 's', 'openid email groups'),
      people: { ...oidcClient(op.issuer, 'c', 's', 'openid email groups'), userinfoUrl },
      // Named by a user name (as preset: keycloak maps it), which these tokens do not carry.
      named: { ...oidcClient(op.issuer, 'c', 's', 'openid email groups'), claims: { user: 'preferred_username' } },
      namedInfo: { ...oidcClient(op.issuer, 'c', 's', 'openid email groups'), claims: { user: 'preferred_username' }, userinfoUrl },
    },
    routes: [
      { path: '/emails/', upstream: upstream.url, provider: 'demo', deny: { emails: ['mallory@evil.test'] }, bearer: orders },
      { path: '/domains/', upstream: upstream.url, provider: 'demo', deny: { domains: ['evil.test'] }, bearer: orders },
      { path: '/groups/', upstream: upstream.url, provider: 'demo', deny: { groups: ['admins'] }, bearer: orders },
      { path: '/claims/', upstream: upstream.url, provider: 'demo', deny: { claims: { groups: ['admins'] } }, bearer: orders },
      { path: '/staff/', upstream: upstream.url, provider: 'demo', allow: { groups: ['staff'] }, bearer: orders },
      { path: '/scoped/', upstream: upstream.url, provider: 'demo', deny: { emails: ['mallory@evil.test'], paths: ['/scoped/admin/*'] }, bearer: orders },
      { path: '/info-emails/', upstream: upstream.url, provider: 'demo', deny: { emails: ['mallory@evil.test'] }, bearer: people },
      { path: '/info-groups/', upstream: upstream.url, provider: 'demo', deny: { groups: ['admins'] }, bearer: people },
      { path: '/info-staff/', upstream: upstream.url, provider: 'demo', allow: { groups: ['staff'] }, headers: { 'X-Groups': 'claims.groups' }, bearer: people },
      { path: '/intro-jwt/', upstream: upstream.url, provider: 'demo', deny: { domains: ['evil.test'] }, bearer: { ...orders, claimsFrom: 'introspection' } },
      { path: '/names/', upstream: upstream.url, provider: 'named', deny: { users: ['mallory.m'] }, bearer: { ...orders, issuers: ['named'] } },
      { path: '/info-names/', upstream: upstream.url, provider: 'namedInfo', deny: { users: ['mallory.m'] }, bearer: { ...orders, issuers: ['namedInfo'], claimsFrom: 'userinfo' } },
      { path: '/ledger/', upstream: upstream.url, provider: 'demo', deny: { domains: ['evil.test'] }, bearer: { audience: 'api://ledger', introspect: true, claimsFrom: 'introspection' } },
    ],
  })
})

afterAll(async () => {
  await gateway?.close()
  await Promise.all([op?.close(), upstream?.close(), userinfo && close(userinfo)])
  await redis?.release()
})

async function withToken (who: { id: string, secret: string }, path: string, resource = 'api://orders'): Promise<Response> {
  const token = await clientCredentialsToken(op, who, resource)
  return await fetch(`${gateway.url}${path}`, { headers: { authorization: `Bearer ${token}`, accept: 'application/json' } })
}

describe('a token that does not carry the claim a person condition reads (claimsFrom: token, the default)', () => {
  it('is refused where the person\'s browser session is refused: deny by e-mail, domain, groups and claim', async () => {
    const browser = new Browser()
    expect((await browser.navigate(`${gateway.url}/emails/x`, { login: 'mallory' })).status).toBe(403)
    expect((await browser.navigate(`${gateway.url}/domains/x`)).status).toBe(403)
    const admin = new Browser()
    expect((await admin.navigate(`${gateway.url}/groups/x`, { login: 'alice' })).status).toBe(403)
    expect((await admin.navigate(`${gateway.url}/claims/x`)).status).toBe(403)
    for (const [who, path] of [[MALLORY, '/emails/x'], [MALLORY, '/domains/x'], [ALICE, '/groups/x'], [ALICE, '/claims/x']] as const) {
      const response = await withToken(who, path)
      expect({ path, status: response.status }).toEqual({ path, status: 403 })
      expect(await response.json()).toMatchObject({ error: 'forbidden', rule: 'deny' })
    }
    expect(upstream.seen.filter((seen) => /^\/(emails|domains|groups|claims)\//.test(seen.url))).toEqual([])
  })

  it('is refused for anyone then, since whom it names cannot be told; a deny rule narrowed by path refuses only there', async () => {
    expect((await withToken(BOB, '/emails/x')).status).toBe(403)
    expect((await withToken(BOB, '/scoped/admin/users')).status).toBe(403)
    expect((await withToken(BOB, '/scoped/wiki')).status).toBe(200)
  })

  it('carried in a shape the gateway does not read, or spelled with more root dots, it is refused as well', async () => {
    for (const [who, path] of [[FRANK, '/groups/x'], [FRANK, '/claims/x'], [GRACE, '/emails/x'], [GRACE, '/domains/x']] as const) {
      expect({ who: who.id, path, status: (await withToken(who, path)).status }).toEqual({ who: who.id, path, status: 403 })
    }
    // Controls: a groups claim read whole, without the denied group, passes.
    expect((await withToken(GRACE, '/groups/x')).status).toBe(200)
    expect((await withToken(GRACE, '/staff/x')).status).toBe(200)
  })

  it('is not admitted by an allow rule on the claim either', async () => {
    expect((await withToken(BOB, '/staff/x')).status).toBe(403)
  })
  it('a users deny naming a user name holds for a token without that name (its sub is not the name): for anyone, as who it is cannot be told; claimsFrom: userinfo tells it', async () => {
    expect((await withToken(MALLORY, '/names/x')).status).toBe(403)
    expect((await withToken(BOB, '/names/x')).status).toBe(403)
    expect((await withToken(MALLORY, '/info-names/x')).status).toBe(403)
    expect((await withToken(BOB, '/info-names/x')).status).toBe(200)
  })
})

describe('claimsFrom: userinfo', () => {
  it('judges by the issuer\'s userinfo answer: the denied person is refused, another passes', async () => {
    expect((await withToken(MALLORY, '/info-emails/x')).status).toBe(403)
    expect((await withToken(BOB, '/info-emails/x')).status).toBe(200)
    expect((await withToken(ALICE, '/info-groups/x')).status).toBe(403)
    expect((await withToken(BOB, '/info-groups/x')).status).toBe(200)
  })

  it('admits by an allow rule on the userinfo claims, and claim headers carry them', async () => {
    expect((await withToken(MALLORY, '/info-staff/x')).status).toBe(403)
    expect((await withToken(BOB, '/info-staff/y')).status).toBe(200)
    expect(upstream.seen.find((seen) => seen.url === '/info-staff/y')?.headers['x-groups']).toBe('staff')
  })

  it('asks once per token, however many requests bring it', async () => {
    const token = await clientCredentialsToken(op, BOB, 'api://orders')
    const before = userinfoCalls
    const responses = await Promise.all([1, 2, 3].map(async () => await fetch(`${gateway.url}/info-emails/again`, { headers: { authorization: `Bearer ${token}` } })))
    expect(responses.map((response) => response.status)).toEqual([200, 200, 200])
    expect(userinfoCalls - before).toBe(1)
  })

  it('refuses the token (401 invalid_token) when the userinfo answer is about another subject', async () => {
    const response = await withToken(EVE, '/info-emails/x')
    expect(response.status).toBe(401)
    expect(response.headers.get('www-authenticate')).toContain('error="invalid_token"')
  })
})

describe('claimsFrom: introspection', () => {
  it('judges an opaque token by the claims of the issuer\'s introspection answer', async () => {
    expect((await withToken(CAROL, '/ledger/x', 'api://ledger')).status).toBe(403)
    expect((await withToken(DAVE, '/ledger/x', 'api://ledger')).status).toBe(200)
    // An answer without an address: who it is cannot be told.
    expect((await withToken(BOB, '/ledger/x', 'api://ledger')).status).toBe(403)
  })

  it('asks the issuer\'s introspection endpoint about a JWT: oidc-provider will not introspect its JWTs, so the request fails (502), never passes', async () => {
    const before = op.requests('/token/introspection')
    const response = await withToken(DAVE, '/intro-jwt/x')
    expect(response.status).toBe(502)
    expect(await response.json()).toMatchObject({ error: 'provider_unavailable' })
    expect(op.requests('/token/introspection') - before).toBe(1)
    expect(upstream.seen.filter((seen) => seen.url.startsWith('/intro-jwt/'))).toEqual([])
  })
})
