// gateway.yaml: types, defaults, ${VAR} substitution and validation that collects every problem
// with its key path and line. Loading a config has no side effects (no network, no store).
import { readFile } from 'node:fs/promises'
import { availableParallelism } from 'node:os'
import { LineCounter, isAlias, isMap, isScalar, isSeq, parseDocument, type Document, type Node } from 'yaml'

export interface ServerConfig {
  host: string
  port: number
  /** {base_url} without a trailing slash; redirect_uri is derived from it. */
  baseUrl: string
  trustProxy: boolean
  /** How long a shutdown waits for in-flight requests. */
  shutdownTimeoutMs: number
  /** Worker processes sharing the port (node:cluster); 1 = this process serves. */
  workers: number
}

export interface SessionConfig {
  cookieName: string
  /** Absent: the gateway makes a random one per process (and warns). */
  secret: string | undefined
  ttlMs: number
  cookieSecure: boolean
  /** How long an instance may serve a session from memory before reading the store again (0: never). */
  cacheTtlMs: number
}

export interface StoreConfig {
  type: 'redis' | 'memory'
  url: string | undefined
  cluster: string[] | undefined
  sentinel: { name: string, nodes: string[] } | undefined
  keyPrefix: string
}

/** Where each identity field is found in the ID token claims or the userinfo JSON (dotted paths). */
export interface ClaimsMapping {
  user: string
  email: string
  name: string
  groups: string
}

/** One <remote_app_name>: a registered OAuth 2.0 client at one provider. */
export interface ProviderConfig {
  name: string
  clientId: string
  clientSecret: string
  /** Absent only when `issuer` is given: then discovery supplies it. */
  authorizeUrl: string | undefined
  tokenUrl: string | undefined
  scope: string
  /** The scope includes `openid`: an ID token is required and validated. */
  openid: boolean
  pkce: boolean
  /** OIDC issuer: discovery at start, and the `iss` that callbacks and ID tokens must carry. */
  issuer: string | undefined
  /** Identity for plain OAuth 2.0 providers (called once at sign-in with the bearer token). */
  userinfoUrl: string | undefined
  claims: ClaimsMapping
  /** Token endpoint timeout. */
  timeoutMs: number
}

/** Who may pass a route: any match passes. */
export interface AllowRules {
  emails: string[]
  domains: string[]
  groups: string[]
}

/** A method and path glob that passes without a session (`*` matches any characters). */
export interface PublicRule {
  method: string
  path: string
}

export interface IdentityHeaders {
  user: string
  email: string
  groups: string
}

export interface RouteConfig {
  /** Path prefix, normalised to start with `/` and to have no trailing slash (`/` stays `/`). */
  path: string
  upstream: string
  provider: string | undefined
  rewritePrefix: string | undefined
  timeoutMs: number
  auth: 'required' | 'none'
  /** Proxy WebSocket upgrades too (same authentication and bearer injection). */
  websocket: boolean
  allow: AllowRules | undefined
  public: PublicRule[]
  identityHeaders: IdentityHeaders
}

export interface GatewayConfig {
  server: ServerConfig
  session: SessionConfig
  store: StoreConfig
  state: { ttlMs: number }
  providers: Record<string, ProviderConfig>
  routes: RouteConfig[]
}

/** Every problem found in a config file, each naming its key path. */
export class ConfigError extends Error {
  readonly issues: string[]
  constructor (source: string, issues: string[]) {
    super(`${source}: ${issues.length} problem${issues.length === 1 ? '' : 's'}\n  ${issues.join('\n  ')}`)
    this.name = 'ConfigError'
    this.issues = issues
  }
}

type Path = ReadonlyArray<string | number>
type Env = Record<string, string | undefined>

function formatPath (path: Path): string {
  let out = ''
  for (const part of path) out += typeof part === 'number' ? `[${part}]` : (out ? `.${part}` : part)
  return out || '(top level)'
}

/** Collects problems; each is reported as `key.path: message (line N)`. */
class Issues {
  readonly list: string[] = []
  constructor (private readonly lines: Map<string, number>) {}

  /** The line of the key, or of its nearest ancestor when the key itself is missing. */
  add (path: Path, message: string): void {
    let line: number | undefined
    for (let n = path.length; n > 0 && line === undefined; n--) line = this.lines.get(formatPath(path.slice(0, n)))
    this.list.push(`${formatPath(path)}: ${message}${line ? ` (line ${line})` : ''}`)
  }
}

const VAR = /\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}/g

/**
 * Replaces `${VAR}` and `${VAR:-default}` inside one scalar. Done on parsed scalars, so a value
 * containing `#` or `: ` cannot change the file's structure.
 */
function substitute (text: string, env: Env, onMissing: (name: string) => void): string {
  return text.replace(VAR, (_match, name: string, fallback: string | undefined) => {
    const value = env[name]
    if (value !== undefined && value !== '') return value
    if (fallback !== undefined) return fallback
    onMissing(name)
    return ''
  })
}

/** Turns the YAML tree into plain values, substituting variables and noting each key's line. */
function toPlain (doc: Document, env: Env, lineCounter: LineCounter, lines: Map<string, number>, missing: Array<[Path, string]>): unknown {
  const lineOf = (node: Node | null | undefined): number | undefined =>
    node?.range ? lineCounter.linePos(node.range[0]).line : undefined

  const walk = (node: unknown, path: Path): unknown => {
    if (isAlias(node)) return walk(node.resolve(doc), path)
    if (isMap(node)) {
      const out: Record<string, unknown> = {}
      for (const pair of node.items) {
        const key = String(isScalar(pair.key) ? pair.key.value : pair.key)
        const line = lineOf(pair.key as Node)
        if (line) lines.set(formatPath([...path, key]), line)
        out[key] = walk(pair.value, [...path, key])
      }
      return out
    }
    if (isSeq(node)) {
      return node.items.map((item, index) => {
        const line = lineOf(item as Node)
        if (line) lines.set(formatPath([...path, index]), line)
        return walk(item, [...path, index])
      })
    }
    if (isScalar(node)) {
      if (typeof node.value !== 'string') return node.value
      return substitute(node.value, env, (name) => missing.push([path, name]))
    }
    return node ?? null
  }
  return walk(doc.contents, [])
}

const UNITS: Record<string, number> = { ms: 1, s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000 }

/** Parses `300`, `300s`, `5m`, `8h`, `250ms`, `1d` into milliseconds; a bare number is seconds. */
export function parseDuration (value: unknown): number | undefined {
  if (typeof value === 'number') return Number.isFinite(value) && value >= 0 ? value * 1000 : undefined
  if (typeof value !== 'string') return undefined
  const match = /^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h|d)?\s*$/.exec(value)
  if (!match) return undefined
  return Math.round(Number(match[1]) * UNITS[match[2] ?? 's']!)
}

function isObject (value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value)
}

/** Typed readers over one mapping; each reports problems with the full key path. */
class Section {
  constructor (
    readonly issues: Issues,
    readonly path: Path,
    readonly value: Record<string, unknown>
  ) {}

  static open (issues: Issues, path: Path, value: unknown, keys: readonly string[]): Section {
    if (value === undefined || value === null) return new Section(issues, path, {})
    if (!isObject(value)) {
      issues.add(path, `must be a mapping, got ${describe(value)}`)
      return new Section(issues, path, {})
    }
    for (const key of Object.keys(value)) {
      if (!keys.includes(key)) issues.add([...path, key], `unknown key (expected one of: ${keys.join(', ')})`)
    }
    return new Section(issues, path, value)
  }

  has (key: string): boolean {
    return this.value[key] !== undefined && this.value[key] !== null
  }

  string (key: string, options: { default?: string, required?: boolean, nonEmpty?: boolean } = {}): string | undefined {
    const value = this.value[key]
    if (value === undefined || value === null) {
      if (options.required) this.issues.add([...this.path, key], 'is required')
      return options.default
    }
    if (typeof value !== 'string' && typeof value !== 'number' && typeof value !== 'boolean') {
      this.issues.add([...this.path, key], `must be a string, got ${describe(value)}`)
      return options.default
    }
    const text = String(value)
    if (options.nonEmpty && text.trim() === '') this.issues.add([...this.path, key], 'must not be empty')
    return text
  }

  integer (key: string, fallback: number, min: number, max: number): number {
    const value = this.value[key]
    if (value === undefined || value === null) return fallback
    const number = typeof value === 'string' && /^\d+$/.test(value.trim()) ? Number(value) : value
    if (typeof number !== 'number' || !Number.isInteger(number) || number < min || number > max) {
      this.issues.add([...this.path, key], `must be an integer from ${min} to ${max}, got ${describe(value)}`)
      return fallback
    }
    return number
  }

  boolean (key: string, fallback: boolean): boolean {
    const value = this.value[key]
    if (value === undefined || value === null) return fallback
    if (typeof value === 'boolean') return value
    if (value === 'true' || value === 'false') return value === 'true'
    this.issues.add([...this.path, key], `must be true or false, got ${describe(value)}`)
    return fallback
  }

  duration (key: string, fallback: string, minMs: number, maxMs: number): number {
    const value = this.value[key] ?? fallback
    const ms = parseDuration(value)
    if (ms === undefined) {
      this.issues.add([...this.path, key], `must be a duration such as 300, 300s, 5m or 8h, got ${describe(value)}`)
      return parseDuration(fallback)!
    }
    if (ms < minMs || ms > maxMs) {
      this.issues.add([...this.path, key], `must be between ${formatMs(minMs)} and ${formatMs(maxMs)}, got ${describe(value)}`)
    }
    return ms
  }

  oneOf<T extends string> (key: string, allowed: readonly T[], fallback: T): T {
    const value = this.value[key]
    if (value === undefined || value === null) return fallback
    if (typeof value === 'string' && (allowed as readonly string[]).includes(value)) return value as T
    this.issues.add([...this.path, key], `must be one of ${allowed.join(', ')}, got ${describe(value)}`)
    return fallback
  }

  url (key: string, protocols: readonly string[], options: { required?: boolean, default?: string } = {}): string | undefined {
    const text = this.string(key, { required: options.required, default: options.default })
    if (text === undefined) return undefined
    return checkUrl(this.issues, [...this.path, key], text, protocols)
  }
}

function checkUrl (issues: Issues, path: Path, text: string, protocols: readonly string[]): string | undefined {
  let url: URL
  try {
    url = new URL(text)
  } catch {
    issues.add(path, `must be a URL, got ${describe(text)}`)
    return undefined
  }
  if (!protocols.includes(url.protocol.slice(0, -1))) {
    issues.add(path, `must be a ${protocols.join(' or ')} URL, got ${describe(text)}`)
    return undefined
  }
  return text
}

function describe (value: unknown): string {
  if (value === null || value === undefined) return 'nothing'
  if (Array.isArray(value)) return 'a list'
  if (typeof value === 'object') return 'a mapping'
  if (typeof value === 'string') return JSON.stringify(value.length > 60 ? `${value.slice(0, 57)}...` : value)
  return String(value)
}

function formatMs (ms: number): string {
  if (ms % 3_600_000 === 0) return `${ms / 3_600_000}h`
  if (ms % 60_000 === 0) return `${ms / 60_000}m`
  if (ms % 1000 === 0) return `${ms / 1000}s`
  return `${ms}ms`
}

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
function validate (issues: Issues, raw: unknown): GatewayConfig {
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

/**
 * Parses and validates config text. Throws a {@link ConfigError} listing every problem.
 * @param source the file name used in messages
 */
export function parseConfig (text: string, env: Env = process.env, source = 'gateway.yaml'): GatewayConfig {
  const lineCounter = new LineCounter()
  const doc = parseDocument(text, { lineCounter, prettyErrors: true, uniqueKeys: true })
  if (doc.errors.length > 0) {
    throw new ConfigError(source, doc.errors.map((e) => `YAML syntax: ${e.message.split('\n')[0]}`))
  }
  const lines = new Map<string, number>()
  const missing: Array<[Path, string]> = []
  const plain = toPlain(doc, env, lineCounter, lines, missing)
  const issues = new Issues(lines)
  for (const [path, name] of missing) issues.add(path, `environment variable ${name} is not set (use \${${name}:-default} for a default)`)
  const config = validate(issues, plain ?? {})
  if (issues.list.length > 0) throw new ConfigError(source, issues.list)
  return config
}

/** Reads and validates a config file. */
export async function loadConfig (file: string, env: Env = process.env): Promise<GatewayConfig> {
  let text: string
  try {
    text = await readFile(file, 'utf8')
  } catch (error) {
    throw new ConfigError(file, [`cannot read the file: ${(error as NodeJS.ErrnoException).code ?? String(error)}`])
  }
  return parseConfig(text, env, file)
}
