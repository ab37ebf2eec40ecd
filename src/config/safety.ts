// What makes a config unsafe (docs/security.md, "Configurations that do not start"): a guessable
// or shipped secret, plain http to a provider that is not on this machine, header names HTTP
// already gives a meaning, a redirect host that is a public suffix, a less protected route that
// reaches a protected route's upstream paths, and (as warnings only) settings that are allowed but
// weaken the gateway. Pure functions: validate.ts turns their answers into problems, and start-up
// and `--check` report the warnings.
import { isIP } from 'node:net'
import { parse as parseHost } from 'tldts'
import { reassignableUserWarnings } from './reassignable-users.js'
import type { GatewayConfig, RouteConfig } from './types.js'

/** How to make a good secret, said in every secret problem. */
export const GENERATE_SECRET = 'generate one with "openssl rand -base64 32"'

/** Below this estimate a secret is refused: half of what 32 random hex characters carry (128 bits). */
const MIN_SECRET_BITS = 64
const MIN_DISTINCT = 8

/** `n × H` of the symbols' frequencies: an upper bound of the information in them, in bits. */
function empiricalBits (symbols: ArrayLike<number>): number {
  const counts = new Map<number, number>()
  for (let i = 0; i < symbols.length; i++) counts.set(symbols[i]!, (counts.get(symbols[i]!) ?? 0) + 1)
  let bits = 0
  for (const count of counts.values()) bits -= count * Math.log2(count / symbols.length)
  return bits
}

/** The shortest period of `text` (`abcabcab` → 3), or its length when it does not repeat. */
function period (text: string): number {
  // Knuth–Morris–Pratt failure function: the longest proper prefix that is also a suffix.
  const border = new Array<number>(text.length).fill(0)
  for (let i = 1, k = 0; i < text.length; i++) {
    while (k > 0 && text[i] !== text[k]) k = border[k - 1]!
    if (text[i] === text[k]) k++
    border[i] = k
  }
  return text.length - (border[text.length - 1] ?? 0)
}

/**
 * Why `secret` is too easy to guess, or undefined when it is not. The estimate is the smaller of
 * the character-frequency entropy and that of the steps between neighbouring characters (which
 * catches runs such as `abcdef…` or `0123…`); 32 random hex characters estimate at about 110 bits,
 * 32 random bytes in base64 at about 200.
 */
export function secretProblem (secret: string): string | undefined {
  const chars = Array.from(secret, (c) => c.codePointAt(0)!)
  if (chars.length < 32) return `must be at least 32 characters, got ${chars.length}; ${GENERATE_SECRET}`
  const repeat = period(secret)
  if (repeat === 1) return `is one character repeated, which anyone can guess; ${GENERATE_SECRET}`
  if (repeat <= secret.length / 2) return `is a ${repeat}-character pattern repeated, which anyone can guess; ${GENERATE_SECRET}`
  const distinct = new Set(chars).size
  if (distinct < MIN_DISTINCT) return `uses only ${distinct} distinct characters, which is easy to guess; ${GENERATE_SECRET}`
  const steps = chars.slice(1).map((c, i) => c - chars[i]!)
  const bits = Math.floor(Math.min(empiricalBits(chars), empiricalBits(steps)))
  if (bits < MIN_SECRET_BITS) {
    return `looks predictable (about ${bits} bits of randomness estimated, at least ${MIN_SECRET_BITS} needed); ${GENERATE_SECRET}`
  }
  return undefined
}

/**
 * Every secret a file shipped in this repository holds as a default or an example (docker-compose.yml,
 * gateway.yaml, bench/, scripts/): anyone can read them, so a gateway that copied one is refused (test/config/
 * shipped-secrets.test.ts reads those files, so this list cannot fall behind them).
 */
export const SHIPPED_SECRETS: readonly string[] = [
  'compose-demo-session-secret-change-me',
  'demo-secret-change-me',
  'bench-session-secret-0123456789-abcdefghij',
  'bench-client-secret',
  'docker-check-secret-0123456789abcdef',
  // docs/machine-clients.md's try-it-locally provider and CI client.
  'gateway-secret',
  'ci-secret',
]

/**
 * Why `secret` may not be used, when it is one of {@link SHIPPED_SECRETS}; undefined otherwise.
 * `loopbackOnly` (server.baseUrl is a loopback host: the demo and the bench) lets them through, as
 * nobody but this machine's own browser can reach such a gateway.
 */
export function shippedSecretProblem (secret: string, loopbackOnly: boolean): string | undefined {
  if (loopbackOnly || !SHIPPED_SECRETS.includes(secret.trim())) return undefined
  return 'is a value shipped in this repository\'s own files (a demo or test value), which anyone can read; set a secret of your own ' +
    '(for a session secret, generate one with "openssl rand -base64 32")'
}

/** Header names HTTP itself gives a meaning (RFC 9110 §7.6.1, RFC 9112): a value put there would be read as framing or routing. */
const RESERVED_HEADERS = ['host', 'authorization', 'cookie', 'content-length', 'transfer-encoding', 'connection',
  'keep-alive', 'proxy-connection', 'proxy-authenticate', 'proxy-authorization', 'te', 'trailer', 'upgrade']

/**
 * Headers applications trust to say what the request is, beyond HTTP's own: where it came from
 * (Origin and Referer, which CSRF defences compare; X-Requested-With, which frameworks read as "not
 * a cross-site form") and which method it is (the overrides Rails, Laravel, Symfony and Express's
 * method-override honour: a claim value `DELETE` would turn a GET into a DELETE).
 */
const REQUEST_DESCRIBING_HEADERS = ['origin', 'referer', 'x-requested-with', 'x-http-method-override', 'x-http-method', 'x-method-override']

/**
 * Families of them: Content-* describes the body (its type chooses the parser, its encoding the
 * decoder), and Sec-* is set only by browsers, so applications trust it (Fetch Metadata's
 * Sec-Fetch-Site as a CSRF defence, Sec-WebSocket-Key).
 */
const REQUEST_DESCRIBING_PREFIXES = ['content-', 'sec-']

/** What reads a header name (lower case, `-`) as something other than identity, in words; undefined when nothing does. */
function headerMeaning (lower: string): string | undefined {
  if (RESERVED_HEADERS.includes(lower)) return 'a header HTTP itself gives a meaning'
  if (REQUEST_DESCRIBING_HEADERS.includes(lower) || REQUEST_DESCRIBING_PREFIXES.some((prefix) => lower.startsWith(prefix))) {
    return 'a header applications trust to say what the request is'
  }
  return undefined
}

/**
 * Why a header the gateway fills with identity data (an identity header, a claim header) may not
 * have this name, or undefined. `_` counts as `-`, as CGI and WSGI read both the same.
 */
export function reservedHeaderProblem (name: string): string | undefined {
  const lower = name.toLowerCase().replaceAll('_', '-')
  const what = headerMeaning(lower)
  if (what === undefined) return undefined
  return `must not be ${JSON.stringify(name)}, ${what} (the upstream would read the identity as its ${lower}): name a header of your own, such as X-Forwarded-User`
}

/**
 * `host` (a domain name, no leading dot) is a public suffix: listed in the Public Suffix List, ICANN
 * or private section (`co.uk`, `github.io`), so unrelated parties own its subdomains. IP addresses
 * and names the list does not know (`localhost`, `intranet`) are not.
 */
export function isPublicSuffix (host: string): boolean {
  if (isIP(host) !== 0) return false
  const parsed = parseHost(host, { allowPrivateDomains: true })
  return parsed.domain === null && (parsed.isIcann === true || parsed.isPrivate === true)
}

/** `localhost`, `*.localhost`, 127.0.0.0/8 and `[::1]`: names that never leave this machine (RFC 6761 §6.3). */
export function isLoopbackHost (hostname: string): boolean {
  return hostname === 'localhost' || hostname.endsWith('.localhost') || hostname === '[::1]' ||
    /^127\.\d{1,3}\.\d{1,3}\.\d{1,3}$/.test(hostname)
}

/**
 * The host of `url` when it is plain http to a host that is not loopback (the traffic would cross a
 * network unencrypted), else undefined. `url` is already known to parse.
 */
export function plainHttpHost (url: string): string | undefined {
  const { protocol, hostname } = new URL(url)
  return protocol === 'http:' && !isLoopbackHost(hostname) ? hostname : undefined
}

/** The message for an endpoint that {@link plainHttpHost} flags, naming the opt-in. */
export function plainHttpProblem (host: string, provider: string): string {
  return `uses plain http to ${JSON.stringify(host)}, which is not a loopback host: tokens and the client secret would cross the network unencrypted; ` +
    `use https, or set providers.${provider}.dangerouslyAllowInsecureHttp: true if the network in between is trusted`
}

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
 * itself when absent). Below `/`, reply-from drops a trailing `/` of R, so P/x goes to R/x; a route
 * at `/` sends /x to R + `x`.
 */
function mapped (route: RouteConfig, requests: UpstreamSpace): UpstreamSpace {
  const rewrite = route.rewritePrefix ?? route.path
  const base = route.path === '/' ? rewrite : rewrite.replace(/\/+$/, '')
  const cut = route.path === '/' ? 1 : route.path.length
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
  const hits = contested.filter((path) => inSpace(path, reached)).length
  return hits === 0 ? 'none' : hits === contested.length ? 'all' : 'some'
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
  return first.protocol === second.protocol && first.port === second.port && isLoopbackHost(first.hostname) && isLoopbackHost(second.hostname)
}

/**
 * `other` lets in someone `target` would refuse: no sign-in at all, people of another provider, or
 * where `target` has rules (allow, deny), other rules or none (the same rules are the same protection).
 */
export function lessProtected (other: RouteConfig, target: RouteConfig): boolean {
  if (target.auth !== 'required') return false
  if (other.auth === 'none' || other.provider !== target.provider) return true
  const ruled = target.rules.allow !== undefined || target.rules.deny.length > 0
  return ruled && JSON.stringify(other.rules) !== JSON.stringify(target.rules)
}

/** How a route is named in a message: its index and path. */
export function routeName (route: RouteConfig, index: number): string {
  return `routes[${index}] (${route.path === '/' ? '/' : `${route.path}/`})`
}

/** Why `other` lets a stranger past `target`, in the words of a problem or a warning. */
export function reachMessage (routes: readonly RouteConfig[], otherIndex: number, targetIndex: number, reach: 'all' | 'some'): string {
  const other = routes[otherIndex]!
  const target = routes[targetIndex]!
  const how = other.auth === 'none'
    ? 'with no sign-in'
    : other.provider !== target.provider
      ? `to anyone signed in at ${JSON.stringify(other.provider)}`
      : other.rules.allow === undefined && other.rules.deny.length === 0 ? 'to any signed-in user, without its rules' : 'under other rules'
  const upstream = new URL(target.upstream).origin
  return reach === 'all'
    ? `reaches every path of ${upstream} that ${routeName(target, targetIndex)} protects, ${how}: ` +
      'give the routes different upstream paths (rewritePrefix) or the same protection'
    : `reaches some of the paths of ${upstream} that ${routeName(target, targetIndex)} protects (through ${routeName(target, targetIndex)} they need a sign-in), ${how}; ` +
      'make sure the upstream serves nothing private there'
}

/** The public glob matches every path under the route's prefix (the same `*` as src/access/glob.ts). */
function coversRoute (glob: string, route: RouteConfig): boolean {
  if (glob === '*') return true
  const star = glob.indexOf('*')
  if (star === -1 || !/^\**$/.test(glob.slice(star))) return false
  const under = route.path === '/' ? '/' : `${route.path}/`
  return under.startsWith(glob.slice(0, star))
}

function publicWarning (route: RouteConfig, index: number): string | undefined {
  // OPTIONS alone is the usual CORS preflight, meant to pass without credentials.
  const opening = route.public.filter((rule) => rule.method !== 'OPTIONS' && coversRoute(rule.path, route))
  if (route.auth !== 'required' || opening.length === 0) return undefined
  const methods = [...new Set(opening.map((rule) => rule.method))]
  const prefix = route.path === '/' ? '/' : `${route.path}/`
  const what = methods.includes('*') ? `every request under ${prefix} public, whatever its method,` : `every ${methods.join(' and ')} request under ${prefix} public,`
  const rules = opening.map((rule) => JSON.stringify(`${rule.method} ${rule.path}`)).join(', ')
  return `routes[${index}].public: ${rules} ${opening.length === 1 ? 'makes' : 'make'} ${what} with no sign-in; ` +
    `narrow the glob${opening.length === 1 ? '' : 's'} (such as "GET ${prefix}static/*") or set auth: none if that is meant`
}

/**
 * Settings that are allowed but weaken the gateway, one sentence each: `--check` prints them and
 * start-up logs them at warn level. Pure: the same config always gives the same list.
 */
export function configWarnings (config: GatewayConfig): string[] {
  const warnings: string[] = []
  for (const provider of Object.values(config.providers)) {
    if (provider.dangerouslyAllowInsecureHttp) {
      warnings.push(`providers.${provider.name}.dangerouslyAllowInsecureHttp is true: provider ${provider.name} may be reached over plain http, ` +
        'where its tokens and client secret can be read or changed on the network')
    }
  }
  for (const provider of Object.values(config.providers)) {
    if (!provider.pkce) {
      warnings.push(`providers.${provider.name}.pkce is false: a stolen authorization code can be exchanged without the verifier only this browser's sign-in holds; ` +
        'remove it unless the provider refuses PKCE')
    }
  }
  config.routes.forEach((route, i) => {
    const warning = publicWarning(route, i)
    if (warning) warnings.push(warning)
    const anyOf = route.rules.allow?.filter((rule) => rule.name.startsWith('allow.')).map((rule) => rule.name.slice('allow.'.length)) ?? []
    if (anyOf.length > 0) {
      warnings.push(`routes[${i}].allow: this object admits any of ${anyOf.join(', ')}, as it did before rule lists, where a rule needs all of its conditions; ` +
        `write it as a list of rules, one per condition (${anyOf.map((key) => `{ ${key}: [...] }`).join(', ')}), to say so`)
    }
  })
  warnings.push(...reassignableUserWarnings(config))
  config.routes.forEach((other, i) => {
    config.routes.forEach((target, j) => {
      if (i !== j && lessProtected(other, target) && upstreamReach(other, target) === 'some') {
        warnings.push(`routes[${i}].path: ${reachMessage(config.routes, i, j, 'some')}`)
      }
    })
  })
  return warnings
}
