// Claim headers end to end: a real oidc-provider releases claims (Keycloak's realm_access.roles, a
// tenant id, and hostile values: CR LF, 4096 and 4097 bytes, non-ASCII), the gateway signs alice in
// and its routes' `headers:` send them to a real upstream, over HTTP and in a websocket handshake:
// `X-Roles: a,b`, a claim the session lacks sends nothing, a value that cannot be sent whole is 403
// `forbidden` naming the header (never its value) and the upstream is not asked. And a client's
// X-Roles, in any spelling, never reaches any route's upstream.
import { createServer, type IncomingHttpHeaders } from 'node:http'
import { WebSocket, WebSocketServer } from 'ws'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { Browser } from '../helpers/browser.js'
import { oidcClient, reserveBaseUrl, startGateway, type TestGateway } from '../helpers/gateway.js'
import { close, listen } from '../helpers/net.js'
import { startOidcProvider, type TestProvider } from '../helpers/oidc.js'
import { rawRequest } from '../helpers/raw-http.js'
import { startRedis, type TestRedis } from '../helpers/redis.js'
import { startUpstream, type SeenRequest, type Upstream } from '../helpers/upstream.js'

const EXACT = 'x'.repeat(4096)
const CLAIMS: Record<string, unknown> = {
  realm_access: { roles: ['a', 'b'] },
  tid: 'tenant-1',
  crlf: 'ok\r\nX-Admin: yes',
  exact: EXACT,
  long: `${EXACT}x`,
  unicode: ['café', '日本'],
}

let redis: TestRedis
let op: TestProvider
let upstream: Upstream
let gateway: TestGateway
let cookie: string
const wsServer = createServer((_req, res) => res.end())
const handshakes: IncomingHttpHeaders[] = []

beforeAll(async () => {
  redis = await startRedis()
  upstream = await startUpstream()
  const wss = new WebSocketServer({ server: wsServer })
  wss.on('connection', (socket, request) => {
    handshakes.push(request.headers)
    socket.send('hello')
  })
  const wsUpstream = await listen(wsServer)
  const server = await reserveBaseUrl()
  op = await startOidcProvider([{ client_id: 'c', client_secret: 's', redirect_uris: [`${server.baseUrl}/oauth/authorized/demo/`] }], {
    scopeClaims: { openid: ['sub', ...Object.keys(CLAIMS)], profile: ['name'], email: ['email', 'email_verified'], groups: ['groups'] },
    extraClaims: (id) => (id === 'alice' ? CLAIMS : {}),
  })
  const protectedRoute = (path: string, headers: Record<string, string>) => ({ path, upstream: upstream.url, provider: 'demo', headers })
  gateway = await startGateway({
    server,
    store: { type: 'redis', url: redis.url },
    providers: { demo: oidcClient(op.issuer, 'c', 's', 'openid email groups') },
    routes: [
      protectedRoute('/app', { 'X-Roles': 'claims.realm_access.roles', 'X-Tenant': 'claims.tid', 'X-Missing': 'claims.nowhere' }),
      protectedRoute('/crlf', { 'X-Roles': 'claims.realm_access.roles', 'X-Note': 'claims.crlf' }),
      protectedRoute('/exact', { 'X-Big': 'claims.exact' }),
      protectedRoute('/long', { 'X-Big': 'claims.long' }),
      protectedRoute('/unicode', { 'X-Scripts': 'claims.unicode' }),
      protectedRoute('/plain', {}),
      { path: '/public', upstream: upstream.url, provider: 'demo', public: ['GET /public/*'], headers: { 'X-Roles': 'claims.realm_access.roles' } },
      { path: '/ws', upstream: wsUpstream, provider: 'demo', websocket: true, headers: { 'X-Roles': 'claims.realm_access.roles' } },
      { path: '/open', upstream: upstream.url, auth: 'none' },
    ],
  })
  const browser = new Browser()
  expect((await browser.navigate(`${gateway.url}/app/x`, { login: 'alice' })).status).toBe(200)
  cookie = browser.cookieHeader(`${gateway.url}/`)!
})

afterAll(async () => {
  await gateway?.close()
  await Promise.all([op?.close(), upstream?.close(), close(wsServer)])
  await redis?.release()
})

/** The gateway's answer to a raw GET of `target` with these header lines, and what the upstream saw of it. */
async function through (target: string, lines: string[], signedIn = true): Promise<{ status: number, body: string, seen: SeenRequest[] }> {
  const before = upstream.seen.length
  const response = await rawRequest(gateway.config.server.port, target, [...(signedIn ? [`Cookie: ${cookie}`] : []), ...lines])
  return { status: response.status, body: response.body, seen: upstream.seen.slice(before) }
}

describe('a route\'s claim headers', () => {
  it('reach the upstream: X-Roles: a,b and the tenant, and no header for a claim the session lacks', async () => {
    const { status, seen } = await through('/app/x', [])
    expect(status).toBe(200)
    expect(seen[0]!.headers['x-roles']).toBe('a,b')
    expect(seen[0]!.headers['x-tenant']).toBe('tenant-1')
    expect(seen[0]!.headers).not.toHaveProperty('x-missing')
  })

  it('send a value of exactly 4096 bytes whole', async () => {
    const { status, seen } = await through('/exact/x', [])
    expect(status).toBe(200)
    expect(seen[0]!.headers['x-big']).toBe(EXACT)
  })

  it('send non-ASCII values as their UTF-8 bytes', async () => {
    const { status, seen } = await through('/unicode/x', [])
    expect(status).toBe(200)
    // Node's server reads header bytes as latin1: the bytes on the wire were UTF-8.
    expect(Buffer.from(seen[0]!.headers['x-scripts'] as string, 'latin1').toString('utf8')).toBe('café,日本')
  })

  it.each([
    ['/crlf/x', 'x-note', 'holds a control character', 'X-Admin'],
    ['/long/x', 'x-big', 'is longer than 4096 bytes', EXACT.slice(0, 64)],
  ])('refuse %s with 403 forbidden naming %s and not its value; the upstream is not asked', async (target, header, problem, value) => {
    const { status, body, seen } = await through(target, [])
    expect(status).toBe(403)
    const answer = JSON.parse(body) as { error: string, message: string }
    expect(answer.error).toBe('forbidden')
    expect(answer.message).toContain(header)
    expect(answer.message).toContain(problem)
    expect(body).not.toContain(value)
    expect(seen).toEqual([])
  })

  it('reach a websocket upstream in the handshake', async () => {
    const before = handshakes.length
    const socket = new WebSocket(`${gateway.url.replace('http', 'ws')}/ws/x`, { headers: { cookie, origin: gateway.config.server.baseUrl, 'x-roles': 'spoofed', x_roles: 'spoofed' } })
    await new Promise<void>((resolve, reject) => {
      socket.once('message', () => resolve())
      socket.once('error', reject)
    })
    socket.close()
    expect(handshakes.slice(before).map((headers) => headers['x-roles'])).toEqual(['a,b'])
    expect(JSON.stringify(handshakes.slice(before))).not.toContain('spoofed')
  })
})

describe('a client\'s own X-Roles', () => {
  const spellings = ['X-Roles', 'x-roles', 'X_ROLES', 'x_roles', 'X.Roles', 'x-ROLES', 'X-Tenant', 'x_tenant', 'X-Missing', 'x.missing', 'X_Big', 'x-scripts']
  const targets: Array<[string, string, boolean]> = [
    ['the route that sends it, signed in', '/app/x', true],
    ['another protected route', '/plain/x', true],
    ['a public path of a route that sends it', '/public/x', false],
    ['an auth: none route', '/open/x', false],
  ]

  it.each(targets)('never reaches the upstream of %s, in any spelling', async (_name, target, signedIn) => {
    const { status, seen } = await through(target, spellings.map((spelling) => `${spelling}: spoofed`), signedIn)
    expect(status).toBe(200)
    expect(seen).toHaveLength(1)
    expect(Object.entries(seen[0]!.headers).filter(([, value]) => String(value).includes('spoofed'))).toEqual([])
  })

  it('does not stand in for a claim the session lacks', async () => {
    const { seen } = await through('/app/x', ['X-Missing: admin', 'x_missing: admin'])
    expect(seen[0]!.headers).not.toHaveProperty('x-missing')
    expect(seen[0]!.headers).not.toHaveProperty('x_missing')
  })
})
