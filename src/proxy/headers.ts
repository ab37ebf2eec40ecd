// The headers that cross the gateway. Upstream-bound: the client's headers minus everything the
// gateway sets or vouches for (identity headers, the assertion header, X-Forwarded-*, Forwarded,
// X-Real-IP, X-Original-URL and kin, and on protected routes the client's own Authorization), in any
// spelling an upstream could read as one of those (`_` for `-`: CGI, WSGI and PHP read
// `X_Forwarded_User` as `X-Forwarded-User`), and the identity headers of other gateways an application
// moved behind this one may still trust (Authelia, Authentik, Grafana's auth proxy, oauth2-proxy,
// Cloudflare Access, AWS ALB, Azure App Service, Pomerium, Google's IAP, Kubernetes' front proxy,
// Keycloak Gatekeeper, Vouch), minus hop-by-hop headers (RFC 9110 §7.6.1); then
// the gateway's own, with X-Forwarded-Host naming the gateway's public host, never the client's Host. Client-bound: the upstream's headers minus hop-by-hop ones, so its keep-alive
// terms never override the client connection's.
// @see https://www.rfc-editor.org/rfc/rfc9110#section-7.6.1
import type { IncomingHttpHeaders } from 'node:http'

/** Hop-by-hop headers: they describe one connection, never the next one (RFC 9110 §7.6.1). */
const HOP_BY_HOP = ['connection', 'keep-alive', 'proxy-connection', 'te', 'trailer', 'transfer-encoding', 'upgrade', 'http2-settings']

/**
 * Headers a client may never send upstream, on any route: what the gateway sets, what upstreams
 * and frameworks read as a trusted client address or original URL, and `expect` (the gateway has
 * already answered `100-continue` itself; the upstream gets the body as it streams).
 */
const CLIENT_NEVER = [
  'cookie', 'forwarded', 'x-original-url', 'x-original-uri', 'x-rewrite-url', 'x-host', 'x-original-host',
  // What frameworks and CDNs read as the client's address (Rails' remote_ip reads Client-IP).
  'x-real-ip', 'x-client-ip', 'client-ip', 'true-client-ip', 'x-cluster-client-ip', 'cf-connecting-ip', 'fastly-client-ip', 'x-proxyuser-ip',
  'x-originating-ip', 'x-remote-addr', 'x-remote-ip', 'x-original-forwarded-for',
  // ...and what libraries and hosting platforms read as it (npm request-ip, django-ipware, PHP's and
  // Java's getIp snippets; Google App Engine, DigitalOcean, Fly.io, Envoy and Istio, Azure Front Door,
  // WebLogic's plug-in): an application moved from one may still be configured to trust it.
  'x-forwarded', 'forwarded-for', 'x-appengine-user-ip', 'do-connecting-ip', 'cf-pseudo-ipv4', 'fly-client-ip',
  'x-envoy-external-address', 'x-azure-clientip', 'x-azure-socketip', 'proxy-client-ip', 'wl-proxy-client-ip',
  // What frameworks read as the scheme a proxy in front was reached on (the gateway sets X-Forwarded-Proto).
  'front-end-https', 'x-url-scheme', 'x-scheme',
  // Identity headers other gateways set, which an application moved behind this one may still trust:
  // the gateway's own defaults, Kubernetes' front proxy (X-Remote-User, -Group), Authelia's Remote-*,
  // the X-Auth-User of many proxies and plugins (X-Authenticated-User is a prefix's, below), and
  // Keycloak Gatekeeper's X-Auth-* (not its X-Auth-Token, which APIs take as their own key).
  'x-forwarded-user', 'x-forwarded-email', 'x-forwarded-groups', 'x-remote-user', 'x-remote-email', 'x-remote-groups', 'x-remote-group',
  'remote-user', 'remote-groups', 'remote-email', 'remote-name', 'x-auth-user',
  'x-auth-email', 'x-auth-username', 'x-auth-userid', 'x-auth-subject', 'x-auth-roles', 'x-auth-groups', 'x-auth-audience', 'x-auth-expiresin',
  // Google Cloud Endpoints' and API Gateway's claims of the caller's JWT, APISIX's and Kong's OIDC
  // plugins' X-Userinfo and X-ID-Token, Kong's credential, Teleport's JWT.
  'x-endpoint-api-userinfo', 'x-apigateway-api-userinfo', 'x-userinfo', 'x-id-token', 'x-credential-identifier', 'teleport-jwt-assertion',
  'x-gateway-assertion', 'proxy-authorization', 'expect',
  // Proxy: CGI hands it over as HTTP_PROXY, which HTTP clients take for their outgoing proxy, so an
  // application's calls (with the tokens it sends) went through the client's ("httpoxy",
  // CVE-2016-5385; nginx, Apache and Go's CGI drop it now). SM_USER: SiteMinder's, the principal
  // Spring Security's pre-authenticated login reads by default.
  'proxy', 'sm-user', 'sm-universalid',
  // forwardAuth.proxySecret, should a proxy in front send it with more than its auth requests.
  'x-forward-auth-secret',
  // W3C Baggage: name-value pairs that upstreams' tracing libraries read into their context (a user
  // id, a tenant) as if a trusted hop had set them; the gateway's tracing propagates none. So do
  // its older name (.NET's Correlation-Context), Jaeger's and OpenTracing's baggage headers (below,
  // and their prefixes uberctx-, ot-baggage-).
  'baggage', 'correlation-context', 'jaeger-baggage', 'sw8-correlation', 'x-honeycomb-trace',
  ...HOP_BY_HOP,
]

/** Headers that make frameworks treat a request as another method: a public OPTIONS or GET rule must not become a DELETE. */
export const METHOD_OVERRIDES = ['x-http-method-override', 'x-http-method', 'x-method-override']

/**
 * Prefixes of header families dropped whole: X-Forwarded-* (the gateway's), and other gateways'
 * identity families: oauth2-proxy's X-Auth-Request-*, Grafana's X-WEBAUTH-*, Authentik's
 * X-Authentik-*, Cloudflare Access's Cf-Access-* (its JWT and user e-mail), AWS ALB's X-Amzn-Oidc-*,
 * Azure App Service's X-MS-CLIENT-PRINCIPAL, -NAME, -ID and -IDP (hence no `-` after it) and its
 * token store's X-MS-TOKEN-<PROVIDER>-* (the person's ID and access tokens), Pomerium's
 * X-Pomerium-* (its JWT, X-Pomerium-Claim-*), Google IAP's X-Goog-Authenticated-User-* and
 * X-Goog-Iap-Jwt-Assertion, Kubernetes' X-Remote-Extra-*, Vouch's X-Vouch-*, Tailscale serve's
 * Tailscale-User-*, Kong's X-Consumer-* and X-Authenticated-* (-Userid, -Groups, -Scope; and the
 * X-Authenticated-User of many proxies), and Apache mod_auth_openidc's OIDC_CLAIM_*,
 * OIDC_access_token and OIDC_id_token (read with `-` for `_`, as `drops` reads every name), and
 * the Shibboleth service provider's Shib-* (its session, identity provider and attributes).
 */
const OWNED_PREFIXES = ['shib-', 'x-forwarded-', 'x-auth-request-', 'x-webauth-', 'x-authentik-', 'cf-access-', 'x-amzn-oidc-', 'x-ms-client-principal',
  'x-ms-token-', 'x-pomerium-', 'x-goog-authenticated-user-', 'x-goog-iap-', 'x-remote-extra-', 'x-vouch-', 'tailscale-user-', 'x-consumer-',
  'x-authenticated-', 'oidc-', 'uberctx-', 'ot-baggage-']

/** One test for every prefix at once. */
const OWNED_PREFIX = new RegExp(`^(?:${OWNED_PREFIXES.join('|')})`)

/**
 * The names listed in a Connection header (lower case), which are hop-by-hop too. A long list is a
 * Set: each header name is looked up in it, and a client chooses both counts (an outside tester's
 * finding: 1,500 names against 1,500 tokens cost 7 ms a request); a short one (`keep-alive`) an array.
 */
function connectionListed (value: string | string[] | number | undefined): { includes: (name: string) => boolean } {
  if (typeof value !== 'string') return NONE_LISTED
  const names = value.split(',').map((name) => name.trim().toLowerCase()).filter(Boolean)
  if (names.length <= SHORT_LIST) return names
  const set = new Set(names)
  return { includes: (name) => set.has(name) }
}

const NONE_LISTED: readonly string[] = []
/** Up to this many names, an array's scan is quicker than making a Set. */
const SHORT_LIST = 8

/** Which client headers a route drops before adding the gateway's own. */
export class ClientHeaderFilter {
  private readonly dropped: Set<string>

  /**
   * @param identityHeaders every identity header name any route uses (lower case): dropped on all routes
   * @param protectedRoute the route requires a session: the client's Authorization is dropped too
   */
  constructor (identityHeaders: Iterable<string>, protectedRoute: boolean) {
    this.dropped = new Set([...CLIENT_NEVER, ...identityHeaders, ...(protectedRoute ? ['authorization', ...METHOD_OVERRIDES] : [])])
  }

  /**
   * True when the client's header `name` (lower case, as Node gives it) must not go upstream, also
   * when spelled with `_` or `.` for `-` (CGI-style servers map all three to one name).
   */
  drops (name: string): boolean {
    if (this.owned(name)) return true
    if (!name.includes('_') && !name.includes('.')) return false
    return this.owned(name.replace(/[_.]/g, '-'))
  }

  private owned (name: string): boolean {
    return this.dropped.has(name) || OWNED_PREFIX.test(name)
  }

  /** The client's headers that may go upstream, as a new object (deleting keys makes V8's objects slow). */
  copy (headers: IncomingHttpHeaders): IncomingHttpHeaders {
    const out: IncomingHttpHeaders = {}
    const listed = headers.connection === undefined ? undefined : connectionListed(headers.connection)
    for (const name of Object.keys(headers)) {
      if (this.drops(name) || listed?.includes(name)) continue
      out[name] = headers[name]
    }
    return out
  }
}

/**
 * The cookie name a Set-Cookie line sets, as a browser sends it back (RFC 6265bis 5.7): the text
 * before the first `=` of its name-value pair. A nameless cookie (`=gw_session=X`, or `gw_session`
 * with no `=`) goes back as its value alone, which a server reads as `gw_session=X`: its name is the
 * value's own up to its `=`.
 */
export function setCookieName (line: string): string {
  const semicolon = line.indexOf(';')
  const pair = semicolon === -1 ? line : line.slice(0, semicolon)
  const equals = pair.indexOf('=')
  const name = equals === -1 ? '' : pair.slice(0, equals).trim()
  if (name !== '') return name.toLowerCase()
  const value = pair.slice(equals + 1)
  const inner = value.indexOf('=')
  return (inner === -1 ? value : value.slice(0, inner)).trim().toLowerCase()
}

/**
 * The upstream's response headers without hop-by-hop ones, without any Set-Cookie for the
 * gateway's own cookies (an upstream must not plant or replace a session), and without what would
 * reach past the route on the origin it shares with the other routes and the gateway's own pages
 * (originReach). A new object only when something is removed.
 * @param gatewayCookies the names of the gateway's cookies
 * @param scope the route's path prefix as browsers spell it, ending in `/`
 */
export function clientBoundHeaders (headers: IncomingHttpHeaders, gatewayCookies: readonly string[], scope: string): IncomingHttpHeaders {
  // undici gives one Set-Cookie as a string, several as an array.
  const raw = headers['set-cookie'] as string | string[] | undefined
  const setCookie = typeof raw === 'string' ? [raw] : raw
  const planted = setCookie?.some((line) => gatewayCookies.includes(setCookieName(line))) === true
  if (!planted && headers.connection === undefined && headers['keep-alive'] === undefined && headers['transfer-encoding'] === undefined &&
    headers['proxy-connection'] === undefined && headers.upgrade === undefined && headers.trailer === undefined && headers.te === undefined &&
    headers['service-worker-allowed'] === undefined && headers['clear-site-data'] === undefined) {
    return headers
  }
  const listed = connectionListed(headers.connection as string | undefined)
  const out: IncomingHttpHeaders = {}
  for (const name of Object.keys(headers)) {
    if (!HOP_BY_HOP.includes(name) && !listed.includes(name)) out[name] = headers[name]
  }
  if (planted) {
    const kept = setCookie!.filter((line) => !gatewayCookies.includes(setCookieName(line)))
    if (kept.length > 0) out['set-cookie'] = kept
    else delete out['set-cookie']
  }
  originReach(out, scope)
  return out
}

/**
 * The Cache-Control of an answer the gateway sent for a person (an admitted request with an
 * identity), so that no shared cache in front of the gateway (a CDN, a company proxy) keeps it for
 * the next caller: such a cache sees the request with only the gateway's cookie, not the
 * Authorization and identity headers the upstream answered, and an upstream's `public, max-age` (or
 * a `Vary` on headers no browser sends, or no directive at all) let it serve alice's page to bob,
 * or a protected file to anyone (an outside tester's finding). `private` is added unless the answer
 * says `private` or `no-store` already; `public` and `s-maxage` go. Undefined: leave it as it is.
 * @see https://www.rfc-editor.org/rfc/rfc9111#section-5.2.2.7
 */
export function personalCacheControl (value: string | string[] | undefined): string | undefined {
  if (value === undefined) return 'private'
  const directives = (Array.isArray(value) ? value.join(',') : value).split(',').map((directive) => directive.trim()).filter((directive) => directive !== '')
  const names = directives.map((directive) => directive.split('=', 1)[0]!.toLowerCase())
  // A `private` with fields (`private="set-cookie"`) keeps only those from shared caches.
  if (directives.some((directive, i) => (names[i] === 'private' && !directive.includes('=')) || names[i] === 'no-store')) return undefined
  return ['private', ...directives.filter((_directive, i) => names[i] !== 'public' && names[i] !== 's-maxage')].join(', ')
}

/**
 * Headers a CDN reads ahead of Cache-Control (RFC 9213's `CDN-Cache-Control` and its targeted
 * `<name>-CDN-Cache-Control`, Fastly's `Surrogate-Control`, Akamai's `Edge-Control`): on a person's
 * answer they would let the CDN keep it all the same (a re-reading's finding).
 * @see https://www.rfc-editor.org/rfc/rfc9213
 */
function cdnControl (name: string): boolean {
  return name === 'surrogate-control' || name === 'edge-control' || name.endsWith('cdn-cache-control')
}

/** An admitted answer's caching, made for its person alone: {@link personalCacheControl}, and no CDN's own control header. */
export function keepPersonal (reply: { header: (name: string, value: string) => unknown, removeHeader: (name: string) => unknown }, headers: IncomingHttpHeaders): void {
  const personal = personalCacheControl(headers['cache-control'])
  if (personal !== undefined) reply.header('cache-control', personal)
  for (const name in headers) if (cdnControl(name)) reply.removeHeader(name)
}

/** What an origin-wide `"*"` of Clear-Site-Data still clears once cookies are left out. */
const CLEARED_BUT_COOKIES = ['"cache"', '"storage"', '"executionContexts"']

/**
 * Takes out of `headers` what would let one route's upstream act on the whole origin:
 * - Service-Worker-Allowed naming a scope beyond the route (`/`): the route's service worker would
 *   then serve every page of the origin, other routes' and the gateway's sign-in pages, for as long
 *   as it stays installed. Kept when it names a path within the route;
 * - Clear-Site-Data's `"cookies"` (and `"*"`, which includes them): the browser would delete the
 *   gateway's session cookie, and every cookie of the site. Its other types are kept.
 */
function originReach (headers: IncomingHttpHeaders, scope: string): void {
  const allowed = headers['service-worker-allowed']
  if (allowed !== undefined && !(typeof allowed === 'string' && withinScope(allowed, scope))) delete headers['service-worker-allowed']
  const clearing = headers['clear-site-data']
  if (clearing === undefined) return
  const types = (Array.isArray(clearing) ? clearing : [clearing]).flatMap((value) => value.split(',')).map((type) => type.trim()).filter((type) => type !== '')
  const kept = [...new Set(types.flatMap((type) => type === '"*"' ? CLEARED_BUT_COOKIES : type.toLowerCase() === '"cookies"' ? [] : [type]))]
  if (kept.length > 0) headers['clear-site-data'] = kept.join(', ')
  else delete headers['clear-site-data']
}

/** Whether a Service-Worker-Allowed value (an absolute path) names a scope within `scope`. */
function withinScope (value: string, scope: string): boolean {
  const path = value.trim()
  // A relative path resolves against the script's own address, which the gateway does not see here: not kept.
  if (!path.startsWith('/') || path.startsWith('//') || path.includes('\\')) return false
  try {
    return new URL(path, 'http://gateway.invalid').pathname.startsWith(scope)
  } catch {
    return false
  }
}
