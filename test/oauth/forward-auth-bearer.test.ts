// Machine clients at forward-auth, asked directly (no proxy in front): a host whose forwardAuth.hosts
// entry has `bearer:` judges the caller's own access token from a real authorization server
// (client-credentials, RFC 9068 JWTs and opaque tokens), with issuers defaulting to the provider
// the forward-auth URL names. 200 hands the token back unchanged with the identity headers and the
// assertion; refusals are RFC 6750's, never a sign-in. Then the hostile cases: a stranger naming a
// bearer host (its word names nothing, so no token is looked at), a host without a block (the token
// is ignored), and repeated or garbled Authorization headers; then the config.
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { configProblems } from '../helpers/config.js'
import { signIn } from '../helpers/browser.js'
import { oidcClient, reserveBaseUrl, startGateway, type TestGateway } from '../helpers/gateway.js'
import { clientCredentialsToken } from '../helpers/machine.js'
import { startOidcProvider, type TestProvider } from '../helpers/oidc.js'
import { rawRequest } from '../helpers/raw-http.js'
import { startRedis, type TestRedis } from '../helpers/redis.js'
import pino from 'pino'
import { stringify } from 'yaml'
import { parseConfig } from '../../src/config/config.js'
import { BearerReports } from '../../src/access/bearer-report.js'
import { Metrics } from '../../src/ops/metrics.js'
import { AccessTokens } from '../../src/oauth/access-tokens.js'
import { Providers } from '../../src/oauth/providers.js'
import { systemClock } from '../../src/ops/clock.js'
import { HostBearers } from '../../src/routes/forward-auth-bearer.js'
import { TOKEN_MESSAGES } from '../../src/oauth/token-messages.js'

const CI = { id: 'ci-job', secret: 'ci-secret' }
const API = 'api.example.com'
let redis: TestRedis
let op: TestProvider
/** Trusts 127.0.0.1, where the tests connect from, to name the host. */
let trusting: TestGateway
/** The same config, trusting only 10.1.2.3: the tests' X-Forwarded-Host is a stranger's. */
let untrusting: TestGateway
let session: string

beforeAll(async () => {
  redis = await startRedis()
  const [a, b] = [await reserveBaseUrl(), await reserveBaseUrl()]
  op = await startOidcProvider([{ client_id: 'fa', client_secret: 'fa-secret', redirect_uris: [a, b].map(({ baseUrl }) => `${baseUrl}/oauth/authorized/demo/`) }], {
    machineClients: [{ client_id: CI.id, client_secret: CI.secret }],
    resources: {
      'api://orders': { scope: 'orders.read orders.write' },
      'api://ledger': { scope: 'ledger.read', format: 'opaque' },
    },
  })
  const shared = {
    store: { type: 'redis', url: redis.url },
    providers: {
      demo: oidcClient(op.issuer, 'fa', 'fa-secret', 'openid email groups'),
      // No issuer: no keys, no introspection endpoint.
      plain: { clientId: 'p', clientSecret: 'p-secret', authorizeUrl: 'http://127.0.0.1:9/authorize', tokenUrl: 'http://127.0.0.1:9/token', scope: 'read' },
    },
    routes: [],
    forwardAuth: {
      hosts: {
        [API]: { bearer: { audience: 'api://orders', scopes: ['orders.read'] } },
        'ledger.example.com': { bearer: { audience: 'api://ledger', issuers: ['demo'], introspect: true } },
        'ops.example.com': { allow: [{ users: ['someone-else'] }], bearer: { audience: 'api://orders' } },
        'plain.example.com': {},
      },
    },
    assertion: {},
  }
  trusting = await startGateway({ ...shared, server: { ...a, trustProxy: ['127.0.0.1'] } })
  untrusting = await startGateway({ ...shared, server: { ...b, trustProxy: ['10.1.2.3'] } })
  session = (await signIn(`${trusting.url}/oauth/login/demo/?next=/oauth/`, 'alice')).cookie
})

afterAll(async () => {
  await Promise.all([trusting?.close(), untrusting?.close()])
  await op?.close()
  await redis?.release()
})

/** GET /oauth/auth/<provider>/ for `host` (as a proxy names it), with these headers. */
async function auth (host: string, headers: Record<string, string>, options: { gateway?: TestGateway, provider?: string } = {}): Promise<Response> {
  const gateway = options.gateway ?? trusting
  return await fetch(`${gateway.url}/oauth/auth/${options.provider ?? 'demo'}/`, {
    headers: { accept: 'application/json', 'x-forwarded-proto': 'https', 'x-forwarded-host': host, 'x-forwarded-uri': '/v1/orders', ...headers },
    redirect: 'manual',
  })
}

const orders = async (scope = 'orders.read'): Promise<string> => await clientCredentialsToken(op, CI, 'api://orders', scope)

describe('a machine client on a host with bearer:', () => {
  it('passes with its token handed back unchanged, its identity headers and the host\'s assertion', async () => {
    const token = await orders()
    for (const accept of ['application/json', 'text/html']) {
      const response = await auth(API, { authorization: `Bearer ${token}`, accept })
      expect(response.status).toBe(200)
      expect(response.headers.get('authorization')).toBe(`Bearer ${token}`)
      expect(response.headers.get('x-forwarded-user')).toBe(CI.id)
      expect(response.headers.get('x-gateway-assertion')).toMatch(/^ey/)
      expect(response.headers.get('x-login-url')).toBeNull()
    }
  })

  it('is 401 invalid_token with RFC 6750\'s challenge and no sign-in, whatever its Accept, for a token of another audience', async () => {
    const token = await clientCredentialsToken(op, CI, 'api://ledger', 'ledger.read')
    for (const accept of ['application/json', 'text/html']) {
      const response = await auth(API, { authorization: `Bearer ${token}`, accept })
      expect(response.status).toBe(401)
      expect(response.headers.get('www-authenticate')).toMatch(/^Bearer realm="demo", error="invalid_token", error_description="[^"]+"$/)
      expect(response.headers.get('x-login-url')).toBeNull()
      expect(response.headers.get('authorization')).toBeNull()
    }
    // The page shows at the application's address (Caddy passes it on): its way on is the gateway's, in full.
    const page = await (await auth(API, { authorization: `Bearer ${token}`, accept: 'text/html' })).text()
    expect(page).toContain(`href="${trusting.url}/oauth/"`)
    expect(page).not.toContain('href="/')
    const body = await (await auth(API, { authorization: `Bearer ${token}` })).json() as Record<string, unknown>
    expect(body).toMatchObject({ error: 'invalid_token' })
    expect(body).not.toHaveProperty('login_url')
  })

  it('is 403 insufficient_scope naming the scope when one is short', async () => {
    const response = await auth(API, { authorization: `Bearer ${await orders('orders.write')}` })
    expect(response.status).toBe(403)
    expect(response.headers.get('www-authenticate')).toBe('Bearer realm="demo", error="insufficient_scope", scope="orders.read"')
    expect(await response.json()).toMatchObject({ error: 'insufficient_scope' })
  })

  it('is 403 forbidden, offering neither a sign-in nor another account, when the host\'s rules refuse the token\'s identity', async () => {
    const response = await auth('ops.example.com', { authorization: `Bearer ${await orders()}` })
    expect(response.status).toBe(403)
    const body = await response.json() as Record<string, unknown>
    expect(body).toMatchObject({ error: 'forbidden', seen: { user: CI.id } })
    expect(body).not.toHaveProperty('login_url')
    expect(body).not.toHaveProperty('switch_account_url')
  })

  it('passes an opaque token the issuer says is active, on a host that introspects', async () => {
    const token = await clientCredentialsToken(op, CI, 'api://ledger', 'ledger.read')
    const response = await auth('ledger.example.com', { authorization: `Bearer ${token}` })
    expect(response.status).toBe(200)
    expect(response.headers.get('authorization')).toBe(`Bearer ${token}`)
    expect((await auth('ledger.example.com', { authorization: 'Bearer made-up-token-value' })).status).toBe(401)
  })

  it('refuses every token when the URL names a provider without issuer (no keys to check it with)', async () => {
    const response = await auth(API, { authorization: `Bearer ${await orders()}` }, { provider: 'plain' })
    expect(response.status).toBe(401)
    expect(response.headers.get('www-authenticate')).toMatch(/^Bearer realm="plain", error="invalid_token"/)
  })

  it('keeps the session flow for a browser without a token on the same host', async () => {
    const response = await auth(API, { cookie: session })
    expect(response.status).toBe(200)
    expect(response.headers.get('x-forwarded-user')).toBe('alice')
    const anonymous = await auth(API, { accept: 'text/html' })
    expect(anonymous.status).toBe(401)
    expect(anonymous.headers.get('x-login-url')).toContain('/oauth/login/demo/')
  })

  it('judges the token, not the session, when a request carries both', async () => {
    const response = await auth(API, { cookie: session, authorization: `Bearer ${await orders('orders.write')}` })
    expect(response.status).toBe(403)
    expect(await response.json()).toMatchObject({ error: 'insufficient_scope' })
  })
})

describe('what an operator sees of forward-auth\'s token callers', () => {
  it('counts each host\'s outcomes in gateway_bearer_tokens_total and names the credential and reason on the request line', async () => {
    const before = await (await fetch(`${trusting.url}/metrics`)).text()
    // Every bearer host has its series from the start (the earlier tests of this file counted some).
    for (const host of [API, 'ledger.example.com', 'ops.example.com']) expect(before).toContain(`gateway_bearer_tokens_total{route="forward-auth:${host}",result="accepted"}`)
    expect(before).not.toContain('forward-auth:plain.example.com')
    const accepted = (text: string) => Number(/gateway_bearer_tokens_total\{route="forward-auth:api\.example\.com",result="accepted"\} (\d+)/.exec(text)?.[1] ?? 0)
    expect((await auth(API, { authorization: `Bearer ${await orders()}` })).status).toBe(200)
    const opaque = await auth(API, { authorization: 'Bearer not-a-jwt' })
    expect(opaque.status).toBe(401)
    // Said of the host, where there is no route to name.
    expect(opaque.headers.get('www-authenticate')).toContain('error_description="The token is not a JWT, and tokens are not introspected here."')
    const after = await (await fetch(`${trusting.url}/metrics`)).text()
    expect(accepted(after)).toBe(accepted(before) + 1)
    expect(after).toMatch(/gateway_bearer_tokens_total\{route="forward-auth:api\.example\.com",result="not_a_jwt"\} [1-9]/)
    const lines = trusting.logs.map((line) => JSON.parse(line) as Record<string, unknown>).filter((line) => line.msg === 'request completed' && line.url === '/oauth/auth/demo/')
    expect(lines.at(-1)).toMatchObject({ credential: 'bearer', decision: 'token_refused', reason: 'not_a_jwt' })
    expect(lines.at(-2)).toMatchObject({ credential: 'bearer', decision: 'allow', user: CI.id })
  })
})

describe('tokens where no bearer block applies', () => {
  it('a host without bearer: ignores the token: a session passes with its own token, no session gets the sign-in', async () => {
    const token = await orders()
    const signedIn = await auth('plain.example.com', { cookie: session, authorization: `Bearer ${token}` })
    expect(signedIn.status).toBe(200)
    expect(signedIn.headers.get('x-forwarded-user')).toBe('alice')
    expect(signedIn.headers.get('authorization')).not.toBe(`Bearer ${token}`)
    const anonymous = await auth('plain.example.com', { authorization: `Bearer ${token}` })
    expect(anonymous.status).toBe(401)
    expect(await anonymous.json()).toMatchObject({ error: 'unauthenticated' })
    expect(anonymous.headers.get('x-login-url')).toContain('/oauth/login/demo/')
  })

  it('a caller trustProxy does not admit, naming a bearer host, gets no token check and no identity: refused (which host it asks for cannot be told)', async () => {
    const token = await orders()
    const response = await auth(API, { authorization: `Bearer ${token}` }, { gateway: untrusting })
    expect(response.status).toBe(403)
    expect(await response.json()).toMatchObject({ error: 'forbidden' })
    expect(response.headers.get('x-forwarded-user')).toBeNull()
    expect(response.headers.get('authorization')).toBeNull()
  })
})

describe('repeated and garbled Authorization headers on a bearer host', () => {
  /** The answer to raw header lines (fetch would merge or refuse them). */
  async function raw (lines: string[]): Promise<{ status: number, headers: Record<string, string>, body: string }> {
    return await rawRequest(trusting.config.server.port, '/oauth/auth/demo/', [`X-Forwarded-Host: ${API}`, 'X-Forwarded-Proto: https', 'X-Forwarded-Uri: /v1/orders', ...lines])
  }

  it('refuses a repeated header that names Bearer as malformed (401 invalid_token), even when each value is valid alone', async () => {
    const token = await orders()
    expect((await raw([`Authorization: Bearer ${token}`])).status).toBe(200)
    for (const lines of [
      [`Authorization: Bearer ${token}`, `Authorization: Bearer ${token}`],
      [`Authorization: Bearer ${token}`, 'Authorization: Bearer x'],
      ['Authorization: Basic YTpi', `Authorization: Bearer ${token}`],
    ]) {
      const response = await raw(lines)
      expect(response.status, lines.join(' | ')).toBe(401)
      // Malformed (more than one token), never "no token was sent".
      expect(JSON.parse(response.body)).toMatchObject({ error: 'invalid_token', message: TOKEN_MESSAGES.malformed })
      expect(response.headers['x-login-url']).toBeUndefined()
      expect(response.headers.authorization).toBeUndefined()
    }
  })

  it.each([
    'Bearer',
    'Bearer ',
    'Bearer a b',
    'Bearer tok,en',
    'Bearer "quoted"',
    'bearer not-a-jwt',
  ])('refuses %j with 401 invalid_token, never the sign-in', async (value) => {
    const response = await raw([`Authorization: ${value}`])
    expect(response.status).toBe(401)
    expect(JSON.parse(response.body)).toMatchObject({ error: 'invalid_token' })
    expect(response.headers['www-authenticate']).toMatch(/^Bearer realm="demo", error="invalid_token"/)
    expect(response.headers['x-login-url']).toBeUndefined()
  })

  it('leaves other schemes, once or repeated, to the session (the sign-in)', async () => {
    for (const lines of [['Authorization: Basic YTpi'], ['Authorization: Basic YTpi', 'Authorization: Basic Yzpk'], ['Authorization: Bearerx y']]) {
      const response = await raw(lines)
      expect(response.status, lines.join(' | ')).toBe(401)
      expect(JSON.parse(response.body)).toMatchObject({ error: 'unauthenticated' })
      expect(response.headers['x-login-url']).toContain('/oauth/login/demo/')
    }
  })
})

describe('the config of a forward-auth host\'s bearer block', () => {
  const base = (bearer: Record<string, unknown>): string => stringify({
    server: { baseUrl: 'https://auth.example.com', trustProxy: '10.0.0.5' },
    session: { secret: 'a-long-enough-session-secret-0123456789-abcdef' },
    providers: { demo: { clientId: 'c', clientSecret: 's', issuer: 'https://id.example.com', scope: 'openid' } },
    forwardAuth: { hosts: { [API]: { bearer } } },
  })

  it('keeps issuers empty when not given: the provider the forward-auth URL names', () => {
    const config = parseConfig(base({ audience: 'api://orders' }), {})
    expect(config.forwardAuth.bearer.get(API)).toEqual({ audience: 'api://orders', issuers: [], scopes: [], header: 'authorization', introspect: false, claimsFrom: 'token' })
  })

  it('compiles one check per (host, provider) pair on first use, however often asked: at most hosts x providers (a block naming its issuers too: the URL\'s provider is the one whose people keep their plain name)', () => {
    const config = parseConfig(stringify({
      server: { baseUrl: 'https://auth.example.com', trustProxy: '10.0.0.5' },
      session: { secret: 'a-long-enough-session-secret-0123456789-abcdef' },
      providers: Object.fromEntries(['a', 'b', 'c'].map((name) => [name, { clientId: name, clientSecret: 's', issuer: `https://${name}.example.com`, scope: 'openid' }])),
      forwardAuth: { hosts: { 'x.example.com': { bearer: { audience: 'api://x' } }, 'y.example.com': { bearer: { audience: 'api://y', issuers: ['a'] } }, 'z.example.com': {} } },
    }), {})
    const log = pino({ level: 'silent' })
    const bearers = new HostBearers(config, new AccessTokens(new Providers(config.providers, log), systemClock), new BearerReports(new Metrics(), log, systemClock))
    expect(bearers.size).toBe(0)
    for (let round = 0; round < 100; round++) {
      for (const provider of ['a', 'b', 'c']) {
        expect(bearers.guard('x.example.com', provider)).toBe(bearers.guard('x.example.com', provider))
        expect(bearers.guard('y.example.com', provider)).toBe(bearers.guard('y.example.com', provider))
        expect(bearers.guard('z.example.com', provider)).toBeUndefined()
        expect(bearers.guard(`w${round}.example.com`, provider)).toBeUndefined()
        expect(bearers.guard(undefined, provider)).toBeUndefined()
        expect(bearers.guard('x.example.com', `${provider}${round}`)).toBeUndefined()
      }
    }
    expect(bearers.size).toBe(6)
  })

  it('refuses header: proxy-authorization (the proxy in front sets the application\'s Authorization)', () => {
    expect(configProblems(base({ audience: 'api://orders', header: 'proxy-authorization' }))).toEqual([
      'forwardAuth.hosts.api.example.com.bearer.header: must be authorization on a forward-auth host: the proxy in front sets the application\'s Authorization from the gateway\'s answer, so a token in Proxy-Authorization cannot leave the application its own; leave header out, or put the route behind the gateway\'s own proxy (routes:) (line 17)',
    ])
  })
})
