// One entry of `routes`, and what the routes must not do to each other (a less protected one
// reaching a protected one's upstream paths).
import { resolvesSegments } from '../raw-segments.js'
import type { ProviderConfig, PublicRule, ReauthConfig, RouteConfig } from '../types.js'
import { Issues, describe, type Path } from '../problems.js'
import { closest } from '../did-you-mean.js'
import { bearerSection } from '../bearer-section.js'
import { configuredTarget } from '../canonical.js'
import { globProblem, ruleLists } from '../rule-lists.js'
import { lessProtected, reachMessage, upstreamReach, type TokenOnly } from '../route-reach.js'
import { DAY, type RouteRaw, type KeyPath, duration, size, url } from './values.js'
import { validateIdentityHeaders, validateClaimHeaders } from './headers.js'

function validatePublic (issues: Issues, path: Path, raw: string[]): PublicRule[] {
  return raw.flatMap((entry, i) => {
    // The schema holds it to "METHOD /path/glob" (schema.ts, PUBLIC_RULE).
    const [method = '', glob = ''] = entry.trim().split(/\s+/)
    const problem = globProblem(glob)
    if (problem !== undefined) issues.add([...path, i], `${problem}, got ${describe(glob)}`)
    return [{ method: method.toUpperCase(), path: glob }]
  })
}

export function validateRoute (issues: Issues, index: number, raw: RouteRaw, providers: string[]): RouteConfig {
  const path = ['routes', index]
  const at = (key: string): Path => [...path, key]
  const prefix = routePrefix(raw.path)
  const spelling = encodedPathProblem(raw.path)
  if (spelling !== undefined) issues.add(at('path'), spelling)
  // The edge merges `//` and removes dot segments before routing: `/docs//api/` would match no request.
  else if (resolvesSegments(prefix)) issues.add(at('path'), `has dot or empty segments, which the edge removes from every request before routing, so it would match none; write the path they stand for, got ${describe(raw.path)}`)
  const auth = raw.auth
  const listed = routeProviders(issues, at, raw)
  const provider = listed[0]
  checkRouteProvider(issues, at, auth, provider, providers, raw.providers === undefined ? 'provider' : 'providers')
  for (const other of listed.slice(1)) checkRouteProvider(issues, at, auth, other, providers, 'providers')
  const rewritePrefix = raw.rewritePrefix
  // An upstream reads `/x/../app/` as `/app/`: the route-reach check and the rules must see that one.
  if (rewritePrefix !== undefined && resolvesSegments(rewritePrefix)) {
    issues.add(at('rewritePrefix'), `has dot or empty segments, which an upstream would resolve to another path; write the path they stand for, got ${describe(rewritePrefix)}`)
  } else if (rewritePrefix !== undefined) {
    const spelling = rewriteSpellingProblem(rewritePrefix)
    if (spelling !== undefined) issues.add(at('rewritePrefix'), spelling)
  }
  const upstream = validateUpstream(issues, at, raw.upstream)
  const assertion = raw.assertion
  if (assertion && auth === 'none') issues.add(at('assertion'), 'needs auth: required (a route without a session has nobody to vouch for)')
  if (raw.bearer !== undefined && auth === 'none') issues.add(at('bearer'), 'needs auth: required (a public route checks no token)')
  if (raw.agents && auth === 'none') issues.add(at('agents'), 'needs auth: required (a public route needs no token)')
  return {
    path: prefix,
    upstream: upstream ?? 'http://invalid',
    provider,
    providers: listed,
    rewritePrefix,
    timeoutMs: duration(issues, at('timeout'), raw.timeout, 100, DAY),
    maxConnections: raw.maxConnections,
    auth,
    websocket: raw.websocket,
    rules: ruleLists(issues, path, raw, { route: prefix }),
    headers: validateClaimHeaders(issues, at('headers'), raw.headers ?? {}),
    public: validatePublic(issues, at('public'), raw.public),
    identityHeaders: validateIdentityHeaders(issues, at('identityHeaders'), raw.identityHeaders),
    allowedOrigins: validateOrigins(issues, at('allowedOrigins'), raw.allowedOrigins),
    assertion,
    websocketMaxMessage: size(issues, at('websocketMaxMessage'), raw.websocketMaxMessage, 1024, 1024 ** 3),
    methodOverrideMaxBody: size(issues, at('methodOverrideMaxBody'), raw.methodOverrideMaxBody, 1024, 1024 ** 3),
    bearer: bearerSection(issues, at('bearer'), raw.bearer, listed.length > 0 ? listed : undefined),
    agents: raw.agents,
    reauth: validateReauth(issues, at('reauth'), raw.reauth, auth, raw.bearer !== undefined),
    preserveBodyBytes: validatePreserveBody(issues, at('preserveBody'), raw.preserveBody, auth),
  }
}

/** `reauth:` on a route: a step-up age (1m to 30d) and the acceptable `acr` values. */
function validateReauth (issues: Issues, at: Path, raw: RouteRaw['reauth'], auth: RouteRaw['auth'], bearer: boolean): ReauthConfig | undefined {
  if (raw === undefined) return undefined
  if (auth === 'none') issues.add(at, 'needs auth: required (a public route has no sign-in to be recent)')
  // RFC 9470 would have the token carry auth_time and acr, which machine clients' tokens
  // (client credentials) do not: every one would be refused, or a person's token would skip the step-up.
  if (bearer) issues.add(at, 'cannot be combined with bearer: a machine client\'s token carries no sign-in the gateway can judge; put the step-up paths on a route of their own')
  if (raw.maxAge === undefined) {
    if (!issues.touched([...at, 'maxAge'])) issues.add([...at, 'maxAge'], 'must say how recent the sign-in must be, such as 15m')
    return undefined
  }
  const acr = [...new Set(raw.acr ?? [])]
  return { maxAgeMs: duration(issues, [...at, 'maxAge'], raw.maxAge, 60_000, 30 * DAY), acr }
}

/** A route's provider signs people in: a token-only issuer (no client) can only be named in `bearer.issuers`. */
export function checkSignInProvider (issues: Issues, at: Path, route: RouteConfig, providers: Record<string, ProviderConfig>): void {
  for (const name of route.providers) {
    const provider = Object.hasOwn(providers, name) ? providers[name] : undefined
    if (provider?.tokenOnly !== true) continue
    issues.add(at, `names ${provider.name}, a token-only issuer (no clientId and clientSecret): nobody can sign in with it`,
      `name a provider people sign in with here, and ${provider.name} in bearer.issuers: [${provider.name}] (with bearer.audience) for the tokens it mints`)
  }
}

/** `reauth:` judges the ID token's `auth_time` and `acr`: the route's provider must sign in with OpenID Connect. */
export function checkReauthProvider (issues: Issues, at: Path, route: RouteConfig, providers: Record<string, ProviderConfig>): void {
  if (route.reauth === undefined || route.provider === undefined) return
  const provider = Object.hasOwn(providers, route.provider) ? providers[route.provider] : undefined
  if (provider !== undefined && !provider.openid) {
    issues.add(at, `needs a provider whose scope includes openid: ${describe(route.provider)} gives no ID token, whose auth_time says when the person signed in`)
  }
}

/** `preserveBody:` on a route: a size from 1KiB to 10MiB, or false (off). */
function validatePreserveBody (issues: Issues, at: Path, raw: RouteRaw['preserveBody'], auth: RouteRaw['auth']): number | undefined {
  if (raw === undefined || raw === false) return undefined
  if (auth === 'none') issues.add(at, 'needs auth: required (a public route never sends anyone to sign in)')
  return size(issues, at, raw, 1024, 10 * 1024 * 1024)
}

/**
 * A route's path prefix without trailing slashes ("/" when missing, or refused by the schema, which
 * holds it to a path clear of the gateway's own endpoints).
 */
/**
 * Why a route path's percent-encoding never meets a request: the edge decodes what a path carries as
 * it is (`%40` is `@`, canonical.ts) and refuses the rest (`%2F`), and the router matches the path
 * decoded (`%C3%A4` is `ä`), so `/%40admin/` or `/%C3%A4pp/` would match nothing and its requests
 * would go to a route beside it. Paths without `%` are the schema's.
 */
function encodedPathProblem (raw: string | undefined): string | undefined {
  if (raw === undefined) return undefined
  const canonical = configuredTarget(raw)
  if (!canonical.ok) return `never matches a request: the edge refuses such a path (${canonical.reason}), got ${describe(raw)}`
  if (!raw.includes('%')) return undefined
  if (canonical.url !== raw) return `never matches a request: the edge spells such a path ${describe(canonical.url)}, got ${describe(raw)}`
  // `/%C3%A4pp/`: the router compares a request's path decoded (`/äpp/...`) with the route's as written.
  return `never matches a request: the router reads a request's path decoded, so write it decoded: ${describe(decodedPath(raw))}, got ${describe(raw)}`
}

/**
 * Why a rewritePrefix is not in the one spelling the gateway compares upstream paths in (the edge's,
 * canonical.ts): an upstream decodes `%7E`, `%61` or `%41PP` to another path than the route-reach
 * check would read, drops a `;v=1` parameter (Tomcat, Jetty) and reads `\` as `/` (IIS).
 */
function rewriteSpellingProblem (raw: string): string | undefined {
  if (raw.includes('?') || raw.includes('#')) return `is a path: a query or fragment in it would be sent before the request's path (\`/index.php?/\` sends /x as /index.php?//x), got ${describe(raw)}`
  const target = configuredTarget(raw)
  if (!target.ok) return `is a path the edge would refuse in a request (${target.reason}), which an upstream may read as another path, got ${describe(raw)}`
  return target.url === raw ? undefined : `is spelled otherwise than the gateway spells paths: write ${describe(target.url)}, got ${describe(raw)}`
}

/** `raw` with its percent-encoding decoded, where it decodes. */
function decodedPath (raw: string): string {
  try {
    return decodeURIComponent(raw)
  } catch {
    return raw
  }
}

function routePrefix (raw: string | undefined): string {
  return raw === undefined || raw.length === 1 ? '/' : raw.replace(/\/+$/, '')
}

/**
 * The providers a session may be at to pass the route: `providers: [a, b]`, or `provider` alone.
 * Several of them take what only one provider's sign-in can give off the table (see the checks).
 */
function routeProviders (issues: Issues, at: KeyPath, raw: RouteRaw): string[] {
  if (raw.providers === undefined) return raw.provider === undefined ? [] : [raw.provider]
  if (raw.provider !== undefined) issues.add(at('provider'), 'cannot be given with providers: list every provider in providers', `providers: [${[raw.provider, ...raw.providers.filter((name) => name !== raw.provider)].join(', ')}]`)
  const several = raw.providers.length > 1
  if (several && raw.reauth !== undefined) issues.add(at('reauth'), 'needs one provider: a step-up signs in again at the route\'s provider; put the step-up paths on a route with provider:')
  if (several && raw.agents === true) issues.add(at('agents'), 'needs one provider: an agent\'s sign-in goes to the route\'s provider; give the agents a route with provider:')
  return raw.providers
}

/** A route's provider: required with auth: required, and one of the configured providers. `key`: where it is written. */
function checkRouteProvider (issues: Issues, at: KeyPath, auth: RouteRaw['auth'], provider: string | undefined, providers: string[], key: 'provider' | 'providers'): void {
  if (auth === 'required' && provider === undefined && !issues.touched(at('provider')) && !issues.touched(at('providers')) && !issues.touched(at('auth'))) {
    issues.add(at('provider'), 'is required when auth is required', providers.length > 0 ? `known: ${providers.join(', ')}` : undefined)
  }
  if (provider !== undefined && !providers.includes(provider) && !issues.touched(['providers', provider]) && !issues.assumed(['providers', provider])) {
    const match = closest(provider, providers)
    issues.add(at(key), `names no configured provider${key === 'providers' ? `: ${describe(provider)}` : ''}`, match !== undefined ? `did you mean \`${match}\`?` : `known: ${providers.join(', ') || 'none'}`)
  }
}

/** A route's upstream: an http(s) origin, with no path, query or fragment (rewritePrefix maps paths). */
function validateUpstream (issues: Issues, at: KeyPath, raw: string | undefined): string | undefined {
  const upstream = url(issues, at('upstream'), raw, ['http', 'https'])
  if (upstream !== undefined && (new URL(upstream).pathname !== '/' || /[?#]/.test(upstream))) {
    issues.add(at('upstream'), `must be an origin such as http://127.0.0.1:9100 (map paths with rewritePrefix), got ${describe(upstream)}`)
  }
  return upstream
}

/** Origins a websocket route accepts besides the gateway's own: `scheme://host[:port]`, nothing more. */
function validateOrigins (issues: Issues, path: Path, raw: string[]): string[] {
  return raw.flatMap((entry, i) => {
    const origin = entry.trim()
    let parsed: URL | undefined
    try {
      parsed = new URL(origin)
    } catch {}
    if (!parsed || !['http:', 'https:'].includes(parsed.protocol) || parsed.origin !== origin.replace(/\/$/, '')) {
      issues.add([...path, i], `must be an origin such as https://app.example.com (scheme, host and port only), got ${describe(origin)}`)
      return []
    }
    return [parsed.origin]
  })
}

/**
 * A less protected route that reaches every upstream path of a protected one is refused at the
 * less protected route's path (partial reach is a warning, see safety.ts's configWarnings).
 */
export function reportReachingRoutes (issues: Issues, routes: readonly RouteConfig[], tokenOnly: TokenOnly): void {
  routes.forEach((other, i) => {
    routes.forEach((target, j) => {
      if (i === j || !lessProtected(other, target, tokenOnly) || upstreamReach(other, target) !== 'all') return
      if (issues.touched(['routes', i]) || issues.touched(['routes', j])) return
      issues.add(['routes', i, 'path'], reachMessage(routes, i, j, 'all', tokenOnly))
    })
  })
}
