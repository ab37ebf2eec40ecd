// Headers the client must not control: on every route, nothing a client sends
// can be read upstream as a header the gateway sets (identity, X-Forwarded-*, Forwarded, X-Real-IP,
// X-Original-URL...), in any spelling with `_` for `-`; nor as an identity header of another gateway
// an application may still trust (Remote-User, X-WEBAUTH-*, Cf-Access-*...: a table over every
// spelling, and a property that every spelling of a name is judged alike); X-Forwarded-Host is the
// gateway's own host or a trusted proxy's, never the client's Host; hop-by-hop headers are stripped
// both ways instead of failing the request; Expect: 100-continue lets a 10 MB upload stream through whole.
import { execFile } from 'node:child_process'
import { createHash, randomBytes } from 'node:crypto'
import { writeFile, mkdtemp } from 'node:fs/promises'
import { createServer, request as httpRequest, type IncomingHttpHeaders, type Server } from 'node:http'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { promisify } from 'node:util'
import fc from 'fast-check'
import { afterAll, beforeAll, describe, expect } from 'vitest'
import { ClientHeaderFilter } from '../../src/proxy/headers.js'
import { Browser } from '../helpers/browser.js'
import { oidcClient, startGateway, type TestGateway } from '../helpers/gateway.js'
import { close, listen } from '../helpers/net.js'
import { rawRequest } from '../helpers/raw-http.js'
import { test as it } from '../helpers/stack.js'
import type { SeenRequest, Upstream } from '../helpers/upstream.js'

let upstream: Upstream
let gateway: TestGateway
let trusting: TestGateway
let signedIn: Browser
let port: number

it.beforeAll(async ({ startStack, op, upstream: fileUpstream, gatewayAddress }) => {
  upstream = fileUpstream
  const routes = [
    { path: '/app/', upstream: upstream.url, provider: 'demo', public: ['GET /app/public/*'] },
    { path: '/custom/', upstream: upstream.url, provider: 'demo', identityHeaders: { user: 'Remote-User', email: 'Remote-Email', groups: 'Remote-Groups' } },
    { path: '/open/', upstream: upstream.url, auth: 'none' },
  ]
  gateway = await startStack({ routes })
  trusting = await startGateway({ server: { trustProxy: true }, store: { type: 'memory' }, providers: { demo: oidcClient(op.issuer, 'c', 's') }, routes })
  port = gatewayAddress.port
  signedIn = new Browser()
  expect((await signedIn.navigate(`${gateway.url}/app/`)).status).toBe(200)
})

afterAll(async () => {
  await Promise.all([gateway?.close(), trusting?.close()])
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
  'X-Originating-IP', 'X-Remote-Addr', 'X_Remote_Addr', 'X-Remote-IP', 'X-Original-Forwarded-For', 'Front-End-Https', 'X-Url-Scheme', 'X-Scheme',
  // A tester's list (round 4): what request-ip, django-ipware and hosting platforms read as the client's address.
  'X-Forwarded', 'X_Forwarded', 'Forwarded-For', 'Forwarded_For', 'X-Appengine-User-Ip', 'DO-Connecting-IP', 'Cf-Pseudo-IPv4', 'Fly-Client-IP',
  'X-Envoy-External-Address', 'X-Azure-ClientIP', 'X-Azure-SocketIP', 'Proxy-Client-IP', 'WL-Proxy-Client-IP', 'WL_Proxy_Client_IP',
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

/**
 * The identity headers of other gateways that applications commonly trust (docs/security.md),
 * with the members their vendors document for each family: Authelia, Grafana's auth proxy,
 * Authentik, oauth2-proxy, Cloudflare Access, AWS ALB, Azure App Service, Pomerium, Google's IAP,
 * Kubernetes' front proxy, Keycloak Gatekeeper, Vouch, and the lone names; mod_auth_openidc's
 * OIDC_CLAIM_* written with `-` (the `_` spelling is one of each name's spellings below).
 */
const OTHER_GATEWAYS = [
  'Remote-User', 'Remote-Groups', 'Remote-Email', 'Remote-Name',
  'X-WEBAUTH-USER', 'X-WEBAUTH-EMAIL', 'X-WEBAUTH-NAME', 'X-WEBAUTH-GROUPS', 'X-WEBAUTH-ROLE',
  'X-authentik-username', 'X-authentik-groups', 'X-authentik-email', 'X-authentik-name', 'X-authentik-uid', 'X-authentik-jwt', 'X-authentik-meta-provider',
  'X-Auth-Request-User', 'X-Auth-Request-Email', 'X-Auth-Request-Groups', 'X-Auth-Request-Preferred-Username', 'X-Auth-Request-Access-Token',
  'X-Authenticated-User', 'X-Auth-User',
  'Cf-Access-Jwt-Assertion', 'Cf-Access-Authenticated-User-Email', 'Cf-Access-Client-Id',
  'X-Amzn-Oidc-Data', 'X-Amzn-Oidc-Identity', 'X-Amzn-Oidc-Accesstoken',
  'X-MS-CLIENT-PRINCIPAL', 'X-MS-CLIENT-PRINCIPAL-NAME', 'X-MS-CLIENT-PRINCIPAL-ID', 'X-MS-CLIENT-PRINCIPAL-IDP',
  // Pomerium (its JWT and claim headers), Google's IAP, Kubernetes' front proxy, Keycloak Gatekeeper, Vouch.
  'X-Pomerium-Jwt-Assertion', 'X-Pomerium-Claim-Email', 'X-Pomerium-Claim-Groups',
  'X-Goog-Authenticated-User-Email', 'X-Goog-Authenticated-User-Id', 'X-Goog-Iap-Jwt-Assertion',
  'X-Remote-Group', 'X-Remote-Extra-Scopes',
  'X-Auth-Email', 'X-Auth-Username', 'X-Auth-Userid', 'X-Auth-Subject', 'X-Auth-Roles', 'X-Auth-Groups',
  'X-Vouch-User', 'X-Vouch-IdP-Claims-Groups',
  // SiteMinder's (Spring Security's default pre-authenticated principal), Shibboleth's, and Proxy (httpoxy).
  'SM-USER', 'SM-UNIVERSALID', 'Shib-Identity-Provider', 'Shib-Session-ID', 'Proxy',
  // Found passing by an outside tester: Azure App Service's token store, Tailscale serve, Kong,
  // Google Cloud Endpoints and API Gateway, APISIX's and Kong's OIDC plugins, Apache
  // mod_auth_openidc (its names carry `_`), Teleport.
  'X-MS-TOKEN-AAD-ID-TOKEN', 'X-MS-TOKEN-AAD-ACCESS-TOKEN', 'X-MS-TOKEN-GOOGLE-ID-TOKEN',
  'Tailscale-User-Login', 'Tailscale-User-Name',
  'X-Consumer-Username', 'X-Consumer-ID', 'X-Consumer-Custom-ID', 'X-Credential-Identifier', 'X-Authenticated-Userid', 'X-Authenticated-Groups', 'X-Authenticated-Scope',
  'X-Endpoint-API-UserInfo', 'X-Apigateway-Api-Userinfo', 'X-Userinfo', 'X-ID-Token',
  'OIDC-CLAIM-email', 'OIDC-CLAIM-groups', 'OIDC-access-token', 'OIDC-id-token',
  'Teleport-Jwt-Assertion',
]

/** Every way to join a name's words with `-`, `_` or `.` (what CGI-style servers read as one name). */
function separatorSpellings (name: string): string[] {
  const [first = '', ...rest] = name.split('-')
  return rest.reduce((spelled, word) => spelled.flatMap((head) => ['-', '_', '.'].map((joint) => `${head}${joint}${word}`)), [first])
}

/** A few letter cases of `name`: as given, lower, upper, and alternating. */
function caseSpellings (name: string): string[] {
  const alternating = [...name].map((char, i) => (i % 2 === 0 ? char.toLowerCase() : char.toUpperCase())).join('')
  return [...new Set([name, name.toLowerCase(), name.toUpperCase(), alternating])]
}

describe('identity headers of other gateways', () => {
  const filters = [['a public route', new ClientHeaderFilter([], false)], ['a protected route', new ClientHeaderFilter([], true)]] as const

  describe.each(filters)('on %s', (_name, filter) => {
    it.each(OTHER_GATEWAYS)('drops %s in every spelling with -, _ and .', (name) => {
      const spellings = separatorSpellings(name)
      expect(spellings.length).toBe(3 ** (name.split('-').length - 1))
      // Node gives header names in lower case.
      expect(spellings.filter((spelling) => !filter.drops(spelling.toLowerCase()))).toEqual([])
    })

    it.each(['x-request-id', 'x-auth-token', 'remote-addr', 'x-ms-request-id', 'cf-ray', 'x-amzn-trace-id', 'x-authenticated', 'x_request_id'])('keeps %s', (name) => {
      expect(filter.drops(name)).toBe(false)
    })
  })

  it('judges every spelling of a name as its spelling with - (what a CGI-style upstream reads)', () => {
    const filter = new ClientHeaderFilter(['x-custom-user'], true)
    const word = fc.stringMatching(/^[a-z0-9]{1,8}$/)
    const known = fc.constantFrom(...OTHER_GATEWAYS, 'X-Forwarded-User', 'X-Gateway-Assertion', 'X-Custom-User', 'Authorization').map((name) => name.toLowerCase().split('-'))
    const words = fc.oneof(known, fc.array(word, { minLength: 1, maxLength: 5 }))
    fc.assert(fc.property(words, fc.array(fc.constantFrom('-', '_', '.'), { minLength: 5, maxLength: 5 }), (parts, joints) => {
      const spelled = parts.reduce((head, part, i) => `${head}${joints[i - 1]!}${part}`)
      expect(filter.drops(spelled)).toBe(filter.drops(parts.join('-')))
    }), { numRuns: 3000 })
  })

  it.each([
    ['a public route', '/open/x', false],
    ['a protected route, signed in', '/app/x', true],
  ] as const)('never reach the upstream of %s, in any spelling or letter case, sent all at once', async (_name, target, withSession) => {
    const spellings = OTHER_GATEWAYS.flatMap((name) => {
      const separated = separatorSpellings(name)
      return [...new Set([...caseSpellings(name), ...separated.slice(1, 4), separated.at(-1)!.toUpperCase()])]
    })
    const cookie = withSession ? [`Cookie: ${signedIn.cookieHeader(`${gateway.url}/`)!}`] : []
    const seen = await forwarded(target, [...cookie, ...spellings.map((spelling) => `${spelling}: spoofed`)])
    expect(carriesSpoof(seen.headers)).toEqual([])
  })
})

/** What the upstream received for a GET through the gateway on `gatewayPort` with its own Host header (fetch cannot set one). */
async function forwardedWithHost (gatewayPort: number, host: string, headers: Record<string, string | string[]> = {}): Promise<SeenRequest> {
  const before = upstream.seen.length
  const status = await new Promise<number>((resolve, reject) => {
    const request = httpRequest({ host: '127.0.0.1', port: gatewayPort, path: '/open/x', headers: { ...headers, host, accept: 'application/json' } }, (response) => {
      response.resume()
      response.on('end', () => resolve(response.statusCode ?? 0))
    })
    request.on('error', reject)
    request.end()
  })
  expect(status).toBe(200)
  const seen = upstream.seen.slice(before)
  expect(seen).toHaveLength(1)
  return seen[0]!
}

describe('X-Forwarded-Host', () => {
  it.each([
    ['a foreign Host', 'evil.example', {}],
    ['a foreign Host and its own X-Forwarded-Host', 'evil.example', { 'x-forwarded-host': 'evil.example' }],
    ['a foreign Host with a port', 'evil.example:8443', {}],
    ['X-Forwarded-Host with _', 'evil.example', { x_forwarded_host: 'evil.example' }],
  ])('is the host of server.baseUrl for %s from a client trustProxy does not admit', async (_name, host, headers) => {
    const seen = await forwardedWithHost(port, host, headers)
    expect(seen.headers['x-forwarded-host']).toBe(new URL(gateway.url).host)
    expect(JSON.stringify(seen.headers)).not.toContain('evil.example')
  })

  it('is a trusted proxy\'s X-Forwarded-Host when it sent exactly one', async () => {
    const seen = await forwardedWithHost(Number(new URL(trusting.url).port), 'internal:8080', { 'x-forwarded-host': 'app.example.com' })
    expect(seen.headers['x-forwarded-host']).toBe('app.example.com')
  })

  it.each([
    ['none', {}],
    ['two header lines', { 'x-forwarded-host': ['a.example', 'b.example'] }],
    ['a list', { 'x-forwarded-host': 'a.example, b.example' }],
    ['a value with a path', { 'x-forwarded-host': 'a.example/evil' }],
    ['a value with userinfo', { 'x-forwarded-host': 'evil.example@a.example' }],
    ['an empty value', { 'x-forwarded-host': '' }],
  ])('from a trusted proxy that sent %s is the host of server.baseUrl, never its Host', async (_name, headers) => {
    const seen = await forwardedWithHost(Number(new URL(trusting.url).port), 'evil.example', headers)
    expect(seen.headers['x-forwarded-host']).toBe(new URL(trusting.url).host)
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

  it('with trustProxy keeps the chain up to the first hop it does not trust, and adds the peer', async () => {
    // `true` trusts the peer alone (the proxy on this machine): the address it appended is the client's,
    // and what the client wrote in front of it is not passed on as if vouched for.
    const seen = await forwarded('/open/x', ['X-Forwarded-For: 203.0.113.9, 10.0.0.1'], Number(new URL(trusting.url).port))
    expect(seen.headers['x-forwarded-for']).toBe('10.0.0.1, 127.0.0.1')
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
