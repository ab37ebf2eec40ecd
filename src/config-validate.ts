// gateway.yaml's schema: defaults, ranges and cross-checks for each section, built on the readers
// of config-reader.ts. `validate` returns the typed config; the problems are in `issues`.
import { availableParallelism } from 'node:os'
import type { AllowRules, ClaimsMapping, GatewayConfig, IdentityHeaders, ProviderConfig, PublicRule, RouteConfig, ServerConfig, SessionConfig, StoreConfig } from './config.js'
import { Issues, Section, checkUrl, describe, isObject, type Path } from './config-reader.js'

const COOKIE_NAME = /^[A-Za-z0-9!#$%&'*+\-.^_`|~]+$/
const PROVIDER_NAME = /^[A-Za-z0-9_-]+$/
const RESERVED_PATHS = ['/oauth', '/healthz', '/readyz', '/metrics']
const DAY = 86_400_000

function validateServer (issues: Issues, raw: unknown): ServerConfig {
  const s = Section.open(issues, ['server'], raw, ['host', 'port', 'baseUrl', 'trustProxy', 'shutdownTimeout', 'workers'])
  const port = s.integer('port', 8080, 0, 65535)
  const baseUrl = s.url('baseUrl', ['http', 'https'], { default: `http://localhost:${port}` }) ?? `http://localhost:${port}`
  if (s.has('baseUrl') && /[?#]/.test(baseUrl)) issues.add(['server', 'baseUrl'], 'must not have a query or fragment')
  return {
    host: s.string('host', { default: '0.0.0.0', nonEmpty: true })!,
    port,
    baseUrl: baseUrl.replace(/\/+$/, ''),
    trustProxy: s.boolean('trustProxy', false),
    shutdownTimeoutMs: s.duration('shutdownTimeout', '10s', 0, 300_000),
    workers: s.value.workers === 'auto' ? availableParallelism() : s.integer('workers', 1, 1, 64),
  }
}

function validateSession (issues: Issues, raw: unknown, baseUrl: string): SessionConfig {
  const s = Section.open(issues, ['session'], raw, ['cookieName', 'secret', 'ttl', 'cookieSecure', 'cacheTtl'])
  const cookieName = s.string('cookieName', { default: 'gw_session' })!
  if (!COOKIE_NAME.test(cookieName)) issues.add(['session', 'cookieName'], `must be a cookie name (letters, digits, - and _), got ${describe(cookieName)}`)
  const secret = s.string('secret')
  if (secret && secret.length < 32) {
    issues.add(['session', 'secret'], `must be at least 32 characters, got ${secret.length}`)
  }
  let cookieSecure: boolean
  if (typeof s.value.cookieSecure === 'boolean') {
    cookieSecure = s.value.cookieSecure
  } else {
    const secure = s.oneOf('cookieSecure', ['auto', 'true', 'false'], 'auto')
    cookieSecure = secure === 'auto' ? baseUrl.startsWith('https:') : secure === 'true'
  }
  return {
    cookieName,
    secret: secret || undefined,
    ttlMs: s.duration('ttl', '8h', 60_000, 30 * DAY),
    cookieSecure,
    cacheTtlMs: s.duration('cacheTtl', '1s', 0, 10_000),
  }
}

function validateStore (issues: Issues, raw: unknown): StoreConfig {
  const s = Section.open(issues, ['store'], raw, ['type', 'url', 'cluster', 'sentinel', 'keyPrefix'])
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
  }
}

const CLAIM_DEFAULTS: ClaimsMapping = { user: 'sub', email: 'email', name: 'name', groups: 'groups' }

function validateProvider (issues: Issues, name: string, raw: unknown): ProviderConfig {
  const path = ['providers', name]
  if (!PROVIDER_NAME.test(name)) issues.add(path, 'a provider name may only use letters, digits, - and _')
  const s = Section.open(issues, path, raw, ['clientId', 'clientSecret', 'authorizeUrl', 'tokenUrl', 'scope', 'pkce', 'issuer', 'userinfoUrl', 'claims', 'timeout'])
  const issuer = s.url('issuer', ['http', 'https'])
  const scope = s.string('scope', { required: true }) ?? ''
  const openid = scope.split(/\s+/).includes('openid')
  // With an issuer, discovery fills in missing endpoints; without one both URLs are needed.
  const authorizeUrl = s.url('authorizeUrl', ['http', 'https'], { required: issuer === undefined })
  const tokenUrl = s.url('tokenUrl', ['http', 'https'], { required: issuer === undefined })
  if (openid && issuer === undefined && s.has('authorizeUrl')) {
    issues.add([...path, 'issuer'], 'is required when the scope includes openid (ID tokens are checked against the issuer and its keys)')
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
    userinfoUrl: s.url('userinfoUrl', ['http', 'https']),
    claims: {
      user: claims.string('user', { default: CLAIM_DEFAULTS.user, nonEmpty: true })!,
      email: claims.string('email', { default: CLAIM_DEFAULTS.email, nonEmpty: true })!,
      name: claims.string('name', { default: CLAIM_DEFAULTS.name, nonEmpty: true })!,
      groups: claims.string('groups', { default: CLAIM_DEFAULTS.groups, nonEmpty: true })!,
    },
    timeoutMs: s.duration('timeout', '10s', 100, 120_000),
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
  const s = Section.open(issues, path, raw, ['path', 'upstream', 'provider', 'rewritePrefix', 'timeout', 'auth', 'websocket', 'allow', 'public', 'identityHeaders'])
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
    auth,
    websocket: s.boolean('websocket', false),
    allow: validateAllow(issues, [...path, 'allow'], s.value.allow),
    public: validatePublic(issues, [...path, 'public'], s.value.public),
    identityHeaders: validateIdentityHeaders(issues, [...path, 'identityHeaders'], s.value.identityHeaders),
  }
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

/** Validates a parsed (and substituted) config object. */
export function validate (issues: Issues, raw: unknown): GatewayConfig {
  const top = Section.open(issues, [], raw, ['server', 'session', 'store', 'state', 'providers', 'routes'])
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
  }
}
