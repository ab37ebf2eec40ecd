// gateway.yaml resolved: the config types the rest of the gateway reads, after validation and
// defaults (validate.ts makes them). A leaf: type declarations only, so any folder may import it
// without importing the loader; the raw file's shape is schema.ts.

/** The providers a `preset` can fill in (presets.ts has one entry for each, schema.ts lists them). */
export type PresetName = 'github' | 'gitlab' | 'google' | 'microsoft' | 'keycloak'

export interface ServerConfig {
  host: string
  port: number
  /** {base_url} without a trailing slash; redirect_uri is derived from it. */
  baseUrl: string
  /**
   * Which peers may set X-Forwarded-*: none (false), every one (true), or these addresses and CIDR
   * ranges; given as is to Fastify's `trustProxy` (proxy-addr).
   */
  trustProxy: boolean | string[]
  /** How long a shutdown waits for in-flight requests. */
  shutdownTimeoutMs: number
  /** Worker processes sharing the port (node:cluster); 1 = this process serves. */
  workers: number
}

export interface SessionConfig {
  cookieName: string
  /** Absent: the gateway makes a random one per process (and warns). */
  secret: string | undefined
  /** Idle lifetime: each request renews it. */
  ttlMs: number
  /** Absolute lifetime from the sign-in (the record's `createdAt`), however active. */
  maxAgeMs: number
  /** Earlier secrets that still open what they sealed; nothing new is sealed with them. */
  previousSecrets: string[]
  cookieSecure: boolean
  /** How long an instance may serve a session from memory before reading the store again (0: never). */
  cacheTtlMs: number
  /**
   * The session cookie's Domain (lower case, no leading dot): every host under it shares the
   * sign-in (forward-auth across subdomains). Undefined: a host-only cookie.
   * @see https://www.rfc-editor.org/rfc/rfc6265#section-5.2.3
   */
  cookieDomain?: string
}

/** Redis Sentinel: where to ask for the master, and how to reach the sentinels and the Redis nodes. */
export interface SentinelConfig {
  /** The monitored master's name. */
  name: string
  /** The sentinels, `host:port`. */
  nodes: string[]
  /** The Redis nodes' ACL user and password (absent: none). */
  username?: string | undefined
  password?: string | undefined
  /** The sentinels' own ACL user and password (absent: none). */
  sentinelUsername?: string | undefined
  sentinelPassword?: string | undefined
  /** TLS to the sentinels and to the Redis nodes (Node's CAs, NODE_EXTRA_CA_CERTS included). */
  tls?: boolean
}

export interface StoreConfig {
  type: 'redis' | 'memory'
  url: string | undefined
  cluster: string[] | undefined
  sentinel: SentinelConfig | undefined
  keyPrefix: string
  /** How long one store command may take (connecting: twice that); then 503 session_store_unavailable. */
  timeoutMs: number
  /**
   * What /readyz makes of the store: `required` (503 when no part of the store answers; a partly
   * reachable cluster stays ready) or `ignored` (ready whatever the store does; its state is still
   * reported). See docs/operations.md.
   */
  readiness: 'required' | 'ignored'
  /**
   * Whether a new session or a refreshed one counts as written only once a replica has acknowledged
   * it (WAIT 1 <timeoutMs>). By default true in the Sentinel and Cluster forms, false with `url`.
   */
  /** How many replicas must acknowledge a new session or a refresh before it counts (0: none, no WAIT). */
  waitForReplica: number
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
  /** Empty for a token-only issuer. */
  clientId: string
  clientSecret: string
  /**
   * No client here (no `clientId`/`clientSecret`): an issuer whose tokens machine clients bring (CI
   * systems, workloads), named only in `bearer.issuers`; nobody signs in with it.
   */
  tokenOnly: boolean
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
  /**
   * The claims a session keeps besides the identity, by path: those some rule (of a route of this
   * provider, or of a forward-auth host) or a route's `headers` names. Others are not kept.
   */
  keptClaims: string[]
  /** Token endpoint timeout. */
  timeoutMs: number
  /** Plain http to a host that is not loopback is allowed (and warned about at start). */
  dangerouslyAllowInsecureHttp: boolean
  /** The preset that filled this provider's endpoints, scope and claims (its quirks apply). */
  preset?: PresetName
  /**
   * Sign-out reaches the provider too: RP-initiated logout where discovery advertises
   * `end_session_endpoint`, token revocation where it advertises `revocation_endpoint`.
   * False: sign-out ends the gateway's session only.
   */
  endSession: boolean
}

/** A claim condition: the claim at `path` (dotted, or a JSON pointer) has one of `values` (an array claim: any element). */
export interface ClaimCondition {
  path: string
  /** As written, numbers and booleans as text (`42`, `1.10`, `true`: a YAML number as its source text): claims are compared in the same form. */
  values: string[]
}

/**
 * One rule of `allow` or `deny`: it holds when every condition it gives holds, and a list inside a
 * condition matches any of its values. An empty list is a condition not given.
 */
export interface Rule {
  /** Where it is written, relative to its route or host (`allow[0]`, `deny[1]`, `allow` for one rule object): the 403 page and the audit line name it. */
  name: string
  /** User names (the identity's `user`, exactly). */
  users: string[]
  /** Verified e-mail addresses, lower case. */
  emails: string[]
  /** Domains of verified e-mail addresses, lower case, without `@`. */
  domains: string[]
  groups: string[]
  /** Every one must hold. */
  claims: ClaimCondition[]
  /** Request methods, upper case. */
  methods: string[]
  /** Globs on the canonical path (`*` matches any characters, `/` included); the query is never part of it. */
  paths: string[]
  /** Networks the client address (as resolved under server.trustProxy) must be in. */
  networks: Network[]
  /** The provider the person signed in at (a machine client: its token's issuer). */
  providers: string[]
}

/** One network of a rule's `networks`, as config/networks.ts reads it. */
export interface Network {
  readonly address: string
  /** The prefix length (32 or 128 for a single address). */
  readonly bits: number
  readonly family: 'ipv4' | 'ipv6'
  /** Written `!10.8.0.0/16`: the condition needs the address outside this network. */
  readonly outside: boolean
}

/** Who may pass: no `deny` rule holds, and an `allow` rule does (`allow` undefined: any signed-in person). */
export interface RuleLists {
  allow: Rule[] | undefined
  deny: Rule[]
}

/** A claim sent to the upstream in a request header (`headers:` on a route). */
export interface ClaimHeader {
  /** Lower case. */
  name: string
  /** The claim's dotted path or JSON pointer (what follows `claims.`). */
  claim: string
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

/**
 * Machine clients on a route (`bearer:`): requests that carry their own access token, checked here
 * instead of a session. @see https://www.rfc-editor.org/rfc/rfc6750
 */
export interface BearerConfig {
  /** What the token's `aud` must contain. */
  audience: string
  /** The providers (by name) whose tokens are accepted; each has an `issuer` (discovery gives its keys). */
  issuers: string[]
  /** Every one must be in the token's `scope` (or `scp`). */
  scopes: string[]
  /** The request header that carries the token: `authorization`, or `proxy-authorization` (the app keeps its own Authorization). */
  header: 'authorization' | 'proxy-authorization'
  /** Tokens that are not JWTs are checked at the issuers' introspection endpoints (RFC 7662): every issuer's (`true`), one issuer's (its name), or none. */
  introspect: boolean | string
  /** Where rules read the person claims a token lacks: nowhere (`token`: they cannot be told), userinfo, or introspection. */
  claimsFrom: 'token' | 'userinfo' | 'introspection'
}

export interface RouteConfig {
  /** Path prefix, normalised to start with `/` and to have no trailing slash (`/` stays `/`). */
  path: string
  upstream: string
  /** The route's sign-in provider; with `providers: [a, b]`, the first of them. */
  provider: string | undefined
  /** Every provider a session may be at to pass (`providers:`; `[provider]` when one is named, `[]` for none). */
  providers: string[]
  rewritePrefix: string | undefined
  /** The upstream's answer must start within this long of the request being sent, waiting for a connection included. */
  timeoutMs: number
  /** At most this many connections to the upstream at once; requests beyond wait (within timeoutMs) for one. */
  maxConnections: number
  auth: 'required' | 'none'
  /** Proxy WebSocket upgrades too (same authentication and bearer injection). */
  websocket: boolean
  /** Origins whose pages may open this route's websockets, besides the gateway's own. */
  allowedOrigins: string[]
  /** Who may pass (`allow` undefined and no `deny`: any signed-in person). */
  rules: RuleLists
  /** Claims sent to the upstream as headers. */
  headers: ClaimHeader[]
  public: PublicRule[]
  identityHeaders: IdentityHeaders
  /** Send the signed identity assertion to this route's upstream. */
  assertion: boolean
  /** Websocket routes: the largest message, in bytes, either way; a larger one closes both sockets with 1009. */
  websocketMaxMessage: number
  /** Routes whose rules name methods (or whose `deny` rules name paths): the largest form body read to find `_method` (or a front controller's `r`), in bytes. */
  methodOverrideMaxBody: number
  /** Machine clients with their own access tokens; absent: requests need a session. */
  bearer: BearerConfig | undefined
  /** MCP clients and CLIs get tokens for this route from the gateway's authorization server (agents/). */
  agents: boolean
  /** Step-up: the sign-in at the provider must be this recent (and of one of these `acr`); absent: any. */
  reauth: ReauthConfig | undefined
  /** A browser form POST of at most this many bytes that meets no session is delivered after the sign-in; undefined: off. */
  preserveBodyBytes: number | undefined
}

/** A route's step-up requirement (`reauth:`). */
export interface ReauthConfig {
  /** The ID token's `auth_time` may be at most this old. */
  maxAgeMs: number
  /** One of these must be the ID token's `acr` (requested with `acr_values`); empty: any. */
  acr: string[]
}

/**
 * The signed identity assertion (an ES256 JWT) sent to the upstreams of routes with `assertion: true`.
 * @see https://www.rfc-editor.org/rfc/rfc7519
 */
export interface AssertionConfig {
  /** The `assertion` section is present or a route has `assertion: true`: keys are made and published. */
  enabled: boolean
  /** The request header that carries it, lower case. */
  header: string
  /** Lifetime of one assertion (`exp` - `iat`). */
  ttlMs: number
  /** How often the signing key pair is replaced. */
  rotateEveryMs: number
}

/** Where /metrics is served instead of the public port (undefined: on the public port). */
export interface MetricsConfig {
  listen: { host: string, port: number } | undefined
}

/** OpenTelemetry traces; the standard OTEL_* variables are read at start (see ops/tracing). */
export interface TracingConfig {
  /** `tracing.otlp` without a trailing slash: spans go to `<otlp>/v1/traces`; undefined: from the environment, or off. */
  otlp: string | undefined
  serviceName: string
  /** 0 to 1: the share of root traces recorded. */
  sampleRatio: number
}

/** A request budget: at most `max` requests per `windowMs`. */
export interface RateBudget {
  max: number
  windowMs: number
}

/** Per client address budgets; `undefined` when the operator turned a limit off. */
export interface RateLimitConfig {
  /** /oauth/login/* and /oauth/authorized/* together. */
  login: RateBudget | undefined
}

/** /oauth/auth/<provider>/ (forward-auth for a proxy in front). */
export interface ForwardAuthConfig {
  /**
   * Hosts an absolute `next` may lead to, lower case: `app.example.org` (that host, default port),
   * `.example.com` (that domain and its subdomains), `host:8443` (that port only).
   */
  allowedRedirectHosts: string[]
  /**
   * Who may pass each host behind the proxy in front, by lower-case host name (no port: the rules
   * hold on every port of the host). Only these hosts and the gateway's own origin get an assertion.
   */
  hosts: ReadonlyMap<string, RuleLists>
  /** Hosts (keys as in `hosts`) whose callers may bring their own access tokens. */
  bearer: ReadonlyMap<string, BearerConfig>
  /** What the proxy in front sends in X-Forward-Auth-Secret; set, /oauth/auth/ answers nothing else. */
  proxySecret: string | undefined
  /** Earlier values of proxySecret still taken while the proxies in front change to the new one. */
  previousProxySecrets: string[]
}

/**
 * The gateway as the OAuth authorization server of agents and CLIs (src/agents/), on when a route
 * has `agents: true`.
 */
export interface AgentsConfig {
  enabled: boolean
  accessTokenTtlMs: number
  refreshTokenTtlMs: number
  /** RFC 7591 dynamic registration of public clients. */
  registration: boolean
  /** Registrations per hour from all addresses together. */
  registrationsPerHour: number
  /** Token and revocation requests per minute from one client address. */
  tokenRequestsPerMinute: number
  /** The device authorization grant (RFC 8628). */
  deviceFlow: boolean
  /** Clients named by the URL of their metadata document. */
  clientMetadataDocuments: boolean
  /** Hosts whose documents may be fetched from a private or loopback address. */
  clientMetadataPrivateHosts: readonly string[]
}

export interface GatewayConfig {
  server: ServerConfig
  session: SessionConfig
  store: StoreConfig
  state: { ttlMs: number }
  providers: Record<string, ProviderConfig>
  routes: RouteConfig[]
  metrics: MetricsConfig
  rateLimit: RateLimitConfig
  assertion: AssertionConfig
  agents: AgentsConfig
  tracing: TracingConfig
  forwardAuth: ForwardAuthConfig
}
