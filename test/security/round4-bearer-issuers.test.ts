// Security round 4: identities of several `bearer.issuers` are not one name space. Two real
// authorization servers each issue a token whose subject is `alice`; the route's own provider's
// alice keeps her name, the second issuer's is `partner:alice` in rules, X-Forwarded-User, the
// signed assertion and the refusal's `seen.user`, on a route and at forward-auth.
import { createRemoteJWKSet, decodeJwt, jwtVerify } from 'jose'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { oidcClient, reserveBaseUrl, startGateway, type TestGateway } from '../helpers/gateway.js'
import { clientCredentialsToken, startMachineProvider } from '../helpers/machine.js'
import type { TestProvider } from '../helpers/oidc.js'
import { startRedis, type TestRedis } from '../helpers/redis.js'
import { startUpstream, type Upstream } from '../helpers/upstream.js'

const ALICE = { id: 'alice', secret: 'alice-secret' }
/** A client of the route's own provider whose name reads as the partner's alice. */
const LOOKALIKE = { id: 'partner:alice', secret: 'lookalike-secret' }
/** The same, in another case. */
const CASED = { id: 'Partner:alice', secret: 'cased-secret' }
const HOST = 'api.example.com'
/** A forward-auth host without rules: any token of its issuers passes, named as the URL's provider names it. */
const OPEN_HOST = 'reports.example.com'

let redis: TestRedis
let upstream: Upstream
let home: TestProvider
let partner: TestProvider
let gateway: TestGateway

beforeAll(async () => {
  redis = await startRedis()
  upstream = await startUpstream()
  const { port, baseUrl } = await reserveBaseUrl()
  const machineClients = [{ client_id: ALICE.id, client_secret: ALICE.secret }]
  home = await startMachineProvider(baseUrl, { machineClients: [...machineClients, ...[LOOKALIKE, CASED].map(({ id, secret }) => ({ client_id: id, client_secret: secret }))] })
  partner = await startMachineProvider(baseUrl, { machineClients })
  const bearer = { audience: 'api://orders', issuers: ['demo', 'partner'] }
  gateway = await startGateway({
    server: { port, baseUrl, trustProxy: true, host: '127.0.0.1' },
    store: { type: 'redis', url: redis.url },
    providers: { demo: oidcClient(home.issuer, 'c', 's'), partner: oidcClient(partner.issuer, 'c', 's') },
    routes: [
      { path: '/team/', upstream: upstream.url, provider: 'demo', allow: { users: ['alice'] }, bearer },
      { path: '/shared/', upstream: upstream.url, provider: 'demo', assertion: true, bearer },
      { path: '/partners/', upstream: upstream.url, provider: 'demo', allow: { users: ['partner:alice'] }, bearer },
      // The partner's own route on the same upstream: there its alice is the plain one.
      { path: '/partner-side/', upstream: upstream.url, provider: 'partner', assertion: true, bearer },
      // Beside /shared/ on its upstream, without the partner: the own people only.
      { path: '/internal/', upstream: upstream.url, provider: 'demo', assertion: true, bearer: { ...bearer, issuers: ['demo'] } },
      // A deny written for the own account partner:alice before the partner issuer was added.
      { path: '/guarded/', upstream: upstream.url, provider: 'demo', deny: { users: ['partner:alice'] }, bearer },
    ],
    forwardAuth: { hosts: { [HOST]: { allow: { users: ['alice'] }, bearer }, [OPEN_HOST]: { bearer } } },
  })
})

afterAll(async () => {
  await gateway?.close()
  await Promise.all([home?.close(), partner?.close(), upstream?.close()])
  await redis?.release()
})

async function call (op: TestProvider, path: string, headers: Record<string, string> = {}, client = ALICE): Promise<Response> {
  const token = await clientCredentialsToken(op, client, 'api://orders')
  return await fetch(`${gateway.url}${path}`, { headers: { authorization: `Bearer ${token}`, accept: 'application/json', ...headers } })
}

describe('a second issuer\'s alice', () => {
  it('is not admitted by `users: [alice]`, meant for the route\'s provider; its own alice is', async () => {
    expect((await call(home, '/team/x')).status).toBe(200)
    const refused = await call(partner, '/team/x')
    expect(refused.status).toBe(403)
    expect(await refused.json()).toMatchObject({ error: 'forbidden', seen: { user: 'partner:alice' } })
  })

  it('is named partner:alice upstream (X-Forwarded-User, the assertion\'s sub), and a rule names her so', async () => {
    expect((await call(partner, '/shared/b')).status).toBe(200)
    expect((await call(home, '/shared/a')).status).toBe(200)
    const seen = (path: string) => upstream.seen.find((request) => request.url === path)!.headers
    expect(seen('/shared/a')['x-forwarded-user']).toBe('alice')
    expect(seen('/shared/b')['x-forwarded-user']).toBe('partner:alice')
    const keys = createRemoteJWKSet(new URL(`${gateway.url}/.well-known/jwks.json`))
    const assertion = await jwtVerify(String(seen('/shared/b')['x-gateway-assertion']), keys, { issuer: gateway.url, audience: new URL(upstream.url).origin })
    expect(assertion.payload).toMatchObject({ sub: 'partner:alice', provider: 'partner' })
    expect((await call(partner, '/partners/x')).status).toBe(200)
    expect((await call(home, '/partners/x')).status).toBe(403)
  })

  it('is named by each route in its own assertion when one token goes to two routes of one upstream, or one host under two providers', async () => {
    const token = await clientCredentialsToken(partner, ALICE, 'api://orders')
    const send = async (path: string, headers: Record<string, string> = {}) => await fetch(`${gateway.url}${path}`, { headers: { authorization: `Bearer ${token}`, ...headers } })
    const sub = (assertion: unknown) => decodeJwt(String(assertion)).sub
    const seen = (path: string) => upstream.seen.find((request) => request.url === path)!.headers
    // First where the partner is the route's own provider, then where it is not: the assertion of
    // the first (sub alice) must not be the second's.
    expect((await send('/partner-side/a')).status).toBe(200)
    expect((await send('/shared/c')).status).toBe(200)
    expect(sub(seen('/partner-side/a')['x-gateway-assertion'])).toBe('alice')
    expect(seen('/shared/c')['x-forwarded-user']).toBe('partner:alice')
    expect(sub(seen('/shared/c')['x-gateway-assertion'])).toBe('partner:alice')
    const asked = { 'x-forwarded-host': OPEN_HOST, 'x-forwarded-uri': '/x', 'x-forwarded-method': 'GET' }
    const asPartner = await send('/oauth/auth/partner/', asked)
    expect(sub(asPartner.headers.get('x-gateway-assertion'))).toBe('alice')
    const asHome = await send('/oauth/auth/demo/', asked)
    expect(asHome.status).toBe(200)
    expect(sub(asHome.headers.get('x-gateway-assertion'))).toBe('partner:alice')
  })

  it('is told from the forward-auth URL\'s provider\'s alice at forward-auth too', async () => {
    const headers = { 'x-forwarded-host': HOST, 'x-forwarded-uri': '/x', 'x-forwarded-method': 'GET' }
    const own = await call(home, '/oauth/auth/demo/', headers)
    expect(own.status).toBe(200)
    expect(own.headers.get('x-forwarded-user') ?? own.headers.get('x-auth-request-user')).toBe('alice')
    expect((await call(partner, '/oauth/auth/demo/', headers)).status).toBe(403)
    // Asked for the partner provider, the partner's alice is the plain one.
    expect((await call(partner, '/oauth/auth/partner/', headers)).status).toBe(200)
  })

  it('is never the own provider\'s account named partner:alice: that one is demo:partner:alice wherever the route has another name space', async () => {
    const refused = await call(home, '/partners/x', {}, LOOKALIKE)
    expect(refused.status).toBe(403)
    expect(await refused.json()).toMatchObject({ error: 'forbidden', seen: { user: 'demo:partner:alice' } })
    expect((await call(home, '/shared/lookalike', {}, LOOKALIKE)).status).toBe(200)
    const seen = upstream.seen.find((request) => request.url === '/shared/lookalike')!.headers
    expect(seen['x-forwarded-user']).toBe('demo:partner:alice')
    expect(decodeJwt(String(seen['x-gateway-assertion']))).toMatchObject({ sub: 'demo:partner:alice', provider: 'demo' })
    // At forward-auth, where the host's issuers are the other name spaces.
    const asked = await call(home, '/oauth/auth/demo/', { 'x-forwarded-host': OPEN_HOST, 'x-forwarded-uri': '/x', 'x-forwarded-method': 'GET' }, LOOKALIKE)
    expect(decodeJwt(String(asked.headers.get('x-gateway-assertion'))).sub).toBe('demo:partner:alice')
    // Where the partner is the route's own provider, the partner's people keep their plain names
    // and the demo's are qualified: demo's partner:alice is demo:partner:alice there too.
    expect((await call(home, '/partner-side/lookalike', {}, LOOKALIKE)).status).toBe(200)
    expect(upstream.seen.find((request) => request.url === '/partner-side/lookalike')!.headers['x-forwarded-user']).toBe('demo:partner:alice')
  })

  it('is never the own account partner:alice on a route of the same upstream without the partner, nor Partner:alice in another case', async () => {
    expect((await call(home, '/internal/lookalike', {}, LOOKALIKE)).status).toBe(200)
    const internal = seen('/internal/lookalike')
    expect(internal['x-forwarded-user']).toBe('demo:partner:alice')
    expect(decodeJwt(String(internal['x-gateway-assertion'])).sub).toBe('demo:partner:alice')
    expect((await call(home, '/shared/cased', {}, CASED)).status).toBe(200)
    expect(seen('/shared/cased')['x-forwarded-user']).toBe('demo:Partner:alice')
  })

  it('a deny written for the own account partner:alice still refuses it once the route takes the partner\'s tokens, and refuses the partner\'s alice too', async () => {
    expect((await call(home, '/guarded/x', {}, LOOKALIKE)).status).toBe(403)
    expect((await call(home, '/guarded/x', {}, CASED)).status).toBe(403)
    expect((await call(partner, '/guarded/x')).status).toBe(403)
    expect((await call(home, '/guarded/x')).status).toBe(200)
  })
})

function seen (path: string): Record<string, unknown> {
  return upstream.seen.find((request) => request.url === path)!.headers as Record<string, unknown>
}
