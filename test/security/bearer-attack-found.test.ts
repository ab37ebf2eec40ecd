// Machine clients' tokens: attacks at the seams of the token checks, the identity headers and the
// RFC 9728 endpoint. Real oidc-provider (client-credentials tokens, JWT and opaque), tokens signed
// here with its own signing key where a claim must be odd, real Redis, a real echo upstream.
// Each case here was found by an attack and failed before its fix.
import { decodeProtectedHeader, SignJWT, type JWTPayload } from 'jose'
import { createServer, type Server } from 'node:http'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { oidcClient, reserveBaseUrl, startForwardAuthGateway, startGateway, type TestGateway } from '../helpers/gateway.js'
import { CI, clientCredentialsToken, startMachineProvider } from '../helpers/machine.js'
import type { TestProvider } from '../helpers/oidc.js'
import { close, listen } from '../helpers/net.js'
import { startRedis, type TestRedis } from '../helpers/redis.js'
import { startUpstream, type Upstream } from '../helpers/upstream.js'

let redis: TestRedis
let upstream: Upstream
let op: TestProvider
let gateway: TestGateway
let kid: string
/**
 * A Keycloak stand-in (it cannot be reached from here): its discovery and an RFC 7662 endpoint that
 * answers each token as Keycloak's documentation shows, a refresh token with `typ: Refresh`.
 */
let keycloak: { url: string, answers: Map<string, Record<string, unknown>>, server: Server }

beforeAll(async () => {
  redis = await startRedis()
  upstream = await startUpstream()
  const answers = new Map<string, Record<string, unknown>>()
  const server = createServer((req, res) => {
    const json = (value: unknown) => { res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(value)) }
    if (req.url === '/.well-known/openid-configuration') {
      json({ issuer: keycloak.url, authorization_endpoint: `${keycloak.url}/auth`, token_endpoint: `${keycloak.url}/token`, jwks_uri: `${keycloak.url}/certs`, introspection_endpoint: `${keycloak.url}/token/introspect` })
    } else if (req.url === '/certs') {
      json({ keys: [] })
    } else {
      let body = ''
      req.on('data', (chunk: Buffer) => { body += chunk.toString() })
      req.on('end', () => { json(answers.get(new URLSearchParams(body).get('token') ?? '') ?? { active: false }) })
    }
  })
  keycloak = { url: await listen(server), answers, server }
  const reserved = await reserveBaseUrl()
  op = await startMachineProvider(reserved.baseUrl)
  kid = decodeProtectedHeader(await clientCredentialsToken(op, CI, 'api://orders', 'orders.read')).kid!
  gateway = await startGateway({
    server: { port: reserved.port, baseUrl: reserved.baseUrl },
    store: { type: 'redis', url: redis.url },
    providers: {
      demo: oidcClient(op.issuer, 'c', 's', 'openid email groups'),
      // The same issuer, its users named by their e-mail address (as preset: google does).
      mail: { ...oidcClient(op.issuer, 'c', 's', 'openid email groups'), claims: { user: 'email' } },
      keycloak: oidcClient(keycloak.url, 'c', 's'),
    },
    routes: [
      { path: '/', upstream: upstream.url, provider: 'demo', bearer: { audience: 'api://orders' } },
      { path: '/ledger/', upstream: upstream.url, provider: 'demo', bearer: { audience: 'api://ledger', introspect: true } },
      { path: '/ledger-jwt-only/', upstream: upstream.url, provider: 'demo', bearer: { audience: 'api://ledger' } },
      { path: '/café/', upstream: upstream.url, provider: 'demo', bearer: { audience: 'api://orders' } },
      { path: '/boss/', upstream: upstream.url, provider: 'mail', allow: { users: ['boss@example.com'] }, bearer: { audience: 'api://orders' } },
      { path: '/mail/', upstream: upstream.url, provider: 'mail', bearer: { audience: 'api://orders' } },
      { path: '/kc/', upstream: upstream.url, provider: 'keycloak', bearer: { audience: 'api://kc', introspect: true } },
    ],
  })
})

afterAll(async () => {
  await gateway?.close()
  await Promise.all([op?.close(), upstream?.close(), keycloak && close(keycloak.server)])
  await redis?.release()
})

/** A token signed with the provider's own key (its JWKS publishes it). */
async function signed (claims: JWTPayload): Promise<string> {
  const now = Math.floor(Date.now() / 1000)
  return await new SignJWT({ iss: op.issuer, aud: 'api://orders', sub: 'svc', iat: now, exp: now + 300, ...claims })
    .setProtectedHeader({ alg: 'RS256', kid, typ: 'at+jwt' }).sign(op.signingKey)
}

function lastSeen (path: string) {
  return upstream.seen.filter((request) => request.url === path).at(-1)
}

async function get (path: string, headers: Record<string, string>): Promise<{ status: number, body: string }> {
  const response = await fetch(`${gateway.url}${path}`, { headers: { accept: 'application/json', ...headers }, redirect: 'manual' })
  return { status: response.status, body: await response.text() }
}

describe('what the identity headers carry', () => {
  it('a subject or a group holding a line break or another control character is refused 403 naming the header, the upstream not asked (was a 502)', async () => {
    const odd: JWTPayload[] = [{ sub: 'svc\r\nx-admin: yes' }, { sub: 'svc\nx' }, { sub: 'svc\u0000x' }, { sub: 'svc\u007fx' }, { groups: ['ops', 'x\r\ny'] }]
    for (const [i, claims] of odd.entries()) {
      const path = `/ctl-${i}`
      const result = await get(path, { authorization: `Bearer ${await signed(claims)}` })
      expect(result.status, JSON.stringify(claims)).toBe(403)
      expect(JSON.parse(result.body)).toMatchObject({ error: 'forbidden' })
      expect(result.body).toContain(claims.sub === undefined ? 'x-forwarded-groups' : 'x-forwarded-user')
      expect(result.body).not.toContain('x-admin')
      expect(lastSeen(path)).toBeUndefined()
    }
  })

  it('a subject of 20 KiB is not a 500', async () => {
    const result = await get('/huge-sub', { authorization: `Bearer ${await signed({ sub: 'a'.repeat(20_000) })}` })
    expect(result.status).not.toBe(500)
  })
})

describe('forward-auth\'s identity headers', () => {
  const API = 'api.example.com'
  let forward: Awaited<ReturnType<typeof startForwardAuthGateway>>

  beforeAll(async () => {
    forward = await startForwardAuthGateway(redis.url, {
      forwardAuth: { allowedRedirectHosts: [API], hosts: { [API]: { bearer: { audience: 'api://orders' } } } },
    }, { machineClients: [{ client_id: CI.id, client_secret: CI.secret }], resources: { 'api://orders': { scope: 'orders.read' } } })
  })

  afterAll(async () => {
    await forward?.close()
  })

  it('a subject holding a line break is a 403 for the proxy in front, never a 500', async () => {
    const kidOf = decodeProtectedHeader(await clientCredentialsToken(forward.op, CI, 'api://orders', 'orders.read')).kid!
    const now = Math.floor(Date.now() / 1000)
    const token = await new SignJWT({ iss: forward.op.issuer, aud: 'api://orders', sub: 'svc\r\nx-admin: yes', exp: now + 300 })
      .setProtectedHeader({ alg: 'RS256', kid: kidOf, typ: 'at+jwt' }).sign(forward.op.signingKey)
    const response = await fetch(`${forward.gateway.url}/oauth/auth/demo/`, {
      headers: { authorization: `Bearer ${token}`, 'x-forwarded-host': API, 'x-forwarded-proto': 'http', 'x-forwarded-uri': '/x', accept: 'application/json' },
    })
    expect(response.status).toBe(403)
    expect(response.headers.get('x-admin')).toBeNull()
  })
})

describe('the RFC 9728 endpoint', () => {
  it('a bearer route at / serves its metadata at the bare well-known path, not shadowed by the route', async () => {
    const response = await fetch(`${gateway.url}/.well-known/oauth-protected-resource`)
    expect(response.status).toBe(200)
    expect(await response.json()).toMatchObject({ resource: gateway.url, authorization_servers: [op.issuer] })
    expect(upstream.seen.some((request) => request.url.startsWith('/.well-known/'))).toBe(false)
  })

  it('a route path beyond ASCII: the 401 names an address that serves the route\'s metadata', async () => {
    const refused = await fetch(`${gateway.url}/caf%C3%A9/x`, { headers: { accept: 'application/json' } })
    expect(refused.status).toBe(401)
    const address = /resource_metadata="([^"]+)"/.exec(refused.headers.get('www-authenticate') ?? '')?.[1]
    expect(address).toBeDefined()
    const metadata = await fetch(address!)
    expect(metadata.status).toBe(200)
    expect(await metadata.json()).toMatchObject({ authorization_servers: [op.issuer] })
  })
})

describe('sender-constrained and made-up tokens', () => {
  // A token bound to a key (`cnf`: DPoP's `jkt`, mTLS's `x5t#S256`) is accepted as
  // a plain bearer token. Such a token is only good with a proof of that key (RFC 9449 §7.1: a
  // resource server must refuse it under the Bearer scheme; RFC 8705 §3), which the gateway does not
  // check: whoever lifts one from a log or an upstream replays it here without the key. Refuse a
  // token whose claims (or introspection answer) carry `cnf`, as `invalid_token`.
  it('a DPoP-bound token (cnf.jkt) is refused under the Bearer scheme', async () => {
    const bound = await signed({ cnf: { jkt: '0ZcOCORZNYy-DWpqq30jZyJGHTN0d2HglBV3uiguA4I' } })
    expect((await get('/dpop', { authorization: `Bearer ${bound}` })).status).toBe(401)
    expect(lastSeen('/dpop')).toBeUndefined()
  })

  it('a flood of tokens with made-up kids costs the provider at most one JWKS request', async () => {
    await get('/warm', { authorization: `Bearer ${await signed({})}` })
    const before = op.requests('/jwks')
    const now = Math.floor(Date.now() / 1000)
    await Promise.all(Array.from({ length: 50 }, async (_, i) => {
      const token = await new SignJWT({ iss: op.issuer, aud: 'api://orders', sub: 'svc', exp: now + 300 })
        .setProtectedHeader({ alg: 'RS256', kid: `made-up-${i}` }).sign(op.signingKey)
      // 401 once a read of the keys made since the kid was met lacks it, 503 "try again" while the last read is too recent to tell.
      expect([401, 503]).toContain((await get(`/kid-${i}`, { authorization: `Bearer ${token}` })).status)
    }))
    expect(op.requests('/jwks') - before).toBeLessThanOrEqual(1)
  })
})

describe('an unverified e-mail address as the user name', () => {
  // A sign-in whose user name is an e-mail address the provider has not verified is
  // refused (anyone can type that address into a self-service sign-up), but a machine client's token
  // is not held to it: access/bearer.ts identityOf takes the issuer's `claims.user` mapping as it
  // is. With `claims.user: email` (preset: google maps it so), a token carrying
  // `email: boss@example.com, email_verified: false` (a self-registered account's device-flow
  // token, say) passes `allow: users: [boss@example.com]` and the application gets
  // X-Forwarded-User: boss@example.com. Apply oauth/claims.ts untakenUser to the token's claims
  // as sign-in does (a 403, or fall back to sub), the same on forward-auth.
  it('a token whose user name is an unverified address does not pass a users rule naming it: its sub names it', async () => {
    const token = await signed({ sub: 'self-registered-7', email: 'boss@example.com', email_verified: false })
    const result = await get('/boss/x', { authorization: `Bearer ${token}` })
    expect(result.status).toBe(403)
    expect(JSON.parse(result.body)).toMatchObject({ seen: { user: 'self-registered-7', email: 'boss@example.com', email_verified: false } })
    expect(lastSeen('/boss/x')).toBeUndefined()
  })

  // A verified user name that is not one address (two @) would reach the application as
  // X-Forwarded-User, which it might split at its first @: the token's sub names it instead.
  it('a token whose user name holds two @ is named by its sub, and carries no address', async () => {
    const token = await signed({ sub: 'quoted-7', email: '"boss@example.com"@attacker.example', email_verified: true })
    expect((await get('/mail/x', { authorization: `Bearer ${token}` })).status).toBe(200)
    const headers = lastSeen('/mail/x')?.headers
    expect({ user: headers?.['x-forwarded-user'], email: headers?.['x-forwarded-email'] }).toEqual({ user: 'quoted-7', email: undefined })
  })

  it('the same token with the address verified passes (the route itself works)', async () => {
    const token = await signed({ sub: 'boss-1', email: 'boss@example.com', email_verified: true })
    expect((await get('/boss/ok', { authorization: `Bearer ${token}` })).status).toBe(200)
    expect(lastSeen('/boss/ok')?.headers['x-forwarded-user']).toBe('boss@example.com')
  })
})

describe('introspection', () => {
  // The token cache was consulted before the route's `introspect` setting. An opaque
  // token introspected for a route with `introspect: true` is then accepted, from the cache, on a
  // route with the same issuer and audience whose block says `introspect: false` (documented as
  // "refuses tokens that are not JWTs"), for up to 60 s; before the first route saw it, the same
  // request is refused (not_a_jwt). Which route a client called first changes the answer.
  it('an active refresh token (or ID token) is no access token: refused as inactive, whatever its aud', async () => {
    const exp = Math.floor(Date.now() / 1000) + 3600
    const about = { iss: keycloak.url, sub: 'alice', aud: 'api://kc', exp }
    keycloak.answers.set('kc-access', { active: true, token_type: 'Bearer', typ: 'Bearer', ...about })
    keycloak.answers.set('kc-refresh', { active: true, typ: 'Refresh', ...about })
    keycloak.answers.set('kc-offline', { active: true, typ: 'Offline', ...about })
    keycloak.answers.set('rfc-refresh', { active: true, token_type: 'refresh_token', ...about })
    keycloak.answers.set('rfc-id', { active: true, token_type: 'urn:ietf:params:oauth:token-type:id_token', ...about })
    expect((await get('/kc/x', { authorization: 'Bearer kc-access' })).status).toBe(200)
    for (const token of ['kc-refresh', 'kc-offline', 'rfc-refresh', 'rfc-id']) {
      const answer = await get('/kc/x', { authorization: `Bearer ${token}` })
      expect({ token, status: answer.status }).toEqual({ token, status: 401 })
      expect(answer.body).toContain('invalid_token')
    }
  })

  it('a route without introspect refuses an opaque token even after another route introspected it', async () => {
    const token = await clientCredentialsToken(op, CI, 'api://ledger', 'ledger.read')
    expect((await get('/ledger-jwt-only/before', { authorization: `Bearer ${token}` })).status).toBe(401)
    expect((await get('/ledger/x', { authorization: `Bearer ${token}` })).status).toBe(200)
    expect((await get('/ledger-jwt-only/after', { authorization: `Bearer ${token}` })).status).toBe(401)
    expect(lastSeen('/ledger-jwt-only/after')).toBeUndefined()
  })
})
