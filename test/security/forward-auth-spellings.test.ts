// The forward-auth snippets shipped in the docs (docs/forward-auth/nginx.conf and Caddyfile), run by
// the real nginx and the real Caddy, in front of an application that reads headers the CGI way
// (HTTP_ + the name upper-cased, `-` and `.` as `_`, the last header of a name winning, as CGI, WSGI
// and PHP do): whatever spelling of an identity header, of the assertion header or of another
// gateway's identity header a client sends (`_`, `.`, any letter case), the application sees only
// what the gateway vouched for. The signed-in user, ursula, has no groups and an e-mail address the
// provider has not verified, so the gateway sends neither header: nothing a client sent may fill
// the gap (issue: X_Forwarded_Groups: admins made a user without groups an admin behind Caddy).
// Then the lines of each file that make it hold, shown to matter: without them the spoof passes.
import { createServer, type Server } from 'node:http'
import { afterAll, beforeAll, describe, expect } from 'vitest'
import { Browser } from '../helpers/browser.js'
import { frontBinary, holdFrontPort, startFrontProxy, type FrontKind, type FrontProxy, type HeldPort } from '../helpers/front-proxy.js'
import { oidcClient, type TestGateway } from '../helpers/gateway.js'
import { close, listen } from '../helpers/net.js'
import { rawRequest } from '../helpers/raw-http.js'
import { test as it } from '../helpers/stack.js'

/** The request as a CGI-style application reads it: HTTP_* variables, a later header of the same variable winning. */
type CgiEnvironment = Record<string, string>

/** An application that answers the CGI variables of each request as JSON. */
interface CgiUpstream { url: string, close (): Promise<void> }

async function startCgiUpstream (): Promise<CgiUpstream> {
  const server: Server = createServer((req, res) => {
    const env: CgiEnvironment = {}
    for (let i = 0; i + 1 < req.rawHeaders.length; i += 2) {
      env[`HTTP_${req.rawHeaders[i]!.toUpperCase().replace(/[-.]/g, '_')}`] = req.rawHeaders[i + 1]!
    }
    // With a length, so that no proxy answers chunked (rawRequest reads the body as it comes).
    const body = JSON.stringify(env)
    res.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) })
    res.end(body)
  })
  const url = await listen(server)
  return { url, close: async () => await close(server) }
}

/** The gateway's identity headers, its assertion header, and other gateways' (docs/forward-auth.md). */
const NAMES = [
  'X-Forwarded-User', 'X-Forwarded-Email', 'X-Forwarded-Groups', 'X-Gateway-Assertion',
  'Remote-User', 'Remote-Groups', 'Remote-Email', 'Remote-Name', 'X-Authenticated-User', 'X-Auth-User',
  'X-WEBAUTH-USER', 'X-WEBAUTH-GROUPS', 'X-authentik-username', 'X-authentik-groups', 'X-Auth-Request-User', 'X-Auth-Request-Groups',
  'Cf-Access-Jwt-Assertion', 'Cf-Access-Authenticated-User-Email', 'X-Amzn-Oidc-Data', 'X-Amzn-Oidc-Identity',
  'X-MS-CLIENT-PRINCIPAL', 'X-MS-CLIENT-PRINCIPAL-NAME',
  'X-Pomerium-Jwt-Assertion', 'X-Pomerium-Claim-Email', 'X-Goog-Authenticated-User-Email', 'X-Goog-Iap-Jwt-Assertion',
  'X-Remote-User', 'X-Remote-Group', 'X-Remote-Extra-Scopes', 'X-Auth-Email', 'X-Auth-Username', 'X-Auth-Groups', 'X-Vouch-User',
  'X-MS-TOKEN-AAD-ID-TOKEN', 'Tailscale-User-Login', 'X-Consumer-Username', 'X-Authenticated-Userid', 'X-Endpoint-API-UserInfo',
  'X-Userinfo', 'X-ID-Token', 'OIDC-CLAIM-email', 'OIDC-access-token', 'Teleport-Jwt-Assertion',
  // oauth2-proxy's X-Forwarded-* beyond the gateway's three, and what the proxy itself sets or clears.
  'X-Forwarded-Preferred-Username', 'X-Forwarded-Access-Token', 'X-Forwarded-For', 'X-Forwarded-Host',
  'X-Real-IP', 'X-Original-URL', 'X-Original-URI',
]

/** `name` as a client may spell it: as given, with `_` or `.` for some or every `-`, in several letter cases. */
function spellings (name: string): string[] {
  const underscored = name.replaceAll('-', '_')
  const lastJoint = name.lastIndexOf('-')
  const mixed = (text: string) => [...text].map((char, i) => (i % 2 === 0 ? char.toUpperCase() : char.toLowerCase())).join('')
  return [...new Set([
    name, name.toLowerCase(), mixed(name),
    underscored, underscored.toLowerCase(), underscored.toUpperCase(), mixed(underscored),
    name.replaceAll('-', '.'), name.replaceAll('-', '.').toLowerCase(),
    `${name.slice(0, lastJoint)}_${name.slice(lastJoint + 1)}`,
    `${name.slice(0, lastJoint)}.${name.slice(lastJoint + 1)}`,
  ])]
}

const FRONTS: FrontKind[] = ['nginx', 'caddy']
const missing = FRONTS.filter((kind) => !frontBinary(kind))
if (missing.length > 0) {
  console.warn(`!!! ${missing.join(' and ')} not installed: the snippet spelling tests behind ${missing.join(' and ')} are SKIPPED (.ci/run installs them) !!!`)
}

/** The line of each snippet that stops the `_` spellings, and what a careless edit makes of it. */
const LOAD_BEARING: Record<FrontKind, [string, string]> = {
  // In both servers of the file: nginx reads it from the default one until Host picks the other.
  nginx: ['underscores_in_headers off;', 'underscores_in_headers on;'],
  caddy: ['\t\trequest_header -*_*\n', ''],
}

let app: CgiUpstream
let gateway: TestGateway
let cookie: string
/** The proxies' ports: each snippet as shipped, and each with its load-bearing line undone. */
const held = {} as Record<FrontKind | `careless-${FrontKind}`, HeldPort>
const ports = {} as Record<keyof typeof held, number>

it.beforeAll(async ({ startStack, op }) => {
  app = await startCgiUpstream()
  for (const name of ['nginx', 'caddy', 'careless-nginx', 'careless-caddy'] as const) {
    held[name] = await holdFrontPort()
    ports[name] = held[name].port
  }
  gateway = await startStack({
    server: { trustProxy: ['127.0.0.1'] },
    providers: { demo: oidcClient(op.issuer, 'c', 's', 'openid email groups') },
    routes: [],
    forwardAuth: { allowedRedirectHosts: Object.values(ports).map((port) => `127.0.0.1:${port}`) },
    assertion: {},
  })
  const browser = new Browser()
  expect((await browser.navigate(`${gateway.url}/oauth/login/demo/?next=/oauth/`, { login: 'ursula' })).status).toBe(200)
  // Cookies do not depend on the port: the proxies in front on 127.0.0.1 receive the same one.
  cookie = browser.cookieHeader(`${gateway.url}/`)!
})

afterAll(async () => {
  await gateway?.close()
  await app?.close()
})

/** The CGI variables the application saw for a request through `port` with these header lines. */
async function through (port: number, lines: string[]): Promise<CgiEnvironment> {
  const response = await rawRequest(port, '/app/x', [`Cookie: ${cookie}`, ...lines])
  expect(response.status, response.body).toBe(200)
  return JSON.parse(response.body) as CgiEnvironment
}

/** The variables that carry a value a client chose. */
function spoofed (env: CgiEnvironment): string[] {
  return Object.entries(env).filter(([, value]) => value.includes('spoofed')).map(([name]) => name)
}

describe.each(FRONTS)('the docs\' %s snippet in front of a CGI-style application', (kind) => {
  let front: FrontProxy

  beforeAll(async () => {
    if (missing.includes(kind)) return
    front = await startFrontProxy(kind, { port: held[kind], gateway: `127.0.0.1:${gateway.config.server.port}`, upstream: new URL(app.url).host })
  })

  afterAll(async () => {
    await front?.stop()
  })

  it.skipIf(missing.includes(kind))('passes the gateway\'s identity: the user, and no e-mail or groups for a user without groups or a verified address', async () => {
    const env = await through(ports[kind], [])
    expect(env.HTTP_X_FORWARDED_USER).toBe('ursula')
    expect(env.HTTP_AUTHORIZATION).toMatch(/^Bearer \S+$/)
    expect(env.HTTP_X_FORWARDED_EMAIL).toBeUndefined()
    expect(env.HTTP_X_FORWARDED_GROUPS).toBeUndefined()
    expect(env.HTTP_COOKIE ?? '').not.toContain('gw_session')
  })

  it.skipIf(missing.includes(kind))('does not let X_Forwarded_Groups: admins or X_Forwarded_Email make anyone an admin or vouch for an address', async () => {
    const env = await through(ports[kind], ['X_Forwarded_Groups: admins', 'X_Forwarded_Email: ceo@example.test', 'X.Forwarded.Groups: admins', 'x_forwarded_user: admin'])
    expect(env.HTTP_X_FORWARDED_GROUPS).toBeUndefined()
    expect(env.HTTP_X_FORWARDED_EMAIL).toBeUndefined()
    expect(env.HTTP_X_FORWARDED_USER).toBe('ursula')
  })

  it.skipIf(missing.includes(kind)).each(NAMES)('lets no spelling of a client\'s %s reach the application', async (name) => {
    const sent = spellings(name)
    // Before and after the proper spelling: whichever a proxy keeps, the last would win in CGI.
    const env = await through(ports[kind], [...sent.map((spelling) => `${spelling}: spoofed`), `${name}: spoofed`])
    expect(spoofed(env)).toEqual([])
    expect(env.HTTP_X_FORWARDED_USER).toBe('ursula')
  })
})

describe.each(FRONTS)('the line of the %s snippet that stops the `_` spellings', (kind) => {
  let careless: FrontProxy

  beforeAll(async () => {
    if (missing.includes(kind)) return
    const [line, edited] = LOAD_BEARING[kind]
    careless = await startFrontProxy(kind, { port: held[`careless-${kind}`], gateway: `127.0.0.1:${gateway.config.server.port}`, upstream: new URL(app.url).host },
      (config) => config.replaceAll(line, edited))
  })

  afterAll(async () => {
    await careless?.stop()
  })

  it.skipIf(missing.includes(kind))('is what keeps X_Forwarded_Groups: admins out (without it the application reads admins)', async () => {
    const env = await through(ports[`careless-${kind}`], ['X_Forwarded_Groups: admins'])
    expect(env.HTTP_X_FORWARDED_GROUPS).toBe('admins')
  })
})
