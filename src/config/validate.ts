// After the schema pass (schema-check.ts): presets, defaults, and the rules JSON Schema cannot say
// (a URL's scheme, a route's provider must exist, one store form, ranges of durations, cookie rules,
// plain http to a remote provider). Each rule is skipped when a key it depends on already has a
// problem, so one mistake gives one message. `validate` returns the resolved GatewayConfig.
import { BlockList, isIP } from 'node:net'
import { availableParallelism } from 'node:os'
import type { AssertionConfig, BearerConfig, ClaimHeader, ForwardAuthConfig, GatewayConfig, IdentityHeaders, MetricsConfig, ProviderConfig, PublicRule, RateBudget, RateLimitConfig, ReauthConfig, RouteConfig, RuleLists, SentinelConfig, ServerConfig, SessionConfig, StoreConfig, TracingConfig } from './types.js'
import { PRESET_NAMES, applyPreset } from './presets.js'
import { Issues, checkUrl, closest, describe, formatMs, formatSize, isObject, parseDuration, parseSize, type Path } from './reader.js'
import { bearerSection, checkBearerIssuers } from './bearer.js'
import { CLAIM_PATH, claimPaths, globProblem, ruleLists } from './rules.js'
import type { FilledYaml, ProviderYaml } from './schema.js'
import { checkSchema, withDefaults } from './schema-check.js'
import { isLoopbackHost, isPublicSuffix, lessProtected, plainHttpHost, plainHttpProblem, reachMessage, reservedHeaderProblem, secretProblem, shippedSecretProblem, upstreamReach } from './safety.js'

const COOKIE_NAME = /^[A-Za-z0-9!#$%&'*+\-.^_`|~]+$/
const PROVIDER_NAME = /^[A-Za-z0-9_-]+$/
const RESERVED_PATHS = ['/oauth', '/healthz', '/readyz', '/metrics']
const DAY = 86_400_000

// What validate.ts reads: every key the schema gives a default is present (schema.ts, `Filled`), so
// no default is written here; the few that are computed from other keys say so where they are made.
type Sections = FilledYaml
type ProviderRaw = NonNullable<FilledYaml['providers']>[string]
type RouteRaw = NonNullable<FilledYaml['routes']>[number]

/** A duration the schema has let through (or its default), held to its range. */
function duration (issues: Issues, path: Path, value: string | number, minMs: number, maxMs: number): number {
  const ms = parseDuration(value)
  if (ms === undefined) {
    // Not reached (the schema's pattern and minimum are parseDuration's); if it were, the file is refused.
    if (!issues.touched(path)) issues.add(path, `must be a duration such as 300, 300s, 5m or 8h, got ${describe(value)}`)
    return minMs
  }
  if (ms < minMs || ms > maxMs) {
    issues.add(path, `must be between ${formatMs(minMs)} and ${formatMs(maxMs)}, got ${describe(value)}`)
    return Math.min(Math.max(ms, minMs), maxMs)
  }
  return ms
}

/** A size the schema has let through (or its default), in bytes, held to its range. */
function size (issues: Issues, path: Path, value: string | number, min: number, max: number): number {
  const bytes = parseSize(value)
  if (bytes === undefined) {
    // Above 1 TiB, or a fraction of a byte: the schema's pattern lets it through, parseSize does not.
    if (!issues.touched(path)) issues.add(path, `must be a size such as 65536, 64KiB or 1MiB, got ${describe(value)}`)
    return min
  }
  if (bytes < min || bytes > max) {
    issues.add(path, `must be between ${formatSize(min)} and ${formatSize(max)}, got ${describe(value)}`)
    return Math.min(Math.max(bytes, min), max)
  }
  return bytes
}

/** A URL with one of `protocols`, or undefined (with a problem) when it is not one. */
function url (issues: Issues, path: Path, value: string | undefined, protocols: readonly string[]): string | undefined {
  return value === undefined ? undefined : checkUrl(issues, path, value, protocols)
}

/** proxy-addr's names for address groups, accepted besides addresses and CIDR ranges. */
const PROXY_GROUPS = ['loopback', 'linklocal', 'uniquelocal']

function isAddressOrRange (entry: string): boolean {
  if (PROXY_GROUPS.includes(entry)) return true
  const [address = '', bits, extra] = entry.split('/')
  const version = isIP(address)
  if (version === 0 || extra !== undefined) return false
  return bits === undefined || (/^\d{1,3}$/.test(bits) && Number(bits) <= (version === 4 ? 32 : 128))
}

/**
 * Why a trusted range is wider than any network of proxies (shorter than /8 for IPv4, the largest
 * private block, /104 for IPv4-mapped IPv6, or /7 for IPv6, the unique-local block): `0.0.0.0/0`, `::/0` or two `/1`s trust
 * every client, as `true` does. Undefined for a range that is narrow enough.
 */
/** Whether IPv6 `probe` lies in `address`/`bits`. */
function inRange (probe: string, address: string, bits: number): boolean {
  const range = new BlockList()
  range.addSubnet(address, bits, 'ipv6')
  return range.check(probe, 'ipv6')
}

function tooWide (entry: string): string | undefined {
  const [address = '', bits] = entry.split('/')
  if (bits === undefined || PROXY_GROUPS.includes(entry)) return undefined
  const version = isIP(address)
  const width = Number(bits)
  // IPv4-mapped IPv6 addresses (::ffff:a.b.c.d) are IPv4 peers: a range among them is measured as
  // IPv4 (its last 32 bits), and one that holds them all (::ffff:0:0/96, ::/80) trusts every one.
  const mapped = version === 6 && inRange(address, '::ffff:0:0', 96)
  const holdsMapped = version === 6 && width <= 96 && inRange('::ffff:0.0.0.0', address, width)
  const least = version === 4 ? 8 : mapped || (holdsMapped && width >= 7) ? 96 + 8 : 7
  if (width >= least) return undefined
  return `${describe(entry)} trusts X-Forwarded-For from a large part of the internet (a range shorter than /${least}): any client could pick its own address; ` +
    'list the addresses or ranges of your proxies, such as 10.0.0.0/8'
}

/** true, false, or a list (or comma-separated string, for ${VAR}) of addresses and CIDR ranges. */
function trustProxy (issues: Issues, value: boolean | string | string[]): boolean | string[] {
  const path = ['server', 'trustProxy']
  if (typeof value === 'boolean') return value
  if (value === 'true' || value === 'false') return value === 'true'
  const list = typeof value === 'string' ? value.split(',').map((entry) => entry.trim()).filter(Boolean) : value
  const trusted = list.flatMap((entry, i) => {
    if (entry !== undefined && isAddressOrRange(entry.trim())) {
      const wide = tooWide(entry.trim())
      if (wide === undefined) return [entry.trim()]
      issues.add([...path, i], wide)
      return []
    }
    issues.add([...path, i], `must be an IP address or CIDR range such as 10.0.0.0/8 (or loopback, linklocal, uniquelocal), got ${describe(entry)}`)
    return []
  })
  return trusted.length > 0 ? trusted : false
}

/**
 * `trustProxy: true` believes X-Forwarded-For from any peer: only a gateway that listens on loopback
 * (so every peer is a proxy on this machine) may say it; anyone else could choose the address its
 * rate-limit budget is counted under.
 */
function checkTrustAll (issues: Issues, trusted: boolean | string[], host: string): void {
  if (trusted !== true || isLoopbackHost(host) || host === '::1') return
  issues.add(['server', 'trustProxy'], `true believes X-Forwarded-For from every client, as server.host ${describe(host)} is not loopback: ` +
    'any client could pick its own address (and a fresh sign-in budget); list the addresses or CIDR ranges of your proxies instead, such as ["10.0.0.0/8"]')
}

function validateServer (issues: Issues, raw: Sections['server']): ServerConfig {
  const port = raw.port
  // Computed from the port, so the schema only describes it (defaultText).
  const baseUrl = url(issues, ['server', 'baseUrl'], raw.baseUrl, ['http', 'https']) ?? `http://localhost:${port}`
  if (raw.baseUrl !== undefined && /[?#]/.test(baseUrl)) issues.add(['server', 'baseUrl'], 'must not have a query or fragment')
  const host = raw.host
  const trusted = trustProxy(issues, raw.trustProxy)
  if (!issues.touched(['server', 'host'])) checkTrustAll(issues, trusted, host)
  return {
    host,
    port,
    baseUrl: baseUrl.replace(/\/+$/, ''),
    trustProxy: trusted,
    shutdownTimeoutMs: duration(issues, ['server', 'shutdownTimeout'], raw.shutdownTimeout, 0, 300_000),
    // `auto` is this machine's core count, known only here.
    workers: raw.workers === 'auto' ? availableParallelism() : raw.workers,
  }
}

function validateSession (issues: Issues, raw: Sections['session'], baseUrl: string, baseUrlTouched: boolean): SessionConfig {
  const cookieName = raw.cookieName
  if (!COOKIE_NAME.test(cookieName)) issues.add(['session', 'cookieName'], `must be a cookie name (letters, digits, - and _), got ${describe(cookieName)}`)
  const secret = raw.secret
  const loopbackOnly = isLoopbackHost(new URL(baseUrl).hostname)
  const weakness = secret ? shippedSecretProblem(secret, loopbackOnly) ?? secretProblem(secret) : undefined
  if (weakness) issues.add(['session', 'secret'], weakness)
  // A cookieSecure with a problem of its own: the checks below that read it would only repeat it.
  const secureTouched = issues.touched(['session', 'cookieSecure'])
  const secure = raw.cookieSecure
  const cookieSecure = secure === 'auto' ? baseUrl.startsWith('https:') : secure
  if (!cookieSecure && baseUrl.startsWith('https:') && !secureTouched) {
    issues.add(['session', 'cookieSecure'], 'is false while server.baseUrl is https: browsers would also send the session cookie over plain http; ' +
      'remove it (auto sets Secure for an https baseUrl) or set it to true')
  }
  if (!baseUrlTouched && !secureTouched) checkCookiePrefix(issues, cookieName, cookieSecure)
  return {
    cookieName,
    secret: secret || undefined,
    ttlMs: duration(issues, ['session', 'ttl'], raw.ttl, 60_000, 30 * DAY),
    maxAgeMs: duration(issues, ['session', 'maxAge'], raw.maxAge, 5 * 60_000, 400 * DAY),
    previousSecrets: validatePreviousSecrets(issues, raw.previousSecrets, secret, loopbackOnly),
    cookieSecure,
    cacheTtlMs: duration(issues, ['session', 'cacheTtl'], raw.cacheTtl, 0, 10_000),
    cookieDomain: validateCookieDomain(issues, raw.cookieDomain, cookieName, baseUrl),
  }
}

/**
 * `session.previousSecrets`: each follows the rules for `secret`, none repeats `secret` or another
 * (a repeat would only cost a try), and they need a `secret` to be previous to.
 */
function validatePreviousSecrets (issues: Issues, raw: string[], secret: string | undefined, loopbackOnly: boolean): string[] {
  if (raw.length > 0 && !secret) {
    issues.add(['session', 'previousSecrets'], 'needs session.secret: previous secrets only open what they sealed, and new sessions must be sealed with a fixed secret')
    return []
  }
  const seen = new Set(secret ? [secret] : [])
  raw.forEach((previous, i) => {
    const at = ['session', 'previousSecrets', i]
    if (seen.has(previous)) {
      issues.add(at, previous === secret ? 'is the same as session.secret: a previous secret must be the one it replaced' : 'repeats an earlier entry')
      return
    }
    seen.add(previous)
    const weakness = shippedSecretProblem(previous, loopbackOnly) ?? secretProblem(previous)
    if (weakness) issues.add(at, weakness)
  })
  return raw
}

/** One DNS label of letters, digits and hyphens (RFC 1123 §2.1). */
const LABEL = '[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?'
const DOMAIN_NAME = new RegExp(`^${LABEL}(?:\\.${LABEL})*$`)

/**
 * `session.cookieDomain`: a domain name (a leading dot is dropped, as browsers do) that
 * server.baseUrl's host is under, or browsers would refuse the cookie; never with a `__Host-` name.
 * @see https://www.rfc-editor.org/rfc/rfc6265#section-5.3 (step 6: the Domain must domain-match the host)
 */
function validateCookieDomain (issues: Issues, raw: string | undefined, cookieName: string, baseUrl: string): string | undefined {
  const path = ['session', 'cookieDomain']
  if (raw === undefined || raw.trim() === '') return undefined
  const domain = raw.trim().toLowerCase().replace(/^\./, '')
  if (!DOMAIN_NAME.test(domain) || isIP(domain) !== 0) {
    issues.add(path, `must be a domain name such as .example.com, got ${describe(raw)}`)
    return undefined
  }
  if (/^__host-/i.test(cookieName)) {
    issues.add(path, 'cannot be used with a "__Host-" cookie name, which browsers only keep without a Domain: ' +
      'rename session.cookieName (for example to __Secure-gw) or remove cookieDomain')
    return undefined
  }
  const host = new URL(baseUrl).hostname
  if (host !== domain && !host.endsWith(`.${domain}`)) {
    issues.add(path, `must be server.baseUrl's host ${describe(host)} or a parent domain of it, got ${describe(domain)}`)
    return undefined
  }
  return domain
}

/** `host`, `.domain` or either with `:port`: see ForwardAuthConfig. */
const REDIRECT_HOST = new RegExp(`^(\\.)?(${LABEL}(?:\\.${LABEL})*)(?::(\\d{1,5}))?$`)

function validateForwardAuth (issues: Issues, raw: Sections['forwardAuth']): ForwardAuthConfig {
  const path = ['forwardAuth', 'allowedRedirectHosts']
  const allowedRedirectHosts = raw.allowedRedirectHosts.flatMap((entry, i) => {
    const lower = entry.trim().toLowerCase()
    if (/[^\x21-\x7e]/.test(lower)) {
      issues.add([...path, i], `must be written in ASCII (punycode, such as xn--bcher-kva.example), got ${describe(entry)}`)
      return []
    }
    const match = REDIRECT_HOST.exec(lower)
    if (!match || (match[3] !== undefined && (Number(match[3]) < 1 || Number(match[3]) > 65535))) {
      issues.add([...path, i], `must be a host name, optionally with a leading dot (and its subdomains) or a :port, such as .example.com or app.example.org:8443, got ${describe(entry)}`)
      return []
    }
    if (match[1] && !match[2]!.includes('.')) {
      issues.add([...path, i], `${describe(entry)} would allow every host under a top-level domain: name your own domain, such as .example.com`)
      return []
    }
    if (isPublicSuffix(match[2]!)) {
      issues.add([...path, i], `${describe(entry)} is a public suffix (in the Public Suffix List): strangers own hosts under it; name your own domain, such as .example.com`)
      return []
    }
    return [lower]
  })
  const hosts = validateHosts(issues, raw.hosts)
  return { allowedRedirectHosts, hosts: new Map([...hosts].map(([host, policy]) => [host, policy.rules])), bearer: hostBearers(hosts) }
}

/** The hosts whose callers may bring their own tokens, with their bearer blocks. */
function hostBearers (hosts: ReadonlyMap<string, HostPolicy>): Map<string, BearerConfig> {
  return new Map([...hosts].flatMap(([host, { bearer }]) => bearer === undefined ? [] : [[host, bearer] as const]))
}

/** A key of forwardAuth.hosts: a lower-case host name or IPv4 address, without port or leading dot. */
const HOST_NAME = new RegExp(`^${LABEL}(?:\\.${LABEL})*$`)

type HostYaml = NonNullable<Sections['forwardAuth']['hosts']>[string]

/** What forwardAuth.hosts keeps for one host. */
interface HostPolicy { rules: RuleLists, bearer: BearerConfig | undefined }

/** forwardAuth.hosts: each host's `allow` and `deny` as lists of rules (one rule object is a list of one), and its `bearer`. */
function validateHosts (issues: Issues, raw: Record<string, HostYaml>): Map<string, HostPolicy> {
  const hosts = new Map<string, HostPolicy>()
  for (const [entry, rules] of Object.entries(raw)) {
    const at = ['forwardAuth', 'hosts', entry]
    const host = entry.trim().toLowerCase()
    if (!HOST_NAME.test(host) && isIP(host) !== 4) {
      issues.add(at, `must be a host name without port or leading dot, such as payroll.example.com (its rules hold on every port), got ${describe(entry)}`)
      continue
    }
    if (hosts.has(host)) {
      issues.add(at, `names the host ${describe(host)} a second time`)
      continue
    }
    hosts.set(host, { rules: ruleLists(issues, at, rules, { host }), bearer: bearerSection(issues, [...at, 'bearer'], rules.bearer, null) })
  }
  return hosts
}

/**
 * Browsers drop a `__Host-`/`__Secure-` cookie (prefixes matched in any case) set without Secure.
 * @see https://datatracker.ietf.org/doc/html/draft-ietf-httpbis-rfc6265bis#section-4.1.3
 */
function checkCookiePrefix (issues: Issues, cookieName: string, cookieSecure: boolean): void {
  const prefix = /^__(host|secure)-/i.exec(cookieName)?.[1]
  if (prefix === undefined || cookieSecure) return
  issues.add(['session', 'cookieName'], `a "${prefix.toLowerCase() === 'host' ? '__Host-' : '__Secure-'}" cookie name needs a Secure cookie, which browsers otherwise drop: use an https baseUrl or set session.cookieSecure: true`)
}

function validateSentinel (issues: Issues, raw: NonNullable<Sections['store']['sentinel']>): SentinelConfig {
  const at = (key: string): Path => ['store', 'sentinel', key]
  // A user without a password is never sent (AUTH needs both): the nodes would refuse the gateway.
  for (const [user, password] of [['username', 'password'], ['sentinelUsername', 'sentinelPassword']] as const) {
    if (raw[user] !== undefined && raw[password] === undefined && !issues.touched(at(password))) issues.add(at(password), `is required with ${user}`)
  }
  return {
    name: raw.name ?? '',
    nodes: raw.nodes ?? [],
    username: raw.username,
    password: raw.password,
    sentinelUsername: raw.sentinelUsername,
    sentinelPassword: raw.sentinelPassword,
    tls: raw.tls,
  }
}

function validateStore (issues: Issues, raw: Sections['store']): StoreConfig {
  const type = raw.type
  const storeUrl = url(issues, ['store', 'url'], raw.url, ['redis', 'rediss'])
  const cluster = raw.cluster?.flatMap((item, i) => {
    const checked = checkUrl(issues, ['store', 'cluster', i], item, ['redis', 'rediss'])
    return checked ? [checked] : []
  })
  const sentinel = raw.sentinel && validateSentinel(issues, raw.sentinel)
  const given = (['url', 'cluster', 'sentinel'] as const).filter((form) => raw[form] !== undefined || issues.touched(['store', form]))
  if (type === 'redis' && given.length > 1) issues.add(['store'], `give only one of url, cluster or sentinel (got ${given.join(' and ')})`)
  return {
    type,
    // Only type redis has one, so the schema only describes it (defaultText).
    url: type === 'redis' && given.length === 0 ? 'redis://127.0.0.1:6379/0' : storeUrl,
    cluster,
    sentinel,
    keyPrefix: raw.keyPrefix,
    timeoutMs: duration(issues, ['store', 'timeout'], raw.timeout, 50, 30_000),
    readiness: raw.readiness,
    // A Sentinel or Cluster form has replicas by design; a single URL may have none. true is one replica.
    waitForReplica: Number(raw.waitForReplica ?? (sentinel !== undefined || cluster !== undefined)),
  }
}

/** The documents discovery reads: OpenID Connect Discovery 1.0 and RFC 8414. */
const WELL_KNOWN = ['/.well-known/openid-configuration', '/.well-known/oauth-authorization-server']

/**
 * The issuer whose discovery document `url` is, when `url` is one: the suffix after the issuer
 * (OIDC), or inserted between host and path (RFC 8414 section 3). Its query is not part of it.
 */
function issuerOfDiscoveryUrl (url: string): string | undefined {
  const parsed = new URL(url)
  const origin = parsed.origin
  const pathname = parsed.pathname.replace(/\/+$/, '')
  for (const suffix of WELL_KNOWN) {
    if (pathname.endsWith(suffix)) return `${origin}${pathname.slice(0, -suffix.length)}`
    if (pathname.startsWith(`${suffix}/`)) return `${origin}${pathname.slice(suffix.length)}`
  }
  return undefined
}

const PRESET_HINT = `or set preset: ${PRESET_NAMES.join(', ')}`

/** The key path of one key of the provider or route being checked: `at('issuer')` is `providers.<name>.issuer`. */
type KeyPath = (key: string) => Path

function validateProvider (issues: Issues, name: string, raw: ProviderRaw, loopbackOnly: boolean): ProviderConfig {
  const path = ['providers', name]
  const at = (key: string): Path => [...path, key]
  if (!PROVIDER_NAME.test(name)) issues.add(path, 'a provider name may only use letters, digits, - and _')
  // A key that has a problem, or that a misspelt key next to it was meant to be, counts as given:
  // nothing that depends on it is reported.
  const given = (key: keyof ProviderRaw): boolean => raw[key] !== undefined || issues.touched(at(key))
  const issuer = url(issues, at('issuer'), raw.issuer, ['http', 'https'])
  const pasted = issuer === undefined ? undefined : issuerOfDiscoveryUrl(issuer)
  if (pasted !== undefined) issues.add(at('issuer'), 'is the URL of the discovery document, not the issuer', `use issuer: ${pasted}`)
  const scope = raw.scope ?? ''
  // A preset (even one with a problem, reported already) supplies the scope and the location.
  const preset = given('preset')
  if (!given('scope') && !preset) issues.add(at('scope'), 'is required', PRESET_HINT)
  const openid = scope.split(/\s+/).includes('openid')
  const { authorizeUrl, tokenUrl } = validateGrantEndpoints(issues, at, raw, given, preset, openid)
  const userinfoUrl = url(issues, at('userinfoUrl'), raw.userinfoUrl, ['http', 'https'])
  const shipped = raw.clientSecret === undefined ? undefined : shippedSecretProblem(raw.clientSecret, loopbackOnly)
  if (shipped !== undefined) issues.add(at('clientSecret'), shipped)
  const allowInsecure = raw.dangerouslyAllowInsecureHttp
  checkPlainHttpEndpoints(issues, name, at, { issuer, authorizeUrl, tokenUrl, userinfoUrl }, allowInsecure)
  return {
    name,
    clientId: raw.clientId ?? '',
    clientSecret: raw.clientSecret ?? '',
    authorizeUrl,
    tokenUrl,
    scope,
    openid,
    pkce: raw.pkce,
    issuer: issuer?.replace(/\/+$/, ''),
    userinfoUrl,
    claims: raw.claims,
    timeoutMs: duration(issues, at('timeout'), raw.timeout, 100, 120_000),
    dangerouslyAllowInsecureHttp: allowInsecure,
    ...(raw.preset !== undefined ? { preset: raw.preset } : {}),
    endSession: raw.endSession,
    // Filled in once the routes and hosts are known (keepNamedClaims).
    keptClaims: [],
  }
}

/**
 * A provider's authorization and token endpoints. With an issuer, discovery fills in missing
 * endpoints; without one both URLs are needed, and an openid scope needs the issuer anyway.
 */
function validateGrantEndpoints (
  issues: Issues, at: KeyPath, raw: ProviderRaw, given: (key: keyof ProviderRaw) => boolean, preset: boolean, openid: boolean
): { authorizeUrl: string | undefined, tokenUrl: string | undefined } {
  for (const key of ['authorizeUrl', 'tokenUrl'] as const) {
    if (!given(key) && !given('issuer') && !preset) issues.add(at(key), 'is required without issuer', PRESET_HINT)
  }
  const authorizeUrl = url(issues, at('authorizeUrl'), raw.authorizeUrl, ['http', 'https'])
  const tokenUrl = url(issues, at('tokenUrl'), raw.tokenUrl, ['http', 'https'])
  if (openid && !given('issuer') && given('authorizeUrl') && !preset) {
    issues.add(at('issuer'), 'is required when the scope includes openid (ID tokens are checked against the issuer and its keys)')
  }
  return { authorizeUrl, tokenUrl }
}

/** Each endpoint on plain http to a host that is not loopback, unless dangerouslyAllowInsecureHttp. */
function checkPlainHttpEndpoints (
  issues: Issues, name: string, at: KeyPath, endpoints: Record<string, string | undefined>, allowInsecure: boolean | undefined
): void {
  for (const [key, endpoint] of Object.entries(endpoints)) {
    const host = endpoint === undefined || allowInsecure ? undefined : plainHttpHost(endpoint)
    if (host !== undefined) issues.add(at(key), plainHttpProblem(host, name))
  }
}

const HTTP_METHODS = ['*', 'GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS']

function validatePublic (issues: Issues, path: Path, raw: string[]): PublicRule[] {
  return raw.flatMap((entry, i) => {
    const rule = entry.trim()
    const [method = '', glob = '', extra] = rule.split(/\s+/)
    if (!HTTP_METHODS.includes(method.toUpperCase()) || (glob !== '*' && !glob.startsWith('/')) || extra !== undefined) {
      issues.add([...path, i], `must be "METHOD /path/glob" such as "GET /app/static/*" or "OPTIONS *", got ${describe(rule)}`)
      return []
    }
    const problem = globProblem(glob)
    if (problem !== undefined) issues.add([...path, i], `${problem}, got ${describe(glob)}`)
    return [{ method: method.toUpperCase(), path: glob }]
  })
}

function validateRoute (issues: Issues, index: number, raw: RouteRaw, providers: string[]): RouteConfig {
  const path = ['routes', index]
  const at = (key: string): Path => [...path, key]
  const prefix = validateRoutePath(issues, at, raw.path)
  const auth = raw.auth
  const provider = raw.provider
  checkRouteProvider(issues, at, auth, provider, providers)
  const rewritePrefix = raw.rewritePrefix
  if (rewritePrefix !== undefined && !rewritePrefix.startsWith('/')) issues.add(at('rewritePrefix'), `must start with /, got ${describe(rewritePrefix)}`)
  const upstream = validateUpstream(issues, at, raw.upstream)
  const assertion = raw.assertion
  if (assertion && auth === 'none') issues.add(at('assertion'), 'needs auth: required (a route without a session has nobody to vouch for)')
  if (raw.bearer !== undefined && auth === 'none') issues.add(at('bearer'), 'needs auth: required (a public route checks no token)')
  return {
    path: prefix,
    upstream: upstream ?? 'http://invalid',
    provider,
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
    bearer: bearerSection(issues, at('bearer'), raw.bearer, provider),
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
  // Sent space-separated in acr_values and quoted in a WWW-Authenticate challenge.
  acr.forEach((value, i) => {
    if (!/^[\x21\x23-\x5b\x5d-\x7e]+$/.test(value)) issues.add([...at, 'acr', i], `must be printable ASCII without spaces, quotes or backslashes, got ${describe(value)}`)
  })
  return { maxAgeMs: duration(issues, [...at, 'maxAge'], raw.maxAge, 60_000, 30 * DAY), acr }
}

/** `reauth:` judges the ID token's `auth_time` and `acr`: the route's provider must sign in with OpenID Connect. */
function checkReauthProvider (issues: Issues, at: Path, route: RouteConfig, providers: Record<string, ProviderConfig>): void {
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

/** A route's path prefix, without trailing slashes ("/" when missing or invalid), clear of the gateway's own endpoints. */
function validateRoutePath (issues: Issues, at: KeyPath, raw: string | undefined): string {
  let prefix = raw ?? '/'
  if (raw !== undefined && (!prefix.startsWith('/') || /[*?#:\s]/.test(prefix))) {
    issues.add(at('path'), `must be a path prefix such as /app/, got ${describe(prefix)}`)
    prefix = '/'
  }
  prefix = prefix.length > 1 ? prefix.replace(/\/+$/, '') : prefix
  if (RESERVED_PATHS.some((reserved) => prefix === reserved || prefix.startsWith(`${reserved}/`))) {
    issues.add(at('path'), `must not overlap the gateway's own ${prefix.startsWith('/oauth') ? '/oauth/' : prefix} endpoint`)
  }
  return prefix
}

/** A route's provider: required with auth: required, and one of the configured providers. */
function checkRouteProvider (issues: Issues, at: KeyPath, auth: RouteRaw['auth'], provider: string | undefined, providers: string[]): void {
  if (auth === 'required' && provider === undefined && !issues.touched(at('provider')) && !issues.touched(at('auth'))) {
    issues.add(at('provider'), 'is required when auth is required', providers.length > 0 ? `known: ${providers.join(', ')}` : undefined)
  }
  if (provider !== undefined && !providers.includes(provider) && !issues.touched(['providers', provider]) && !issues.assumed(['providers', provider])) {
    const match = closest(provider, providers)
    issues.add(at('provider'), 'names no configured provider', match !== undefined ? `did you mean \`${match}\`?` : `known: ${providers.join(', ') || 'none'}`)
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

/** Headers an assertion may not be named after: the gateway already sets them, or HTTP gives them a meaning. */
const GATEWAY_SET_HEADERS = ['authorization', 'cookie', 'host', 'forwarded', 'x-real-ip']

/** The top-level `assertion` section; enabled when written in the file or when a route asks for it. */
function validateAssertion (issues: Issues, section: Sections['assertion'], written: boolean, routes: RouteConfig[]): AssertionConfig {
  const header = section.header
  const lower = header.toLowerCase()
  const problem = filledHeaderProblem(header, true)
  if (problem !== undefined) issues.add(['assertion', 'header'], problem)
  return {
    enabled: written || routes.some((route) => route.assertion),
    header: lower,
    ttlMs: duration(issues, ['assertion', 'ttl'], section.ttl, 5000, 600_000),
    rotateEveryMs: duration(issues, ['assertion', 'rotateEvery'], section.rotateEvery, 3_600_000, 90 * DAY),
  }
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

const HEADER_NAME = /^[A-Za-z0-9!#$%&'*+\-.^_`|~]+$/
/**
 * A header the gateway fills with who the user is: letters, digits and `-` only. CGI, WSGI and PHP
 * read `_` and `.` as `-`, so a client's `X-App-User` would reach such an application as the same
 * variable as a configured `X_App_User` (the gateway drops a client's other spellings of `-` names).
 */
const IDENTITY_HEADER_NAME = /^[A-Za-z0-9-]+$/
const IDENTITY_HEADER_PROBLEM = 'may hold only letters, digits and "-": CGI, WSGI and PHP read "_" and "." as "-", so a client could send the same header in another spelling'

/**
 * Why a header the gateway fills (an identity, claim or assertion header) may not have this name, or
 * undefined: not a header name, a spelling CGI reads as another, a header HTTP gives a meaning, and
 * (`gatewaySet`) one the gateway sets itself (identity headers are X-Forwarded-* by default).
 */
function filledHeaderProblem (name: string, gatewaySet: boolean): string | undefined {
  const lower = name.toLowerCase()
  if (!HEADER_NAME.test(name)) return `must be a header name, got ${describe(name)}`
  if (!IDENTITY_HEADER_NAME.test(name)) return `${IDENTITY_HEADER_PROBLEM}, got ${describe(name)}`
  if (gatewaySet && (GATEWAY_SET_HEADERS.includes(lower) || lower.startsWith('x-forwarded-'))) {
    return `must not be a header the gateway sets itself (${lower}), got ${describe(name)}`
  }
  return reservedHeaderProblem(name)
}

function validateIdentityHeaders (issues: Issues, path: Path, raw: RouteRaw['identityHeaders']): IdentityHeaders {
  const header = (key: keyof IdentityHeaders) => {
    const name = raw[key]
    const problem = filledHeaderProblem(name, false)
    if (problem !== undefined) issues.add([...path, key], problem)
    return name.toLowerCase()
  }
  return { user: header('user'), email: header('email'), groups: header('groups') }
}

/**
 * A route's `headers`: `Name: claims.<path>`. Names as identity headers' (letters, digits and `-`,
 * none HTTP gives a meaning to, not the route's identity or assertion headers), lower case.
 */
function validateClaimHeaders (issues: Issues, path: Path, raw: Record<string, string>): ClaimHeader[] {
  const seen = new Set<string>()
  return Object.entries(raw).flatMap(([name, source]) => {
    const at = [...path, name]
    const lower = name.toLowerCase()
    if (seen.has(lower)) {
      issues.add(at, `names the header ${lower} a second time (header names are the same in any case)`)
      return []
    }
    seen.add(lower)
    const problem = filledHeaderProblem(name, true)
    if (problem !== undefined) {
      issues.add(at, problem)
      return []
    }
    const claim = source.trim().startsWith('claims.') ? source.trim().slice('claims.'.length) : undefined
    if (claim === undefined || !CLAIM_PATH.test(claim)) {
      issues.add(at, `must be claims.<path>, such as claims.realm_access.roles or claims.tid, got ${describe(source)}`)
      return []
    }
    return [{ name: name.toLowerCase(), claim }]
  })
}

const WILDCARD_HOSTS = ['0.0.0.0', '::']

/** `metrics.listen`: "host:port" (IPv6 in brackets), on another address than the public port. */
function validateMetrics (issues: Issues, raw: Sections['metrics'], server: ServerConfig): MetricsConfig {
  const text = raw.listen?.trim()
  if (text === undefined || text === '') return { listen: undefined }
  const match = /^(\[[0-9A-Fa-f:.]+\]|[^\s:[\]/]+):(\d{1,5})$/.exec(text)
  const host = match?.[1]?.replace(/^\[(.*)\]$/, '$1') ?? ''
  const port = Number(match?.[2])
  if (!match || port < 1 || port > 65535 || (match[1]!.startsWith('[') && isIP(host) !== 6)) {
    issues.add(['metrics', 'listen'], `must be "host:port" such as 127.0.0.1:9090 or [::1]:9090, got ${describe(text)}`)
    return { listen: undefined }
  }
  if (port === server.port && (host === server.host || WILDCARD_HOSTS.includes(host) || WILDCARD_HOSTS.includes(server.host))) {
    issues.add(['metrics', 'listen'], `is the gateway's own address (server.host and server.port); give /metrics another port, such as ${host.includes(':') ? `[${host}]` : host}:9090`)
  }
  return { listen: { host, port } }
}

/**
 * `tracing.otlp`: an http(s) URL without credentials (they would reach logs; the exporter reads
 * OTEL_EXPORTER_OTLP_HEADERS for a token), query or fragment.
 */
function validateTracing (issues: Issues, raw: Sections['tracing']): TracingConfig {
  const settings = { otlp: undefined, serviceName: raw.serviceName.trim(), sampleRatio: raw.sampleRatio }
  const text = raw.otlp?.trim()
  if (text === undefined || text === '') return settings
  const at = ['tracing', 'otlp']
  if (checkUrl(issues, at, text, ['http', 'https']) === undefined) return settings
  const url = new URL(text)
  if (url.username !== '' || url.password !== '') {
    issues.add(at, `must not carry a user name or password (they would be logged), got ${describe(text)}`, 'give the collector\'s token in OTEL_EXPORTER_OTLP_HEADERS, such as Authorization=Bearer%20<token>')
    return settings
  }
  if (url.search !== '' || url.hash !== '') {
    issues.add(at, `must have no query or fragment, got ${describe(text)}`)
    return settings
  }
  return { ...settings, otlp: text.replace(/\/+$/, '') }
}

const RATE_WINDOWS: Record<string, number> = { s: 1000, sec: 1000, second: 1000, min: 60_000, minute: 60_000, h: 3_600_000, hour: 3_600_000 }

/** `600/min`, `10/s`, `5000/h`, or `off` (the schema has checked the form). */
function validateRateLimit (raw: Sections['rateLimit']): RateLimitConfig {
  const value = raw.login
  if (value === false || value.trim() === 'off') return { login: undefined }
  // RATE_PATTERN (schema.ts) has let through only `N/unit` with a unit of RATE_WINDOWS.
  const [max, unit] = value.replace(/\s+/g, '').split('/') as [string, string]
  return { login: { max: Number(max), windowMs: RATE_WINDOWS[unit]! } satisfies RateBudget }
}

/**
 * A less protected route that reaches every upstream path of a protected one is refused at the
 * less protected route's path (partial reach is a warning, see safety.ts's configWarnings).
 */
function refuseReachingRoutes (issues: Issues, routes: readonly RouteConfig[]): void {
  routes.forEach((other, i) => {
    routes.forEach((target, j) => {
      if (i === j || !lessProtected(other, target) || upstreamReach(other, target) !== 'all') return
      if (issues.touched(['routes', i]) || issues.touched(['routes', j])) return
      issues.add(['routes', i, 'path'], reachMessage(routes, i, j, 'all'))
    })
  })
}

/** The placeholder deploy/kubernetes/base/secrets.env ships for every value an operator must set. */
export const PLACEHOLDER = 'REPLACE-ME'

/**
 * Reports each value that still holds the placeholder, and removes it, so that nothing is reported
 * a second time about the same value (its length, its form).
 */
function refusePlaceholders (issues: Issues, node: Record<string, unknown> | unknown[], path: Path): void {
  for (const [key, value] of Object.entries(node)) {
    const at: Path = [...path, Array.isArray(node) ? Number(key) : key]
    if (typeof value === 'string' && value.includes(PLACEHOLDER)) {
      issues.add(at, `still holds the placeholder ${PLACEHOLDER}: set the real value (see docs/deployment.md, "Secrets")`)
      if (!Array.isArray(node)) delete node[key]
    } else if (isObject(value) || Array.isArray(value)) {
      refusePlaceholders(issues, value, at)
    }
  }
}

/**
 * Each provider keeps, in its sessions, the claims that some rule or header mapping may read: the
 * rules and headers of its routes, and the rules of every forward-auth host (any provider's session
 * may be judged there).
 */
function keepNamedClaims (providers: Record<string, ProviderConfig>, routes: readonly RouteConfig[], forwardAuth: ForwardAuthConfig): void {
  const hosts = [...forwardAuth.hosts.values()].flatMap(claimPaths)
  for (const provider of Object.values(providers)) {
    const named = routes.filter((route) => route.provider === provider.name)
      .flatMap((route) => [...claimPaths(route.rules), ...route.headers.map((header) => header.claim)])
    provider.keptClaims = [...new Set([...named, ...hosts])].sort()
  }
}

/**
 * What a route without a session cannot use (rules judge nobody, there are no claims to send), and
 * claim headers named as one of its identity headers or the assertion header (two values for one name).
 */
function refuseHeaderClashes (issues: Issues, routes: readonly RouteConfig[], assertionHeader: string): void {
  routes.forEach((route, i) => {
    if (route.auth === 'none') {
      for (const key of ['allow', 'deny'] as const) {
        if (key === 'allow' ? route.rules.allow !== undefined : route.rules.deny.length > 0) {
          issues.add(['routes', i, key], 'needs auth: required (a route without a session has nobody to judge: its requests pass before any rule)')
        }
      }
    }
    if (route.auth === 'none' && route.headers.length > 0) {
      issues.add(['routes', i, 'headers'], 'needs auth: required (a route without a session has no claims to send)')
      return
    }
    for (const header of route.headers) {
      if (Object.values(route.identityHeaders).includes(header.name) || header.name === assertionHeader) {
        issues.add(['routes', i, 'headers'], `names ${header.name}, which is one of this route's identity headers or the assertion header: give the claim another header`)
      }
    }
  })
}

/**
 * Validates a parsed (and substituted) config: the schema pass, presets, defaults, then the rules
 * above. Returns the resolved config; the problems are in `issues`.
 */
export function validate (issues: Issues, plain: unknown): GatewayConfig {
  const checked = checkSchema(issues, plain)
  refusePlaceholders(issues, checked, [])
  // Presets fill what a provider entry leaves out, before the schema's defaults do.
  if (isObject(checked.providers)) {
    for (const [name, entry] of Object.entries(checked.providers)) {
      if (!isObject(entry)) continue
      const { provider, problems } = applyPreset(entry as ProviderYaml)
      for (const [key, message] of problems) issues.add(['providers', name, key], message)
      checked.providers[name] = provider
    }
  }
  // Written by the operator, not filled in by the schema's defaults: it turns the assertions on.
  const assertionWritten = checked.assertion !== undefined
  const raw = withDefaults(checked)
  const server = validateServer(issues, raw.server)

  const providers: Record<string, ProviderConfig> = {}
  for (const [name, entry] of Object.entries(raw.providers ?? {})) providers[name] = validateProvider(issues, name, entry, isLoopbackHost(new URL(server.baseUrl).hostname))

  const routes: RouteConfig[] = []
  const names = Object.keys(raw.providers ?? {})
  ;(raw.routes ?? []).forEach((entry, i) => {
    if (!isObject(entry)) return
    const route = validateRoute(issues, i, entry, names)
    if (routes.some((other) => other.path === route.path) && entry.path !== undefined) {
      issues.add(['routes', i, 'path'], `duplicates another route's path ${describe(route.path)}`)
    }
    routes.push(route)
  })
  refuseReachingRoutes(issues, routes)

  const store = validateStore(issues, raw.store)
  if (store.type === 'memory' && server.workers > 1 && !issues.touched(['store', 'type'])) {
    issues.add(['server', 'workers'], 'several workers need a shared store: set store.type to redis (the memory store lives in one process)')
  }
  const forwardAuth = validateForwardAuth(issues, raw.forwardAuth)
  const assertion = validateAssertion(issues, raw.assertion, assertionWritten, routes)
  refuseHeaderClashes(issues, routes, assertion.header)
  keepNamedClaims(providers, routes, forwardAuth)
  routes.forEach((route, i) => { if (route.bearer !== undefined) checkBearerIssuers(issues, ['routes', i, 'bearer'], route.bearer, providers) })
  routes.forEach((route, i) => { checkReauthProvider(issues, ['routes', i, 'reauth'], route, providers) })
  for (const [host, bearer] of forwardAuth.bearer) checkBearerIssuers(issues, ['forwardAuth', 'hosts', host, 'bearer'], bearer, providers)
  return {
    server,
    session: validateSession(issues, raw.session, server.baseUrl, issues.touched(['server', 'baseUrl'])),
    store,
    state: { ttlMs: duration(issues, ['state', 'ttl'], raw.state.ttl, 10_000, 3_600_000) },
    providers,
    routes,
    metrics: validateMetrics(issues, raw.metrics, server),
    rateLimit: validateRateLimit(raw.rateLimit),
    assertion,
    tracing: validateTracing(issues, raw.tracing),
    forwardAuth,
  }
}
