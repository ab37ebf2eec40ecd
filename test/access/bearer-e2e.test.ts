// Machine clients end to end: a real authorization server issuing client-credentials tokens for two
// resources (RFC 9068 JWTs for one, opaque tokens checked by introspection for the other), a gateway
// whose routes accept them beside browser sessions, real Redis, a real upstream.
import { createRemoteJWKSet, jwtVerify } from 'jose'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { Browser } from '../helpers/browser.js'
import { oidcClient, reserveBaseUrl, startGateway, type TestGateway } from '../helpers/gateway.js'
import { CI, clientCredentialsToken, startMachineProvider } from '../helpers/machine.js'
import type { TestProvider } from '../helpers/oidc.js'
import { startRedis, type TestRedis } from '../helpers/redis.js'
import { startUpstream, type Upstream } from '../helpers/upstream.js'

let redis: TestRedis
let upstream: Upstream
let op: TestProvider
let gateway: TestGateway

beforeAll(async () => {
  redis = await startRedis()
  upstream = await startUpstream()
  const { port, baseUrl } = await reserveBaseUrl()
  op = await startMachineProvider(baseUrl, {
    // As a provider's mapper adds roles to a service account's tokens.
    tokenClaims: (clientId) => clientId === CI.id ? { realm_access: { roles: ['deployer', 'reader'] } } : undefined,
  })
  gateway = await startGateway({
    server: { port, baseUrl },
    store: { type: 'redis', url: redis.url },
    providers: { demo: oidcClient(op.issuer, 'c', 's', 'openid email groups') },
    routes: [
      { path: '/orders/', upstream: upstream.url, provider: 'demo', bearer: { audience: 'api://orders', scopes: ['orders.read'] } },
      { path: '/ledger/', upstream: upstream.url, provider: 'demo', bearer: { audience: 'api://ledger', introspect: true } },
      { path: '/admin/', upstream: upstream.url, provider: 'demo', deny: { users: [CI.id] }, bearer: { audience: 'api://orders' } },
      {
        path: '/deploy/',
        upstream: upstream.url,
        provider: 'demo',
        allow: { claims: { 'realm_access.roles': ['deployer'] } },
        headers: { 'X-Roles': 'claims.realm_access.roles' },
        assertion: true,
        bearer: { audience: 'api://orders' },
      },
    ],
  })
})

afterAll(async () => {
  await gateway?.close()
  await Promise.all([op?.close(), upstream?.close()])
  await redis?.release()
})

/** The upstream's record of the last request whose path is `path`. */
function lastSeen (path: string) {
  return upstream.seen.filter((request) => request.url === path).at(-1)
}

describe('a machine client with a JWT access token', () => {
  it('passes with either Accept, and the upstream gets the token unchanged', async () => {
    const token = await clientCredentialsToken(op, CI, 'api://orders', 'orders.read')
    for (const accept of ['application/json', 'text/html']) {
      const path = `/orders/list?accept=${accept.length}`
      const response = await fetch(`${gateway.url}${path}`, { headers: { authorization: `Bearer ${token}`, accept } })
      expect(response.status).toBe(200)
      expect(lastSeen(path)?.headers.authorization).toBe(`Bearer ${token}`)
      expect(lastSeen(path)?.headers['x-forwarded-user']).toBe(CI.id)
    }
  })

  it('is refused with 403 insufficient_scope when a required scope is missing', async () => {
    const token = await clientCredentialsToken(op, CI, 'api://orders', 'orders.write')
    const response = await fetch(`${gateway.url}/orders/scope-short`, { headers: { authorization: `Bearer ${token}` } })
    expect(response.status).toBe(403)
    expect(await response.json()).toMatchObject({ error: 'insufficient_scope' })
    expect(response.headers.get('www-authenticate')).toMatch(/^Bearer .*error="insufficient_scope", scope="orders.read"/)
    expect(lastSeen('/orders/scope-short')).toBeUndefined()
  })

  it('is refused with 401 invalid_token, naming the resource metadata, for another audience', async () => {
    const token = await clientCredentialsToken(op, CI, 'api://ledger', 'ledger.read')
    const response = await fetch(`${gateway.url}/orders/other-audience`, { headers: { authorization: `Bearer ${token}`, accept: 'text/html' } })
    expect(response.status).toBe(401)
    expect(response.headers.get('www-authenticate')).toContain('error="invalid_token"')
    expect(response.headers.get('www-authenticate')).toContain(`resource_metadata="${gateway.url}/.well-known/oauth-protected-resource/orders"`)
    expect(lastSeen('/orders/other-audience')).toBeUndefined()
  })

  it('is judged by the route\'s rules as a person is: 403 forbidden, offering neither a sign-in nor another account', async () => {
    const token = await clientCredentialsToken(op, CI, 'api://orders', 'orders.read')
    const response = await fetch(`${gateway.url}/admin/x`, { headers: { authorization: `Bearer ${token}`, accept: 'application/json' } })
    expect(response.status).toBe(403)
    const body = await response.json() as Record<string, unknown>
    // A client's token names no e-mail address: nothing is said verified.
    expect(body).toMatchObject({ error: 'forbidden', rule: 'deny', seen: { user: CI.id, email: null, email_verified: null, groups: [] } })
    expect(body).not.toHaveProperty('login_url')
    expect(body).not.toHaveProperty('switch_account_url')
    expect(lastSeen('/admin/x')).toBeUndefined()
    const page = await (await fetch(`${gateway.url}/admin/x`, { headers: { authorization: `Bearer ${token}`, accept: 'text/html' } })).text()
    expect(page).toContain('rules do not admit the client')
    expect(page).not.toContain('Sign in with another account')
    expect(page).not.toContain('Use another account')
  })
})

describe('what the upstream learns of a machine client', () => {
  it('gets claim headers and the signed assertion from the token\'s claims, and rules read those claims', async () => {
    const token = await clientCredentialsToken(op, CI, 'api://orders', 'orders.read')
    const response = await fetch(`${gateway.url}/deploy/run`, { headers: { authorization: `Bearer ${token}` } })
    expect(response.status).toBe(200)
    const seen = lastSeen('/deploy/run')!
    expect(seen.headers['x-roles']).toBe('deployer,reader')
    const assertion = await jwtVerify(String(seen.headers['x-gateway-assertion']), createRemoteJWKSet(new URL(`${gateway.url}/.well-known/jwks.json`)), {
      issuer: gateway.url, audience: new URL(upstream.url).origin,
    })
    expect(assertion.payload).toMatchObject({ sub: CI.id, provider: 'demo' })
  })
})

describe('an opaque token checked by introspection', () => {
  it('passes when the issuer says it is active for this audience', async () => {
    const token = await clientCredentialsToken(op, CI, 'api://ledger', 'ledger.read')
    const response = await fetch(`${gateway.url}/ledger/balance`, { headers: { authorization: `Bearer ${token}` } })
    expect(response.status).toBe(200)
    expect(lastSeen('/ledger/balance')?.headers.authorization).toBe(`Bearer ${token}`)
  })

  it('is refused when the issuer does not know it', async () => {
    const response = await fetch(`${gateway.url}/ledger/forged`, { headers: { authorization: 'Bearer made-up-token-value' } })
    expect(response.status).toBe(401)
    expect(await response.json()).toMatchObject({ error: 'invalid_token' })
  })
})

describe('a browser beside machine clients', () => {
  it('still signs in and passes with its session; without a token or session, a browser is redirected and an API client gets the metadata address', async () => {
    const browser = new Browser()
    const page = await browser.navigate(`${gateway.url}/orders/home`, { login: 'alice' })
    expect(page.status).toBe(200)
    expect(lastSeen('/orders/home')?.headers['x-forwarded-user']).toBe('alice')
    const anonymous = await fetch(`${gateway.url}/orders/home`, { redirect: 'manual', headers: { accept: 'text/html' } })
    expect(anonymous.status).toBe(302)
    const api = await fetch(`${gateway.url}/orders/home`, { headers: { accept: 'application/json' } })
    expect(api.status).toBe(401)
    expect(api.headers.get('www-authenticate')).toContain(`resource_metadata="${gateway.url}/.well-known/oauth-protected-resource/orders"`)
  })

  it('serves the RFC 9728 metadata of a bearer route', async () => {
    const response = await fetch(`${gateway.url}/.well-known/oauth-protected-resource/orders`)
    expect(response.status).toBe(200)
    expect(await response.json()).toEqual({
      resource: `${gateway.url}/orders`,
      authorization_servers: [op.issuer],
      bearer_methods_supported: ['header'],
      scopes_supported: ['orders.read'],
    })
  })
})
