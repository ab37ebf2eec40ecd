// The forward-auth snippets shipped in the docs (docs/forward-auth/nginx.conf and Caddyfile), run by
// the real nginx and the real Caddy in front of admin.example.com, whose forwardAuth.hosts rules
// refuse POST and /admin/*: the gateway judges the original request's method (X-Forwarded-Method,
// which each snippet sends to the auth request: nginx by a line of its own, Caddy's forward_auth by
// itself) and path, not the auth request's own GET. A client's X-Forwarded-Method does not stand in
// for the real one. Then the nginx line shown to matter: without it the method cannot be told and
// the rule refuses every request, GET as well.
import { createServer, type Server } from 'node:http'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { frontBinary, startFrontProxy, type FrontKind, type FrontProxy } from '../helpers/front-proxy.js'
import { sessionCookie, startForwardAuthGateway, type TestGateway } from '../helpers/gateway.js'
import { close, listen } from '../helpers/net.js'
import type { TestProvider } from '../helpers/oidc.js'
import { startRedis, type TestRedis } from '../helpers/redis.js'
import { rawRequest } from '../helpers/raw-http.js'

const ADMIN = 'admin.example.com'
const FRONTS: FrontKind[] = ['nginx', 'caddy']
const missing = FRONTS.filter((kind) => !frontBinary(kind))
if (missing.length > 0) {
  console.warn(`!!! ${missing.join(' and ')} not installed: the snippet method and path rule tests behind ${missing.join(' and ')} are SKIPPED (.ci/run installs them) !!!`)
}

/** An application that counts the requests that reach it, by method and path. */
interface CountingUpstream { url: string, seen: string[], close (): Promise<void> }

async function startCountingUpstream (): Promise<CountingUpstream> {
  const upstream: CountingUpstream = { url: '', seen: [], close: async () => {} }
  const server: Server = createServer((req, res) => {
    upstream.seen.push(`${req.method ?? ''} ${req.url ?? ''}`)
    req.resume()
    req.on('end', () => res.end('app'))
  })
  upstream.url = await listen(server)
  upstream.close = async () => await close(server)
  return upstream
}

/** `method target` through `port` as admin.example.com, with these header lines and a small form body for POST; the status (0: no answer). */
async function send (port: number, method: string, target: string, lines: string[]): Promise<number> {
  const form = method === 'POST' ? { body: 'a=1', type: ['Content-Type: application/x-www-form-urlencoded'] } : { type: [] }
  return (await rawRequest(port, target, [...form.type, ...lines], { method, host: ADMIN, body: form.body })).status
}

let redis: TestRedis
let op: TestProvider
let app: CountingUpstream
let gateway: TestGateway
let session: string

beforeAll(async () => {
  redis = await startRedis()
  app = await startCountingUpstream()
  ;({ gateway, op } = await startForwardAuthGateway(redis.url, {
    forwardAuth: { allowedRedirectHosts: [ADMIN], hosts: { [ADMIN]: { deny: [{ methods: ['POST'] }, { paths: ['/admin/*'] }] } } },
  }))
  session = await sessionCookie(gateway, 'alice')
})

afterAll(async () => {
  await gateway?.close()
  await Promise.all([op?.close(), app?.close()])
  await redis?.release()
})

/** Starts `kind` serving admin.example.com, with the snippet edited by `edit` when given. */
async function front (kind: FrontKind, edit?: (config: string) => string): Promise<{ front: FrontProxy, port: number }> {
  const front = await startFrontProxy(kind, { gateway: `127.0.0.1:${gateway.config.server.port}`, upstream: new URL(app.url).host, host: ADMIN }, edit)
  return { port: front.port, front }
}

describe.each(FRONTS)('the docs\' %s snippet and forwardAuth.hosts rules on the method and path', (kind) => {
  let proxy: { front: FrontProxy, port: number } | undefined

  beforeAll(async () => {
    if (!missing.includes(kind)) proxy = await front(kind)
  })

  afterAll(async () => {
    await proxy?.front.stop()
  })

  /** The status, and whether the application saw the request. */
  async function through (method: string, target: string, lines: string[] = []): Promise<{ status: number, reached: boolean }> {
    const before = app.seen.length
    const status = await send(proxy!.port, method, target, [`Cookie: ${session}`, ...lines])
    return { status, reached: app.seen.slice(before).includes(`${method} ${target}`) }
  }

  it.skipIf(missing.includes(kind))('admits a GET, and refuses a POST (deny: methods POST) before the application sees it', async () => {
    expect(await through('GET', '/pay')).toEqual({ status: 200, reached: true })
    expect(await through('POST', '/pay')).toEqual({ status: 403, reached: false })
  })

  it.skipIf(missing.includes(kind))('refuses a GET under /admin/ (deny: paths /admin/*), and admits one beside it', async () => {
    expect(await through('GET', '/admin/users')).toEqual({ status: 403, reached: false })
    expect(await through('GET', '/administrator')).toEqual({ status: 200, reached: true })
  })

  it.skipIf(missing.includes(kind)).each([
    'X-Forwarded-Method: GET',
    'X_Forwarded_Method: GET',
    'X-HTTP-Method-Override: GET',
    'X-Original-Method: GET',
  ])('does not let a POST pass as a GET with %s', async (line) => {
    expect(await through('POST', '/pay', [line])).toEqual({ status: 403, reached: false })
  })
})

describe('the line of the nginx snippet that sends the method', () => {
  let careless: { front: FrontProxy, port: number } | undefined

  beforeAll(async () => {
    if (!missing.includes('nginx')) careless = await front('nginx', (config) => config.replace('proxy_set_header X-Forwarded-Method $request_method;', ''))
  })

  afterAll(async () => {
    await careless?.front.stop()
  })

  it.skipIf(missing.includes('nginx'))('is what lets a GET through a method rule (without it the method cannot be told and the rule refuses)', async () => {
    expect(await send(careless!.port, 'GET', '/pay', [`Cookie: ${session}`])).toBe(403)
  })
})

describe('a trusted peer naming the original request in two headers (as ingress-nginx and others may pass one on from the client)', () => {
  /** forward-auth asked directly, as the trusted proxy in front would; the status. */
  async function ask (headers: Record<string, string>): Promise<number> {
    const response = await fetch(`${gateway.url}/oauth/auth/demo/`, { headers: { cookie: session, host: ADMIN, 'x-forwarded-host': ADMIN, 'x-forwarded-proto': 'http', accept: 'application/json', ...headers } })
    await response.arrayBuffer()
    return response.status
  }

  it.each([
    ['one method header, X-Forwarded-Method', { 'x-forwarded-method': 'GET', 'x-forwarded-uri': '/pay' }, 200],
    ['one method header, X-Original-Method (ingress-nginx)', { 'x-original-method': 'GET', 'x-original-uri': '/pay' }, 200],
    ['both, agreeing', { 'x-forwarded-method': 'GET', 'x-original-method': 'GET', 'x-forwarded-uri': '/pay', 'x-original-uri': '/pay' }, 200],
    ['the methods disagree: a POST calling itself a GET in the other header', { 'x-forwarded-method': 'GET', 'x-original-method': 'POST', 'x-forwarded-uri': '/pay' }, 403],
    ['the paths disagree', { 'x-forwarded-method': 'GET', 'x-forwarded-uri': '/pay', 'x-original-uri': '/admin/users' }, 403],
    ['no method named', { 'x-forwarded-uri': '/pay' }, 403],
    ['two methods joined in one value (a proxy that appends)', { 'x-forwarded-method': 'POST, GET', 'x-forwarded-uri': '/pay' }, 403],
    ['no path named', { 'x-forwarded-method': 'GET' }, 403],
    ['a path that cannot be made canonical', { 'x-forwarded-method': 'GET', 'x-forwarded-uri': '/pay/%2e%2e/admin/users' }, 403],
  ])('%s', async (_what, headers, status) => {
    expect(await ask(headers)).toBe(status)
  })

  it('the method header sent twice, differing (a proxy that appends rather than replaces): 403', async () => {
    const port = gateway.config.server.port
    const lines = [`Cookie: ${session}`, 'X-Forwarded-Proto: http', 'X-Forwarded-Uri: /pay']
    expect(await send(port, 'GET', '/oauth/auth/demo/', [...lines, 'X-Forwarded-Method: GET'])).toBe(200)
    expect(await send(port, 'GET', '/oauth/auth/demo/', [...lines, 'X-Forwarded-Method: POST', 'X-Forwarded-Method: GET'])).toBe(403)
    // The client's X-Original-Method does not decide where the proxy's own header came twice.
    expect(await send(port, 'GET', '/oauth/auth/demo/', [...lines, 'X-Forwarded-Method: POST', 'X-Forwarded-Method: GET', 'X-Original-Method: GET'])).toBe(403)
    expect(await send(port, 'GET', '/oauth/auth/demo/', [...lines, 'X-Forwarded-Method: GET', 'X-Forwarded-Method: GET'])).toBe(200)
  })
})
