// Headers the client must not control (issue 13, item 2): on every route, nothing a client sends
// can be read upstream as a header the gateway sets (identity, X-Forwarded-*, Forwarded, X-Real-IP,
// X-Original-URL...), in any spelling with `_` for `-`; hop-by-hop headers are stripped both ways
// instead of failing the request; Expect: 100-continue lets a 10 MB upload stream through whole.
import { execFile } from 'node:child_process'
import { createHash, randomBytes } from 'node:crypto'
import { writeFile, mkdtemp } from 'node:fs/promises'
import { createServer, type IncomingHttpHeaders, type Server } from 'node:http'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { promisify } from 'node:util'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { Browser } from '../helpers/browser.js'
import { oidcClient, reserveBaseUrl, startGateway, type TestGateway } from '../helpers/gateway.js'
import { close, listen } from '../helpers/net.js'
import { startOidcProvider, type TestProvider } from '../helpers/oidc.js'
import { rawRequest } from '../helpers/raw-http.js'
import { startRedis, type TestRedis } from '../helpers/redis.js'
import { startUpstream, type SeenRequest, type Upstream } from '../helpers/upstream.js'

let redis: TestRedis
let op: TestProvider
let upstream: Upstream
let gateway: TestGateway
let trusting: TestGateway
let signedIn: Browser
let port: number

beforeAll(async () => {
  redis = await startRedis()
  upstream = await startUpstream()
  const reserved = await reserveBaseUrl()
  op = await startOidcProvider([{ client_id: 'c', client_secret: 's', redirect_uris: [`${reserved.baseUrl}/oauth/authorized/demo/`] }])
  const routes = [
    { path: '/app/', upstream: upstream.url, provider: 'demo', public: ['GET /app/public/*'] },
    { path: '/custom/', upstream: upstream.url, provider: 'demo', identityHeaders: { user: 'Remote-User', email: 'Remote-Email', groups: 'Remote-Groups' } },
    { path: '/open/', upstream: upstream.url, auth: 'none' },
  ]
  gateway = await startGateway({ server: reserved, store: { type: 'redis', url: redis.url }, providers: { demo: oidcClient(op.issuer, 'c', 's') }, routes })
  trusting = await startGateway({ server: { trustProxy: true }, store: { type: 'memory' }, providers: { demo: oidcClient(op.issuer, 'c', 's') }, routes })
  port = reserved.port
  signedIn = new Browser()
  expect((await signedIn.navigate(`${gateway.url}/app/`)).status).toBe(200)
})

afterAll(async () => {
  await Promise.all([gateway?.close(), trusting?.close()])
  await Promise.all([op?.close(), upstream?.close()])
  await redis?.release()
})

/** What the upstream received for a raw request with these header lines. */
async function forwarded (target: string, headers: string[], gatewayPort = port): Promise<SeenRequest> {
  const before = upstream.seen.length
  const response = await rawRequest(gatewayPort, target, headers)
  expect(response.status, response.body).toBe(200)
  const seen = upstream.seen.slice(before)
  expect(seen).toHaveLength(1)
  return seen[0]!
}

const SPOOFED = [
  'X-Forwarded-User', 'x_forwarded_user', 'X_FORWARDED_USER', 'X-Forwarded_User', 'X-Forwarded-Email', 'X_Forwarded_Email',
  'X-Forwarded-Groups', 'x_forwarded_groups', 'Remote-User', 'Remote_User', 'Remote-Email', 'remote_groups',
  'X-Forwarded-For', 'X_Forwarded_For', 'X-Forwarded-Host', 'x_forwarded_host', 'X-Forwarded-Proto', 'X-Forwarded-Port',
  'X-Forwarded-Prefix', 'X_Forwarded_Prefix', 'X-Forwarded-Server', 'Forwarded', 'X-Real-IP', 'X_Real_IP', 'X-Client-IP',
  'True-Client-IP', 'X-Original-URL', 'X_Original_URL', 'X-Original-URI', 'X-Rewrite-URL', 'X-Gateway-Assertion',
  'X_Gateway_Assertion', 'Proxy-Authorization', 'Client-IP', 'Client_IP', 'X-Cluster-Client-IP', 'CF-Connecting-IP',
  'Fastly-Client-IP', 'X-ProxyUser-Ip', 'X-Host', 'X-Original-Host', 'X-Auth-Request-User', 'X-Auth-Request-Email',
  'x_auth_request_groups', 'X-Remote-User', 'X.Forwarded.User', 'Remote.User',
]

/** The spoofed value's trace in what the upstream saw: no header may carry it. */
function carriesSpoof (headers: IncomingHttpHeaders): string[] {
  return Object.entries(headers).filter(([, value]) => String(value).includes('spoofed')).map(([name]) => name)
}

describe('client headers that could be read as the gateway\'s own', () => {
  const targets = [
    ['a public route', '/open/x', false],
    ['a public path of a protected route', '/app/public/x', false],
    ['a protected route, signed in', '/app/x', true],
    ['a route with custom identity headers, signed in', '/custom/x', true],
  ] as const

  describe.each(targets)('on %s', (_name, target, withSession) => {
    it.each(SPOOFED)('drops %s', async (header) => {
      const cookie = withSession ? [`Cookie: ${signedIn.cookieHeader(`${gateway.url}/`)!}`] : []
      const seen = await forwarded(target, [...cookie, `${header}: spoofed`])
      expect(carriesSpoof(seen.headers)).toEqual([])
    })
  })

  it('replaces the client\'s Authorization on a protected route, also on its public paths', async () => {
    const signed = await forwarded('/app/x', [`Cookie: ${signedIn.cookieHeader(`${gateway.url}/`)!}`, 'Authorization: Bearer spoofed'])
    expect(signed.headers.authorization).toMatch(/^Bearer (?!spoofed)/)
    const publicPath = await forwarded('/app/public/x', ['Authorization: Bearer spoofed'])
    expect(publicPath.headers.authorization).toBeUndefined()
  })

  it('sets the identity headers from the session, not from the client', async () => {
    const seen = await forwarded('/custom/x', [`Cookie: ${signedIn.cookieHeader(`${gateway.url}/`)!}`, 'Remote_User: spoofed', 'remote-user: spoofed'])
    expect(seen.headers['remote-user']).toBe('alice')
    expect(carriesSpoof(seen.headers)).toEqual([])
  })

  it('drops every X-Forwarded-* name, but keeps other headers with underscores and the client\'s Authorization on a public route', async () => {
    const seen = await forwarded('/open/x', ['X-Forwarded-Userland: kept', 'X_Request_Id: kept', 'Authorization: Bearer own'])
    expect(seen.headers['x-forwarded-userland']).toBeUndefined()
    expect(seen.headers.x_request_id).toBe('kept')
    expect(seen.headers.authorization).toBe('Bearer own')
  })
})

describe('method overrides', () => {
  it('are dropped on a protected route\'s public paths, so a public GET cannot become a DELETE upstream', async () => {
    const seen = await forwarded('/app/public/x', ['X-HTTP-Method-Override: DELETE', 'X-HTTP-Method: DELETE', 'X_Method_Override: DELETE'])
    expect(Object.keys(seen.headers).filter((name) => name.includes('method'))).toEqual([])
  })

  it('pass on an auth: none route, where the client may do anything anyway', async () => {
    const seen = await forwarded('/open/x', ['X-HTTP-Method-Override: DELETE'])
    expect(seen.headers['x-http-method-override']).toBe('DELETE')
  })
})

describe('Set-Cookie from an upstream', () => {
  it('never sets the gateway\'s own cookies, in any letter case; the application\'s own pass', async () => {
    const response = await rawRequest(port, '/open/set-cookies')
    expect(response.status).toBe(200)
    expect(response.headers['set-cookie']).toBe('app=kept; Path=/')
  })

  it('drops a single Set-Cookie for the session cookie, also on a narrower path', async () => {
    const response = await rawRequest(port, '/open/set-cookie')
    expect(response.status).toBe(200)
    expect(response.headers['set-cookie']).toBeUndefined()
  })
})

describe('X-Forwarded-For', () => {
  it('without trustProxy is the peer only, whatever the client claims', async () => {
    const seen = await forwarded('/open/x', ['X-Forwarded-For: 203.0.113.9'])
    expect(seen.headers['x-forwarded-for']).toBe('127.0.0.1')
  })

  it('with trustProxy keeps the trusted chain and adds the peer', async () => {
    const seen = await forwarded('/open/x', ['X-Forwarded-For: 203.0.113.9, 10.0.0.1'], Number(new URL(trusting.url).port))
    expect(seen.headers['x-forwarded-for']).toBe('203.0.113.9, 10.0.0.1, 127.0.0.1')
  })
})

describe('hop-by-hop headers (RFC 9110 §7.6.1)', () => {
  it.each([
    ['Connection naming another header', ['Connection: close, X-Hop', 'X-Hop: secret'], 'x-hop'],
    ['Keep-Alive', ['Keep-Alive: timeout=5'], 'keep-alive'],
    ['Proxy-Connection', ['Proxy-Connection: keep-alive'], 'proxy-connection'],
    ['TE', ['TE: trailers'], 'te'],
    ['Trailer', ['Trailer: X-Checksum'], 'trailer'],
    ['Upgrade on a route without websocket', ['Upgrade: h2c'], 'upgrade'],
  ])('strips %s instead of failing the request', async (_name, headers, name) => {
    const seen = await forwarded('/open/x', headers)
    expect(seen.headers[name]).toBeUndefined()
  })

  it('does not pass the upstream\'s keep-alive terms to the client, so Connection: close closes', async () => {
    const response = await rawRequest(port, '/open/x')
    expect(response.status).toBe(200)
    expect(response.headers['keep-alive']).toBeUndefined()
    expect(response.headers.connection).toBe('close')
  })
})

describe('large uploads', () => {
  let sink: Server
  let sinkGateway: TestGateway
  let file: string
  let digest: string
  const SIZE = 10 * 1024 * 1024

  beforeAll(async () => {
    // An upstream that reads the whole body and answers its length and SHA-256.
    sink = createServer((req, res) => {
      const hash = createHash('sha256')
      let length = 0
      req.on('data', (chunk: Buffer) => { hash.update(chunk); length += chunk.length })
      req.on('end', () => res.end(JSON.stringify({ length, sha256: hash.digest('hex'), expect: req.headers.expect ?? null })))
    })
    const sinkUrl = await listen(sink)
    sinkGateway = await startGateway({ store: { type: 'memory' }, routes: [{ path: '/upload/', upstream: sinkUrl, auth: 'none' }] })
    const body = randomBytes(SIZE)
    digest = createHash('sha256').update(body).digest('hex')
    file = join(await mkdtemp(join(tmpdir(), 'gw-upload-')), 'body.bin')
    await writeFile(file, body)
  })

  afterAll(async () => {
    await sinkGateway?.close()
    if (sink) await close(sink)
  })

  it.each([
    ['with curl\'s default headers (Expect: 100-continue)', []],
    ['chunked (Transfer-Encoding: chunked)', ['-H', 'Transfer-Encoding: chunked']],
  ])('a 10 MB POST %s arrives whole', async (_name, extra) => {
    const { stdout } = await promisify(execFile)('curl', ['-sS', '-v', '--max-time', '20', '-X', 'POST', '--data-binary', `@${file}`,
      '-H', 'Content-Type: application/octet-stream', ...extra, `${sinkGateway.url}/upload/x`], { maxBuffer: 1 << 20 })
    expect(JSON.parse(stdout)).toEqual({ length: SIZE, sha256: digest, expect: null })
  })
})
