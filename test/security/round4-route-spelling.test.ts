// An outside tester's findings on the spelling of routes' paths and rewritePrefixes (a public route
// beside a protected one on one upstream):
// - a protected route whose path has capitals (`/ReportServer/`, as SSRS, OWA and Citrix have) was
//   reached by an anonymous lower-case `/reportserver/x` through a public `/`: the edge checked only
//   requests with something to fold;
// - a route path written percent-encoded (`/%C3%A4pp/`) matched none of its own requests (the router
//   reads a request's path decoded), and a non-ASCII one (`/café/`) was compared raw with the edge's
//   encoded request paths (`/CAF%C3%A9/x` passed), which also cut a wrong upstream path with a
//   rewritePrefix (`/ü/` to `/pub/`: `/pubC3%BC/y`);
// - a route at `/` with `rewritePrefix: /app` (no trailing `/`) was modelled as sending /x to `/appx`,
//   where the proxy sends `/app/x`: anonymous `/admin/users` reached a protected `/app/`'s upstream
//   `/app/admin/users` with a warning only;
// - a rewritePrefix was compared as written: `%7E`, `%61`, `%41PP`, `app%2E`, `;v=1`, `\..\`, `%C3%84`
//   are read by some upstream as another path.
// A second tester, on those fixes:
// - a protected route whose path has empty or dot segments (`/docs//api/`) matched no request (the
//   edge merges and removes them before routing): a public `/` beside it served its paths;
// - Unicode letters that toLowerCase does not fold as Java, Spring and Python do (`İ`, `ı`, `ſ`);
// - a rewritePrefix with a query (`/index.php?/`) was accepted.
// A third tester:
// - route reach compared a route's raw path (`/café`) with `public` globs and rewritePrefixes in the
//   request's spelling, and never folded case there: a public glob leading to a protected
//   route's upstream paths loaded silently;
// - a root route with a rewritePrefix mapped an upstream's `Location: /app//evil.example/x` back to
//   `//evil.example/x`, another host;
// - a websocket route `/café/` never upgraded, a glob on it could not be written, and its RFC 9728
//   `resource` was spelled otherwise than its metadata address;
// - route paths the edge refuses in every request (`;`, `\`, `/a../`) loaded.
// Each row failed on the code before.
import { stringify } from 'yaml'
import { afterAll, describe, expect, it } from 'vitest'
import { ConfigError } from '../../src/config/config.js'
import { prefixSpelling } from '../../src/http/edge.js'
import { upstreamPaths } from '../../src/proxy/upstream-path.js'
import { resourceIdentifier, resourceMetadataUrl } from '../../src/oauth/urls.js'
import { configProblems } from '../helpers/config.js'
import { startGateway, type TestGateway } from '../helpers/gateway.js'
import { startUpstream } from '../helpers/upstream.js'

const DEMO = { clientId: 'c', clientSecret: 's', authorizeUrl: 'http://127.0.0.1:9/auth', tokenUrl: 'http://127.0.0.1:9/token', scope: 'profile' }
const closing: Array<() => Promise<void>> = []
afterAll(async () => { for (const close of closing.reverse()) await close() })

/** Whether an anonymous GET `url` reaches the upstream as `seen` (false when the config is refused). */
async function lands (routes: (upstream: string) => unknown[], url: string, seen: string): Promise<boolean> {
  const upstream = await startUpstream()
  closing.push(async () => { await upstream.close() })
  let gateway: TestGateway
  try {
    gateway = await startGateway({ store: { type: 'memory' }, providers: { demo: DEMO }, routes: routes(upstream.url) }, { listen: false })
  } catch (error) {
    if (error instanceof ConfigError) return false
    throw error
  }
  closing.push(async () => { await gateway.close() })
  const response = await gateway.app.inject({ url, headers: { accept: 'application/json' } })
  return response.statusCode === 200 && upstream.seen.some((one) => one.url === seen)
}

const withPublicRoot = (path: string) => (upstream: string) => [{ path, upstream, provider: 'demo' }, { path: '/', upstream, auth: 'none' }]

describe('a protected route\'s path, spelled otherwise by the request, beside a public /', () => {
  it('route /ReportServer/: a lower-case /reportserver/x is refused at the edge', async () => {
    expect(prefixSpelling('/reportserver/x', ['/ReportServer', ''])).toBeDefined()
    expect(await lands(withPublicRoot('/ReportServer/'), '/reportserver/x', '/reportserver/x')).toBe(false)
  })

  it('route /%C3%A4pp/ (which would match none of its own requests) is refused', async () => {
    expect(await lands(withPublicRoot('/%C3%A4pp/'), '/%C3%A4pp/x', '/%C3%A4pp/x')).toBe(false)
  })

  it('route /café/: /CAF%C3%A9/x and /caf%C3%89/x (É) are refused at the edge', async () => {
    expect(prefixSpelling('/CAF%C3%A9/x', ['/café', ''])).toBeDefined()
    expect(await lands(withPublicRoot('/café/'), '/CAF%C3%A9/x', '/CAF%C3%A9/x')).toBe(false)
    expect(await lands(withPublicRoot('/café/'), '/caf%C3%89/x', '/caf%C3%89/x')).toBe(false)
  })

  it('route /c++/: /c%2B%2B/x (which most upstreams decode to /c++/x) is refused at the edge', async () => {
    expect(await lands(withPublicRoot('/c++/'), '/c%2B%2B/x', '/c%2B%2B/x')).toBe(false)
  })

  it('route /ü/ with rewritePrefix /pub/ sends /%C3%BC/y to /pub/y', async () => {
    expect(await lands((upstream) => [{ path: '/ü/', upstream, auth: 'none', rewritePrefix: '/pub/' }], '/%C3%BC/y', '/pub/y')).toBe(true)
  })

  it('public / with rewritePrefix /app (no trailing /) beside protected /app/: the config is refused, so /admin/users never arrives as /app/admin/users', async () => {
    const routes = (upstream: string) => [{ path: '/app/', upstream, provider: 'demo' }, { path: '/', upstream, auth: 'none', rewritePrefix: '/app' }]
    expect(await lands(routes, '/admin/users', '/app/admin/users')).toBe(false)
  })
})

const UP = 'http://127.0.0.1:9100'
const PROVIDERS = { p: { clientId: 'c', clientSecret: 's', scope: 'read', authorizeUrl: 'https://op.example.org/a', tokenUrl: 'https://op.example.org/t' } }
const config = (routes: unknown[]) => stringify({ session: { secret: 'q3Vt8mJ0bXcE1s7yKp2RzL9wH4dNfA6gUoTiC5eBvMk=' }, providers: PROVIDERS, routes })

describe('the route-reach check reads rewritePrefixes as the proxy and the upstream do', () => {
  it.each([
    ['/app', '/app/', undefined],
    ['/APP', '/app/', '/app/'],
    ['/x', '/app/', '/x/'],
  ])('public / with rewritePrefix %s beside protected %s (%s) is refused', (rewrite, path, targetRewrite) => {
    expect(upstreamPaths('/', rewrite).path('/admin')).toBe(`${rewrite}/admin`)
    const text = config([{ path: '/', upstream: UP, auth: 'none', rewritePrefix: rewrite }, { path, upstream: UP, provider: 'p', rewritePrefix: targetRewrite }])
    expect(configProblems(text, {})).toContainEqual(expect.stringMatching(/^routes\[0\]\.path: reaches every path/))
  })

  it.each([
    ['/%7Ealice/', '/alice/', '/~alice/', 'is spelled otherwise than the gateway spells paths: write "/~alice/", got "/%7Ealice/"'], // Apache user directories
    ['/%61pp/', '/app/', undefined, 'is spelled otherwise than the gateway spells paths: write "/app/", got "/%61pp/"'],
    ['/%41PP/', '/app/', undefined, 'is spelled otherwise than the gateway spells paths: write "/APP/", got "/%41PP/"'],
    ['/app%2E/', '/app/', undefined, 'is spelled otherwise than the gateway spells paths: write "/app./", got "/app%2E/"'],
    ['/app;v=1/', '/app/', undefined, 'is a path the edge would refuse in a request'], // Tomcat, Jetty: a path parameter
    ['/x\\..\\app/', '/app/', undefined, 'is a path the edge would refuse in a request'], // IIS: \ is /
    ['/%C3%84pp/', '/äpp/', undefined, undefined], // IIS, ASP.NET: Ä is ä
    ['/APP./', '/app/', undefined, undefined],
  ])('public /pub/ with rewritePrefix %s beside protected %s (%s) is refused', (rewrite, path, targetRewrite, spelling) => {
    const problems = configProblems(config([{ path: '/pub/', upstream: UP, auth: 'none', rewritePrefix: rewrite }, { path, upstream: UP, provider: 'p', rewritePrefix: targetRewrite }]), {})
    if (spelling === undefined) expect(problems).toContainEqual(expect.stringMatching(/^routes\[0\]\.path: reaches every path .* \(as an upstream that reads paths in any letter case, such as IIS, reads them\)/))
    else expect(problems).toContainEqual(expect.stringContaining(`routes[0].rewritePrefix: ${spelling}`))
  })

  it('a rewritePrefix in the gateway\'s spelling is fine; one with raw non-ASCII (which would go upstream so) is told the spelling', () => {
    for (const rewrite of ['/~alice/', '/caf%C3%A9/', '/c++/', '/a:b@c/']) {
      expect(configProblems(config([{ path: '/pub/', upstream: UP, auth: 'none', rewritePrefix: rewrite }]), {})).toEqual([])
    }
    expect(configProblems(config([{ path: '/pub/', upstream: UP, auth: 'none', rewritePrefix: '/café/' }]), {}))
      .toEqual([expect.stringContaining('routes[0].rewritePrefix: is spelled otherwise than the gateway spells paths: write "/caf%C3%A9/", got "/café/"')])
  })

  it('a rewritePrefix that is a non-ASCII route path in the request\'s spelling reaches it exactly, and the message does not call it a case reading', () => {
    const problems = configProblems(config([{ path: '/pub/', upstream: UP, auth: 'none', rewritePrefix: '/caf%C3%A9/' }, { path: '/café/', upstream: UP, provider: 'p' }]), {})
    expect(problems).toContainEqual(expect.stringMatching(/^routes\[0\]\.path: reaches every path of http:\/\/127\.0\.0\.1:9100 that routes\[1\] \(\/café\/\) protects, with no sign-in/))
  })
})

describe('a spelling the router gives to a route no less protected goes on (the second tester\'s over-refusals)', () => {
  /** The status an anonymous GET `url` gets. */
  async function status (routes: (upstream: string) => unknown[], url: string): Promise<number> {
    const upstream = await startUpstream()
    closing.push(async () => { await upstream.close() })
    const gateway = await startGateway({ store: { type: 'memory' }, providers: { demo: DEMO }, routes: routes(upstream.url) }, { listen: false })
    closing.push(async () => { await gateway.close() })
    return (await gateway.app.inject({ url, headers: { accept: 'application/json' } })).statusCode
  }

  it('/ReportServer/ and / behind the same sign-in: /reportserver/x asks for the sign-in (401), as Microsoft\'s own links spell it', async () => {
    expect(await status((upstream) => [{ path: '/ReportServer/', upstream, provider: 'demo' }, { path: '/', upstream, provider: 'demo' }], '/reportserver/x')).toBe(401)
  })

  it('a protected /app/ with a public /app/Static/: /app/static/x, routed to the protected /app/, asks for the sign-in', async () => {
    expect(await status((upstream) => [{ path: '/app/', upstream, provider: 'demo' }, { path: '/app/Static/', upstream, auth: 'none' }], '/app/static/x')).toBe(401)
  })

  it('a public / beside a protected /ReportServer/ still refuses /reportserver/x (400)', async () => {
    expect(await status(withPublicRoot('/ReportServer/'), '/reportserver/x')).toBe(400)
  })
})

describe('a protected route whose path has empty or dot segments never matches a request', () => {
  it.each(['/docs//api/', '/docs/./api/', '/app/../docs/api/'])('route %s: a config error', (path) => {
    expect(configProblems(config([{ path, upstream: UP, provider: 'p' }, { path: '/', upstream: UP, auth: 'none' }]), {}))
      .toContainEqual(expect.stringMatching(/^routes\[0\]\.path: has dot or empty segments, which the edge removes from every request before routing/))
  })

  it('route /docs//api/ beside a public /: anonymous /docs/api/secret never reaches the upstream', async () => {
    expect(await lands((upstream) => [{ path: '/docs//api/', upstream, provider: 'demo' }, { path: '/', upstream, auth: 'none' }], '/docs/api/secret', '/docs/api/secret')).toBe(false)
  })
})

describe('Unicode letters as Java, Spring and Python compare them case-insensitively', () => {
  // Spring 6 PathPattern (setCaseSensitive(false)) compares Character.toLowerCase(c): İ (U+0130) is
  // `i`; Java's equalsIgnoreCase and Python's re.IGNORECASE (Django `(?i)`) read ı (U+0131) as `i`
  // and ſ (U+017F) as `s`. JavaScript's toLowerCase gives `i` and a combining dot for İ, and keeps ı and ſ.
  it.each([
    ['/%C4%B0nternal/x', '/internal'],
    ['/adm%C4%B1n/x', '/admin'],
    ['/%C5%BFecret/x', '/secret'],
    ['/%E2%84%AAb/x', '/kb'],
  ])('%s is refused beside a route %s/', (path, prefix) => {
    expect(prefixSpelling(path, [prefix, ''])).toBeDefined()
  })
})

describe('a rewritePrefix with a query or fragment', () => {
  // `/pub/admin/users` would go upstream as `/index.php?//admin/users`, CodeIgniter's `/admin/users`.
  it.each(['/index.php?/', '/search?q=', '/a#b'])('rewritePrefix %s is a config error', (rewritePrefix) => {
    expect(configProblems(config([{ path: '/admin/', upstream: UP, provider: 'p' }, { path: '/pub/', upstream: UP, auth: 'none', rewritePrefix }]), {}))
      .toContainEqual(expect.stringContaining('routes[1].rewritePrefix: is a path: a query or fragment in it would be sent before the request\'s path'))
  })
})

describe('a public glob that leads to a protected route\'s upstream paths, through a non-ASCII path or another case', () => {
  it('ASCII: refused at load (the control)', async () => {
    const routes = (upstream: string) => [{ path: '/shop/', upstream, provider: 'demo' }, { path: '/u/', upstream, provider: 'demo', rewritePrefix: '/shop/', public: ['GET /u/admin/*'] }]
    expect(await lands(routes, '/u/admin/x', '/shop/admin/x')).toBe(false)
  })

  it.each([
    ['protected /café/, public glob on /u/ rewriting to /caf%C3%A9/', '/café/', '/u/', '/caf%C3%A9/', 'GET /u/admin/*', '/u/admin/x'],
    ['public glob on /ü/ rewriting to protected /shop/', '/shop/', '/ü/', '/shop/', 'GET /%C3%BC/admin/*', '/%C3%BC/admin/x'],
    ['rewritePrefix /APP/ beside protected /app/ (IIS: /app/)', '/app/', '/u/', '/APP/', 'GET /u/admin/*', '/u/admin/x'],
  ])('%s: refused at load', async (_name, protectedPath, path, rewritePrefix, glob, url) => {
    const routes = (upstream: string) => [{ path: protectedPath, upstream, provider: 'demo' }, { path, upstream, provider: 'demo', rewritePrefix, public: [glob] }]
    expect(await lands(routes, url, `${rewritePrefix.replace(/\/$/, '')}/admin/x`)).toBe(false)
  })
})

describe('what else reads a non-ASCII route path', () => {
  it('a Location a root route\'s rewritePrefix maps back never leads off the gateway\'s origin', () => {
    const paths = upstreamPaths('/', '/app/')
    const staysOn = (origin: string, location: string) => new URL(location, origin).origin === origin
    for (const location of ['/app//evil.example/x', '/app/\\evil.example/x', '/app/\t/evil.example/x', '/app/\t\\evil.example/x', '/app/\r\n/evil.example/x']) {
      expect(staysOn('https://gateway.example', paths.location(location)), `${location} came back as ${paths.location(location)}`).toBe(true)
    }
    expect(paths.location('/app/next?x=1')).toBe('/next?x=1')
  })

  it('path globs on /café/ and /a{b}/ are written in the request\'s spelling', () => {
    const text = (route: Record<string, unknown>) => stringify({ session: { secret: 'q3Vt8mJ0bXcE1s7yKp2RzL9wH4dNfA6gUoTiC5eBvMk=' }, providers: PROVIDERS, routes: [{ upstream: UP, provider: 'p', ...route }] })
    expect(configProblems(text({ path: '/café/', deny: [{ paths: ['/caf%C3%A9/admin/*'] }], allow: [{ users: ['1'], paths: ['/caf%C3%A9/x/*'] }] }), {})).toEqual([])
    expect(configProblems(text({ path: '/a{b}/', deny: [{ paths: ['/a%7Bb%7D/admin/*'] }] }), {})).toEqual([])
  })

  it('RFC 9728: a route\'s resource is the URL its metadata address is derived from', () => {
    const resource = resourceIdentifier('https://gw.example', '/café')
    expect(resource).toBe('https://gw.example/caf%C3%A9')
    expect(resourceMetadataUrl('https://gw.example', '/café')).toBe('https://gw.example/.well-known/oauth-protected-resource/caf%C3%A9')
  })

  it.each(['/a;b/', '/a\\b/', '/a../'])('route path %s, which the edge refuses in every request, is a config error', (path) => {
    expect(configProblems(config([{ path, upstream: UP, provider: 'p' }]), {})).toContainEqual(expect.stringMatching(/^routes\[0\]\.path: never matches a request: the edge refuses such a path/))
  })
})
