// `bearer.claimsFrom` on a JWT. Introspection: the issuer's RFC 7662 answer is kept at most 60 s
// (SPEC; machine-clients.md), as for an opaque token, never past the time the JWT passes (`exp`
// plus the clock tolerance). A token the issuer has since revoked (`active: false`), or whose person
// has since lost the group the route's allow names, is refused once the answer is older than that (an outside tester's finding: the first answer was kept
// until the JWT's `exp`, an hour here, both in the claims cache and in the route's identity cache).
//
// The issuer is a stand-in (oidc-provider will not introspect its own JWTs): discovery, JWKS and an
// RFC 7662 endpoint answering as a test sets it, with RS256 JWTs it signs itself. The gateway's clock
// is injected.
import { decodeJwt } from 'jose'
import { afterAll, afterEach, expect } from 'vitest'
import type { TestGateway } from '../helpers/gateway.js'
import { jtiOf, startKeyIssuer, type KeyIssuer } from '../helpers/key-issuer.js'
import type { Upstream } from '../helpers/upstream.js'
import { test as it } from '../helpers/stack.js'

/** The gateway's clock: the wall clock moved by `offset` ms. */
const clock = { offset: 0, now: () => Date.now() + clock.offset }

/** What the stand-in's introspection endpoint says of each token (by its `jti`). */
const answers = new Map<string, Record<string, unknown>>()
let issuer: KeyIssuer
let gateway: TestGateway
let seen: Upstream['seen']

const sign = async (claims: Record<string, unknown>): Promise<string> => await issuer.sign(claims, { audience: 'api://orders', now: Date.now(), lifetimeS: 3600 })

it.beforeAll(async ({ startStack, upstream }) => {
  issuer = await startKeyIssuer({
    introspect: (token) => answers.get(jtiOf(token) ?? '') ?? { active: false },
    userinfo: (token) => jtiOf(token) === 'userinfo-down' ? { status: 500, body: {} } : { status: 200, body: { ...answers.get(jtiOf(token) ?? ''), active: undefined } },
  })
  gateway = await startStack({
    providers: { stand: { issuer: issuer.url, clientId: 'c', clientSecret: 's', scope: 'openid' } },
    routes: [
      { path: '/intro/', upstream: upstream.url, provider: 'stand', allow: { groups: ['staff'] }, bearer: { audience: 'api://orders', claimsFrom: 'introspection' } },
      { path: '/info/', upstream: upstream.url, provider: 'stand', allow: { groups: ['staff'] }, bearer: { audience: 'api://orders', claimsFrom: 'userinfo' } },
      { path: '/signed/', upstream: upstream.url, provider: 'stand', assertion: true, bearer: { audience: 'api://orders', claimsFrom: 'introspection' } },
      // The same upstream (so the same assertion cache), the token's own claims only (no groups).
      { path: '/tokened/', upstream: upstream.url, provider: 'stand', assertion: true, bearer: { audience: 'api://orders' } },
    ],
    assertion: { ttl: '10m' },
  }, { deps: { clock } })
  seen = upstream.seen
})

afterEach(() => { clock.offset = 0 })
afterAll(async () => {
  await gateway?.close()
  await issuer?.close()
})

async function call (token: string, route = 'intro'): Promise<number> {
  const response = await fetch(`${gateway.url}/${route}/x`, { headers: { authorization: `Bearer ${token}`, accept: 'application/json' } })
  await response.arrayBuffer()
  return response.status
}

it('a JWT the issuer has revoked is refused once the introspection answer is older than 60 s', async () => {
  const token = await sign({ sub: 'bob', jti: 'revoked' })
  answers.set('revoked', { active: true, sub: 'bob', groups: ['staff'] })
  expect(await call(token)).toBe(200)
  // The issuer revokes it (RFC 7662: active false from now on).
  answers.set('revoked', { active: false })
  const before = issuer.asked.introspect
  clock.offset = 61_000
  // Expected: asked again (the answer is older than 60 s), inactive, 401. Found: 200, not asked.
  expect({ status: await call(token), asked: issuer.asked.introspect - before }).toEqual({ status: 401, asked: 1 })
})

it('a JWT whose person the issuer no longer puts in `staff` is refused by the allow once the answer is older than 60 s', async () => {
  const token = await sign({ sub: 'carol', jti: 'demoted' })
  answers.set('demoted', { active: true, sub: 'carol', groups: ['staff'] })
  expect(await call(token)).toBe(200)
  answers.set('demoted', { active: true, sub: 'carol', groups: [] })
  clock.offset = 61_000
  expect(await call(token)).toBe(403)
})

// A JWT still passes for the clock tolerance (60 s) after its `exp`. Its claims answer was kept only
// until `exp`, so in that minute every request asked the issuer again, and verified the token again
// (a re-reader's finding).
it.for([['intro', 'introspect'], ['info', 'userinfo']] as const)('a JWT within the clock tolerance after its exp is not asked about at each request (%s)', async ([route, endpoint]) => {
  const token = await sign({ sub: 'dan', jti: `late-${route}` })
  answers.set(`late-${route}`, { active: true, sub: 'dan', groups: ['staff'] })
  expect(await call(token, route)).toBe(200)
  const before = issuer.asked[endpoint]
  // 30 s past its one-hour exp: within the tolerance.
  clock.offset = 3_630_000
  expect([await call(token, route), await call(token, route), await call(token, route)]).toEqual([200, 200, 200])
  // Introspection: asked again once (its answer is older than 60 s); userinfo: its answer holds.
  expect(issuer.asked[endpoint] - before).toBe(endpoint === 'introspect' ? 1 : 0)
})

// The signed assertion says what the headers say: it was cached by the token and the person's name
// only, so once the answer lost a group, X-Forwarded-Groups lost it and the assertion sent with it
// still had it, for up to 2/3 of assertion.ttl (an outside tester's finding).
it('the signed assertion drops a group the issuer took away as soon as the identity headers do', async () => {
  const token = await sign({ sub: 'erin', jti: 'demoted-signed' })
  answers.set('demoted-signed', { active: true, sub: 'erin', groups: ['admins'] })
  const upstreamSaw = async (marker: string) => {
    const response = await fetch(`${gateway.url}/signed/${marker}`, { headers: { authorization: `Bearer ${token}`, accept: 'application/json' } })
    await response.arrayBuffer()
    const request = seen.findLast((one) => one.url.endsWith(`/${marker}`))!
    return { status: response.status, header: request.headers['x-forwarded-groups'] ?? '', assertion: decodeJwt(String(request.headers['x-gateway-assertion'])).groups }
  }
  expect(await upstreamSaw('before')).toEqual({ status: 200, header: 'admins', assertion: ['admins'] })
  answers.set('demoted-signed', { active: true, sub: 'erin', groups: [] })
  clock.offset = 61_000
  expect(await upstreamSaw('after')).toEqual({ status: 200, header: '', assertion: [] })
})

// Two routes to one upstream share its assertion cache, and read the same token's person
// differently: each pushed the other's assertion out, and alternating between them signed one at
// every request (an outside tester's finding).
it('alternating between two routes to one upstream with one token signs one assertion per route, each saying its route\'s groups', async () => {
  const token = await sign({ sub: 'erin', jti: 'two-routes' })
  answers.set('two-routes', { active: true, sub: 'erin', groups: ['admins'] })
  const said: Record<string, Set<string>> = { signed: new Set(), tokened: new Set() }
  for (let i = 0; i < 4; i++) {
    for (const route of ['signed', 'tokened']) {
      const response = await fetch(`${gateway.url}/${route}/alt-${i}`, { headers: { authorization: `Bearer ${token}`, accept: 'application/json' } })
      await response.arrayBuffer()
      expect(response.status).toBe(200)
      const assertion = String(seen.findLast((one) => one.url.endsWith(`/alt-${i}`) && one.url.includes(route))!.headers['x-gateway-assertion'])
      expect(decodeJwt(assertion).groups).toEqual(route === 'signed' ? ['admins'] : [])
      said[route]!.add(assertion)
    }
  }
  expect({ signed: said.signed!.size, tokened: said.tokened!.size }).toEqual({ signed: 1, tokened: 1 })
})

// A re-reader's finding: the requests that waited on one userinfo question shared its failure, and
// each wrote an error line of its own (8 for one answer). Whatever the timing, one warn line per
// question asked, naming the provider and the endpoint; none at error level.
it('parallel requests with one token whose userinfo fails: 502 each, one warn line per question asked', async () => {
  const token = await sign({ sub: 'fay', jti: 'userinfo-down' })
  const from = gateway.logs.length
  const before = issuer.asked.userinfo
  const statuses = await Promise.all(Array.from({ length: 8 }, async () => await call(token, 'info')))
  expect(statuses).toEqual(Array.from({ length: 8 }, () => 502))
  const loud = gateway.logs.slice(from).map((line) => JSON.parse(line) as { level: number, msg: string, provider?: string })
    .filter((line) => line.level >= 40)
  expect(loud.every((line) => line.level === 40 && line.msg === 'userinfo request to the provider failed' && line.provider === 'stand')).toBe(true)
  expect(loud).toHaveLength(issuer.asked.userinfo - before)
})
