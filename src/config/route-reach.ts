// Where two routes meet at one upstream: a less protected route (no sign-in, another provider,
// other rules) that reaches a protected route's upstream paths would let a stranger walk around its
// protection. Reaching all of them is refused (validate/routes.ts), some of them is a warning.
import { isLoopbackHost } from './loopback.js'
import { requestSpelling } from './canonical.js'
import { folded } from './path-fold.js'
import type { GatewayConfig, ProviderConfig, RouteConfig } from './types.js'

/**
 * The upstream paths a route sends requests to: `exact`, and `prefix` followed by nothing or by
 * anything that does not start with `/` (request targets are canonical: never an empty segment).
 */
interface UpstreamSpace { prefix: string, exact: string | undefined }

/** The route's path and what is below it, as the gateway matches them: `/app` and `/app/...`. */
function requestSpace (route: RouteConfig): UpstreamSpace {
  return route.path === '/' ? { prefix: '/', exact: undefined } : { prefix: `${route.path}/`, exact: route.path }
}

/**
 * Where `route` sends the requests in `requests` (a part of its own request space, such as the
 * subtree of a route nested in it): request P + x goes upstream as R + x, R being rewritePrefix (P
 * itself when absent) without its trailing `/` (proxy/upstream-path.ts), so P/x goes to R/x and a
 * route at `/` sends /x to R/x, whether R ends in `/` or not.
 */
function mapped (route: RouteConfig, requests: UpstreamSpace): UpstreamSpace {
  const base = (route.rewritePrefix ?? route.path).replace(/\/+$/, '')
  const cut = route.path === '/' ? 0 : route.path.length
  const map = (path: string) => `${base}${path.slice(cut)}` || '/'
  return { prefix: map(requests.prefix), exact: requests.exact === undefined ? undefined : map(requests.exact) }
}

function inSpace (path: string, space: UpstreamSpace): boolean {
  return path === space.exact || (path.startsWith(space.prefix) && path[space.prefix.length] !== '/')
}

/** `inner`'s request space lies inside `outer`'s: the gateway gives those requests to `inner`. */
function nested (inner: RouteConfig, outer: RouteConfig): boolean {
  return inner.path !== outer.path && (outer.path === '/' || inner.path.startsWith(`${outer.path}/`))
}

/** A character no configured path has: it stands for "any other character" below. */
const OTHER = '\u0000'

/**
 * How much of `target`'s upstream paths `other` reaches on the same upstream origin: `all`, `some`
 * or `none`. Where one route is nested in the other, the paths that the outer one would map the
 * inner one's requests to do not count: those requests go to the inner route (a public `/` beside
 * a protected `/app/` reaches none of its paths; with `rewritePrefix: /` it reaches all of them but
 * `/app/...`, which is all; a public `/static/` inside a protected `/` reaches none).
 *
 * Each space is made of a few strings, so the answer is decided exactly by trying each string `s`,
 * `s/`, and both followed by a character none of them has: every path passes the same tests as one
 * of these.
 */
export function upstreamReach (other: RouteConfig, target: RouteConfig): 'all' | 'some' | 'none' {
  return exactReach(readLoosely(other), readLoosely(target))
}

/**
 * `route` with its path and rewritePrefix in the request's spelling (`/café` is `/caf%C3%A9`), as a
 * case-insensitive upstream reads them (path-fold.ts: lower case, non-ASCII letters too, `%2B` as
 * `+`, no trailing dots or `%20`s): to IIS or Express, `rewritePrefix: /APP/` is `/app/`. The
 * gateway's own paths read so too: the edge refuses a request spelled like another route's prefix
 * in another case (http/edge.ts, prefixSpelling), so such a request reaches no upstream.
 */
function readLoosely (route: RouteConfig): RouteConfig {
  const loose = readAs(route, (path) => folded(requestSpelling(path)))
  // Public globs are written in the request's spelling already.
  return { ...loose, public: route.public.map((rule) => ({ ...rule, path: rule.path === '*' ? '*' : folded(rule.path) })) }
}

/** `route` with its path and rewritePrefix in the request's spelling only: how the message tells a loose reach from an exact one. */
function readExactly (route: RouteConfig): RouteConfig {
  return readAs(route, requestSpelling)
}

function readAs (route: RouteConfig, read: (path: string) => string): RouteConfig {
  const each = (path: string) => path === '/' ? path : read(path)
  return { ...route, path: each(route.path), rewritePrefix: route.rewritePrefix === undefined ? undefined : each(route.rewritePrefix) }
}

/** upstreamReach, upstream paths compared exactly. */
function exactReach (other: RouteConfig, target: RouteConfig): 'all' | 'some' | 'none' {
  if (!sameServer(other.upstream, target.upstream)) return 'none'
  const reached = mapped(other, requestSpace(other))
  const protectedSpace = mapped(target, requestSpace(target))
  const shadows = [
    ...(nested(target, other) ? [mapped(other, requestSpace(target))] : []),
    ...(nested(other, target) ? [mapped(target, requestSpace(other))] : []),
  ]
  const strings = [reached, protectedSpace, ...shadows].flatMap((space) => [space.prefix, ...(space.exact === undefined ? [] : [space.exact])])
  const candidates = [`/${OTHER}`, ...strings.flatMap((text) => [text, `${text}${OTHER}`, `${text}/`, `${text}/${OTHER}`])].filter((path) => !path.includes('//'))
  const contested = candidates.filter((path) => inSpace(path, protectedSpace) && !shadows.some((shadow) => inSpace(path, shadow)))
  const hit = (path: string) => inSpace(path, reached)
  if (!contested.some(hit)) return 'none'
  // Everything below the protected path is all of it, its bare path (`/app`, often a redirect to `/app/`) or not.
  return contested.every((path) => path === protectedSpace.exact || hit(path)) ? 'all' : 'some'
}

/**
 * Two upstream URLs that may name one server: the same origin, or the same scheme and port on two
 * loopback names (`localhost`, `127.0.0.1`, `127.0.0.2` and `[::1]` may all reach one process
 * listening on every loopback address).
 */
function sameServer (a: string, b: string): boolean {
  const first = new URL(a)
  const second = new URL(b)
  if (first.origin === second.origin) return true
  return first.protocol === second.protocol && first.port === second.port && thisMachine(first.hostname) && thisMachine(second.hostname)
}

/**
 * A host a connection takes for this machine: a loopback name, 127.0.0.0/8 as an IPv4-mapped IPv6
 * address (URL writes `[::ffff:7f00:1]`), or the unspecified address `0.0.0.0` or `[::]` (not
 * loopback names for what listens, so only here).
 */
function thisMachine (hostname: string): boolean {
  return isLoopbackHost(hostname) || hostname === '0.0.0.0' || hostname === '[::]' || /^\[::ffff:7f[0-9a-f]{2}:[0-9a-f]{1,4}\]$/.test(hostname)
}

/**
 * `other` lets in someone `target` would refuse: no sign-in at all, people of a provider `target`
 * does not list or tokens of an issuer it does not take, tokens short of its scopes, public paths
 * that lead to `target`'s upstream paths, an older sign-in than
 * `target`'s step-up asks, or, where `target` has rules (allow, deny), other rules or none. The
 * same rules are the same protection, unless they name `paths`: a glob reads each route's own
 * gateway paths, which lead to other upstream paths on the two routes.
 */
export function lessProtected (other: RouteConfig, target: RouteConfig, tokenOnly: TokenOnly = NONE): boolean {
  return lessProtectedBy(other, target, tokenOnly) !== undefined
}

/** Which providers are token-only issuers (CI systems, workloads), whose callers choose their tokens' audience. */
export type TokenOnly = ReadonlySet<string>
const NONE: TokenOnly = new Set()

export function tokenOnlyIssuers (providers: Readonly<Record<string, ProviderConfig>>): TokenOnly {
  return new Set(Object.values(providers).filter((provider) => provider.tokenOnly).map((provider) => provider.name))
}

/** Why `other` is less protected than `target` (lessProtected), or undefined when it is not. */
type Weaker = 'no_sign_in' | 'providers' | 'issuers' | 'first_provider' | 'scopes' | 'audience' | 'public' | 'step_up' | 'path_rules' | 'rules'

function lessProtectedBy (other: RouteConfig, target: RouteConfig, tokenOnly: TokenOnly): Weaker | undefined {
  if (target.auth !== 'required') return undefined
  if (other.auth === 'none') return 'no_sign_in'
  if (other.providers.some((name) => !target.providers.includes(name))) return 'providers'
  if (foreignIssuers(other, target).length > 0) return 'issuers'
  // The first provider's people keep their plain names: another first one lets its people pass as them.
  if (other.providers[0] !== target.providers[0]) return 'first_provider'
  if (fewerScopes(other, target)) return 'scopes'
  if (otherAudience(other, target, tokenOnly)) return 'audience'
  if (opensPaths(readLoosely(other), readLoosely(target))) return 'public'
  if (target.reauth !== undefined && canonical(other.reauth) !== canonical(target.reauth)) return 'step_up'
  const ruled = target.rules.allow !== undefined || target.rules.deny.length > 0
  if (!ruled) return undefined
  if (canonicalRules(other.rules) !== canonicalRules(target.rules)) return 'rules'
  return namesPaths(target.rules) ? 'path_rules' : undefined
}

/** Both take tokens, and `other` asks fewer of the scopes `target` asks (`bearer.scopes`). */
function fewerScopes (other: RouteConfig, target: RouteConfig): boolean {
  return other.bearer !== undefined && target.bearer !== undefined && target.bearer.scopes.some((scope) => !other.bearer!.scopes.includes(scope))
}

/**
 * Both take tokens, for other audiences, and `other` takes some issuer's that is no token-only one:
 * an authorization server's audience says which clients may call (a CI issuer's caller chooses it).
 */
function otherAudience (other: RouteConfig, target: RouteConfig, tokenOnly: TokenOnly): boolean {
  if (other.bearer === undefined || target.bearer === undefined || other.bearer.audience === target.bearer.audience) return false
  return other.bearer.issuers.some((issuer) => !tokenOnly.has(issuer))
}

/**
 * The upstream paths a `public` glob of `route` opens, as the literal they start with: the glob's
 * text before its first `*`, mapped as the route's requests are; a glob whose literal stops short of
 * the route's prefix (`*`, `/c*` on `/ci/`) opens all of the route's paths. Undefined when it opens
 * none of them (a glob outside the route never matches).
 */
function openedUpstream (route: RouteConfig, glob: string): string | undefined {
  const space = requestSpace(route)
  const literal = glob.split('*', 1)[0]!
  const inRoute = (path: string) => path === space.exact || path.startsWith(space.prefix)
  if (inRoute(literal)) return mapped(route, { prefix: literal, exact: undefined }).prefix
  return literal !== glob && (space.prefix.startsWith(literal) || space.exact?.startsWith(literal) === true) ? mapped(route, space).prefix : undefined
}

/**
 * A `public` glob of `other` opens upstream paths `target` protects (its globs read its own gateway
 * paths, mapped upstream as its requests are), beyond those `target` opens itself with the same method.
 */
function opensPaths (other: RouteConfig, target: RouteConfig): boolean {
  const own = new Set(target.public.map((rule) => `${rule.method} ${openedUpstream(target, rule.path)}`))
  const guarded = mapped(target, requestSpace(target))
  return other.public.some((rule) => {
    const literal = openedUpstream(other, rule.path)
    if (literal === undefined || own.has(`${rule.method} ${literal}`)) return false
    return literal === guarded.exact || literal.startsWith(guarded.prefix) || guarded.prefix.startsWith(literal)
  })
}

/** A value in one spelling for comparison: lists sorted (their order changes nothing), keys sorted, a rule's `name` left out. */
function canonical (value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonical).sort().join(',')}]`
  if (value !== null && typeof value === 'object') {
    return `{${Object.keys(value).filter((key) => key !== 'name').sort().map((key) => `${JSON.stringify(key)}:${canonical((value as Record<string, unknown>)[key])}`).join(',')}}`
  }
  return JSON.stringify(value) ?? 'undefined'
}

/** Rule lists for comparison: the order of rules and of values changes nothing, nor where a rule is written (`allow` or `allow[0]`). */
function canonicalRules (rules: RouteConfig['rules']): string {
  return canonical({ allow: rules.allow ?? null, deny: rules.deny })
}

/** Whether any rule of `rules` has a `paths` condition. */
function namesPaths (rules: RouteConfig['rules']): boolean {
  return [...rules.allow ?? [], ...rules.deny].some((rule) => rule.paths.length > 0)
}

/** Issuers whose tokens `other` takes (`bearer.issuers`) and `target` neither takes nor signs its people in with. */
function foreignIssuers (other: RouteConfig, target: RouteConfig): string[] {
  const known = new Set([...target.providers, ...target.bearer?.issuers ?? []])
  return (other.bearer?.issuers ?? []).filter((name) => !known.has(name))
}

/** How a route is named in a message: its index and path. */
export function routeName (route: RouteConfig, index: number): string {
  return `routes[${index}] (${route.path === '/' ? '/' : `${route.path}/`})`
}

/** Who `other` lets past `target`: its first difference in protection, as reachMessage words it. */
function reachedHow (other: RouteConfig, target: RouteConfig, foreign: readonly string[], tokenOnly: TokenOnly): string {
  switch (lessProtectedBy(other, target, tokenOnly)) {
    case 'no_sign_in': return 'with no sign-in'
    case 'providers': return `to anyone signed in at ${foreign.map((name) => JSON.stringify(name)).join(' or ')}`
    case 'issuers': return `to the tokens of ${foreignIssuers(other, target).map((name) => JSON.stringify(name)).join(' or ')} (bearer.issuers)`
    case 'first_provider': return `naming the people of ${JSON.stringify(other.providers[0])} without the \`${other.providers[0]}:\` that this route gives them (its first provider is another)`
    case 'scopes': return 'to tokens without every scope this route asks (bearer.scopes)'
    case 'audience': return 'to tokens for another audience (bearer.audience)'
    case 'public': return 'with public paths that lead to them (its public globs read its own gateway paths)'
    case 'step_up': return 'without the sign-in age this route asks (reauth)'
    case 'path_rules': return 'under the same rules, whose paths globs read each route\'s own gateway paths'
    case 'rules':
    case undefined: return other.rules.allow === undefined && other.rules.deny.length === 0 ? 'to any signed-in user, without its rules' : 'under other rules'
  }
}

/** Why `other` lets a stranger past `target`, in the words of a problem or a warning. */
export function reachMessage (routes: readonly RouteConfig[], otherIndex: number, targetIndex: number, reach: 'all' | 'some', tokenOnly: TokenOnly = NONE): string {
  const other = routes[otherIndex]!
  const target = routes[targetIndex]!
  const foreign = other.providers.filter((name) => !target.providers.includes(name))
  const how = reachedHow(other, target, foreign, tokenOnly)
  const upstream = new URL(target.upstream).origin
  // The people of several providers on one application: one route that lists them all.
  const together = other.auth === 'required' && foreign.length > 0
    ? `; to let the people of ${[...new Set([...target.providers, ...other.providers])].join(' and ')} use one application, make it one route with providers: [${[...new Set([...target.providers, ...other.providers])].join(', ')}] (and rules that name providers where they differ)`
    : ''
  // Reached only as a case-insensitive upstream reads the paths (readLoosely): say so.
  const loosely = exactReach(readExactly(other), readExactly(target)) === reach ? '' : ' (as an upstream that reads paths in any letter case, such as IIS, reads them)'
  return reach === 'all'
    ? `reaches every path of ${upstream} that ${routeName(target, targetIndex)} protects${loosely}, ${how}: ` +
      `give the routes different upstream paths (rewritePrefix) or the same protection${together}`
    : `reaches some of the paths of ${upstream} that ${routeName(target, targetIndex)} protects${loosely} (through ${routeName(target, targetIndex)} they need a sign-in), ${how}; ` +
      'make sure the upstream serves nothing private there'
}

/** The warning for each less protected route that reaches some of a protected one's upstream paths. */
export function reachWarnings (routes: readonly RouteConfig[], tokenOnly: TokenOnly = NONE): string[] {
  const warnings: string[] = []
  routes.forEach((other, i) => {
    routes.forEach((target, j) => {
      if (i !== j && lessProtected(other, target, tokenOnly) && upstreamReach(other, target) === 'some') {
        warnings.push(`routes[${i}].path: ${reachMessage(routes, i, j, 'some', tokenOnly)}`)
      }
    })
  })
  return warnings
}

/**
 * For the edge (http/edge.ts, MayPass): whether a request the router gives to the route at prefix
 * `routed` may go on though it reads as a path under the route at `loose` (`/reportserver/x` beside
 * a route `/ReportServer/`): both are routes, and the router's is no less protected. Prefixes as the
 * edge names them (a route's path without its trailing `/`, `''` for `/`). Each pair is judged once.
 */
export function spelledPrefixPasses (config: Pick<GatewayConfig, 'routes' | 'providers'>): (routed: string, loose: string) => boolean {
  const byPrefix = new Map(config.routes.map((route) => [route.path.replace(/\/+$/, ''), route]))
  const tokenOnly = tokenOnlyIssuers(config.providers)
  const judged = new Map<string, boolean>()
  return (routed, loose) => {
    const key = `${routed}\u0000${loose}`
    let passes = judged.get(key)
    if (passes === undefined) {
      const [router, reading] = [byPrefix.get(routed), byPrefix.get(loose)]
      passes = router !== undefined && reading !== undefined && !lessProtected(router, reading, tokenOnly)
      judged.set(key, passes)
    }
    return passes
  }
}
