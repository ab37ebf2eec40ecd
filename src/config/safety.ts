// What makes a config unsafe (docs/security.md, "Configurations that do not start"): a guessable
// or shipped secret, plain http to a provider that is not on this machine, header names HTTP
// already gives a meaning, a redirect host that is a public suffix, and (as warnings only)
// settings that are allowed but weaken the gateway (a less protected route that reaches some of a
// protected route's upstream paths is route-reach.ts's). Pure functions: validate.ts turns their answers into problems, and start-up
// and `--check` report the warnings.
import { introspectionWarnings, rulePlaces, sharedNameWarnings, unpinnedIssuerWarnings } from './bearer-section.js'
import { networkWarnings } from './network-warnings.js'
import { baseUrlPortWarnings } from './server-warnings.js'
import { upstreamNameWarnings } from './upstream-names.js'
import { isIP } from 'node:net'
import { parse as parseHost } from 'tldts'
import { reassignableUserWarnings } from './reassignable-users.js'
import { requestSpelling } from './canonical.js'
import { isLoopbackHost } from './loopback.js'
import { reachWarnings, tokenOnlyIssuers } from './route-reach.js'
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
  // The demo provider's CI client (demo/machine.ts, docs/machine-clients.md's "Try it").
  'ci-secret-change-me',
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

/** The public glob matches every path under the route's prefix (the same `*` as src/access/glob.ts). */
function coversRoute (glob: string, route: RouteConfig): boolean {
  if (glob === '*') return true
  const star = glob.indexOf('*')
  if (star === -1 || !/^\**$/.test(glob.slice(star))) return false
  const under = route.path === '/' ? '/' : `${requestSpelling(route.path)}/`
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
 * What a gateway of `config` keeps only in its process: its session secret (made at each start when
 * none is set) and its sessions (a memory store). Said at the start and by --check (a newcomer's
 * finding: --check said OK, and the start warned).
 */
export function processWarnings (config: GatewayConfig): string[] {
  return [
    ...(config.session.secret ? [] : ['session.secret is not set: each start makes a random one, so sessions will not survive a restart and cannot be shared between instances; set one (openssl rand -base64 32)']),
    ...(config.store.type === 'memory' ? ['store.type is memory: sessions live in this process only (one instance, lost on restart); set store.type: redis (GATEWAY_STORE=redis and REDIS_URL in the shipped gateway.yaml) to keep them across restarts and instances'] : []),
  ]
}

/**
 * Settings that are allowed but weaken the gateway, one sentence each: `--check` prints them and
 * start-up logs them at warn level. Pure: the same config always gives the same list.
 */
export function configWarnings (config: GatewayConfig): string[] {
  const warnings: string[] = []
  // A newcomer's finding: `routes:` left out (or indented under another key) passed --check as OK.
  if (config.routes.length === 0 && config.forwardAuth.hosts.size === 0) {
    warnings.push('routes: none, and no forwardAuth hosts: the gateway protects nothing (only its own /oauth/ pages answer); add a route (routes: - path: /app/ ...)')
  }
  for (const provider of Object.values(config.providers)) {
    if (provider.dangerouslyAllowInsecureHttp) {
      warnings.push(`providers.${provider.name}.dangerouslyAllowInsecureHttp is true: provider ${provider.name} may be reached over plain http, ` +
        'where its tokens and client secret can be read or changed on the network')
    }
  }
  for (const provider of Object.values(config.providers)) {
    if (!provider.tokenOnly && provider.issuer !== undefined && !provider.openid) {
      warnings.push(`providers.${provider.name}.scope has no openid beside an issuer: no ID token is asked for, so who signs in rests on the userinfo answer alone ` +
        `(and OIDC providers such as Google's and Microsoft's answer userinfo only for openid); add openid to the scope, unless ${provider.name} is a plain OAuth 2.0 server ` +
        'that publishes its endpoints at that issuer (RFC 8414)')
    }
    if (!provider.pkce) {
      warnings.push(`providers.${provider.name}.pkce is false: a stolen authorization code can be exchanged without the verifier only this browser's sign-in holds; ` +
        'remove it unless the provider refuses PKCE')
    }
  }
  config.routes.forEach((route, i) => {
    const warning = publicWarning(route, i)
    if (warning) warnings.push(warning)
    // An outside tester's finding: the sign-in budget is all that bounds what strangers can have kept (a kept form needs no cookie).
    if (route.preserveBodyBytes !== undefined && config.rateLimit.login === undefined) {
      warnings.push(`routes[${i}].preserveBody with rateLimit.login off: nothing bounds the forms strangers can have kept (up to ${route.preserveBodyBytes} bytes each, for state.ttl, ` +
        'with no cookie needed); a proxy in front counts requests, not the bytes kept: set rateLimit.login, or preserveBody: false')
    }
    const anyOf = route.rules.allow?.filter((rule) => rule.name.startsWith('allow.')).map((rule) => rule.name.slice('allow.'.length)) ?? []
    if (anyOf.length > 0) {
      warnings.push(`routes[${i}].allow: this object admits any of ${anyOf.join(', ')}, as it did before rule lists, where a rule needs all of its conditions; ` +
        `write it as a list of rules, one per condition (${anyOf.map((key) => `{ ${key}: [...] }`).join(', ')}), to say so`)
    }
  })
  warnings.push(...reassignableUserWarnings(config))
  warnings.push(...reachWarnings(config.routes, tokenOnlyIssuers(config.providers)))
  warnings.push(...networkWarnings(config))
  const places = rulePlaces(config)
  warnings.push(...unpinnedIssuerWarnings(places, config.providers))
  warnings.push(...sharedNameWarnings(places))
  warnings.push(...upstreamNameWarnings(config))
  warnings.push(...introspectionWarnings(config))
  warnings.push(...baseUrlPortWarnings(config.server))
  return warnings
}
