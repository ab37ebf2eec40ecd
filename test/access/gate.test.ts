// The access gate on its own: a table of cases (route, rules, session state,
// browser or API client -> decision) with no sockets and no store, and fast-check properties that
// the gate and the route's public matcher agree, that the matcher means what a glob means, and that
// a path the public rules do not match never passes without a session.
import fc from 'fast-check'
import { describe, expect, it } from 'vitest'
import { queryRoutedPaths } from '../../src/config/path-fold.js'
import type { PublicRule } from '../../src/config/types.js'
import { anyOf, lists, NO_RULES } from '../helpers/rules.js'
import { compileGate, decide, failed, NO_SESSION, publicMatcher, signedIn, UNREAD, type Decision, type GateRoute, type SessionState } from '../../src/access/gate.js'
import type { Identity } from '../../src/session/record.js'
import { refusal } from '../../src/access/refusal.js'
import { GatewayError } from '../../src/errors.js'
import { errorPage } from '../../src/http/pages.js'

const loginFor = (provider: string) => (next: string) => `https://gw.example/oauth/login/${provider}/?next=${encodeURIComponent(next)}`

/** "GET /app/static/*" -> { method, path }, as the config reads a `public` entry. */
const rules = (...entries: string[]): PublicRule[] => entries.map((entry) => {
  const [method = '', path = ''] = entry.split(' ')
  return { method, path }
})

const route = (overrides: Partial<GateRoute> = {}): GateRoute => ({ path: '/app', auth: 'required', provider: 'demo', rules: NO_RULES, public: [], ...overrides })

const ALLOW = anyOf({ emails: ['alice@example.org'], domains: ['example.com'], groups: ['admins'] })

const ROUTES = {
  plain: route(),
  static: route({ public: rules('GET /app/static/*', 'OPTIONS *', 'GET /app/*/health', '* /app/open', 'POST /app/hooks/*.json', 'GET /app/a?b') }),
  allow: route({ rules: ALLOW }),
  github: route({ path: '/gh', provider: 'github', rules: anyOf({ groups: ['octo-team'] }) }),
  open: route({ path: '/docs', auth: 'none', provider: undefined }),
  root: route({ path: '/' }),
  cafe: route({ path: '/café' }),
  bang: route({ path: '/app!' }),
} as const

const id = (sub: string, extra: Partial<Identity> = {}): Identity => ({ sub, groups: [], ...extra })
const alice = id('alice', { email: 'alice@example.org' })
const bob = id('bob', { email: 'bob@example.com' })
const carol = id('carol', { email: 'carol@elsewhere.net', groups: ['admins', 'staff'] })
const dave = id('dave', { email: 'dave@other.org', groups: ['staff'] })
const mallory = id('mallory', { email: 'alice@example.org', emailVerified: false })
const malloryDomain = id('mallory2', { email: 'm@example.com', emailVerified: false })
const octo = id('octo', { groups: ['octo-team'] })

const as = (identity: Identity | undefined): SessionState => signedIn('token-of-' + (identity?.sub ?? 'nobody'), identity)
const storeDown = failed(new GatewayError('session_store_unavailable', 'The session store cannot be reached.'))

type Row = [name: string, route: keyof typeof ROUTES, method: string, target: string, html: boolean, session: SessionState, expected: Partial<Decision> & { kind: Decision['kind'] }]

const TABLE: Row[] = [
  // No session: browsers are sent to sign in, API clients get 401, with `next` the whole target.
  ['a browser without a session is sent to sign in', 'plain', 'GET', '/app/x?y=1', true, NO_SESSION, { kind: 'sign_in', loginUrl: 'https://gw.example/oauth/login/demo/?next=%2Fapp%2Fx%3Fy%3D1' }],
  ['an API client without a session gets 401 with the login URL and realm', 'plain', 'GET', '/app/x', false, NO_SESSION, { kind: 'unauthenticated', loginUrl: 'https://gw.example/oauth/login/demo/?next=%2Fapp%2Fx', realm: 'demo' }],
  ['a POST without a session from an API client gets 401', 'plain', 'POST', '/app/api', false, NO_SESSION, { kind: 'unauthenticated' }],
  ['the route prefix itself is judged', 'plain', 'GET', '/app', true, NO_SESSION, { kind: 'sign_in' }],
  ['the route prefix with a query is judged', 'plain', 'GET', '/app?x=1', false, NO_SESSION, { kind: 'unauthenticated' }],
  ['a session not read yet is asked for', 'plain', 'GET', '/app/x', true, UNREAD, { kind: 'read_session' }],
  ['a failed store is unavailable, not a sign-in', 'plain', 'GET', '/app/x', true, storeDown, { kind: 'unavailable', error: (storeDown as { error: unknown }).error }],
  ['a failed store is unavailable for an API client too', 'plain', 'GET', '/app/x', false, storeDown, { kind: 'unavailable' }],
  // Signed in, no allow rules: anyone signed in passes with their token and identity.
  ['a signed-in user passes with token and identity', 'plain', 'GET', '/app/x', true, as(alice), { kind: 'allow', accessToken: 'token-of-alice', identity: alice }],
  ['a session without an identity passes a route without allow rules', 'plain', 'GET', '/app/x', false, as(undefined), { kind: 'allow', identity: undefined }],
  ['a route at / judges every path', 'root', 'DELETE', '/anything/at/all', false, as(dave), { kind: 'allow' }],
  ['a route at / without a session asks to sign in', 'root', 'GET', '/', true, NO_SESSION, { kind: 'sign_in' }],
  // Public globs.
  ['a public glob passes without a session', 'static', 'GET', '/app/static/app.js', true, NO_SESSION, { kind: 'public' }],
  ['a public path is public before the session is read', 'static', 'GET', '/app/static/app.js', false, UNREAD, { kind: 'public' }],
  ['a public path is public when the store is down', 'static', 'GET', '/app/static/app.js', false, storeDown, { kind: 'public' }],
  ['a public path forwards no credentials even with a session', 'static', 'GET', '/app/static/app.js', true, as(alice), { kind: 'public' }],
  ['`*` at the end of a glob crosses slashes', 'static', 'GET', '/app/static/a/b/c.css?v=2', false, NO_SESSION, { kind: 'public' }],
  ['a method-specific public rule does not admit another method', 'static', 'POST', '/app/static/app.js', false, NO_SESSION, { kind: 'unauthenticated' }],
  ['a GET rule does not admit HEAD', 'static', 'HEAD', '/app/static/app.js', false, NO_SESSION, { kind: 'unauthenticated' }],
  ['OPTIONS * passes any path without a session', 'static', 'OPTIONS', '/app/private/x', false, NO_SESSION, { kind: 'public' }],
  ['`*` in the middle of a glob matches', 'static', 'GET', '/app/svc/health', false, NO_SESSION, { kind: 'public' }],
  ['`*` in the middle of a glob matches across slashes', 'static', 'GET', '/app/a/b/health', false, NO_SESSION, { kind: 'public' }],
  ['`*` in the middle needs the rest of the glob', 'static', 'GET', '/app/svc/health/secrets', true, NO_SESSION, { kind: 'sign_in' }],
  ['a glob does not match a longer path', 'static', 'GET', '/app/openx', false, NO_SESSION, { kind: 'unauthenticated' }],
  ['a method `*` rule passes any method', 'static', 'PATCH', '/app/open', false, NO_SESSION, { kind: 'public' }],
  ['a glob\'s suffix must end the path, not the query', 'static', 'POST', '/app/hooks/x?f=.json', false, NO_SESSION, { kind: 'unauthenticated' }],
  ['a glob\'s suffix ending the path passes', 'static', 'POST', '/app/hooks/push.json?f=1', false, NO_SESSION, { kind: 'public' }],
  ['a glob holding `?` matches no path (the query is not the path)', 'static', 'GET', '/app/a?b', false, NO_SESSION, { kind: 'unauthenticated' }],
  ['regex characters in a glob are literal', 'static', 'GET', '/app/staticXapp.js', false, NO_SESSION, { kind: 'unauthenticated' }],
  // Allow rules.
  ['an allowed e-mail passes', 'allow', 'GET', '/app/x', true, as(alice), { kind: 'allow', identity: alice }],
  ['an e-mail in an allowed domain passes', 'allow', 'GET', '/app/x', true, as(bob), { kind: 'allow', identity: bob }],
  ['an allowed group passes', 'allow', 'GET', '/app/x', false, as(carol), { kind: 'allow', identity: carol }],
  ['no matching e-mail, domain or group is forbidden', 'allow', 'GET', '/app/x', true, as(dave), { kind: 'forbidden', identity: dave, loginUrl: 'https://gw.example/oauth/login/demo/?next=%2Fapp%2Fx' }],
  ['an unverified allowed e-mail is forbidden', 'allow', 'GET', '/app/x', false, as(mallory), { kind: 'forbidden', identity: mallory }],
  ['an unverified e-mail in an allowed domain is forbidden', 'allow', 'GET', '/app/x', false, as(malloryDomain), { kind: 'forbidden' }],
  ['a session without an identity is forbidden by allow rules', 'allow', 'GET', '/app/x', false, as(undefined), { kind: 'forbidden', identity: undefined }],
  ['allow rules still ask a browser without a session to sign in', 'allow', 'GET', '/app/x', true, NO_SESSION, { kind: 'sign_in' }],
  ['another provider\'s route signs in with that provider', 'github', 'GET', '/gh/repos', true, NO_SESSION, { kind: 'sign_in', loginUrl: 'https://gw.example/oauth/login/github/?next=%2Fgh%2Frepos' }],
  ['another provider\'s realm is named in the 401', 'github', 'GET', '/gh/repos', false, NO_SESSION, { kind: 'unauthenticated', realm: 'github' }],
  ['another provider\'s group rule admits its group', 'github', 'GET', '/gh/repos', false, as(octo), { kind: 'allow', accessToken: 'token-of-octo' }],
  ['another provider\'s group rule refuses an admin of the first', 'github', 'GET', '/gh/repos', false, as(carol), { kind: 'forbidden' }],
  // auth: none, and requests that cannot be judged.
  ['an auth: none route is public without a session', 'open', 'POST', '/docs/x', false, NO_SESSION, { kind: 'public' }],
  ['an auth: none route never forwards a session', 'open', 'GET', '/docs', true, as(alice), { kind: 'public' }],
  ['a target outside the route is invalid', 'plain', 'GET', '/apple', false, as(alice), { kind: 'invalid_request', reason: 'the request target is not under the route\'s path' }],
  ['a target elsewhere is invalid', 'plain', 'GET', '/other/app/x', true, NO_SESSION, { kind: 'invalid_request' }],
  ['a route whose path the router matched decoded is judged (non-ASCII)', 'cafe', 'GET', '/caf%C3%A9/menu?x=1', true, NO_SESSION, { kind: 'sign_in' }],
  ['a route whose path the router matched decoded is judged (a sub-delim)', 'bang', 'GET', '/app%21/x', false, as(alice), { kind: 'allow' }],
  ['a decoded target outside the route is still invalid', 'cafe', 'GET', '/caf%C3%A9s/x', false, NO_SESSION, { kind: 'invalid_request' }],
  ['a target that is not a path is invalid', 'root', 'GET', 'http://evil.example/', false, as(alice), { kind: 'invalid_request', reason: 'the request target is not a path' }],
  ['an invalid target is refused before the public rules', 'static', 'OPTIONS', '*', false, NO_SESSION, { kind: 'invalid_request' }],
]

describe('the access gate', () => {
  const gates = Object.fromEntries(Object.entries(ROUTES).map(([name, r]) => [name, compileGate(r, loginFor(r.provider ?? ''))]))

  it('has a table of at least 25 cases covering every decision', () => {
    expect(TABLE.length).toBeGreaterThanOrEqual(25)
    const kinds = new Set(TABLE.map((row) => row[6].kind))
    expect([...kinds].sort()).toEqual(['allow', 'forbidden', 'invalid_request', 'public', 'read_session', 'sign_in', 'unauthenticated', 'unavailable'])
  })

  it.each(TABLE)('%s', (_name, routeName, method, target, html, session, expected) => {
    expect(decide(gates[routeName]!, { method, target, address: undefined }, html, session)).toEqual(expect.objectContaining(expected))
  })

  it('returns the sign-in to the `next` the caller gives (forward-auth knows the original URL)', () => {
    const gate = compileGate(ROUTES.plain, loginFor('demo'))
    expect(decide(gate, { method: 'GET', target: '/app/x', address: undefined }, true, NO_SESSION, '/app/elsewhere')).toEqual({ kind: 'sign_in', loginUrl: 'https://gw.example/oauth/login/demo/?next=%2Fapp%2Felsewhere' })
  })

  it('refuses to compile a protected route without a provider', () => {
    expect(() => compileGate(route({ provider: undefined }), loginFor(''))).toThrow(/names no provider/)
  })
})

describe('the refusals', () => {
  it('answers a 401 with login_url and WWW-Authenticate naming the realm', () => {
    const error = refusal({ kind: 'unauthenticated', loginUrl: 'https://gw.example/l', realm: 'demo', resourceMetadata: undefined }, { subject: 'this route', headers: { 'x-login-url': 'https://gw.example/l' } }) as GatewayError
    expect(error.statusCode).toBe(401)
    expect(error.code).toBe('unauthenticated')
    expect(error.details).toEqual({ loginUrl: 'https://gw.example/l', headers: { 'www-authenticate': 'Bearer realm="demo"', 'x-login-url': 'https://gw.example/l' } })
  })

  it('answers a 403 naming the account, and 400 for what cannot be judged', () => {
    const forbidden = refusal({ kind: 'forbidden', identity: dave, loginUrl: 'https://gw.example/l', rule: undefined }, { subject: 'this route' }) as GatewayError
    expect([forbidden.statusCode, forbidden.code, forbidden.message]).toEqual([403, 'forbidden', 'dave@other.org may not use this application: no allow rule matched.'])
    const invalid = refusal({ kind: 'invalid_request', reason: 'the request target is not a path' }, { subject: 'this route' }) as GatewayError
    expect([invalid.statusCode, invalid.code]).toEqual([400, 'invalid_request'])
  })

  it('passes a store failure on with a retry address, and a bug on as it is', () => {
    const down = new GatewayError('session_store_unavailable', 'The session store cannot be reached.')
    expect(refusal({ kind: 'unavailable', error: down }, { subject: 'this route', retryUrl: '/app/x' })).toMatchObject({ code: 'session_store_unavailable', details: { retryUrl: '/app/x' } })
    const bug = new TypeError('x is undefined')
    expect(refusal({ kind: 'unavailable', error: bug }, { subject: 'this route' })).toBe(bug)
  })
})

// A re-reader's finding: one failure shared by the requests that waited on one refresh took the
// first request's address, and every one of their pages offered to try that one again.
describe('one failure shared by several requests', () => {
  it('each refusal carries its own request\'s retry address, and the shared failure is left as it was', () => {
    const shared = new GatewayError('session_store_unavailable', 'The session store cannot be reached.')
    const first = refusal({ kind: 'unavailable', error: shared }, { subject: 'this route', retryUrl: '/app/tab-0' }) as GatewayError
    const second = refusal({ kind: 'unavailable', error: shared }, { subject: 'this route', retryUrl: '/app/tab-1' }) as GatewayError
    expect([first.details.retryUrl, second.details.retryUrl, shared.details.retryUrl]).toEqual(['/app/tab-0', '/app/tab-1', undefined])
    // A sign-in address the failure brought stays, and then no retry is offered.
    const refused = new GatewayError('token_exchange_failed', 'The provider refused.', { details: { loginUrl: '/oauth/login/demo/' } })
    expect((refusal({ kind: 'unavailable', error: refused }, { subject: 'this route', retryUrl: '/app/x' }) as GatewayError).details).toMatchObject({ loginUrl: '/oauth/login/demo/', retryUrl: undefined })
  })
})

/** What a glob means, written plainly (no regular expressions): `*` matches any run of characters. */
function globMatches (glob: string, path: string): boolean {
  if (glob === '*') return true
  const parts = glob.split('*')
  const first = parts[0]!
  const last = parts[parts.length - 1]!
  if (parts.length === 1) return path === glob
  if (!path.startsWith(first) || !path.endsWith(last) || path.length < first.length + last.length) return false
  let at = first.length
  const end = path.length - last.length
  for (const middle of parts.slice(1, -1)) {
    const found = path.indexOf(middle, at)
    if (found === -1 || found + middle.length > end) return false
    at = found + middle.length
  }
  return true
}

// Small alphabets so that globs and paths often meet; regex metacharacters included on purpose.
const pathChar = fc.constantFrom('/', 'a', 'b', '.', '-', '(', '+', '$', '*', '~')
const globChar = fc.constantFrom('/', 'a', 'b', '.', '(', '+', '$', '*', '*', '?', '^')
const pathArb = fc.array(pathChar, { maxLength: 12 }).map((chars) => `/${chars.join('')}`)
const globArb = fc.oneof(fc.constant('*'), fc.array(globChar, { maxLength: 8 }).map((chars) => `/${chars.join('')}`))
const methodArb = fc.constantFrom('GET', 'HEAD', 'POST', 'OPTIONS', 'DELETE')
const ruleArb = fc.record({ method: fc.constantFrom('*', 'GET', 'POST', 'OPTIONS'), path: globArb })
const queryArb = fc.oneof(fc.constant(''), fc.array(fc.oneof(pathChar, fc.constantFrom('=', '&', '?', '%2F')), { maxLength: 8 }).map((chars) => `?${chars.join('')}`))
const refusedState = fc.constantFrom<SessionState>(NO_SESSION, UNREAD, storeDown)
/** Whether `query` names no path a front controller would take from it (src/config/path-fold.ts). */
const routesNowhere = (path: string, query: string) => queryRoutedPaths(path, query.slice(1), false).routed === undefined

describe('the gate and the route\'s public matcher agree (fast-check)', () => {
  it('matches a rule exactly when its method matches and its glob matches the path, whatever the query (that routes nowhere)', () => {
    fc.assert(fc.property(fc.array(ruleArb, { maxLength: 4 }), methodArb, pathArb, queryArb, (ruleList, method, path, query) => {
      fc.pre(routesNowhere(path, query))
      const expected = ruleList.some((rule) => (rule.method === '*' || rule.method === method) && globMatches(rule.path, path))
      expect(publicMatcher(ruleList)(method, path + query)).toBe(expected)
    }), { numRuns: 2000 })
  })

  it('agrees with the plain glob on globs cut from the target itself (a `*` across `?`, a prefix, a suffix)', () => {
    // Globs made of the target's own pieces meet it often, where random globs seldom would.
    fc.assert(fc.property(pathArb, queryArb, fc.nat(), fc.nat(), fc.constantFrom('star', 'prefix', 'suffix'), (path, query, a, b, shape) => {
      fc.pre(routesNowhere(path, query))
      const target = path + query
      const i = 1 + (a % path.length)
      const j = Math.max(i, b % (target.length + 1))
      const glob = shape === 'star' ? `${target.slice(0, i)}*${target.slice(j)}` : shape === 'prefix' ? target.slice(0, i) : `/*${target.slice(j)}`
      const expected = !glob.includes('?') && globMatches(glob, path)
      expect(publicMatcher([{ method: 'GET', path: glob }])('GET', target)).toBe(expected)
    }), { numRuns: 3000 })
  })

  // An outside tester's finding: `GET /app/` public made `/app/?/admin/users` (CodeIgniter's admin) public.
  it('matches a query that routes to another path (?/x under a directory or script) only when a public glob matches that path too', () => {
    // Plain paths (letters and `-`): what the edge would refuse or move is in the rows below.
    const plainPath = fc.array(fc.constantFrom('/', 'a', 'b', '-'), { maxLength: 12 }).map((chars) => `/${chars.join('')}`)
    fc.assert(fc.property(fc.array(ruleArb, { maxLength: 4 }), methodArb, plainPath, fc.constantFrom('?/'), plainPath, (ruleList, method, path, form, routed) => {
      const directory = path.slice(0, path.lastIndexOf('/') + 1)
      const target = `${directory}${form}${routed.slice(1)}`
      const reading = `${directory.slice(0, -1)}/${routed.slice(1)}`
      fc.pre(!routed.startsWith('//') && !reading.includes('//'))
      // Public when the path is, and the path its query routes to is too (by the same rule or another of the method).
      const publicPath = (one: string) => ruleList.some((rule) => (rule.method === '*' || rule.method === method) && globMatches(rule.path, one))
      const expected = publicPath(directory) && publicPath(reading)
      expect(publicMatcher(ruleList)(method, target)).toBe(expected)
    }), { numRuns: 2000 })
    const matcher = publicMatcher(rules('GET /app/', 'GET /app/index.php'))
    for (const target of ['/app/?/admin/users', '/app/index.php?/admin/users', '/app/?/admin/users?x=1']) expect([target, matcher('GET', target)]).toEqual([target, false])
    // A route parameter (Drupal's q, Yii's r) only widens a deny: a search box's ?q=admin is no route to most applications.
    for (const target of ['/app/', '/app/?page=2', '/app/index.php?lang=en', '/app/?q=admin/people', '/app/index.php?r=admin']) expect([target, matcher('GET', target)]).toEqual([target, true])
    // One the edge would refuse (an encoded `/`) or read its own way (dot segments) cannot be told: not public.
    for (const target of ['/app/?/x%2F..%2Fadmin', '/app/?/../admin', '/app/?//admin']) expect([target, publicMatcher(rules('GET *'))('GET', target)]).toEqual([target, false])
  })

  it('never asks a public path to sign in, and never lets a non-public path through without a session', () => {
    fc.assert(fc.property(fc.array(ruleArb, { maxLength: 4 }), methodArb, pathArb, queryArb, fc.boolean(), refusedState, (ruleList, method, path, query, html, session) => {
      const gate = compileGate(route({ path: '/', public: ruleList }), loginFor('demo'))
      const target = path + query
      const decision = decide(gate, { method, target, address: undefined }, html, session)
      if (gate.isPublic(method, target)) {
        expect(decision).toEqual({ kind: 'public' })
      } else {
        expect(['sign_in', 'unauthenticated', 'read_session', 'unavailable']).toContain(decision.kind)
      }
    }), { numRuns: 2000 })
  })

  it('lets a signed-in user through on a non-public path only with their own token', () => {
    fc.assert(fc.property(fc.array(ruleArb, { maxLength: 4 }), methodArb, pathArb, fc.boolean(), (ruleList, method, path, html) => {
      const gate = compileGate(route({ path: '/', public: ruleList }), loginFor('demo'))
      const decision = decide(gate, { method, target: path, address: undefined }, html, as(alice))
      expect(decision).toEqual(gate.isPublic(method, path) ? { kind: 'public' } : { kind: 'allow', accessToken: 'token-of-alice', identity: alice })
    }), { numRuns: 1000 })
  })
})

describe('a 403 by address: only where no account would pass from there', () => {
  const OUTSIDE = '203.0.113.9'
  const SWITCH = 'https://gw.example/oauth/switch-account?next=%2Fapp%2Fx'
  const answer = (route: GateRoute, identity: Identity, provider: string) =>
    decide(compileGate(route, (next) => `https://gw.example/oauth/login/${provider}/?next=${encodeURIComponent(next)}`), { method: 'GET', target: '/app/x', address: OUTSIDE }, true, signedIn('t', identity, false, provider))
  // An outside tester's finding: a deny naming the account and the network said "whichever account" and offered none.
  it.each([
    ['several providers: github accounts only from the office', lists(undefined, [{ providers: ['github'], networks: ['!10.0.0.0/8'] }]), { sub: 'a', subject: 'a', groups: [] }, 'github', { sub: 'b', subject: 'b', groups: [] }, 'google', false],
    ['contractors only from the VPN', lists(undefined, [{ groups: ['contractors'], networks: ['!10.0.0.0/8'] }]), { sub: 'a', subject: 'a', groups: ['contractors'] }, 'google', { sub: 'a2', subject: 'a2', groups: ['staff'] }, 'google', false],
    ['nobody from outside the VPN (a deny on networks alone)', lists(undefined, [{ networks: ['!10.0.0.0/8'] }]), { sub: 'a', subject: 'a', groups: [] }, 'google', undefined, undefined, true],
    ['staff only from the VPN (every allow rule names networks)', lists([{ groups: ['staff'], networks: ['10.0.0.0/8'] }]), { sub: 'a', subject: 'a', groups: ['staff'] }, 'google', undefined, undefined, true],
  ] as const)('%s', (_what, rules, refusedWho, refusedAt, otherWho, otherAt, fromHere) => {
    const route: GateRoute = { path: '/app', auth: 'required', provider: 'google', providers: ['google', 'github'], rules, public: [] }
    if (otherWho !== undefined) expect(answer(route, otherWho, otherAt!).kind).toBe('allow')
    const decision = answer(route, refusedWho, refusedAt)
    expect(decision.kind).toBe('forbidden')
    const error = refusal(decision as Extract<Decision, { kind: 'forbidden' }>, { subject: 'this route', switchAccountUrl: SWITCH }) as GatewayError
    expect(error.details.refused?.byNetwork === true).toBe(fromHere)
    expect(error.details.switchAccountUrl).toBe(fromHere ? undefined : SWITCH)
    expect(errorPage(error, '/').includes('whichever account makes them')).toBe(fromHere)
  })
})
