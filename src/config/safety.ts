// What makes a config unsafe (SPEC.md, "Security floor"): a guessable session secret, plain http to
// a provider that is not on this machine, and (as warnings only) settings that are allowed but
// weaken the gateway. Pure functions: config-validate.ts turns their answers into problems, and
// start-up and `--check` report the warnings.
import type { GatewayConfig, RouteConfig } from './config.js'

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

/** The public glob matches every path under the route's prefix (the same `*` as proxy.ts's matcher). */
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
  config.routes.forEach((route, i) => {
    const warning = publicWarning(route, i)
    if (warning) warnings.push(warning)
  })
  return warnings
}
