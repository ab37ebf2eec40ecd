// Hostile access tokens end to end: a real authorization server issuing client-credentials tokens,
// a second one whose tokens must not pass, a gateway with its clock injected, real Redis and a real
// upstream. Every refused token is answered 401 `invalid_token` (403 `insufficient_scope` for a
// scope short) with RFC 6750's challenge and RFC 9728's metadata address, whatever the Accept, and
// the upstream never sees the request.
import { createHmac, createPublicKey, randomUUID } from 'node:crypto'
import fc from 'fast-check'
import { generateKeyPair, SignJWT, decodeJwt, type JWK, type JWTPayload } from 'jose'
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest'
import { BEARER_JWKS_COOLDOWN_MS } from '../../src/oauth/access-tokens.js'
import { Browser } from '../helpers/browser.js'
import { oidcClient, reserveBaseUrl, startGateway, type TestGateway } from '../helpers/gateway.js'
import { clientCredentialsToken } from '../helpers/machine.js'
import { startOidcProvider, type TestProvider } from '../helpers/oidc.js'
import { startRedis, type TestRedis } from '../helpers/redis.js'
import { startUpstream, type Upstream } from '../helpers/upstream.js'

const CI = { id: 'ci-job', secret: 'ci-secret' }
const BLOCKED = { id: 'blocked-job', secret: 'blocked-secret' }
const registered = (client: { id: string, secret: string }) => ({ client_id: client.id, client_secret: client.secret })
const RESOURCES = {
  'api://orders': { scope: 'orders.read orders.write' },
  'api://billing': { scope: 'orders.read' },
  'api://ledger': { scope: 'ledger.read', format: 'opaque' as const },
  'api://brief': { scope: 'ledger.read', format: 'opaque' as const, ttl: 30 },
}
/** The gateway's clock: the wall clock moved by `offset` milliseconds (reset after each test). */
const clock = { offset: 0, now: () => Date.now() + clock.offset }

let redis: TestRedis
let upstream: Upstream
let op: TestProvider
let other: TestProvider
/** An issuer that goes down during the tests (its introspection endpoint with it). */
let gone: TestProvider
let gateway: TestGateway
/** The `kid` of `op`'s signing key, as its JWKS publishes it. */
let kid: string
/** `op`'s public key as its JWKS publishes it. */
let publicJwk: JWK

beforeAll(async () => {
  redis = await startRedis()
  upstream = await startUpstream()
  const { port, baseUrl } = await reserveBaseUrl()
  // `logout` turns on token revocation (a revoked opaque token must be refused).
  // The gateway's client may also be sent back to the upstream: the test then reads the code there
  // and redeems it itself, as a person's app would, for a real ID token.
  op = await startOidcProvider([{ client_id: 'c', client_secret: 's', redirect_uris: [`${baseUrl}/oauth/authorized/demo/`, `${upstream.url}/signed-in`] }],
    { machineClients: [registered(CI), registered(BLOCKED)], resources: RESOURCES, logout: true })
  // Another issuer whose clients, resources and scopes are the same: only `iss` and keys differ.
  other = await startOidcProvider([{ client_id: 'c2', client_secret: 's2', redirect_uris: [`${baseUrl}/oauth/authorized/other/`] }],
    { machineClients: [registered(CI)], resources: RESOURCES })
  gone = await startOidcProvider([{ client_id: 'c3', client_secret: 's3', redirect_uris: [`${baseUrl}/oauth/authorized/gone/`] }],
    { machineClients: [registered(CI)], resources: RESOURCES })
  const jwks = await (await fetch(`${op.issuer}/jwks`)).json() as { keys: JWK[] }
  publicJwk = jwks.keys[0]!
  kid = publicJwk.kid!
  gateway = await startGateway({
    server: { port, baseUrl },
    store: { type: 'redis', url: redis.url },
    providers: { demo: oidcClient(op.issuer, 'c', 's'), other: oidcClient(other.issuer, 'c2', 's2'), gone: oidcClient(gone.issuer, 'c3', 's3') },
    routes: [
      { path: '/orders/', upstream: upstream.url, provider: 'demo', bearer: { audience: 'api://orders', scopes: ['orders.read'] }, deny: [{ users: [BLOCKED.id] }] },
      { path: '/other/', upstream: upstream.url, provider: 'other', bearer: { audience: 'api://orders' } },
      { path: '/ledger/', upstream: upstream.url, provider: 'demo', bearer: { audience: 'api://ledger', introspect: true } },
      { path: '/brief/', upstream: upstream.url, provider: 'demo', bearer: { audience: 'api://brief', introspect: true } },
      { path: '/vault/', upstream: upstream.url, provider: 'gone', bearer: { audience: 'api://ledger', introspect: true } },
      // Two issuers; opaque tokens only demo's: the other never sees one.
      { path: '/one/', upstream: upstream.url, provider: 'demo', bearer: { audience: 'api://ledger', issuers: ['other', 'demo'], introspect: 'demo' } },
      { path: '/each/', upstream: upstream.url, provider: 'demo', bearer: { audience: 'api://ledger', issuers: ['other', 'demo'], introspect: true } },
    ],
  }, { deps: { clock } })
})

afterEach(() => { clock.offset = 0 })

afterAll(async () => {
  await gateway?.close()
  await Promise.all([op?.close(), other?.close(), gone?.close(), upstream?.close()])
  await redis?.release()
})

const b64 = (value: unknown): string => Buffer.from(typeof value === 'string' ? value : JSON.stringify(value)).toString('base64url')
const nowS = (): number => Math.floor(clock.now() / 1000)

/** The claims of a good access token of `op` for /orders/, with `extra` over them. */
function claims (extra: JWTPayload = {}): JWTPayload {
  return { iss: op.issuer, aud: 'api://orders', sub: 'forged-job', client_id: 'forged-job', scope: 'orders.read', iat: nowS(), exp: nowS() + 300, jti: randomUUID(), ...extra }
}

/** A token signed with `op`'s own signing key: what only `op` could have issued. */
async function signed (payload: JWTPayload, header: Record<string, unknown> = {}): Promise<string> {
  return await new SignJWT(payload).setProtectedHeader({ alg: 'RS256', kid, typ: 'at+jwt', ...header }).sign(op.signingKey)
}

/** Replaces one of a compact JWT's three parts. */
function withPart (token: string, index: 0 | 1 | 2, part: string): string {
  const parts = token.split('.')
  parts[index] = part
  return parts.join('.')
}

/** A real ID token of `login` for the gateway's client `c`, from a sign-in at `op` (with `nonce` when given). */
async function realIdToken (login: string, nonce?: string): Promise<string> {
  const browser = new Browser()
  const query = new URLSearchParams({ client_id: 'c', response_type: 'code', scope: 'openid email', redirect_uri: `${upstream.url}/signed-in`, ...(nonce === undefined ? {} : { nonce }) })
  await browser.navigate(`${op.issuer}/auth?${query}`, { login })
  const back = browser.hops.map((hop) => hop.location).find((location) => location?.startsWith(`${upstream.url}/signed-in`))
  const code = new URL(back!).searchParams.get('code')!
  const form = new URLSearchParams({ grant_type: 'authorization_code', code, redirect_uri: `${upstream.url}/signed-in`, client_id: 'c', client_secret: 's' })
  const answer = await (await fetch(`${op.issuer}/token`, { method: 'POST', body: form })).json() as { id_token: string }
  return answer.id_token
}

const ordersToken = async (scope = 'orders.read'): Promise<string> => await clientCredentialsToken(op, CI, 'api://orders', scope)

let path = 0
/** A path of its own under `prefix`, so that the upstream's record tells whether this request reached it. */
const fresh = (prefix = '/orders/'): string => `${prefix}t${++path}`
const reached = (target: string): boolean => upstream.seen.some((request) => request.url === target)

/**
 * Sends `token` to `prefix` with either Accept and checks the refusal: `status`, its code, the
 * challenge (with `description` in error_description when given), no redirect, the upstream not called.
 */
async function expectRefused (token: string, expected: { status: 401 | 403, error: string, description?: string, prefix?: string, authorization?: string }): Promise<void> {
  for (const accept of ['application/json', 'text/html']) {
    const target = fresh(expected.prefix)
    const response = await fetch(`${gateway.url}${target}`, { redirect: 'manual', headers: { authorization: expected.authorization ?? `Bearer ${token}`, accept } })
    const body = await response.text()
    expect(response.status, `${accept}: ${body.slice(0, 200)}`).toBe(expected.status)
    expect(response.headers.get('location')).toBeNull()
    const challenge = response.headers.get('www-authenticate') ?? ''
    expect(challenge).toMatch(/^Bearer /)
    if (expected.error === 'invalid_token') {
      expect(challenge).toContain('error="invalid_token"')
      const route = (expected.prefix ?? '/orders/').slice(0, -1)
      expect(challenge).toContain(`resource_metadata="${gateway.url}/.well-known/oauth-protected-resource${route}"`)
    }
    if (expected.error === 'insufficient_scope') expect(challenge).toContain('error="insufficient_scope", scope="orders.read"')
    if (expected.description !== undefined) expect(challenge).toContain(expected.description)
    if (accept === 'application/json') {
      expect(response.headers.get('content-type')).toMatch(/^application\/json/)
      expect(JSON.parse(body)).toMatchObject({ error: expected.error, message: expect.any(String) })
    } else {
      // A browser-like Accept gets the error page, never the sign-in redirect.
      expect(response.headers.get('content-type')).toMatch(/^text\/html/)
    }
    expect(reached(target), `${accept}: the upstream was called`).toBe(false)
  }
}

/** The status of one request to a fresh path under `prefix` with `token`; `seen` whether the upstream got it. */
async function statusOf (token: string, prefix = '/orders/'): Promise<{ status: number, seen: boolean }> {
  const target = fresh(prefix)
  const response = await fetch(`${gateway.url}${target}`, { headers: { authorization: `Bearer ${token}`, accept: 'application/json' } })
  await response.arrayBuffer()
  return { status: response.status, seen: reached(target) }
}

describe('tokens refused end to end (upstream never called, either Accept)', () => {
  const rows: Array<[string, () => Promise<string>, { status: 401 | 403, error: string, description?: string, prefix?: string }]> = [
    ['a token for another audience', async () => await clientCredentialsToken(op, CI, 'api://billing', 'orders.read'), { status: 401, error: 'invalid_token', description: '(aud)' }],
    ['a valid token whose header was changed', async () => {
      const token = await ordersToken()
      const header = JSON.parse(Buffer.from(token.split('.')[0]!, 'base64url').toString()) as Record<string, unknown>
      return withPart(token, 0, b64({ ...header, jku: 'https://evil.test/jwks' }))
    }, { status: 401, error: 'invalid_token', description: 'signature does not verify' }],
    ['a valid token whose payload was changed', async () => {
      const token = await ordersToken()
      return withPart(token, 1, b64({ ...decodeJwt(token), sub: 'alice', scope: 'orders.read orders.write admin' }))
    }, { status: 401, error: 'invalid_token', description: 'signature does not verify' }],
    ['a valid token whose signature was changed', async () => {
      const token = await ordersToken()
      const signature = token.split('.')[2]!
      return withPart(token, 2, (signature[0] === 'A' ? 'B' : 'A') + signature.slice(1))
    }, { status: 401, error: 'invalid_token', description: 'signature does not verify' }],
    ['alg none', async () => `${b64({ alg: 'none', typ: 'at+jwt' })}.${b64(claims())}.`, { status: 401, error: 'invalid_token', description: 'algorithm' }],
    ['an HS256 token whose secret is the JWKS public key (key confusion)', async () => {
      const pem = createPublicKey({ key: publicJwk, format: 'jwk' }).export({ type: 'spki', format: 'pem' })
      const input = `${b64({ alg: 'HS256', kid, typ: 'at+jwt' })}.${b64(claims())}`
      return `${input}.${createHmac('sha256', pem).update(input).digest('base64url')}`
    }, { status: 401, error: 'invalid_token', description: 'algorithm' }],
    ['an HS256 token whose secret is the JWK itself (key confusion)', async () => {
      const input = `${b64({ alg: 'HS256', kid, typ: 'at+jwt' })}.${b64(claims())}`
      return `${input}.${createHmac('sha256', JSON.stringify(publicJwk)).update(input).digest('base64url')}`
    }, { status: 401, error: 'invalid_token', description: 'algorithm' }],
    ['another issuer\'s token, same client, audience and scope', async () => await clientCredentialsToken(other, CI, 'api://orders', 'orders.read'), { status: 401, error: 'invalid_token', description: 'not from an issuer this route accepts' }],
    ['a configured issuer\'s token on a route that does not name it', async () => await ordersToken(), { status: 401, error: 'invalid_token', description: 'not from an issuer this route accepts', prefix: '/other/' }],
    ['a token that claims the issuer but is signed by another one\'s key', async () => {
      // Past the refetch cooldown: the gateway reads the issuer's keys again for this kid and does not
      // find it, a verdict (within the cooldown of an earlier read it would be 503 "try again").
      clock.offset += BEARER_JWKS_COOLDOWN_MS
      const token = await clientCredentialsToken(other, CI, 'api://orders', 'orders.read')
      return withPart(token, 1, b64({ ...decodeJwt(token), iss: op.issuer }))
    }, { status: 401, error: 'invalid_token', description: 'key the issuer does not publish' }],
    ['a person\'s real ID token (with a nonce)', async () => await realIdToken('alice', 'n-0123456789'), { status: 401, error: 'invalid_token', description: 'An ID token is not an access token' }],
    ['a person\'s real ID token (without a nonce: the gateway\'s client id is its only audience)', async () => await realIdToken('alice'), { status: 401, error: 'invalid_token', description: 'An ID token is not an access token' }],
    ['an ID token by its typ', async () => await signed(claims(), { typ: 'id+jwt' }), { status: 401, error: 'invalid_token', description: 'An ID token is not an access token' }],
    ['an ID token by its nonce', async () => await signed(claims({ nonce: 'n-0123456789' }), { typ: 'JWT' }), { status: 401, error: 'invalid_token', description: 'An ID token is not an access token' }],
    ['an ID token by its audience (the gateway\'s client id only)', async () => await signed(claims({ aud: 'c', sub: 'alice', azp: 'c' }), { typ: 'JWT' }), { status: 401, error: 'invalid_token', description: 'An ID token is not an access token' }],
    ['a token without exp', async () => { const { exp: _, ...rest } = claims(); return await signed(rest) }, { status: 401, error: 'invalid_token', description: 'no expiry' }],
    ['a token whose nbf is more than 60 s ahead', async () => await signed(claims({ nbf: nowS() + 120 })), { status: 401, error: 'invalid_token', description: 'not valid yet' }],
    ['a token whose exp is more than 60 s past', async () => await signed(claims({ iat: nowS() - 600, exp: nowS() - 61 })), { status: 401, error: 'invalid_token', description: 'expired' }],
    ['a token whose exp is a string', async () => await signed(claims({ exp: String(nowS() + 300) as unknown as number })), { status: 401, error: 'invalid_token' }],
    ['a token short of a required scope', async () => await ordersToken('orders.write'), { status: 403, error: 'insufficient_scope' }],
    ['a token that is not a JWT on a route that does not introspect', async () => await clientCredentialsToken(op, CI, 'api://ledger', 'ledger.read'), { status: 401, error: 'invalid_token', description: 'not a JWT' }],
  ]
  it.each(rows)('refuses %s', async (_name, make, expected) => {
    await expectRefused(await make(), expected)
  })

  it('answers 403 forbidden to a valid token whose subject a deny rule names (rules apply to machine clients)', async () => {
    const token = await clientCredentialsToken(op, BLOCKED, 'api://orders', 'orders.read')
    expect(decodeJwt(token).sub).toBe(BLOCKED.id)
    for (const accept of ['application/json', 'text/html']) {
      const target = fresh()
      const response = await fetch(`${gateway.url}${target}`, { redirect: 'manual', headers: { authorization: `Bearer ${token}`, accept } })
      const body = await response.text()
      expect(response.status).toBe(403)
      if (accept === 'application/json') expect(JSON.parse(body)).toMatchObject({ error: 'forbidden' })
      expect(reached(target)).toBe(false)
    }
  })
})

describe('the credential as sent', () => {
  it.each([
    ['a tab after the scheme', (token: string) => `Bearer\t${token}`],
    ['a comma after the scheme', (token: string) => `Bearer,${token}`],
    ['two tokens', (token: string) => `Bearer ${token} ${token}`],
    ['two credentials', (token: string) => `Bearer ${token},Bearer ${token}`],
  ])('refuses a good token in a malformed credential (%s) with 401, never the sign-in redirect', async (_name, spell) => {
    const token = await ordersToken()
    await expectRefused(token, { status: 401, error: 'invalid_token', description: 'no single well-formed token', authorization: spell(token) })
  })

  it('forwards exactly `Bearer <token>` whatever the scheme\'s case and the spaces, and never a credential it refused', async () => {
    const token = await ordersToken()
    const spelling = fc.record({
      upper: fc.array(fc.boolean(), { minLength: 6, maxLength: 6 }),
      spaces: fc.integer({ min: 1, max: 4 }),
      suffix: fc.constantFrom('', '', '=', ' x', ',x', '.x'),
    })
    await fc.assert(fc.asyncProperty(spelling, async ({ upper, spaces, suffix }) => {
      const scheme = [...'bearer'].map((letter, i) => upper[i] ? letter.toUpperCase() : letter).join('')
      const target = fresh()
      const response = await fetch(`${gateway.url}${target}`, { redirect: 'manual', headers: { authorization: `${scheme}${' '.repeat(spaces)}${token}${suffix}`, accept: 'text/html' } })
      await response.arrayBuffer()
      const seen = upstream.seen.find((request) => request.url === target)
      if (suffix === '') {
        expect(response.status).toBe(200)
        expect(seen?.headers.authorization).toBe(`Bearer ${token}`)
      } else {
        expect(response.status).toBe(401)
        expect(seen).toBeUndefined()
      }
    }), { numRuns: 40 })
  })
})

describe('token lifetime on the gateway\'s clock', () => {
  it('passes a token up to 60 s past exp and refuses it after, though it passed (and was cached) before', async () => {
    const token = await ordersToken()
    const exp = decodeJwt(token).exp! * 1000
    expect(await statusOf(token)).toEqual({ status: 200, seen: true })
    clock.offset = exp + 50_000 - Date.now()
    expect(await statusOf(token)).toEqual({ status: 200, seen: true })
    clock.offset = exp + 61_000 - Date.now()
    await expectRefused(token, { status: 401, error: 'invalid_token', description: 'expired' })
  })

  it('refuses a token before nbf (beyond 60 s) and passes it once the clock reaches it', async () => {
    const token = await signed(claims({ nbf: nowS() + 600, exp: nowS() + 3600 }))
    await expectRefused(token, { status: 401, error: 'invalid_token', description: 'not valid yet' })
    clock.offset = 600_000 - 30_000
    expect(await statusOf(token)).toEqual({ status: 200, seen: true })
  })
})

describe('keys and the verification cache', () => {
  it('a flood of 200 tokens with random kids, each signed by a fresh key, is refused and costs the provider at most one JWKS fetch', async () => {
    // The gateway holds the issuer's keys first (a valid token), as it would in service.
    expect((await statusOf(await ordersToken())).status).toBe(200)
    const before = op.requests('/jwks')
    const tokens = await Promise.all(Array.from({ length: 200 }, async () => {
      const { privateKey } = await generateKeyPair('ES256')
      return await new SignJWT(claims()).setProtectedHeader({ alg: 'ES256', kid: randomUUID(), typ: 'at+jwt' }).sign(privateKey)
    }))
    const answers = await Promise.all(tokens.map(async (token) => await statusOf(token)))
    // Refused (401) once a read of the keys made since the kid was met lacks it; "try again" (503)
    // while the last read is too recent to tell: never passed on.
    expect(answers.every((answer) => (answer.status === 401 || answer.status === 503) && !answer.seen)).toBe(true)
    expect(op.requests('/jwks') - before).toBeLessThanOrEqual(1)
  })

  it('a valid token sent 1000 times costs no JWKS fetch after the first, and each request reaches the upstream with it', async () => {
    const token = await ordersToken()
    expect((await statusOf(token)).status).toBe(200)
    const before = op.requests('/jwks')
    for (let batch = 0; batch < 20; batch++) {
      const answers = await Promise.all(Array.from({ length: 50 }, async () => await statusOf(token)))
      expect(answers.every((answer) => answer.status === 200 && answer.seen)).toBe(true)
    }
    expect(op.requests('/jwks')).toBe(before)
  })
})

describe('opaque tokens by introspection', () => {
  const ledgerToken = async (resource = 'api://ledger'): Promise<string> => await clientCredentialsToken(op, CI, resource, 'ledger.read')

  it('passes an active token, then refuses it once revoked and its cached answer (60 s) is over', async () => {
    const token = await ledgerToken()
    expect(await statusOf(token, '/ledger/')).toEqual({ status: 200, seen: true })
    const revoked = await fetch(`${op.issuer}/token/revocation`, { method: 'POST', body: new URLSearchParams({ token, client_id: CI.id, client_secret: CI.secret }) })
    expect(revoked.status).toBe(200)
    // The positive answer is reused for at most 60 s: within it the revocation is not yet seen.
    const asked = op.requests('/token/introspection')
    clock.offset = 59_000
    expect(await statusOf(token, '/ledger/')).toEqual({ status: 200, seen: true })
    expect(op.requests('/token/introspection')).toBe(asked)
    clock.offset = 61_000
    await expectRefused(token, { status: 401, error: 'invalid_token', description: 'not active', prefix: '/ledger/' })
    expect(op.requests('/token/introspection')).toBeGreaterThan(asked)
  })

  it('introspect: <issuer> sends opaque tokens to that issuer only; introspect: true to each in turn', async () => {
    const token = await ledgerToken()
    const askedOther = other.requests('/token/introspection')
    expect(await statusOf(token, '/one/')).toEqual({ status: 200, seen: true })
    await expectRefused('made-up-opaque-token-for-one', { status: 401, error: 'invalid_token', description: 'not active', prefix: '/one/' })
    expect(other.requests('/token/introspection')).toBe(askedOther)
    // Listed first with introspect: true, the other issuer is asked about demo's token.
    expect(await statusOf(await ledgerToken(), '/each/')).toEqual({ status: 200, seen: true })
    expect(other.requests('/token/introspection')).toBe(askedOther + 1)
  })

  it('refuses an unknown opaque token', async () => {
    await expectRefused('made-up-opaque-token-0123456789', { status: 401, error: 'invalid_token', description: 'not active', prefix: '/ledger/' })
  })

  it('reuses an answer never past the token\'s exp, and refuses the token 60 s after exp though its issuer still calls it active', async () => {
    const token = await ledgerToken('api://brief')
    const asked = op.requests('/token/introspection')
    expect(await statusOf(token, '/brief/')).toEqual({ status: 200, seen: true })
    expect(await statusOf(token, '/brief/')).toEqual({ status: 200, seen: true })
    expect(op.requests('/token/introspection')).toBe(asked + 1)
    // Past its exp (30 s) but within 60 s of the answer: asked again.
    clock.offset = 31_000
    expect(await statusOf(token, '/brief/')).toEqual({ status: 200, seen: true })
    expect(op.requests('/token/introspection')).toBe(asked + 2)
    clock.offset = 91_000
    await expectRefused(token, { status: 401, error: 'invalid_token', description: 'expired', prefix: '/brief/' })
  })
})

describe('an introspection endpoint that is down', () => {
  it('answers 502 provider_unavailable (never a refusal of the token, never the upstream)', async () => {
    const token = await clientCredentialsToken(gone, CI, 'api://ledger', 'ledger.read')
    expect(await statusOf(token, '/vault/')).toEqual({ status: 200, seen: true })
    await gone.close()
    // Past the cached answer: the gateway has to ask again, and nobody answers.
    clock.offset = 61_000
    for (const accept of ['application/json', 'text/html']) {
      const target = fresh('/vault/')
      const response = await fetch(`${gateway.url}${target}`, { redirect: 'manual', headers: { authorization: `Bearer ${token}`, accept } })
      const body = await response.text()
      expect(response.status).toBe(502)
      if (accept === 'application/json') expect(JSON.parse(body)).toMatchObject({ error: 'provider_unavailable' })
      expect(reached(target)).toBe(false)
    }
  })
})

describe('what reaches the logs', () => {
  it('no log line holds a token the gateway saw', async () => {
    const jwt = await ordersToken()
    const opaque = await clientCredentialsToken(op, CI, 'api://ledger', 'ledger.read')
    const forged = await signed(claims({ nbf: nowS() + 600 }))
    await statusOf(jwt)
    await statusOf(opaque, '/ledger/')
    await statusOf(forged)
    for (const token of [jwt, opaque, forged]) {
      const signature = token.split('.').at(-1)!
      expect(gateway.logs.filter((line) => line.includes(signature))).toEqual([])
    }
  })
})
