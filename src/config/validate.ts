// gateway.yaml's schema: defaults, ranges and cross-checks for each section, built on the readers
// of config-reader.ts. `validate` returns the typed config; the problems are in `issues`.
import { isIP } from 'node:net'
import { availableParallelism } from 'node:os'
import type { AllowRules, AssertionConfig, ClaimsMapping, ForwardAuthConfig, GatewayConfig, IdentityHeaders, MetricsConfig, ProviderConfig, PublicRule, RateBudget, RateLimitConfig, RouteConfig, ServerConfig, SessionConfig, StoreConfig } from './config.js'
import { Issues, Section, checkUrl, describe, isObject, type Path } from './reader.js'
import { plainHttpHost, plainHttpProblem, secretProblem } from './safety.js'

const COOKIE_NAME = /^[A-Za-z0-9!#$%&'*+\-.^_`|~]+$/
const PROVIDER_NAME = /^[A-Za-z0-9_-]+$/
const RESERVED_PATHS = ['/oauth', '/healthz', '/readyz', '/metrics']
const DAY = 86_400_000

/** proxy-addr's names for address groups, accepted besides addresses and CIDR ranges. */
const PROXY_GROUPS = ['loopback', 'linklocal', 'uniquelocal']

function isAddressOrRange (entry: string): boolean {
  if (PROXY_GROUPS.includes(entry)) return true
  const [address = '', bits, extra] = entry.split('/')
  const version = isIP(address)
  if (version === 0 || extra !== undefined) return false
  return bits === undefined || (/^\d{1,3}$/.test(bits) && Number(bits) <= (version === 4 ? 32 : 128))
}

/** true, false, or a list (or comma-separated string, for ${VAR}) of addresses and CIDR ranges. */
function validateTrustProxy (issues: Issues, value: unknown): boolean | string[] {
  const path = ['server', 'trustProxy']
  if (value === undefined || value === null) return false
  if (typeof value === 'boolean') return value
  if (value === 'true' || value === 'false') return value === 'true'
  const list: unknown = typeof value === 'string' ? value.split(',').map((entry) => entry.trim()).filter(Boolean) : value
  if (!Array.isArray(list)) {
    issues.add(path, `must be true, false or a list of addresses and CIDR ranges such as ["127.0.0.1", "10.0.0.0/8"], got ${describe(value)}`)
    return false
  }
  const trusted = list.flatMap((entry: unknown, i) => {
    if (typeof entry === 'string' && isAddressOrRange(entry.trim())) return [entry.trim()]
    issues.add([...path, i], `must be an IP address or CIDR range such as 10.0.0.0/8 (or loopback, linklocal, uniquelocal), got ${describe(entry)}`)
    return []
  })
  return trusted.length > 0 ? trusted : false
}

function validateServer (issues: Issues, raw: unknown): ServerConfig {
  const s = Section.open(issues, ['server'], raw, ['host', 'port', 'baseUrl', 'trustProxy', 'shutdownTimeout', 'workers'])
  const port = s.integer('port', 8080, 0, 65535)
  const baseUrl = s.url('baseUrl', ['http', 'https'], { default: `http://localhost:${port}` }) ?? `http://localhost:${port}`
  if (s.has('baseUrl') && /[?#]/.test(baseUrl)) issues.add(['server', 'baseUrl'], 'must not have a query or fragment')
  return {
    host: s.string('host', { default: '0.0.0.0', nonEmpty: true })!,
    port,
    baseUrl: baseUrl.replace(/\/+$/, ''),
    trustProxy: validateTrustProxy(issues, s.value.trustProxy),
    shutdownTimeoutMs: s.duration('shutdownTimeout', '10s', 0, 300_000),
    workers: s.value.workers === 'auto' ? availableParallelism() : s.integer('workers', 1, 1, 64),
  }
}

function validateSession (issues: Issues, raw: unknown, baseUrl: string): SessionConfig {
  const s = Section.open(issues, ['session'], raw, ['cookieName', 'secret', 'ttl', 'cookieSecure', 'cacheTtl', 'cookieDomain'])
  const cookieName = s.string('cookieName', { default: 'gw_session' })!
  if (!COOKIE_NAME.test(cookieName)) issues.add(['session', 'cookieName'], `must be a cookie name (letters, digits, - and _), got ${describe(cookieName)}`)
  const secret = s.string('secret')
  const weakness = secret ? secretProblem(secret) : undefined
  if (weakness) issues.add(['session', 'secret'], weakness)
  let cookieSecure: boolean
  if (typeof s.value.cookieSecure === 'boolean') {
    cookieSecure = s.value.cookieSecure
  } else {
    const secure = s.oneOf('cookieSecure', ['auto', 'true', 'false'], 'auto')
    cookieSecure = secure === 'auto' ? baseUrl.startsWith('https:') : secure === 'true'
  }
  if (!cookieSecure && baseUrl.startsWith('https:')) {
    issues.add(['session', 'cookieSecure'], 'is false while server.baseUrl is https: browsers would also send the session cookie over plain http; ' +
      'remove it (auto sets Secure for an https baseUrl) or set it to true')
  }
  checkCookiePrefix(issues, cookieName, cookieSecure)
  return {
    cookieName,
    secret: secret || undefined,
    ttlMs: s.duration('ttl', '8h', 60_000, 30 * DAY),
    cookieSecure,
    cacheTtlMs: s.duration('cacheTtl', '1s', 0, 10_000),
    cookieDomain: validateCookieDomain(issues, s.string('cookieDomain'), cookieName, baseUrl),
  }
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

function validateForwardAuth (issues: Issues, raw: unknown): ForwardAuthConfig {
  const s = Section.open(issues, ['forwardAuth'], raw, ['allowedRedirectHosts'])
  const path = ['forwardAuth', 'allowedRedirectHosts']
  const allowedRedirectHosts = stringList(issues, path, s.value.allowedRedirectHosts).flatMap((entry, i) => {
    const lower = entry.toLowerCase()
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
    return [lower]
  })
  return { allowedRedirectHosts }
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

function validateStore (issues: Issues, raw: unknown): StoreConfig {
  const s = Section.open(issues, ['store'], raw, ['type', 'url', 'cluster', 'sentinel', 'keyPrefix', 'readiness'])
  const type = s.oneOf('type', ['redis', 'memory'], 'memory')
  const url = s.url('url', ['redis', 'rediss'])
  let cluster: string[] | undefined
  if (s.has('cluster')) {
    const list = s.value.cluster
    if (!Array.isArray(list) || list.length === 0) {
      issues.add(['store', 'cluster'], 'must be a non-empty list of redis:// URLs')
    } else {
      cluster = list.flatMap((item, i) => {
        const checked = typeof item === 'string' ? checkUrl(issues, ['store', 'cluster', i], item, ['redis', 'rediss']) : undefined
        if (typeof item !== 'string') issues.add(['store', 'cluster', i], `must be a redis:// URL, got ${describe(item)}`)
        return checked ? [checked] : []
      })
    }
  }
  let sentinel: StoreConfig['sentinel']
  if (s.has('sentinel')) {
    const sec = Section.open(issues, ['store', 'sentinel'], s.value.sentinel, ['name', 'nodes'])
    const name = sec.string('name', { required: true, nonEmpty: true }) ?? ''
    const nodes = sec.value.nodes
    if (!Array.isArray(nodes) || nodes.length === 0 || !nodes.every((n) => typeof n === 'string' && /^[^\s:]+:\d+$/.test(n))) {
      issues.add(['store', 'sentinel', 'nodes'], 'must be a non-empty list of "host:port" strings')
    }
    sentinel = { name, nodes: Array.isArray(nodes) ? nodes.map(String) : [] }
  }
  const forms = [url, cluster, sentinel].filter((form) => form !== undefined).length
  if (type === 'redis' && forms > 1) issues.add(['store'], 'give only one of url, cluster or sentinel')
  return {
    type,
    url: type === 'redis' && forms === 0 ? 'redis://127.0.0.1:6379/0' : url,
    cluster,
    sentinel,
    keyPrefix: s.string('keyPrefix', { default: 'gw:' })!,
    readiness: s.oneOf('readiness', ['required', 'ignored'], 'required'),
  }
}

const CLAIM_DEFAULTS: ClaimsMapping = { user: 'sub', email: 'email', name: 'name', groups: 'groups' }

function validateProvider (issues: Issues, name: string, raw: unknown): ProviderConfig {
  const path = ['providers', name]
  if (!PROVIDER_NAME.test(name)) issues.add(path, 'a provider name may only use letters, digits, - and _')
  const s = Section.open(issues, path, raw, ['clientId', 'clientSecret', 'authorizeUrl', 'tokenUrl', 'scope', 'pkce', 'issuer', 'userinfoUrl', 'claims', 'timeout', 'dangerouslyAllowInsecureHttp', 'endSession'])
  const issuer = s.url('issuer', ['http', 'https'])
  const scope = s.string('scope', { required: true }) ?? ''
  const openid = scope.split(/\s+/).includes('openid')
  // With an issuer, discovery fills in missing endpoints; without one both URLs are needed.
  const authorizeUrl = s.url('authorizeUrl', ['http', 'https'], { required: issuer === undefined })
  const tokenUrl = s.url('tokenUrl', ['http', 'https'], { required: issuer === undefined })
  if (openid && issuer === undefined && s.has('authorizeUrl')) {
    issues.add([...path, 'issuer'], 'is required when the scope includes openid (ID tokens are checked against the issuer and its keys)')
  }
  const userinfoUrl = s.url('userinfoUrl', ['http', 'https'])
  const allowInsecure = s.boolean('dangerouslyAllowInsecureHttp', false)
  const endpoints = { issuer, authorizeUrl, tokenUrl, userinfoUrl }
  for (const [key, url] of Object.entries(endpoints)) {
    const host = url === undefined || allowInsecure ? undefined : plainHttpHost(url)
    if (host !== undefined) issues.add([...path, key], plainHttpProblem(host, name))
  }
  const claims = Section.open(issues, [...path, 'claims'], s.value.claims, Object.keys(CLAIM_DEFAULTS))
  return {
    name,
    clientId: s.string('clientId', { required: true, nonEmpty: true }) ?? '',
    clientSecret: s.string('clientSecret', { required: true, nonEmpty: true }) ?? '',
    authorizeUrl,
    tokenUrl,
    scope,
    openid,
    pkce: s.boolean('pkce', true),
    issuer: issuer?.replace(/\/+$/, ''),
    userinfoUrl,
    claims: {
      user: claims.string('user', { default: CLAIM_DEFAULTS.user, nonEmpty: true })!,
      email: claims.string('email', { default: CLAIM_DEFAULTS.email, nonEmpty: true })!,
      name: claims.string('name', { default: CLAIM_DEFAULTS.name, nonEmpty: true })!,
      groups: claims.string('groups', { default: CLAIM_DEFAULTS.groups, nonEmpty: true })!,
    },
    timeoutMs: s.duration('timeout', '10s', 100, 120_000),
    dangerouslyAllowInsecureHttp: allowInsecure,
    endSession: s.boolean('endSession', true),
  }
}

function stringList (issues: Issues, path: Path, value: unknown): string[] {
  if (value === undefined || value === null) return []
  if (!Array.isArray(value) || !value.every((item) => typeof item === 'string' && item.trim() !== '')) {
    issues.add(path, `must be a list of strings, got ${describe(value)}`)
    return []
  }
  return value.map((item: string) => item.trim())
}

function validateAllow (issues: Issues, path: Path, raw: unknown): AllowRules | undefined {
  if (raw === undefined || raw === null) return undefined
  const s = Section.open(issues, path, raw, ['emails', 'domains', 'groups'])
  const rules = {
    emails: stringList(issues, [...path, 'emails'], s.value.emails).map((e) => e.toLowerCase()),
    domains: stringList(issues, [...path, 'domains'], s.value.domains).map((d) => d.toLowerCase().replace(/^@/, '')),
    groups: stringList(issues, [...path, 'groups'], s.value.groups),
  }
  if (rules.emails.length + rules.domains.length + rules.groups.length === 0) {
    issues.add(path, 'allows nobody: give emails, domains or groups (or remove allow to let any signed-in user in)')
  }
  return rules
}

const HTTP_METHODS = ['*', 'GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS']

function validatePublic (issues: Issues, path: Path, raw: unknown): PublicRule[] {
  return stringList(issues, path, raw).flatMap((rule, i) => {
    const [method = '', glob = '', extra] = rule.split(/\s+/)
    if (!HTTP_METHODS.includes(method.toUpperCase()) || (glob !== '*' && !glob.startsWith('/')) || extra !== undefined) {
      issues.add([...path, i], `must be "METHOD /path/glob" such as "GET /app/static/*" or "OPTIONS *", got ${describe(rule)}`)
      return []
    }
    return [{ method: method.toUpperCase(), path: glob }]
  })
}

function validateRoute (issues: Issues, index: number, raw: unknown, providers: Record<string, unknown>): RouteConfig {
  const path = ['routes', index]
  const s = Section.open(issues, path, raw, ['path', 'upstream', 'provider', 'rewritePrefix', 'timeout', 'maxConnections', 'auth', 'websocket', 'allow', 'public', 'identityHeaders', 'allowedOrigins', 'assertion'])
  let prefix = s.string('path', { required: true }) ?? '/'
  if (!prefix.startsWith('/') || /[*?#:\s]/.test(prefix)) {
    issues.add([...path, 'path'], `must be a path prefix such as /app/, got ${describe(prefix)}`)
    prefix = '/'
  }
  prefix = prefix.length > 1 ? prefix.replace(/\/+$/, '') : prefix
  if (RESERVED_PATHS.some((reserved) => prefix === reserved || prefix.startsWith(`${reserved}/`))) {
    issues.add([...path, 'path'], `must not overlap the gateway's own ${prefix.startsWith('/oauth') ? '/oauth/' : prefix} endpoint`)
  }
  const auth = s.oneOf('auth', ['required', 'none'], 'required')
  const provider = s.string('provider')
  if (auth === 'required' && provider === undefined) issues.add([...path, 'provider'], 'is required when auth is required')
  if (provider !== undefined && !Object.hasOwn(providers, provider)) {
    issues.add([...path, 'provider'], `names no configured provider (known: ${Object.keys(providers).join(', ') || 'none'})`)
  }
  const rewritePrefix = s.string('rewritePrefix')
  if (rewritePrefix !== undefined && !rewritePrefix.startsWith('/')) issues.add([...path, 'rewritePrefix'], `must start with /, got ${describe(rewritePrefix)}`)
  const upstream = s.url('upstream', ['http', 'https'], { required: true })
  if (upstream !== undefined && (new URL(upstream).pathname !== '/' || /[?#]/.test(upstream))) {
    issues.add([...path, 'upstream'], `must be an origin such as http://127.0.0.1:9100 (map paths with rewritePrefix), got ${describe(upstream)}`)
  }
  return {
    path: prefix,
    upstream: upstream ?? 'http://invalid',
    provider,
    rewritePrefix,
    timeoutMs: s.duration('timeout', '30s', 100, DAY),
    maxConnections: s.integer('maxConnections', 128, 1, 10_000),
    auth,
    websocket: s.boolean('websocket', false),
    allow: validateAllow(issues, [...path, 'allow'], s.value.allow),
    public: validatePublic(issues, [...path, 'public'], s.value.public),
    identityHeaders: validateIdentityHeaders(issues, [...path, 'identityHeaders'], s.value.identityHeaders),
    allowedOrigins: validateOrigins(issues, [...path, 'allowedOrigins'], s.value.allowedOrigins),
    assertion: validateRouteAssertion(s, auth),
  }
}

function validateRouteAssertion (s: Section, auth: RouteConfig['auth']): boolean {
  const assertion = s.boolean('assertion', false)
  if (assertion && auth === 'none') s.issues.add([...s.path, 'assertion'], 'needs auth: required (a route without a session has nobody to vouch for)')
  return assertion
}

/** Headers an assertion may not be named after: the gateway already sets them, or HTTP gives them a meaning. */
const GATEWAY_SET_HEADERS = ['authorization', 'cookie', 'host', 'forwarded', 'x-real-ip']

/** The top-level `assertion` section; enabled when present or when a route asks for it. */
function validateAssertion (issues: Issues, raw: unknown, routes: RouteConfig[]): AssertionConfig {
  const s = Section.open(issues, ['assertion'], raw, ['header', 'ttl', 'rotateEvery'])
  const header = s.string('header', { default: 'X-Gateway-Assertion' })!
  const lower = header.toLowerCase()
  if (!HEADER_NAME.test(header)) {
    issues.add(['assertion', 'header'], `must be a header name, got ${describe(header)}`)
  } else if (GATEWAY_SET_HEADERS.includes(lower) || lower.startsWith('x-forwarded-')) {
    issues.add(['assertion', 'header'], `must not be a header the gateway sets itself (${lower}), got ${describe(header)}`)
  }
  return {
    enabled: (raw !== undefined && raw !== null) || routes.some((route) => route.assertion),
    header: lower,
    ttlMs: s.duration('ttl', '60s', 5000, 600_000),
    rotateEveryMs: s.duration('rotateEvery', '24h', 3_600_000, 90 * DAY),
  }
}

/** Origins a websocket route accepts besides the gateway's own: `scheme://host[:port]`, nothing more. */
function validateOrigins (issues: Issues, path: Path, raw: unknown): string[] {
  return stringList(issues, path, raw).flatMap((origin, i) => {
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

function validateIdentityHeaders (issues: Issues, path: Path, raw: unknown): IdentityHeaders {
  const s = Section.open(issues, path, raw, ['user', 'email', 'groups'])
  const header = (key: keyof IdentityHeaders, fallback: string) => {
    const name = s.string(key, { default: fallback })!
    if (!HEADER_NAME.test(name)) issues.add([...path, key], `must be a header name, got ${describe(name)}`)
    return name.toLowerCase()
  }
  return { user: header('user', 'X-Forwarded-User'), email: header('email', 'X-Forwarded-Email'), groups: header('groups', 'X-Forwarded-Groups') }
}

const WILDCARD_HOSTS = ['0.0.0.0', '::']

/** `metrics.listen`: "host:port" (IPv6 in brackets), on another address than the public port. */
function validateMetrics (issues: Issues, raw: unknown, server: ServerConfig): MetricsConfig {
  const s = Section.open(issues, ['metrics'], raw, ['listen'])
  const text = s.string('listen')?.trim()
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

const RATE_WINDOWS: Record<string, number> = { s: 1000, sec: 1000, second: 1000, min: 60_000, minute: 60_000, h: 3_600_000, hour: 3_600_000 }

/** `600/min`, `10/s`, `5000/h`, or `off` (YAML 1.1's `off` may arrive as false). */
function rateBudget (issues: Issues, path: Path, raw: unknown, fallback: string): RateBudget | undefined {
  const value = raw ?? fallback
  if (value === 'off' || value === false) return undefined
  const match = typeof value === 'string' ? /^\s*(\d{1,7})\s*\/\s*([a-z]+)\s*$/.exec(value) : null
  const windowMs = match ? RATE_WINDOWS[match[2]!] : undefined
  if (!match || windowMs === undefined || Number(match[1]) < 1) {
    issues.add(path, `must be a rate such as 600/min, 10/s or 5000/h (at least 1), or off, got ${describe(value)}`)
    return parseRate(fallback)
  }
  return { max: Number(match[1]), windowMs }
}

function parseRate (text: string): RateBudget {
  const [max, unit] = text.split('/')
  return { max: Number(max), windowMs: RATE_WINDOWS[unit!]! }
}

function validateRateLimit (issues: Issues, raw: unknown): RateLimitConfig {
  const s = Section.open(issues, ['rateLimit'], raw, ['login'])
  return { login: rateBudget(issues, ['rateLimit', 'login'], s.value.login, '600/min') }
}

/** Validates a parsed (and substituted) config object. */
export function validate (issues: Issues, raw: unknown): GatewayConfig {
  const top = Section.open(issues, [], raw, ['server', 'session', 'store', 'state', 'providers', 'routes', 'metrics', 'rateLimit', 'assertion', 'forwardAuth'])
  const server = validateServer(issues, top.value.server)
  const stateSection = Section.open(issues, ['state'], top.value.state, ['ttl'])

  const providers: Record<string, ProviderConfig> = {}
  const rawProviders = top.value.providers ?? {}
  if (!isObject(rawProviders)) {
    issues.add(['providers'], `must be a mapping of provider name to settings, got ${describe(rawProviders)}`)
  } else {
    for (const [name, value] of Object.entries(rawProviders)) providers[name] = validateProvider(issues, name, value)
  }

  const routes: RouteConfig[] = []
  const rawRoutes = top.value.routes ?? []
  if (!Array.isArray(rawRoutes)) {
    issues.add(['routes'], `must be a list of routes, got ${describe(rawRoutes)}`)
  } else {
    rawRoutes.forEach((value, i) => {
      const route = validateRoute(issues, i, value, isObject(rawProviders) ? rawProviders : {})
      if (routes.some((other) => other.path === route.path)) issues.add(['routes', i, 'path'], `duplicates another route's path ${describe(route.path)}`)
      routes.push(route)
    })
  }

  const store = validateStore(issues, top.value.store)
  if (store.type === 'memory' && server.workers > 1) {
    issues.add(['server', 'workers'], 'several workers need a shared store: set store.type to redis (the memory store lives in one process)')
  }
  return {
    server,
    session: validateSession(issues, top.value.session, server.baseUrl),
    store,
    state: { ttlMs: stateSection.duration('ttl', '5m', 10_000, 3_600_000) },
    providers,
    routes,
    metrics: validateMetrics(issues, top.value.metrics, server),
    rateLimit: validateRateLimit(issues, top.value.rateLimit),
    assertion: validateAssertion(issues, top.value.assertion, routes),
    forwardAuth: validateForwardAuth(issues, top.value.forwardAuth),
  }
}
