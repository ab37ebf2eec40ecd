// Machine clients through the forward-auth snippets shipped in the docs (docs/forward-auth/nginx.conf
// and Caddyfile), run by the real nginx and the real Caddy: both pass the client's Authorization on
// to the auth request, so a host whose forwardAuth.hosts entry has `bearer:` admits a client-
// credentials token from a real authorization server, and the application gets that token and the
// identity headers. A refused token reaches the client as the gateway answered it (401 with RFC
// 6750's WWW-Authenticate and no sign-in address, 403 with the scope named), a browser without a
// token still gets its sign-in redirect, and a host without a block ignores tokens: the
// application never sees a token the gateway did not vouch for.
import { request } from 'node:http'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { frontBinary, startFrontProxy, type FrontKind, type FrontProxy } from '../helpers/front-proxy.js'
import { sessionCookie, startForwardAuthGateway, type TestGateway } from '../helpers/gateway.js'
import { clientCredentialsToken } from '../helpers/machine.js'
import type { TestProvider } from '../helpers/oidc.js'
import { startRedis, type TestRedis } from '../helpers/redis.js'
import { startUpstream, type Upstream } from '../helpers/upstream.js'

const API = 'api.example.com'
const PLAIN = 'plain.example.com'
const CI = { id: 'ci-job', secret: 'ci-secret' }
const FRONTS: FrontKind[] = ['nginx', 'caddy']
const missing = FRONTS.filter((kind) => !frontBinary(kind))
if (missing.length > 0) {
  console.warn(`!!! ${missing.join(' and ')} not installed: the machine-client tests behind ${missing.join(' and ')} are SKIPPED (.ci/run installs them) !!!`)
}

let redis: TestRedis
let op: TestProvider
let app: Upstream
let gateway: TestGateway

beforeAll(async () => {
  redis = await startRedis()
  app = await startUpstream()
  ;({ gateway, op } = await startForwardAuthGateway(redis.url, {
    forwardAuth: {
      allowedRedirectHosts: [API, PLAIN],
      hosts: { [API]: { bearer: { audience: 'api://orders', scopes: ['orders.read'] } }, [PLAIN]: {} },
    },
    assertion: {},
  }, {
    machineClients: [{ client_id: CI.id, client_secret: CI.secret }],
    resources: { 'api://orders': { scope: 'orders.read orders.write' }, 'api://ledger': { scope: 'ledger.read' } },
  }))
})

afterAll(async () => {
  await gateway?.close()
  await Promise.all([op?.close(), app?.close()])
  await redis?.release()
})

interface Answer { status: number, headers: Record<string, string | string[] | undefined>, body: string }

/** GET `path` through the proxy on `port` for `host`, with these headers. */
async function send (port: number, host: string, path: string, headers: Record<string, string>): Promise<Answer> {
  return await new Promise((resolve, reject) => {
    const req = request({ host: '127.0.0.1', port, path, headers: { host, accept: 'application/json', ...headers } }, (res) => {
      let body = ''
      res.setEncoding('utf8')
      res.on('data', (chunk: string) => { body += chunk })
      res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body }))
    })
    req.setTimeout(10_000, () => req.destroy(new Error('no answer within 10 s')))
    req.on('error', reject)
    req.end()
  })
}

const token = async (resource = 'api://orders', scope = 'orders.read'): Promise<string> => await clientCredentialsToken(op, CI, resource, scope)

describe.each(FRONTS)('machine clients through the docs\' %s snippet', (kind) => {
  const fronts: Record<string, { front: FrontProxy, port: number }> = {}

  beforeAll(async () => {
    if (missing.includes(kind)) return
    for (const host of [API, PLAIN]) {
      const front = await startFrontProxy(kind, { gateway: `127.0.0.1:${gateway.config.server.port}`, upstream: new URL(app.url).host, host })
      fronts[host] = { port: front.port, front }
    }
  })

  afterAll(async () => {
    await Promise.all(Object.values(fronts).map(async ({ front }) => await front.stop()))
  })

  /** The request `path` as the application saw it, if it did. */
  const seen = (path: string) => app.seen.find((request) => request.url === path)
  const through = async (host: string, path: string, headers: Record<string, string>): Promise<Answer> => await send(fronts[host]!.port, host, path, headers)

  it.skipIf(missing.includes(kind))('lets a valid token through: the application gets the token unchanged and the identity headers', async () => {
    const valid = await token()
    const path = `/${kind}/orders`
    const response = await through(API, path, { authorization: `Bearer ${valid}` })
    expect(response.status).toBe(200)
    expect(seen(path)?.headers.authorization).toBe(`Bearer ${valid}`)
    expect(seen(path)?.headers['x-forwarded-user']).toBe(CI.id)
    expect(seen(path)?.headers['x-gateway-assertion']).toMatch(/^ey/)
  })

  it.skipIf(missing.includes(kind))('answers a token of another audience 401 with the gateway\'s challenge, no sign-in, whatever the Accept', async () => {
    const other = await token('api://ledger', 'ledger.read')
    for (const accept of ['application/json', 'text/html']) {
      const path = `/${kind}/other-audience?accept=${accept.length}`
      const response = await through(API, path, { authorization: `Bearer ${other}`, accept })
      expect(response.status).toBe(401)
      expect(response.headers['www-authenticate']).toMatch(/^Bearer realm="demo", error="invalid_token", error_description="[^"]+"$/)
      expect(response.headers['cache-control']).toBe('no-store')
      expect(response.headers.location).toBeUndefined()
      expect(response.headers['x-login-url']).toBeUndefined()
      expect(response.body).not.toContain('/oauth/login/')
      expect(seen(path)).toBeUndefined()
    }
  })

  it.skipIf(missing.includes(kind))('answers a token a scope short 403 naming the scope', async () => {
    const path = `/${kind}/scope-short`
    const response = await through(API, path, { authorization: `Bearer ${await token('api://orders', 'orders.write')}` })
    expect(response.status).toBe(403)
    expect(response.headers['www-authenticate']).toBe('Bearer realm="demo", error="insufficient_scope", scope="orders.read"')
    expect(response.headers['cache-control']).toBe('no-store')
    expect(seen(path)).toBeUndefined()
  })

  it.skipIf(missing.includes(kind))('still sends a browser without a token to sign in, and an API client without one gets the sign-in 401', async () => {
    const browser = await through(API, `/${kind}/home`, { accept: 'text/html' })
    expect(browser.status).toBe(302)
    expect(browser.headers.location).toContain('/oauth/login/demo/')
    const api = await through(API, `/${kind}/home`, {})
    expect(api.status).toBe(401)
    expect(api.headers['x-login-url']).toContain('/oauth/login/demo/')
    expect(api.headers['www-authenticate']).toBe('Bearer realm="demo"')
    expect(api.headers['cache-control']).toBe('no-store')
  })

  it.skipIf(missing.includes(kind))('on a host without bearer: ignores the token: no session is the sign-in, a session passes with its own token', async () => {
    const valid = await token()
    const anonymous = await through(PLAIN, `/${kind}/plain`, { authorization: `Bearer ${valid}`, accept: 'text/html' })
    expect(anonymous.status).toBe(302)
    expect(seen(`/${kind}/plain`)).toBeUndefined()
    const path = `/${kind}/plain-signed-in`
    const signedIn = await through(PLAIN, path, { authorization: `Bearer ${valid}`, cookie: await sessionCookie(gateway, 'alice') })
    expect(signedIn.status).toBe(200)
    expect(seen(path)?.headers['x-forwarded-user']).toBe('alice')
    expect(seen(path)?.headers.authorization).toMatch(/^Bearer /)
    expect(seen(path)?.headers.authorization).not.toBe(`Bearer ${valid}`)
  })
})
