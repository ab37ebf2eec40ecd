// A `deny` paths glob holds for every spelling a case-insensitive application
// (Express and Koa routers by default, IIS always) reads as the denied path: other letter case,
// trailing dots and `%20`s on a segment, NTFS stream suffixes. Through a route, through the docs' nginx forward-auth
// file under the real nginx with a forwardAuth.hosts deny rule, and asked of /oauth/auth/ directly,
// by a person signed in at the real provider; the application never sees a denied request. An
// `allow` glob does not widen with the fold. Spellings beside the denied path still pass.
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { startCaseInsensitiveUpstream, type CaseInsensitiveUpstream } from '../helpers/case-insensitive-upstream.js'
import { frontBinary, startFrontProxy, type FrontProxy } from '../helpers/front-proxy.js'
import { sessionCookie, startForwardAuthGateway, startGatewayWithProvider, type TestGateway } from '../helpers/gateway.js'
import { startRedis, type TestRedis } from '../helpers/redis.js'
import { rawRequest } from '../helpers/raw-http.js'

const WIKI = 'wiki.example.com'
const nginx = frontBinary('nginx')
if (nginx === undefined) console.warn('!!! nginx not installed: the deny-spelling tests behind the docs\' nginx file are SKIPPED (.ci/run installs it) !!!')

/** Spellings of /wiki/admin/... that a case-insensitive application routes to its admin pages. */
const DENIED_SPELLINGS = ['/wiki/admin/users', '/wiki/?/admin/users', '/wiki/index.php?/Admin/users', '/wiki/ADMIN/users', '/wiki/Admin/Users', '/wiki/admin./users', '/wiki/admin%20/users', '/wiki/ADMIN', '/wiki/aDmIn.%20./x', '/wiki/ADMIN%20%20/x', '/wiki/ADMIN.?x=1', '/wiki/Admin?Y=z.',
  // IIS on NTFS: a stream suffix names the directory or file itself (an outside tester's finding).
  '/wiki/admin::$INDEX_ALLOCATION/users', '/wiki/ADMIN:$i30:$INDEX_ALLOCATION/users', '/wiki/admin%3A%3A%24DATA', '/wiki/admin.::$data./x',
  // Drupal's ?q= in spellings PHP reads as q: its name cut at a NUL, decoded byte by byte (an attacker's findings).
  '/wiki/?q%00=admin/users', '/wiki/?q=pub&q%00%FF=admin/users']
/** Paths beside it, which the rule does not deny. */
const ADMITTED = ['/wiki/page', '/wiki/administrator', '/wiki/Main_Page', '/wiki/admins/x', '/wiki/admin:notes', '/wiki/page::$DATA']

let redis: TestRedis
let app: CaseInsensitiveUpstream

beforeAll(async () => {
  redis = await startRedis()
  app = await startCaseInsensitiveUpstream()
})

afterAll(async () => {
  await app?.close()
  await redis?.release()
})

/** Whether the application routed anything to its admin pages since it had routed `since` requests. */
function adminReached (since: number): boolean {
  return app.routed.slice(since).some((path) => path === '/wiki/admin' || path.startsWith('/wiki/admin/'))
}

describe('a route with deny: [{ paths: [/wiki/admin/*] }] before a case-insensitive application', () => {
  let gateway: TestGateway
  let closeAll: () => Promise<void>
  let cookie: string

  beforeAll(async () => {
    ;({ gateway, close: closeAll } = await startGatewayWithProvider({
      store: { type: 'redis', url: redis.url },
      routes: [
        { path: '/wiki/', upstream: app.url, provider: 'demo', deny: [{ paths: ['/wiki/admin/*'] }] },
        { path: '/docs/', upstream: app.url, provider: 'demo', allow: [{ paths: ['/docs/public/*'] }] },
        { path: '/w/', upstream: app.url, provider: 'demo', deny: [{ paths: ['/w/special:*', '/w/$batch', '/w/@me/*'] }] },
      ],
    }))
    cookie = await sessionCookie(gateway, 'alice')
  })

  afterAll(async () => {
    await closeAll?.()
  })

  async function status (path: string): Promise<number> {
    const response = await fetch(`${gateway.url}${path}`, { headers: { accept: 'application/json', cookie } })
    await response.arrayBuffer()
    return response.status
  }

  it.each(DENIED_SPELLINGS)('refuses %s (403) before the application sees it', async (path) => {
    const since = app.routed.length
    expect(await status(path)).toBe(403)
    expect(adminReached(since)).toBe(false)
  })

  // The characters a path carries as they are (sub-delims, `:`, `@`), percent-encoded: the
  // application decodes them to the denied path, and so does the gateway.
  it.each(['/w/special%3Aversion', '/w/Special%3aVersion', '/w/%24batch', '/w/%24BATCH', '/w/%40me/x', '/w/%40ME./x'])('refuses %s (403) before the application sees it', async (path) => {
    const since = app.routed.length
    expect(await status(path)).toBe(403)
    expect(app.routed.slice(since)).toEqual([])
  })

  it.each(ADMITTED)('admits %s', async (path) => {
    expect(await status(path)).toBe(200)
  })

  it('an allow glob is not widened by the fold: /docs/PUBLIC/x is not /docs/public/x', async () => {
    expect(await status('/docs/public/x')).toBe(200)
    expect(await status('/docs/PUBLIC/x')).toBe(403)
    expect(await status('/docs/public./x')).toBe(403)
  })
})

/** Paths a PHP front controller or a Rails router dispatches to the denied admin action. */
const ROUTED_SPELLINGS = ['/app/index.php/admin/users', '/app/INDEX.PHP/Admin/users', '/app/index.php/admin', '/app/admin.json', '/app/ADMIN.Json',
  '/app/index.php/admin.json', '/app/admin/users.xml', '/ex/admin/', '/ex/ADMIN/', '/ex/admin.xml', '/ex/app.php/admin']
/** Paths beside them, which the rules do not deny. */
const ROUTED_ADMITTED = ['/app/index.php/page', '/app/administrator.json', '/app/page.json', '/app/index.php', '/ex/admins', '/ex/page/']

describe('deny globs before a front controller (PATH_INFO) and a Rails-like router (trailing /, format suffix)', () => {
  let front: CaseInsensitiveUpstream
  let gateway: TestGateway
  let closeAll: () => Promise<void>
  let cookie: string

  beforeAll(async () => {
    front = await startCaseInsensitiveUpstream({ frontController: true })
    ;({ gateway, close: closeAll } = await startGatewayWithProvider({
      store: { type: 'redis', url: redis.url },
      routes: [
        { path: '/app/', upstream: front.url, provider: 'demo', deny: [{ paths: ['/app/admin/*'] }] },
        { path: '/ex/', upstream: front.url, provider: 'demo', deny: [{ paths: ['/ex/admin'] }] },
      ],
    }))
    cookie = await sessionCookie(gateway, 'alice')
  })

  afterAll(async () => {
    await closeAll?.()
    await front?.close()
  })

  async function status (path: string): Promise<number> {
    const response = await fetch(`${gateway.url}${path}`, { headers: { accept: 'application/json', cookie } })
    await response.arrayBuffer()
    return response.status
  }

  it.each(ROUTED_SPELLINGS)('refuses %s (403) before the application routes it to its admin action', async (path) => {
    const since = front.routed.length
    expect(await status(path)).toBe(403)
    expect(front.routed.slice(since).some((routed) => /^\/(?:app|ex)\/admin(?:\/|$)/.test(routed))).toBe(false)
  })

  it.each(ROUTED_ADMITTED)('admits %s', async (path) => {
    expect(await status(path)).toBe(200)
  })
})

describe('forward-auth with a forwardAuth.hosts deny rule on /wiki/admin/*', () => {
  let gateway: TestGateway
  let closeAll: () => Promise<void>
  let cookie: string
  let front: FrontProxy | undefined

  beforeAll(async () => {
    ;({ gateway, close: closeAll } = await startForwardAuthGateway(redis.url, {
      forwardAuth: { allowedRedirectHosts: [WIKI], hosts: { [WIKI]: { deny: [{ paths: ['/wiki/admin/*'] }] } } },
    }))
    cookie = await sessionCookie(gateway, 'alice')
    if (nginx !== undefined) {
      front = await startFrontProxy('nginx', { gateway: `127.0.0.1:${gateway.config.server.port}`, upstream: new URL(app.url).host, host: WIKI })
    }
  })

  afterAll(async () => {
    await front?.stop()
    await closeAll?.()
  })

  /** forward-auth asked directly, as the trusted proxy in front would (with a query rule too when given); the status. */
  async function ask (uri: string, query = ''): Promise<number> {
    const response = await fetch(`${gateway.url}/oauth/auth/demo/${query}`, {
      headers: { cookie, host: WIKI, 'x-forwarded-host': WIKI, 'x-forwarded-proto': 'http', 'x-forwarded-method': 'GET', 'x-forwarded-uri': uri, accept: 'application/json' },
    })
    await response.arrayBuffer()
    return response.status
  }

  it.each(DENIED_SPELLINGS)('asked directly: refuses %s (403), with and without a query rule', async (path) => {
    expect(await ask(path)).toBe(403)
    expect(await ask(path, '?emails=alice@example.com,bob@example.com')).toBe(403)
  })

  it.each(ADMITTED)('asked directly: admits %s', async (path) => {
    expect(await ask(path)).toBe(200)
  })

  /** `GET target` through nginx as wiki.example.com with the session; the status (0: no answer). */
  async function through (target: string): Promise<number> {
    return (await rawRequest(front!.port, target, [`Cookie: ${cookie}`], { host: WIKI })).status
  }

  it.skipIf(nginx === undefined).each(DENIED_SPELLINGS)('through the docs\' nginx file: refuses %s before the application sees it', async (path) => {
    const since = app.routed.length
    expect(await through(path)).toBe(403)
    expect(adminReached(since)).toBe(false)
  })

  it.skipIf(nginx === undefined).each(ADMITTED)('through the docs\' nginx file: admits %s', async (path) => {
    expect(await through(path)).toBe(200)
  })
})
