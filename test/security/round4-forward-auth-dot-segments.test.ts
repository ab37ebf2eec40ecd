// Forward-auth judges only a path the application will receive. The docs' nginx file and Caddyfile
// send the raw original target ($request_uri; forward_auth's X-Forwarded-Uri) and pass that same raw
// target to the application, which resolves (or does not resolve) `..`, `.` and `//` its own way:
// Express's `app.use('/admin', router)` serves /admin/users/../../pub from its admin router. A raw
// path whose segments canonicalisation would change (a dot segment, raw or percent-encoded in any
// case, an empty segment) is a path that cannot be told: a `deny` with `paths` holds and an `allow`
// with `paths` does not admit. Run under the real nginx and the real Caddy with the docs' files, and
// asked of /oauth/auth/ directly by a trusted proxy, for a deny-only and an allow-only host; raw
// paths that are already canonical are judged as before.
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { frontBinary, startFrontProxy, type FrontKind, type FrontProxy } from '../helpers/front-proxy.js'
import { sessionCookie, startForwardAuthGateway, type TestGateway } from '../helpers/gateway.js'
import { startUpstream, type Upstream } from '../helpers/upstream.js'
import { startRedis, type TestRedis } from '../helpers/redis.js'
import { rawRequest } from '../helpers/raw-http.js'

const ADMIN = 'admin.example.com'
const REPORTS = 'reports.example.com'
const METHODS = 'methods.example.com'
const FRONTS: FrontKind[] = ['nginx', 'caddy']
const missing = FRONTS.filter((kind) => !frontBinary(kind))
if (missing.length > 0) console.warn(`!!! ${missing.join(' and ')} not installed: the dot-segment tests behind them are SKIPPED (.ci/run installs them) !!!`)

/** Raw paths whose segments canonicalisation changes, each reaching /admin for some reader; refused on ADMIN (deny /admin, /admin/*). */
const HOSTILE_DENY = [
  '/admin/users/../../pub', '/admin/..', '/admin/x/%2e%2e/%2e%2e/', '/admin/./x', '//admin', '/pub/%2E%2e/admin',
  '/admin/x/..%2f..', '/admin/%2E/x', '/admin/x/.%2E/.%2e/', '/admin//x', '/./admin', '/admin/users/../../pub?x=1',
  '/admin/x/%2E%2E/..', '/admin/.', '//admin/users',
]
/** Raw paths that canonicalise into /reports/*, which an application reads as somewhere else; not admitted on REPORTS (allow /reports/*). */
const HOSTILE_ALLOW = [
  '/admin/x/../../reports/q', '/admin/%2e%2e/reports/q', '/admin/%2E%2E/reports/q', '/reports/./q', '//reports/q',
  '/reports//q', '/./reports/q', '/admin/.%2e/reports/q', '/admin/x/..%2F../reports/q',
]
/** Canonical raw paths: judged exactly as before (status for ADMIN, for REPORTS). */
const CANONICAL: Array<[string, number, number]> = [
  ['/pub', 200, 403], ['/', 200, 403], ['/admin', 403, 403], ['/admin/users', 403, 403], ['/administrator', 200, 403],
  ['/reports/q', 200, 200], ['/reports/q?a=1', 200, 200], ['/pub/a.b/c..d', 200, 403], ['/pub/x/', 200, 403],
  // Spellings whose segments do not change: an encoded unreserved character and a character outside `pchar`.
  ['/reports/%71', 200, 200], ['/%61dmin/users', 403, 403], ['/reports/a%7Bb', 200, 200],
]

let redis: TestRedis
let app: Upstream
let gateway: TestGateway
let closeGateway: () => Promise<void>
let session: string

beforeAll(async () => {
  redis = await startRedis()
  app = await startUpstream()
  ;({ gateway, close: closeGateway } = await startForwardAuthGateway(redis.url, {
    forwardAuth: {
      allowedRedirectHosts: [ADMIN, REPORTS, METHODS],
      hosts: {
        [ADMIN]: { deny: [{ paths: ['/admin', '/admin/*'] }] },
        [REPORTS]: { allow: [{ paths: ['/reports/*'] }] },
        [METHODS]: { deny: [{ methods: ['DELETE'] }, { methods: ['PUT'], paths: ['/admin/*'] }] },
      },
    },
  }))
  session = await sessionCookie(gateway, 'alice')
})

afterAll(async () => {
  await closeGateway?.()
  await app?.close()
  await redis?.release()
})

describe('/oauth/auth/ asked directly by a trusted proxy with the raw original path', () => {
  async function ask (host: string, uri: string): Promise<number> {
    const response = await fetch(`${gateway.url}/oauth/auth/demo/`, {
      headers: { cookie: session, host, 'x-forwarded-host': host, 'x-forwarded-proto': 'http', 'x-forwarded-method': 'GET', 'x-forwarded-uri': uri, accept: 'application/json' },
    })
    await response.arrayBuffer()
    return response.status
  }

  it.each(HOSTILE_DENY)('deny /admin/*: refuses %s (the path cannot be told)', async (uri) => {
    expect(await ask(ADMIN, uri)).toBe(403)
  })

  it.each(HOSTILE_ALLOW)('allow /reports/*: does not admit %s', async (uri) => {
    expect(await ask(REPORTS, uri)).toBe(403)
  })

  it.each(CANONICAL)('a canonical path is judged as before: %s (%i on the deny host, %i on the allow host)', async (uri, admin, reports) => {
    expect(await ask(ADMIN, uri)).toBe(admin)
    expect(await ask(REPORTS, uri)).toBe(reports)
  })

  it('the X-Original-URI spelling (ingress-nginx) is read the same way', async () => {
    const response = await fetch(`${gateway.url}/oauth/auth/demo/`, {
      headers: { cookie: session, host: ADMIN, 'x-forwarded-host': ADMIN, 'x-forwarded-proto': 'http', 'x-original-method': 'GET', 'x-original-uri': '/admin/users/../../pub', accept: 'application/json' },
    })
    await response.arrayBuffer()
    expect(response.status).toBe(403)
  })
})

describe('a path that cannot be told still has its method overrides judged (deny DELETE; deny PUT on /admin/*)', () => {
  async function ask (uri: string, override?: string): Promise<number> {
    const headers: Record<string, string> = { cookie: session, host: METHODS, 'x-forwarded-host': METHODS, 'x-forwarded-proto': 'http', 'x-forwarded-method': 'POST', 'x-forwarded-uri': uri, accept: 'application/json' }
    if (override !== undefined) headers['x-http-method-override'] = override
    const response = await fetch(`${gateway.url}/oauth/auth/demo/`, { headers })
    await response.arrayBuffer()
    return response.status
  }

  it.each([
    ['/pub/./x', 'DELETE', 403], ['/pub//x', 'DELETE', 403], ['/pub/./x?_method=DELETE', undefined, 403], ['/pub;x', 'DELETE', 403],
    ['/pub/./x', 'PUT', 403], ['/pub/./x', undefined, 200], ['/pub/x', 'PUT', 200], ['/pub/x', 'DELETE', 403], ['/pub/x?_method=DELETE', undefined, 403],
  ])('POST %s with override %s: %i', async (uri, override, status) => {
    expect(await ask(uri, override)).toBe(status)
  })
})

/** `GET target` written byte for byte through `port` as `host` with the session; the status (0: no answer). */
async function send (port: number, host: string, target: string): Promise<number> {
  return (await rawRequest(port, target, [`Cookie: ${session}`], { host })).status
}

describe.each(FRONTS)('through the docs\' %s file, which passes the raw target to the application', (kind) => {
  const ports: Record<string, number> = {}
  const fronts: FrontProxy[] = []

  beforeAll(async () => {
    if (missing.includes(kind)) return
    for (const host of [ADMIN, REPORTS]) {
      const front = await startFrontProxy(kind, { gateway: `127.0.0.1:${gateway.config.server.port}`, upstream: new URL(app.url).host, host })
      ports[host] = front.port
      fronts.push(front)
    }
  })

  afterAll(async () => {
    await Promise.all(fronts.map(async (front) => await front.stop()))
  })

  /** The status, and the raw targets the application received meanwhile. */
  async function through (host: string, target: string): Promise<{ status: number, received: string[] }> {
    const before = app.seen.length
    const status = await send(ports[host]!, host, target)
    return { status, received: app.seen.slice(before).map((seen) => seen.url) }
  }

  /** Refused by the gateway (403) or by the proxy itself (400): either way the application never saw it. */
  function expectRefused ({ status, received }: { status: number, received: string[] }): void {
    expect({ refused: status === 403 || status === 400, received }).toEqual({ refused: true, received: [] })
  }

  it.skipIf(missing.includes(kind)).each(HOSTILE_DENY)('deny /admin/*: %s never reaches the application', async (target) => {
    expectRefused(await through(ADMIN, target))
  })

  it.skipIf(missing.includes(kind)).each(HOSTILE_ALLOW)('allow /reports/*: %s never reaches the application', async (target) => {
    expectRefused(await through(REPORTS, target))
  })

  it.skipIf(missing.includes(kind)).each(CANONICAL)('a canonical path is judged as before: %s', async (target, admin, reports) => {
    const onAdmin = await through(ADMIN, target)
    expect(onAdmin.status).toBe(admin)
    expect(onAdmin.received).toEqual(admin === 200 ? [target] : [])
    const onReports = await through(REPORTS, target)
    expect(onReports.status).toBe(reports)
    expect(onReports.received).toEqual(reports === 200 ? [target] : [])
  })
})
