// The signed identity assertion: the example upstream of docs/assertion.md (run here verbatim)
// verifies it with jose's createRemoteJWKSet against the gateway's /.well-known/jwks.json; altered,
// expired and wrong-audience assertions are refused; two instances on one real Redis publish the
// same key, and a rotation keeps the previous one published; signing happens once per session and
// route until the assertion nears expiry. Time is an injected clock shared by the gateways.
import { createRemoteJWKSet, decodeJwt, decodeProtectedHeader, jwtVerify, type JSONWebKeySet, type JWTPayload } from 'jose'
import { mkdtemp, readFile, symlink, writeFile } from 'node:fs/promises'
import type { IncomingHttpHeaders, Server } from 'node:http'
import { tmpdir } from 'node:os'
import { join, resolve } from 'node:path'
import { pathToFileURL } from 'node:url'
import { Redis } from 'ioredis'
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest'
import { stringify } from 'yaml'
import { ConfigError, parseConfig } from '../../src/config/config.js'
import { buildGateway } from '../../src/gateway.js'
import type { FastifyInstance } from 'fastify'
import { Browser, signIn as signInAt } from '../helpers/browser.js'
import { TEST_SECRET, logCollector, oidcClient, reserveBaseUrl } from '../helpers/gateway.js'
import { close, listen, releasePort, waitFor } from '../helpers/net.js'
import { startOidcProvider, type TestProvider } from '../helpers/oidc.js'
import { startRedis, type TestRedis } from '../helpers/redis.js'
import { startUpstream, type SeenRequest, type Upstream } from '../helpers/upstream.js'

const DAY = 86_400_000

/** The docs' example upstream, as a module: the code block under "Verifying it in an upstream". */
interface ExampleUpstream {
  assertionVerifier (options: { gateway: string, audience: string, header?: string }): (request: { headers: IncomingHttpHeaders }) => Promise<JWTPayload>
  createApp (options: { gateway: string, audience: string }): Server
}

async function loadDocsExample (): Promise<ExampleUpstream> {
  const docs = await readFile('docs/assertion.md', 'utf8')
  const code = /## Verifying it in an upstream[\s\S]*?```js\n([\s\S]*?)```/.exec(docs)?.[1]
  if (!code) throw new Error('docs/assertion.md has no js example under "Verifying it in an upstream"')
  const dir = await mkdtemp(join(tmpdir(), 'gw-assertion-example-'))
  // So that the example's `import ... from 'jose'` resolves as it would in an application.
  await symlink(resolve('node_modules'), join(dir, 'node_modules'))
  await writeFile(join(dir, 'upstream.mjs'), code)
  return await import(pathToFileURL(join(dir, 'upstream.mjs')).href) as ExampleUpstream
}

/**
 * The gateways' clock: real time plus an offset the tests move (no waiting on the wall clock), or,
 * while `frozen` is set, that instant plus the offset (what a test that counts signings needs: a
 * busy machine's real seconds must not move the renewal point).
 */
const clock = { offset: 0, frozen: undefined as number | undefined, now: () => (clock.frozen ?? Date.now()) + clock.offset }

interface Instance { url: string, app: FastifyInstance }

async function startInstance (raw: Record<string, unknown>, port: number, baseUrl: string): Promise<Instance> {
  const config = parseConfig(stringify({ ...raw, server: { host: '127.0.0.1', port, baseUrl }, session: { secret: TEST_SECRET } }), {}, 'test.yaml')
  const app = await buildGateway(config, { logStream: logCollector().stream, clock })
  await releasePort(port) // reserved (held) by reserveBaseUrl() until now
  await app.listen({ host: '127.0.0.1', port })
  return { url: baseUrl, app }
}

let redis: TestRedis
let op: TestProvider
let echo: Upstream
let example: ExampleUpstream
let apps: Array<{ server: Server, url: string }>
let a: Instance
let b: Instance
let custom: Instance

const json = { accept: 'application/json' }

beforeAll(async () => {
  redis = await startRedis()
  echo = await startUpstream()
  example = await loadDocsExample()
  const bases = [await reserveBaseUrl(), await reserveBaseUrl(), await reserveBaseUrl()]
  op = await startOidcProvider([{ client_id: 'c', client_secret: 's', redirect_uris: bases.map(({ baseUrl }) => `${baseUrl}/oauth/authorized/demo/`) }])
  // Two applications that believe only assertions meant for them (audience = their own origin).
  apps = []
  for (let i = 0; i < 2; i++) {
    const server = example.createApp({ gateway: bases[0]!.baseUrl, audience: 'http://placeholder' })
    const url = await listen(server)
    await close(server)
    const app = example.createApp({ gateway: bases[0]!.baseUrl, audience: url })
    await new Promise<void>((resolve) => app.listen(Number(new URL(url).port), '127.0.0.1', resolve))
    apps.push({ server: app, url })
  }
  const provider = { demo: oidcClient(op.issuer, 'c', 's', 'openid email profile groups') }
  const routes = [
    { path: '/app/', upstream: apps[0]!.url, provider: 'demo', assertion: true },
    { path: '/other/', upstream: apps[1]!.url, provider: 'demo', assertion: true },
    { path: '/signed/', upstream: echo.url, provider: 'demo', assertion: true },
    { path: '/plain/', upstream: echo.url, provider: 'demo' },
    { path: '/open/', upstream: echo.url, auth: 'none' },
  ]
  const shared = { store: { type: 'redis', url: redis.url }, providers: provider, routes }
  // Started together: they must agree on one key pair.
  ;[a, b] = await Promise.all([startInstance(shared, bases[0]!.port, bases[0]!.baseUrl), startInstance(shared, bases[1]!.port, bases[1]!.baseUrl)])
  custom = await startInstance({
    assertion: { header: 'X-Identity-Assertion', ttl: '30s' },
    store: { type: 'memory' },
    providers: provider,
    routes: [{ path: '/signed/', upstream: echo.url, provider: 'demo', assertion: true }, { path: '/open/', upstream: echo.url, auth: 'none' }],
  }, bases[2]!.port, bases[2]!.baseUrl)
})

afterAll(async () => {
  await Promise.all([a?.app.close(), b?.app.close(), custom?.app.close()])
  await Promise.all([op?.close(), echo?.close(), ...(apps ?? []).map(({ server }) => close(server))])
  await redis?.release()
})

async function signIn (gateway: Instance, login: string, start = '/app/'): Promise<string> {
  return (await signInAt(`${gateway.url}${start}`, login)).cookie
}

async function seen (url: string, headers: Record<string, string>): Promise<SeenRequest> {
  const response = await fetch(url, { headers: { ...json, ...headers } })
  expect(response.status).toBe(200)
  return await response.json() as SeenRequest
}

async function assertionOf (url: string, cookie: string, header = 'x-gateway-assertion'): Promise<string> {
  const value = (await seen(url, { cookie })).headers[header]
  expect(typeof value).toBe('string')
  return value as string
}

async function jwks (gateway: Instance): Promise<{ response: Response, keys: JSONWebKeySet['keys'] }> {
  const response = await fetch(`${gateway.url}/.well-known/jwks.json`)
  expect(response.status).toBe(200)
  return { response, keys: (await response.json() as JSONWebKeySet).keys }
}

const signings = (gateway: Instance) => gateway.app.assertions!.signed

describe('an upstream verifying the assertion as docs/assertion.md shows', () => {
  it('gets the signed-in user through the gateway, and 401 without the gateway', async () => {
    clock.offset = 0
    const browser = new Browser()
    const landed = await browser.navigate(`${a.url}/app/`, { login: 'alice' })
    expect(landed.status).toBe(200)
    expect(await landed.json()).toEqual({ user: 'alice', email: 'alice@example.test', groups: ['admins', 'staff'] })
    expect((await fetch(`${apps[0]!.url}/`)).status).toBe(401)
  })

  it('carries iss, aud, sub, email, groups, provider, iat and exp (ttl) with the kid of a published ES256 key', async () => {
    clock.offset = 0
    const token = await assertionOf(`${a.url}/signed/x`, await signIn(a, 'alice'))
    const header = decodeProtectedHeader(token)
    const claims = decodeJwt(token)
    expect(header.alg).toBe('ES256')
    expect(claims).toMatchObject({ iss: a.url, aud: new URL(echo.url).origin, sub: 'alice', email: 'alice@example.test', groups: ['admins', 'staff'], provider: 'demo' })
    expect(claims.exp! - claims.iat!).toBe(60)
    expect(Math.abs(claims.iat! - Date.now() / 1000)).toBeLessThan(5)
    const { response, keys } = await jwks(a)
    expect(response.headers.get('cache-control')).toBe('public, max-age=300')
    expect(keys.map((key) => key.kid)).toContain(header.kid)
    for (const key of keys) {
      expect(key).toMatchObject({ kty: 'EC', crv: 'P-256', alg: 'ES256', use: 'sig' })
      expect(key).not.toHaveProperty('d')
    }
    const verify = example.assertionVerifier({ gateway: a.url, audience: new URL(echo.url).origin })
    expect((await verify({ headers: { 'x-gateway-assertion': token } })).sub).toBe('alice')
  })

  it('leaves out an e-mail address the provider did not verify', async () => {
    clock.offset = 0
    const claims = decodeJwt(await assertionOf(`${a.url}/signed/x`, await signIn(a, 'eve')))
    expect(claims.sub).toBe('eve')
    expect(claims).not.toHaveProperty('email')
  })

  it('refuses an altered assertion (payload or signature)', async () => {
    clock.offset = 0
    const token = await assertionOf(`${a.url}/signed/x`, await signIn(a, 'bob'))
    const verify = example.assertionVerifier({ gateway: a.url, audience: new URL(echo.url).origin })
    const [head, payload, signature] = token.split('.') as [string, string, string]
    const forged = Buffer.from(JSON.stringify({ ...decodeJwt(token), sub: 'alice', groups: ['admins'] })).toString('base64url')
    await expect(verify({ headers: { 'x-gateway-assertion': `${head}.${forged}.${signature}` } })).rejects.toMatchObject({ code: 'ERR_JWS_SIGNATURE_VERIFICATION_FAILED' })
    const flipped = `${signature.slice(0, 10)}${signature[10] === 'A' ? 'B' : 'A'}${signature.slice(11)}`
    await expect(verify({ headers: { 'x-gateway-assertion': `${head}.${payload}.${flipped}` } })).rejects.toMatchObject({ code: 'ERR_JWS_SIGNATURE_VERIFICATION_FAILED' })
    await expect(verify({ headers: {} })).rejects.toThrow(/no assertion/)
  })

  it('refuses an assertion meant for another upstream (audience)', async () => {
    clock.offset = 0
    const token = await assertionOf(`${a.url}/signed/x`, await signIn(a, 'bob'))
    const verify = example.assertionVerifier({ gateway: a.url, audience: apps[1]!.url })
    await expect(verify({ headers: { 'x-gateway-assertion': token } })).rejects.toMatchObject({ code: 'ERR_JWT_CLAIM_VALIDATION_FAILED', claim: 'aud' })
    // Replayed straight at the other application, it gets 401 there too.
    expect((await fetch(`${apps[1]!.url}/`, { headers: { 'x-gateway-assertion': token } })).status).toBe(401)
  })

  it('refuses an expired assertion (signed by a gateway whose clock says ten minutes ago)', async () => {
    clock.offset = -10 * 60_000
    try {
      const token = await assertionOf(`${a.url}/signed/x`, await signIn(a, 'carol', '/plain/'))
      expect(decodeJwt(token).exp! * 1000).toBeLessThan(Date.now())
      const verify = example.assertionVerifier({ gateway: a.url, audience: new URL(echo.url).origin })
      await expect(verify({ headers: { 'x-gateway-assertion': token } })).rejects.toMatchObject({ code: 'ERR_JWT_EXPIRED' })
    } finally {
      clock.offset = 0
    }
  })
})

describe('where the header goes', () => {
  it('sends nothing to a route without assertion: true, and drops a client-sent one in any spelling on every route', async () => {
    clock.offset = 0
    const cookie = await signIn(a, 'alice')
    const forged = { 'x-gateway-assertion': 'forged', x_gateway_assertion: 'forged' }
    for (const url of [`${a.url}/plain/x`, `${a.url}/open/x`]) {
      const headers = (await seen(url, { cookie, ...forged })).headers
      expect(headers).not.toHaveProperty('x-gateway-assertion')
      expect(headers).not.toHaveProperty('x_gateway_assertion')
    }
    const signed = (await seen(`${a.url}/signed/x`, { cookie, ...forged })).headers
    expect(signed['x-gateway-assertion']).not.toBe('forged')
    expect(signed).not.toHaveProperty('x_gateway_assertion')
  })

  it('uses the configured header name, and drops a client-sent header of that name', async () => {
    const cookie = await signIn(custom, 'alice', '/signed/')
    const headers = (await seen(`${custom.url}/signed/x`, { cookie, 'x-identity-assertion': 'forged' })).headers
    expect(headers).not.toHaveProperty('x-gateway-assertion')
    const claims = decodeJwt(headers['x-identity-assertion'] as string)
    expect(claims.exp! - claims.iat!).toBe(30)
    const open = (await seen(`${custom.url}/open/x`, { 'x-identity-assertion': 'forged', x_identity_assertion: 'forged' })).headers
    expect(open).not.toHaveProperty('x-identity-assertion')
    expect(open).not.toHaveProperty('x_identity_assertion')
  })
})

describe('signing on the hot path', () => {
  afterEach(() => { clock.frozen = undefined })

  it('signs once per session and route, and again only when less than a third of the ttl is left', async () => {
    clock.offset = 0
    const cookie = await signIn(a, 'dana', '/plain/')
    clock.frozen = Date.now()
    const before = signings(a)
    const first = await Promise.all(Array.from({ length: 10 }, () => assertionOf(`${a.url}/signed/x`, cookie)))
    const again = await Promise.all(Array.from({ length: 10 }, () => assertionOf(`${a.url}/signed/y`, cookie)))
    expect(new Set([...first, ...again]).size).toBe(1)
    expect(signings(a) - before).toBe(1)
    clock.offset = 39_000
    expect(await assertionOf(`${a.url}/signed/x`, cookie)).toBe(first[0])
    expect(signings(a) - before).toBe(1)
    clock.offset = 41_000
    const renewed = await Promise.all(Array.from({ length: 10 }, () => assertionOf(`${a.url}/signed/x`, cookie)))
    expect(new Set(renewed).size).toBe(1)
    expect(renewed[0]).not.toBe(first[0])
    expect(decodeJwt(renewed[0]!).iat! - decodeJwt(first[0]!).iat!).toBeGreaterThanOrEqual(40)
    expect(signings(a) - before).toBe(2)
    clock.offset = 0
  })
})

describe('keys shared by every instance on one store', () => {
  it('has two instances started together publish the same key, and each verifies the other\'s assertions', async () => {
    clock.offset = 0
    const [fromA, fromB] = await Promise.all([jwks(a), jwks(b)])
    expect(fromA.keys).toHaveLength(1)
    expect(fromB.keys).toEqual(fromA.keys)
    const cookie = await signIn(a, 'alice')
    const token = await assertionOf(`${b.url}/signed/x`, cookie)
    expect(decodeProtectedHeader(token).kid).toBe(fromA.keys[0]!.kid)
    await jwtVerify(token, createRemoteJWKSet(new URL(`${a.url}/.well-known/jwks.json`)), { issuer: b.url, audience: new URL(echo.url).origin })
  })

  it('refuses to overwrite the keys of another session.secret: 500 internal_error, and the log says what to fix', async () => {
    clock.offset = 0
    const { port, baseUrl } = await reserveBaseUrl()
    const { stream, lines } = logCollector()
    const config = parseConfig(stringify({
      server: { host: '127.0.0.1', port, baseUrl },
      session: { secret: 'another-session-secret-0123456789-abcdefghij' },
      store: { type: 'redis', url: redis.url },
      assertion: {},
    }), {}, 'test.yaml')
    const stranger = await buildGateway(config, { logStream: stream, clock })
    try {
      const response = await stranger.inject({ url: '/.well-known/jwks.json', headers: json })
      expect(response.statusCode).toBe(500)
      expect(response.json()).toMatchObject({ error: 'internal_error' })
      expect(lines.join('\n')).toContain('sealed with another session.secret')
      expect((await jwks(a)).keys).toHaveLength(1)
    } finally {
      await stranger.close()
    }
  })

  it('rotates after rotateEvery without a restart, keeps the previous key published, and both keys verify', async () => {
    clock.offset = 0
    const cookie = await signIn(a, 'alice')
    const old = await assertionOf(`${a.url}/signed/x`, cookie)
    const oldKid = decodeProtectedHeader(old).kid
    clock.offset = DAY + 1000
    const rotated = await jwks(a)
    expect(rotated.keys.map((key) => key.kid)).toHaveLength(2)
    expect(rotated.keys.map((key) => key.kid)).toContain(oldKid)
    await waitFor(async () => JSON.stringify((await jwks(b)).keys) === JSON.stringify(rotated.keys), 2000, 'the other instance to publish the new key')
    // The new key is published ahead of use; once that lead has passed, it signs.
    clock.offset = DAY + 6 * 60_000
    const fresh = await assertionOf(`${b.url}/signed/x`, cookie)
    const newKid = decodeProtectedHeader(fresh).kid
    expect(newKid).not.toBe(oldKid)
    expect(decodeProtectedHeader(await assertionOf(`${a.url}/signed/x`, cookie)).kid).toBe(newKid)
    const verify = example.assertionVerifier({ gateway: a.url, audience: new URL(echo.url).origin })
    expect((await verify({ headers: { 'x-gateway-assertion': old } })).sub).toBe('alice')
    const keys = createRemoteJWKSet(new URL(`${a.url}/.well-known/jwks.json`))
    await jwtVerify(fresh, keys, { issuer: b.url, audience: new URL(echo.url).origin, currentDate: new Date(clock.now()) })
    clock.offset = 0
  })

  // An outside tester's finding: the set was gone (then after two quiet periods; now when the store
  // loses it), the request that found so was signed with a key no JWK Set held any more, and the
  // set made anew signed at once, unpublished until then.
  it('a set the store lost is written back by an instance whose keys are current: the key in use stays published, the next one signs after the lead', async () => {
    clock.offset = 0
    const cookie = await signIn(a, 'alice')
    clock.offset = 3 * DAY
    await jwks(a)
    const inUse = decodeProtectedHeader(await assertionOf(`${a.url}/signed/x`, cookie)).kid
    // Redis lost it (one without persistence, restarted).
    const admin = new Redis(redis.url)
    await admin.del('gw:assertion-keys').finally(() => admin.disconnect())
    // Past a's next check, and its cached assertion's end: the next request signs and looks again.
    clock.offset = 3 * DAY + 2 * 60_000
    expect(decodeProtectedHeader(await assertionOf(`${a.url}/signed/x`, cookie)).kid).toBe(inUse)
    const published = (await jwks(a)).keys.map((key) => key.kid)
    expect(published).toHaveLength(2)
    expect(published).toContain(inUse)
    clock.offset = 3 * DAY + 8 * 60_000
    const next = decodeProtectedHeader(await assertionOf(`${a.url}/signed/x`, cookie)).kid
    expect(next).not.toBe(inUse)
    expect(published).toContain(next)
    clock.offset = 0
  })
})

describe('assertion config', () => {
  const base = { providers: { demo: { clientId: 'c', clientSecret: 's', issuer: 'http://127.0.0.1:1', scope: 'openid' } } }
  const problems = (raw: Record<string, unknown>) => {
    try {
      parseConfig(stringify({ ...base, ...raw }), {}, 'test.yaml')
      return []
    } catch (error) {
      if (!(error instanceof ConfigError)) throw error
      return error.issues.map((issue) => issue.replace(/ \(line \d+\)$/, ''))
    }
  }

  it.each([
    [{ assertion: { ttl: '1s' } }, 'assertion.ttl: must be between 5s and 10m, got "1s"'],
    [{ assertion: { rotateEvery: '10m' } }, 'assertion.rotateEvery: must be between 1h and 90d, got "10m"'],
    [{ assertion: { header: 'X Bad' } }, 'assertion.header: must be a header name of letters, digits and "-" only (CGI, WSGI and PHP read "_" and "." as "-", so a client could send the same header in another spelling), got "X Bad"'],
    [{ assertion: { header: 'Authorization' } }, 'assertion.header: must not be a header the gateway sets itself (authorization), got "Authorization"'],
    [{ assertion: { other: 1 } }, 'assertion.other: unknown key (expected one of: header, ttl, rotateEvery)'],
    [{ routes: [{ path: '/o/', upstream: 'http://127.0.0.1:9', auth: 'none', assertion: true }] }, 'routes[0].assertion: needs auth: required (a route without a session has nobody to vouch for)'],
  ])('reports %j', (raw, message) => {
    expect(problems(raw)).toEqual([message])
  })

  it('defaults to X-Gateway-Assertion, 60 s and 24 h', () => {
    const config = parseConfig(stringify({ ...base, routes: [{ path: '/a/', upstream: 'http://127.0.0.1:9', provider: 'demo', assertion: true }] }), {}, 'test.yaml')
    expect(config.assertion).toEqual({ enabled: true, header: 'x-gateway-assertion', ttlMs: 60_000, rotateEveryMs: DAY })
    expect(config.routes[0]!.assertion).toBe(true)
  })
})
