// A less protected route beside a protected one on the same upstream: refused when it reaches every
// upstream path of the protected route, a warning (at --check and start-up) when it reaches some.
// A table of cases, and a fast-check property against a model that routes and rewrites each request
// as the gateway does.
import fc from 'fast-check'
import { stringify } from 'yaml'
import { describe, expect, it } from 'vitest'
import { configProblems } from '../helpers/config.js'
import { configWarnings, parseConfig } from '../../src/config/config.js'
import type { RouteConfig } from '../../src/config/types.js'
import { upstreamReach } from '../../src/config/route-reach.js'
import { upstreamPaths } from '../../src/proxy/upstream-path.js'

const UP = 'http://127.0.0.1:9100'
const SECRET = 'q3Vt8mJ0bXcE1s7yKp2RzL9wH4dNfA6gUoTiC5eBvMk='
const PROVIDERS = { p: { clientId: 'c', clientSecret: 's', scope: 'read', authorizeUrl: 'https://op.example.org/a', tokenUrl: 'https://op.example.org/t' } }

/** A route as validate.ts resolves it (the fields upstreamReach and lessProtected read). */
function route (path: string, rewritePrefix?: string, auth: 'none' | 'required' = 'required', upstream = UP): RouteConfig {
  return {
    path: path.length > 1 ? path.replace(/\/+$/, '') : path,
    upstream,
    provider: auth === 'required' ? 'p' : undefined,
    providers: auth === 'required' ? ['p'] : [],
    rewritePrefix,
    timeoutMs: 30_000,
    maxConnections: 128,
    auth,
    websocket: false,
    allowedOrigins: [],
    rules: { allow: undefined, deny: [] },
    headers: [],
    public: [],
    identityHeaders: { user: 'x-forwarded-user', email: 'x-forwarded-email', groups: 'x-forwarded-groups' },
    assertion: false,
    websocketMaxMessage: 1024 * 1024,
    methodOverrideMaxBody: 1024 * 1024,
    bearer: undefined,
    reauth: undefined,
    preserveBodyBytes: undefined,
    agents: false,
  }
}

describe('upstreamReach: which upstream paths of a protected route another route reaches', () => {
  it.each([
    // [less protected: path, rewritePrefix], [protected: path, rewritePrefix], reach
    [['/', undefined], ['/app/', '/'], 'all'], // the issue: the whole app is public
    [['/', '/'], ['/app/', '/'], 'all'],
    [['/pub/', '/'], ['/app/', '/'], 'all'],
    [['/pub/', '/'], ['/app/', '/x/'], 'all'],
    [['/pub/', '/x/'], ['/app/', '/x/y/'], 'all'],
    [['/', undefined], ['/app/', undefined], 'none'], // a public site with a protected area: clients asking for /app/ reach the protected route
    [['/', undefined], ['/app/', '/app/'], 'none'],
    [['/public/', undefined], ['/app/', '/'], 'some'], // upstream /public/... both ways
    [['/public/', undefined], ['/app/', undefined], 'none'],
    [['/pub/', '/x/'], ['/app/', '/y/'], 'none'],
    [['/pub/', '/x'], ['/app/', '/xy/'], 'none'], // /x is a segment, not a string prefix
    [['/', '/x'], ['/app/', '/xy/'], 'none'], // a route at / sends /y to /x/y, as the proxy does (upstream-path.ts)
    [['/pub/', '/x/y/'], ['/app/', '/x/'], 'some'],
    [['/', undefined], ['/a/b/', '/a/'], 'all'], // all of upstream /a/... but /a/b/..., which clients ask /a/b/ for
    [['/', '/x'], ['/app/', '/x/'], 'all'], // / goes to /x/, /y to /x/y: all below /x/, and the bare /x is not counted
    [['/', '/app'], ['/app/', undefined], 'all'], // the same without a trailing / (anonymous /admin/users was upstream /app/admin/users)
    [['/static/', undefined], ['/', undefined], 'none'], // a public folder of a protected site
    [['/static/', '/'], ['/', undefined], 'all'],
    [['/a/', undefined], ['/a/b/', '/'], 'some'],
    // Upstream paths as a case-insensitive upstream (IIS, Express) reads them: /APP/ is /app/.
    [['/pub/', '/APP/'], ['/app/', undefined], 'all'],
    [['/pub/', '/App./'], ['/app/', undefined], 'all'],
    [['/pub/', '/app/'], ['/APP/', undefined], 'all'],
    [['/', '/APP'], ['/app/', '/app/'], 'all'],
    [['/pub/', '/%C3%84pp/'], ['/äpp/', undefined], 'all'], // IIS and .NET read Ä as ä
    [['/pub/', '/c%2B%2B/'], ['/c++/', undefined], 'all'], // most upstreams decode %2B
    [['/pub/', '/APP/X/'], ['/app/', undefined], 'some'],
  ] as const)('%j beside protected %j reaches %s', ([lessPath, lessRewrite], [path, rewrite], expected) => {
    expect(upstreamReach(route(lessPath, lessRewrite, 'none'), route(path, rewrite))).toBe(expected)
  })

  it('another upstream origin is never reached; the same origin written with a default port is', () => {
    expect(upstreamReach(route('/', undefined, 'none', 'http://127.0.0.1:9101'), route('/app/', '/'))).toBe('none')
    expect(upstreamReach(route('/', undefined, 'none', 'http://app.internal'), route('/app/', '/', 'required', 'http://app.internal:80'))).toBe('all')
  })
})

describe('the config refuses full reach and warns about partial reach, naming both routes', () => {
  const config = (routes: unknown[]) => stringify({ session: { secret: SECRET }, providers: PROVIDERS, routes })

  it('refuses a public / beside a protected /app/ with rewritePrefix: /', () => {
    const text = config([{ path: '/', upstream: UP, auth: 'none' }, { path: '/app/', upstream: UP, provider: 'p', rewritePrefix: '/' }])
    expect(configProblems(text, {})).toEqual([
      `routes[0].path: reaches every path of ${UP} that routes[1] (/app/) protects, with no sign-in: give the routes different upstream paths (rewritePrefix) or the same protection (line 11)`,
    ])
  })

  it('refuses a public route whose rewritePrefix is a protected route\'s upstream path in another letter case, and says so', () => {
    const text = config([{ path: '/pub/', upstream: UP, auth: 'none', rewritePrefix: '/APP/' }, { path: '/app/', upstream: UP, provider: 'p' }])
    expect(configProblems(text, {})).toEqual([
      `routes[0].path: reaches every path of ${UP} that routes[1] (/app/) protects (as an upstream that reads paths in any letter case, such as IIS, reads them), with no sign-in: give the routes different upstream paths (rewritePrefix) or the same protection (line 11)`,
    ])
  })

  it('refuses a route open to any signed-in user beside one with allow rules', () => {
    const text = config([
      { path: '/admin/', upstream: UP, provider: 'p', rewritePrefix: '/', allow: { groups: ['admins'] } },
      { path: '/all/', upstream: UP, provider: 'p', rewritePrefix: '/' },
    ])
    expect(configProblems(text, {})).toEqual([
      `routes[1].path: reaches every path of ${UP} that routes[0] (/admin/) protects, to any signed-in user, without its rules: give the routes different upstream paths (rewritePrefix) or the same protection (line 18)`,
    ])
  })

  it('refuses a route of another provider, and one with other allow rules, that reaches every path; accepts the same rules', () => {
    const providers = { ...PROVIDERS, gh: { preset: 'github', clientId: 'c', clientSecret: 's' } }
    const text = (second: Record<string, unknown>) => stringify({
      session: { secret: SECRET },
      providers,
      routes: [{ path: '/admin/', upstream: UP, provider: 'p', rewritePrefix: '/', allow: { groups: ['admins'] } }, { path: '/other/', upstream: UP, rewritePrefix: '/', ...second }],
    })
    // Each lets in people the other refuses; the first route is named, with the other.
    const refused = (how: string, together = '') => [`routes[0].path: reaches every path of ${UP} that routes[1] (/other/) protects, ${how}: give the routes different upstream paths (rewritePrefix) or the same protection${together} (line 15)`]
    // The refusal names the one-route form that lets the people of both providers in.
    expect(configProblems(text({ provider: 'gh', allow: { groups: ['admins'] } }), {})).toEqual(refused('to anyone signed in at "p"',
      '; to let the people of gh and p use one application, make it one route with providers: [gh, p] (and rules that name providers where they differ)'))
    expect(configProblems(text({ provider: 'p', allow: { groups: ['staff'] } }), {})).toEqual(refused('under other rules'))
    expect(configProblems(text({ provider: 'p', allow: { groups: ['admins'] } }), {})).toEqual([])
  })

  it('a route of several providers is one protection: as that one route the pair is accepted; beside a route of one of them it lets the other\'s people in', () => {
    const providers = { ...PROVIDERS, gh: { preset: 'github', clientId: 'c', clientSecret: 's' } }
    const one = stringify({
      session: { secret: SECRET },
      providers,
      routes: [{ path: '/admin/', upstream: UP, providers: ['p', 'gh'], rewritePrefix: '/', allow: [{ providers: ['p'], groups: ['admins'] }, { providers: ['gh'], users: ['42'] }] }],
    })
    expect(configProblems(one, {})).toEqual([])
    const beside = (first: Record<string, unknown>, second: Record<string, unknown>) => stringify({
      session: { secret: SECRET },
      providers,
      routes: [{ path: '/admin/', upstream: UP, rewritePrefix: '/', ...first }, { path: '/other/', upstream: UP, rewritePrefix: '/', ...second }],
    })
    // The same providers in the same order are the same protection; in another order the first one's
    // people keep plain names on one route and not on the other, so one could pass as another's person.
    expect(configProblems(beside({ providers: ['p', 'gh'] }, { providers: ['p', 'gh'] }), {})).toEqual([])
    expect(configProblems(beside({ providers: ['p', 'gh'] }, { providers: ['gh', 'p'] }), {})).toEqual([
      expect.stringMatching(/^routes\[0\]\.path: .* naming the people of "p" without the `p:` that this route gives them/),
    ])
    expect(configProblems(beside({ provider: 'p' }, { providers: ['p', 'gh'] }), {})).toEqual([
      expect.stringMatching(/^routes\[1\]\.path: reaches every path .* that routes\[0\] \(\/admin\/\) protects, to anyone signed in at "gh"/),
    ])
  })

  it('a route that takes the tokens of an issuer the protected route does not is less protected: refused when it reaches every path', () => {
    const providers = { op: { clientId: 'c', clientSecret: 's', scope: 'openid', issuer: 'https://op.example.org' }, partner: { clientId: 'c2', clientSecret: 's2', scope: 'openid', issuer: 'https://partner.example.org' }, gha: { issuer: 'https://token.actions.githubusercontent.com' } }
    const beside = (ci: Record<string, unknown>, app: Record<string, unknown> = {}) => stringify({
      session: { secret: SECRET },
      providers,
      routes: [{ path: '/app/', upstream: UP, provider: 'op', ...app }, { path: '/ci/', upstream: UP, rewritePrefix: '/app/', provider: 'op', ...ci }],
    })
    // A CI issuer's tokens (any repository's, with the audience the caller chose), or a second sign-in provider's.
    for (const issuer of ['gha', 'partner']) {
      expect(configProblems(beside({ bearer: { issuers: [issuer], audience: 'a' } }), {})).toEqual([
        expect.stringMatching(new RegExp(`^routes\\[1\\]\\.path: reaches every path of ${UP.replaceAll('.', '\\.')} that routes\\[0\\] \\(/app/\\) protects, to the tokens of "${issuer}" \\(bearer\\.issuers\\)`)),
      ])
    }
    // The same issuer's tokens on both, or the route's own provider's: no one new.
    expect(configProblems(beside({ bearer: { issuers: ['gha'], audience: 'a' } }, { bearer: { issuers: ['gha'], audience: 'b' } }), {})).toEqual([])
    expect(configProblems(beside({ bearer: { audience: 'a' } }), {})).toEqual([])
  })

  it('public paths, a weaker step-up, or the same rules with paths globs (read on each route\'s own gateway paths) are less protection: refused when they reach every path', () => {
    const providers = { op: { clientId: 'c', clientSecret: 's', scope: 'openid', issuer: 'https://op.example.org' } }
    const pair = (app: Record<string, unknown>, other: Record<string, unknown>, path = '/ci/') => stringify({
      session: { secret: SECRET },
      providers,
      routes: [{ path: '/app/', upstream: UP, provider: 'op', ...app }, { path, upstream: UP, rewritePrefix: '/app/', provider: 'op', ...other }],
    })
    const admins = { allow: [{ groups: ['admins'] }] }
    // GET /ci/admin/users is upstream /app/admin/users, public.
    expect(configProblems(pair(admins, { ...admins, public: ['GET /ci/admin/*'] }), {})).toEqual([
      expect.stringMatching(/^routes\[1\]\.path: reaches every path .* that routes\[0\] \(\/app\/\) protects, with public paths/),
    ])
    // /ci/x is upstream /app/x with a sign-in of any age.
    expect(configProblems(pair({ reauth: { maxAge: '15m' } }, {}), {})).toEqual([
      expect.stringMatching(/^routes\[1\]\.path: reaches every path .* that routes\[0\] \(\/app\/\) protects, without the sign-in age this route asks \(reauth\)/),
    ])
    expect(configProblems(pair({ reauth: { maxAge: '15m' } }, { reauth: { maxAge: '15m' } }), {})).toEqual([])
    // The same deny on /app/admin/* holds on upstream /app/admin/... through /app/ only: through /,
    // that upstream path is gateway path /admin/..., which the glob does not name.
    const denyAdmin = { deny: [{ paths: ['/app/admin/*'] }] }
    expect(configProblems(pair(denyAdmin, denyAdmin, '/'), {})).toContainEqual(
      expect.stringMatching(/^routes\[[01]\]\.path: reaches every path .* protects, under the same rules, whose paths globs read each route's own gateway paths/))
    // The same rules without paths globs are the same protection.
    expect(configProblems(pair(admins, admins), {})).toEqual([])
  })

  it.each([
    ['http://localhost:9100'], ['http://127.0.0.2:9100'], ['http://[::1]:9100'],
  ])('takes %s for the same server as %s on loopback', (spelled) => {
    const text = config([{ path: '/', upstream: spelled, auth: 'none' }, { path: '/app/', upstream: UP, provider: 'p', rewritePrefix: '/' }])
    expect(configProblems(text, {})).toEqual([
      `routes[0].path: reaches every path of ${UP} that routes[1] (/app/) protects, with no sign-in: give the routes different upstream paths (rewritePrefix) or the same protection (line 11)`,
    ])
    expect(configProblems(config([{ path: '/', upstream: spelled.replace('9100', '9101'), auth: 'none' }, { path: '/app/', upstream: UP, provider: 'p', rewritePrefix: '/' }]), {})).toEqual([])
  })

  it('warns about a public /public/ beside a protected /app/ with rewritePrefix: /, and starts', () => {
    const parsed = parseConfig(config([{ path: '/public/', upstream: UP, auth: 'none' }, { path: '/app/', upstream: UP, provider: 'p', rewritePrefix: '/' }]), {})
    expect(configWarnings(parsed)).toEqual([
      `routes[0].path: reaches some of the paths of ${UP} that routes[1] (/app/) protects (through routes[1] (/app/) they need a sign-in), with no sign-in; make sure the upstream serves nothing private there`,
    ])
  })

  it('accepts a public site with a protected area on one upstream, and routes on different upstreams', () => {
    expect(configProblems(config([{ path: '/', upstream: UP, auth: 'none' }, { path: '/app/', upstream: UP, provider: 'p' }]), {})).toEqual([])
    expect(configWarnings(parseConfig(config([{ path: '/', upstream: UP, auth: 'none' }, { path: '/app/', upstream: UP, provider: 'p' }]), {}))).toEqual([])
    expect(configProblems(config([{ path: '/', upstream: 'http://127.0.0.1:9101', auth: 'none' }, { path: '/app/', upstream: UP, provider: 'p', rewritePrefix: '/' }]), {})).toEqual([])
  })
})

/**
 * The model: the gateway gives a request to the route with the longest matching path (`/app`
 * matches `/app` and `/app/...`), and the proxy's own mapping (upstream-path.ts) sends it upstream.
 */
function owner (routes: RouteConfig[], request: string): RouteConfig | undefined {
  const matching = routes.filter((r) => r.path === '/' || request === r.path || request.startsWith(`${r.path}/`))
  return matching.sort((a, b) => b.path.length - a.path.length)[0]
}

function upstreamPath (r: RouteConfig, request: string): string {
  return upstreamPaths(r.path, r.rewritePrefix).path(request)
}

/** The requests `r` sends upstream as `upstream` (the inverse of upstreamPath), canonical ones only. */
function requestsFor (r: RouteConfig, upstream: string): string[] {
  const base = (r.rewritePrefix ?? r.path).replace(/\/+$/, '')
  const rest = upstream.startsWith(`${base}/`) ? upstream.slice(base.length) : undefined
  const found = r.path === '/' ? [rest] : [r.path, rest === undefined ? undefined : r.path + rest]
  return found.filter((q): q is string => q !== undefined && !q.includes('//') && upstreamPath(r, q) === upstream)
}

/** Upstream paths of up to three segments (with and without a trailing `/`), from pieces of the routes' paths. */
const SEGMENTS = ['a', 'b', 'c', 'ab', 'aa', 'ba', 'ac', 'bc', 'abc', 'bab']
function paths (depth: number): string[] {
  let level = ['']
  const all = ['/']
  for (let i = 0; i < depth; i++) {
    level = level.flatMap((p) => SEGMENTS.map((s) => `${p}/${s}`))
    all.push(...level, ...level.map((p) => `${p}/`))
  }
  return all
}
const UPSTREAM = paths(3)

const prefix = fc.constantFrom('/', '/a', '/b', '/a/b', '/ab')
const rewrite = fc.option(fc.constantFrom('/', '/a', '/a/', '/b/', '/a/b', '/ab/'), { nil: undefined })

describe('what counts as less protection, from outside readings: counted, and the same protection written otherwise', () => {
  const providers = { op: { clientId: 'c', clientSecret: 's', scope: 'openid email', issuer: 'https://op.example.org' } }
  const text = (routes: unknown[]) => stringify({ session: { secret: SECRET }, providers, routes })
  /** /app/ and `path` rewriting to /app/: `path` reaches every upstream path of /app/. */
  const pair = (app: Record<string, unknown>, other: Record<string, unknown>, path = '/ci/') =>
    text([{ path: '/app/', upstream: UP, provider: 'op', ...app }, { path, upstream: UP, rewritePrefix: '/app/', provider: 'op', ...other }])
  const FULL = /reaches every path of http:\/\/127\.0\.0\.1:9100 that routes\[\d\] \(\/(app|ci)\/\) protects/

  it('a route that takes tokens short of the scopes the other asks: refused', () => {
    expect(configProblems(pair({ bearer: { audience: 'api', scopes: ['admin'] } }, { bearer: { audience: 'api' } }), {})).toEqual([
      expect.stringMatching(/^routes\[1\]\.path: reaches every path .* to tokens without every scope this route asks \(bearer\.scopes\)/),
    ])
    expect(configProblems(pair({ bearer: { audience: 'api', scopes: ['admin', 'read'] } }, { bearer: { audience: 'api', scopes: ['read', 'admin'] } }), {})).toEqual([])
  })

  it('a route that takes an authorization server\'s tokens for another audience: refused (a CI issuer\'s caller chooses the audience: not counted there)', () => {
    expect(configProblems(pair({ bearer: { audience: 'admin-api' } }, { bearer: { audience: 'public-api' } }), {})).toEqual([
      expect.stringMatching(/^routes\[[01]\]\.path: reaches every path .* to tokens for another audience \(bearer\.audience\)/),
    ])
    expect(configProblems(pair({ bearer: { audience: 'api' } }, { bearer: { audience: 'api' } }), {})).toEqual([])
  })

  it.each([['http://0.0.0.0:9100'], ['http://[::ffff:127.0.0.1]:9100'], ['http://[::]:9100']])('%s beside http://127.0.0.1:9100 is one server', (spelled) => {
    const config = text([{ path: '/', upstream: spelled, auth: 'none' }, { path: '/app/', upstream: UP, provider: 'op', rewritePrefix: '/' }])
    expect(configProblems(config, {})).toContainEqual(expect.stringMatching(/^routes\[0\]\.path: reaches every path/))
  })

  it.each([['/x/../app/'], ['/./app/'], ['/app/./'], ['/app//']])('a rewritePrefix with dot or empty segments (%s) is refused: an upstream reads it as another path', (rewrite) => {
    const config = text([{ path: '/app/', upstream: UP, provider: 'op' }, { path: '/pub/', upstream: UP, auth: 'none', rewritePrefix: rewrite }])
    expect(configProblems(config, {})).toContainEqual(expect.stringMatching(/^routes\[1\]\.rewritePrefix: has dot or empty segments/))
  })

  it.each([
    ['groups in another order', { allow: [{ groups: ['a', 'b'] }] }, { allow: [{ groups: ['b', 'a'] }] }],
    ['allow rules in another order', { allow: [{ groups: ['a'] }, { users: ['u'] }] }, { allow: [{ users: ['u'] }, { groups: ['a'] }] }],
    ['one allow rule as an object and as a list', { allow: { groups: ['admins'] } }, { allow: [{ groups: ['admins'] }] }],
    ['acr values in another order', { reauth: { maxAge: '15m', acr: ['mfa', 'hwk'] } }, { reauth: { maxAge: '15m', acr: ['hwk', 'mfa'] } }],
  ])('%s is the same protection: accepted', (_what, app, other) => {
    expect(configProblems(pair(app, other), {})).toEqual([])
  })

  it('public paths that lead outside the protected route\'s upstream paths, or to ones it opens itself, are no less protection', () => {
    // Public GET /assets/* is upstream /assets/..., none of the /app/... paths /legacy/ protects.
    expect(configProblems(text([{ path: '/', upstream: UP, provider: 'op', public: ['GET /assets/*'] }, { path: '/legacy/', upstream: UP, provider: 'op', rewritePrefix: '/app/' }]), {})).toEqual([])
    // A UI and an API route on one backend root, each with the one public health path.
    expect(configProblems(text([
      { path: '/app/', upstream: UP, provider: 'op', rewritePrefix: '/', public: ['GET /app/healthz'] },
      { path: '/api/', upstream: UP, provider: 'op', rewritePrefix: '/', public: ['GET /api/healthz'] },
    ]), {})).toEqual([])
    // One that leads into them is less: upstream /app/admin/... public through /ci/, and globs
    // whose text stops before the route's prefix (they match all of it).
    for (const glob of ['/ci/admin/*', '*', '/c*', '/ci*']) {
      expect(configProblems(pair({}, { public: [`GET ${glob}`] }), {})).toContainEqual(expect.stringMatching(FULL))
    }
  })
})

describe('upstreamReach agrees with the model', () => {
  it('is the same for either route\'s paths in any letter case', () => {
    const recase = (text: string | undefined, upper: boolean[]) => text === undefined ? undefined : [...text].map((char, index) => upper[index % upper.length] ? char.toUpperCase() : char).join('')
    const casing = fc.array(fc.boolean(), { minLength: 1, maxLength: 4 })
    fc.assert(fc.property(prefix, rewrite, prefix, rewrite, casing, casing, (lessPath, lessRewrite, path, rewritePrefix, lessCase, targetCase) => {
      fc.pre(lessPath !== path)
      const exact = upstreamReach(route(lessPath, lessRewrite, 'none'), route(path, rewritePrefix))
      expect(upstreamReach(route(lessPath, recase(lessRewrite, lessCase), 'none'), route(path, recase(rewritePrefix, targetCase)))).toBe(exact)
      expect(upstreamReach(route(recase(lessPath, lessCase)!, lessRewrite, 'none'), route(recase(path, targetCase)!, rewritePrefix))).toBe(exact)
    }), { numRuns: 300 })
  })

  it('refused iff every upstream path of the protected route (but those its own requests name, and its bare path) is reached; warned iff some are', () => {
    fc.assert(fc.property(prefix, rewrite, prefix, rewrite, (lessPath, lessRewrite, path, rewritePrefix) => {
      fc.pre(lessPath !== path)
      const less = route(lessPath, lessRewrite, 'none')
      const target = route(path, rewritePrefix)
      const routes = [less, target]
      // Who serves each upstream path: the route whose requests for it the gateway gives to that route.
      const servedBy = (r: RouteConfig, u: string) => requestsFor(r, u).some((q) => owner(routes, q) === r)
      // What one route would have sent upstream for requests the other takes: nobody reaches it through the first.
      const shadowed = (u: string) => requestsFor(less, u).some((q) => owner(routes, q) === target) || requestsFor(target, u).some((q) => owner(routes, q) === less)
      const contested = UPSTREAM.filter((u) => servedBy(target, u) && !shadowed(u))
      const hits = contested.filter((u) => servedBy(less, u)).length
      // The protected route's bare path (request /app's upstream path) is not needed for all.
      const bare = target.path === '/' ? undefined : upstreamPath(target, target.path)
      const expected = hits === 0 ? 'none' : contested.every((u) => u === bare || servedBy(less, u)) ? 'all' : 'some'
      expect(upstreamReach(less, target)).toBe(expected)
    }), { numRuns: 500 })
  })
})
