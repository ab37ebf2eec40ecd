// Forward-auth for a proxy in front (nginx auth_request, Caddy forward_auth, Traefik ForwardAuth,
// ingress-nginx auth-url): GET /oauth/auth/<provider>/ answers 200 with the bearer token and the
// identity headers in the response, 401 `unauthenticated` with the sign-in address, 403 `forbidden`
// when the allow rules in the query, or the rules forwardAuth.hosts keeps for the host a trusted
// proxy names in X-Forwarded-Host, do not admit the user (both must). It never proxies: the proxy in front copies what
// it needs from this answer onto the request it sends its application. A host whose entry has a
// `bearer:` block also admits machine clients by their own access token (forward-auth-bearer.ts):
// 200 with that token unchanged, else 401 `invalid_token` / 403 `insufficient_scope` with RFC
// 6750's challenge, never a sign-in address.
// @see https://nginx.org/en/docs/http/ngx_http_auth_request_module.html
// @see https://caddyserver.com/docs/caddyfile/directives/forward_auth
import type { Metrics } from '../ops/metrics.js'
import type { FastifyInstance, FastifyRequest } from 'fastify'
import type { Access, Guard } from '../access/authorize.js'
import type { BearerReports } from '../access/bearer-report.js'
import { nameSpaces } from '../access/name-spaces.js'
import { compileGate } from '../access/gate.js'
import { DEFAULT_IDENTITY_HEADERS, identityHeaders } from '../access/identity-headers.js'
import { refusal } from '../access/refusal.js'
import { respond, type Site } from '../access/responder.js'
import type { Assertions } from '../assertion/assertions.js'
import { normalisedRule } from '../config/rule-lists.js'
import { parseNetwork } from '../config/networks.js'
import { allOf, compileRules, type Judge } from '../access/rules.js'
import { overrideMethod, queryOverrides, forbiddenOverride } from '../access/method-override.js'
import { canonicalTarget } from '../config/canonical.js'
import type { GatewayConfig, Rule } from '../config/types.js'
import { GatewayError, unknownProvider } from '../errors.js'
import { trustTest } from '../http/trust-proxy.js'
import type { AccessTokens } from '../oauth/access-tokens.js'
import type { Providers } from '../oauth/providers.js'
import { hostKey, RedirectHosts } from '../oauth/redirect-hosts.js'
import { FORWARD_AUTH_ROUTE, HOME, loginUrl, safeNext, switchAccountUrl } from '../oauth/urls.js'
import { loggedParameterName } from '../ops/logger.js'
import { METHOD_OVERRIDES } from '../proxy/headers.js'
import { forwardAudit } from './forward-auth-audit.js'
import { credential, HostBearers } from './forward-auth-bearer.js'
import { resolvesSegments } from '../config/raw-segments.js'
import { NO_PROXY_SECRET, proxySecretTest } from './proxy-secret.js'

/** The response header that carries the login URL of a 401, for the proxy in front to redirect a browser to. */
export { LOGIN_URL_HEADER } from '../access/responder.js'

export interface ForwardAuthDeps {
  config: GatewayConfig
  providers: Providers
  access: Access
  /** Checks machine clients' tokens on hosts whose forwardAuth.hosts entry has `bearer:`. */
  accessTokens: AccessTokens
  /** Counts and logs their outcomes, per host (`forward-auth:<host>`). */
  bearerReports: BearerReports
  /** Present when the gateway signs identity assertions: the original URL's origin gets one when allowed (see assertionAudience). */
  assertions?: Assertions | undefined
  /** Counts the rules' refusals (route `forward-auth`) and the previous proxy secrets taken. */
  metrics: Metrics
}

/** A comma-separated list from one or more query parameters of that name; undefined when absent. */
function listParameter (value: string | string[] | undefined): string[] | undefined {
  if (value === undefined) return undefined
  return (Array.isArray(value) ? value : [value]).flatMap((item) => item.split(',')).map((item) => item.trim()).filter(Boolean)
}

/** The query parameters forward-auth reads: all of them rules, written in the proxy's configuration. */
const QUERY_RULE_KEYS = new Set(['emails', 'domains', 'groups', 'networks'])

/**
 * 400 for a query parameter forward-auth does not read. The query is the operator's configuration
 * (the proxy's auth address): a typo (`group=`), another gateway's spelling (`allowed_groups=`), a
 * case (`Groups=`) or a condition only gateway.yaml has (`users=`) was dropped, and every signed-in
 * person passed the rule the operator meant (an outside tester's finding). Never a client's: the
 * shipped nginx and Caddy files send no query of the client's here.
 */
function refuseUnreadParameters (query: Record<string, unknown>, url: string): void {
  const unread = Object.keys(query).find((key) => !QUERY_RULE_KEYS.has(key))
  if (unread === undefined) return
  // Named only as the log names it (a bare or long name may be a token: a re-reading's point).
  const named = loggedParameterName(url, unread) ? JSON.stringify(unread) : 'a parameter (its name left out: not one the log keeps)'
  throw new GatewayError('invalid_request', `Forward-auth reads only emails, domains, groups and networks from its query; ${named} is none of them, so the rule it names cannot be applied. ` +
    'Fix the auth address in the proxy\'s configuration (behind Caddy, end forward_auth\'s uri with "?", so that the client\'s own query is not passed on).')
}

/**
 * The rules given as query parameters (`emails`, `domains`, `groups`, comma-separated): any of them
 * admits, as one rule each (`query.groups`); undefined when none is given (any signed-in person
 * passes); given but empty, they allow nobody. `networks` (CIDRs, `!` for outside) is a condition
 * each of them needs besides (alone: one rule, `query.networks`); one entry that is no network
 * allows nobody (never a wider rule).
 */
function queryRules (query: Record<string, string | string[] | undefined>): Rule[] | undefined {
  const given = (['emails', 'domains', 'groups'] as const).map((key) => [key, listParameter(query[key])] as const)
  const networks = listParameter(query.networks)
  if (given.every(([, values]) => values === undefined) && networks === undefined) return undefined
  if (networks !== undefined && (networks.length === 0 || networks.some((entry) => typeof parseNetwork(entry) === 'string'))) return []
  const where = networks === undefined ? {} : { networks }
  if (given.every(([, values]) => values === undefined)) return [normalisedRule('query.networks', where)]
  return given.flatMap(([key, values]) => values === undefined || values.length === 0 ? [] : [normalisedRule(`query.${key}`, { [key]: values, ...where })])
}

/**
 * The one value two headers agree on: either when only one is sent, undefined when any two values differ. A
 * proxy sets one of them (X-Forwarded-Method: Traefik, Caddy, the shipped nginx snippet;
 * X-Original-Method: ingress-nginx) and may pass the other on from the client as it came: a client
 * that sends the other one differently only refuses itself.
 */
function agreed (request: FastifyRequest, name: string, other: string, ...more: string[]): string | undefined {
  const values = [...(request.raw.headersDistinct[name] ?? []), ...(request.raw.headersDistinct[other] ?? []), ...more]
  // Sent more than once (a proxy that appends rather than replaces): what the client added could be either.
  return values.every((value) => value === values[0]) ? values[0] : undefined
}

/**
 * The original request's method and canonical path, as a trusted proxy names them (see agreed):
 * what `methods` and `paths` conditions judge. Either is undefined when it cannot be told (the path
 * also when its raw segments are not those of its canonical form: resolvesSegments), and rules
 * then refuse rather than admit (access/rules.ts).
 */
function originalRequest (fromProxy: boolean, request: FastifyRequest, original: OriginalUrl | undefined): OriginalSubject {
  // The client's address only as a trusted proxy tells it: without an X-Forwarded-For that names one
  // (not empty, not only commas and blanks, which proxy-addr skips), request.ip is the proxy's own.
  const forwardedFor = request.headers['x-forwarded-for']
  const address = fromProxy && forwardedFor !== undefined && /[^,\s]/.test(String(forwardedFor)) ? request.ip : undefined
  if (original === undefined || !fromProxy) return { method: undefined, path: undefined, address, overrides: [] }
  // Not a method token (`POST, GET`: values joined by a proxy): it cannot be told.
  const named = agreed(request, 'x-forwarded-method', 'x-original-method')
  const method = named !== undefined && /^[A-Za-z]+$/.test(named) ? named.toUpperCase() : undefined
  const canonical = resolvesSegments(original.uri) ? undefined : canonicalTarget(original.uri)
  const path = canonical?.ok === true ? canonical.url : undefined
  // Judged whether or not the path can be told: a path the rules cannot read does not hide them.
  return { method, path, address, overrides: [...queryOverrides(original.uri), ...headerOverrides(request)] }
}

/**
 * The methods the original request's method-override headers name, in every spelling (`_` for `-`):
 * the proxy in front passes them to the application, which may act on them (a route's proxy drops
 * them instead: proxy/headers.ts). Undefined: a value that is no method.
 */
function headerOverrides (request: FastifyRequest): Array<string | undefined> {
  const named = Object.keys(request.raw.headersDistinct).filter((name) => METHOD_OVERRIDES.includes(name.replace(/[_.]/g, '-')))
  return named.flatMap((name) => request.raw.headersDistinct[name]!.map(overrideMethod))
}

/**
 * The original request as the rules judge it: its method and canonical path (undefined: cannot be
 * told), and the methods its `?_method=` and method-override headers name besides
 * (access/method-override.ts), each judged as well. The body is not sent to forward-auth: a `_method`
 * form field cannot be judged here (docs/forward-auth.md).
 */
interface OriginalSubject { method: string | undefined, path: string | undefined, address: string | undefined, overrides: Array<string | undefined> }

/** Forward-auth's judge: the query's rules and the host's (compiled at startup), both on the original request. */
function forwardJudge (query: Rule[] | undefined, host: Judge | undefined, subject: OriginalSubject): Judge {
  const judge = allOf([compileRules({ allow: query, deny: [] }), ...(host === undefined ? [] : [host])])
  // `provider`: the one the URL names (a session's), or a machine client's token's issuer.
  return (identity, _method, _path, _address, provider) => {
    const judgement = judge(identity, subject.method, subject.path, subject.address, provider)
    if (!judgement.admit || subject.overrides.length === 0) return judgement
    // On the subject's path as told, undefined included (the target forbiddenOverride passes on is not read).
    const onPath: Judge = (who, method, _path, address, by) => judge(who, method, subject.path, address, by)
    return forbiddenOverride(onPath, identity, subject.path ?? '', subject.address, subject.overrides, provider) ?? judgement
  }
}

/** The original URL: `text` as given (what `next` will be checked as), `uri` its path and query, `url` as parsed. */
interface OriginalUrl { text: string, uri: string, url: URL }

/**
 * The URL the user asked the proxy in front for, from X-Forwarded-Proto/-Host and the one
 * X-Forwarded-Uri and X-Original-URI agree on (see agreed: a proxy sets one, and may pass the other
 * on from the client, which then names another request than the one the application gets), only
 * when the peer is a proxy trustProxy admits; anyone else could send these headers. `text` is the
 * URL as given (what `next` will be checked as), `url` as parsed. Undefined when it cannot be told:
 * its method, path and `?_method=` are then unknown, and rules that name methods or paths refuse.
 */
function originalUrl (fromProxy: boolean, request: FastifyRequest, named: NamedUrl | undefined | null): OriginalUrl | undefined {
  if (!fromProxy || named === null) return undefined
  const uri = agreed(request, 'x-forwarded-uri', 'x-original-uri', ...(named === undefined ? [] : [named.uri]))
  const host = forwardedHostName(request, named)
  const proto = named?.scheme ?? request.protocol
  // ingress-nginx empties X-Forwarded-Proto; one that names another scheme than the URL leaves it untold.
  const sentProto = request.headers['x-forwarded-proto']
  if (named !== undefined && typeof sentProto === 'string' && sentProto !== '' && sentProto.toLowerCase() !== named.scheme) return undefined
  if (uri === undefined || !uri.startsWith('/') || host === null || (proto !== 'http' && proto !== 'https')) return undefined
  const text = `${proto}://${host}${uri}`
  try {
    return { text, uri, url: new URL(text) }
  } catch {
    return undefined
  }
}

/**
 * The host a trusted proxy says the request is for (X-Forwarded-Host, else Host), as
 * forwardAuth.hosts names hosts (see hostKey), read by the parser that reads the original URL;
 * undefined when the peer is no trusted proxy (its word names nothing), null when the value is
 * not a host (which rules apply could not be told: refused). A name with an empty label is none:
 * `payroll.example.com..` (two trailing dots, which hostKey left one of) matched no entry of
 * forwardAuth.hosts, so its rules did not apply (an outside tester's finding).
 */
function forwardedHost (fromProxy: boolean, request: FastifyRequest, named: NamedUrl | undefined | null): string | undefined | null {
  if (!fromProxy) return undefined
  const host = named === null ? null : forwardedHostName(request, named)
  if (host === null) return null
  try {
    const url = new URL(`http://${host}/`)
    const key = hostKey(url)
    return key === '' || key.split('.').includes('') ? null : key
  } catch {
    return null
  }
}

/** The original request as X-Original-URL names it: its scheme (lower case), host and raw path with query. */
interface NamedUrl { scheme: string, host: string, uri: string }

/**
 * X-Original-URL, which ingress-nginx's auth location sets (`$scheme://$http_host$request_uri`)
 * where other proxies set X-Forwarded-Host and -Uri: the Host it sends is the auth-url's own, and a
 * client's X-Forwarded-Host and -Uri pass through it as the client wrote them (an outside tester's
 * finding: per-host rules judged the gateway's own host, and a client chose the path a `deny`
 * judged). Undefined when not sent; null when it cannot be read (sent twice, or joined by a proxy
 * into one value with `, `; no http(s) URL with a host and a path), which leaves the host and the
 * path untold. Read from a trusted proxy only.
 */
function namedUrl (request: FastifyRequest): NamedUrl | undefined | null {
  const values = request.raw.headersDistinct['x-original-url']
  if (values === undefined) return undefined
  const match = values.length === 1 ? /^(https?):\/\/([^/?#\\@\s]+)(\/[^#\s]*)$/i.exec(values[0]!) : null
  return match === null ? null : { scheme: match[1]!.toLowerCase(), host: match[2]!, uri: match[3]! }
}

/**
 * The host the original request was for: X-Forwarded-Host (else Host, as request.host reads them
 * from a trusted proxy), or X-Original-URL's where that is sent. Both sent: they must name the same
 * host (hostKey), else null: the host cannot be told, and whose rules apply with it.
 */
function forwardedHostName (request: FastifyRequest, named: NamedUrl | undefined): string | null {
  if (named === undefined) return request.host
  if (request.headers['x-forwarded-host'] === undefined) return named.host
  try {
    return hostKey(new URL(`${named.scheme}://${request.host}/`)) === hostKey(new URL(`${named.scheme}://${named.host}/`)) ? named.host : null
  } catch {
    return null
  }
}

/**
 * Whether the proxy in front named the original host only in X-Original-URL, as ingress-nginx's
 * auth location does from `$http_host`: the client's Host header, while nginx chose the Ingress by
 * the request line's host when the target is in absolute form (a re-reading's finding: `GET
 * http://payroll.example.com/pay` with `Host: wiki.example.com` was judged by wiki's rules). With
 * `forwardAuth.hosts` rules, such a request is refused until the proxy also sends the host it chose
 * in X-Forwarded-Host (`$host`), which must then agree (forwardedHostName).
 */
function namedOnlyInUrl (request: FastifyRequest): boolean {
  return request.headers['x-original-url'] !== undefined && request.headers['x-forwarded-host'] === undefined
}

const NAMED_ONLY_IN_URL = 'the proxy in front named the host only in X-Original-URL, which the client\'s Host header writes; ' +
  'have it send the host it chose as X-Forwarded-Host too (ingress-nginx: auth-proxy-set-headers with X-Forwarded-Host: $host, docs/forward-auth.md)'

/**
 * Whether this is a browser's own request for the answer, not a proxy's for the request it guards:
 * it carries a browser's Fetch Metadata (`Sec-Fetch-Site`, which proxies pass on from the request
 * they guard) and comes from a peer no `server.trustProxy` entry admits, or from a trusted one that
 * names no original request (a relay of the page's request: a re-reading's finding, through
 * deployment.md's nginx) or names this endpoint on the gateway's own origin. Answered, the 200
 * hands the provider's access token (and the assertion) to whatever script runs on the gateway's
 * origin (an outside tester's finding: `fetch('/oauth/auth/demo/')` from a page of another route
 * read the person's token). An application's own `/oauth/auth/...` on its own host is no such case.
 */
function browserOwn (request: FastifyRequest, fromProxy: boolean, original: OriginalUrl | undefined, ownHost: string): boolean {
  if (request.headers['sec-fetch-site'] === undefined) return false
  if (!fromProxy || original === undefined) return true
  // As the gateway's edge reads a target (`%61uth` is `auth`), in any case.
  const canonical = canonicalTarget(original.uri)
  // On the gateway's own host, whatever scheme or port the proxy in front serves it on.
  return original.url.hostname === ownHost && canonical.ok && canonical.url.toLowerCase().startsWith(FORWARD_AUTH_PREFIX)
}

const HOST_UNTOLD = 'Forward-auth cannot tell which host this request is for: it comes from no proxy that server.trustProxy admits (only a trusted proxy\'s X-Forwarded-Host is read), ' +
  'and forwardAuth.hosts has rules, which would not be applied; list the proxy in server.trustProxy (docs/forward-auth.md)'

const FORWARD_AUTH_PREFIX = '/oauth/auth/'
const BROWSER_OWN = 'Forward-auth answers the proxy in front of an application, not a browser: this request carries a browser\'s Sec-Fetch-Site ' +
  'and comes from no proxy that server.trustProxy admits, or from one that names no original request or this endpoint as the one it guards; ' +
  'list the proxy in server.trustProxy, and have it send X-Forwarded-Uri (docs/forward-auth.md)'

/**
 * Where the sign-in returns: the path itself when the original URL is on the gateway's own
 * origin, else the absolute URL when its host is allowed; otherwise /oauth/. Either way the
 * value as sent, checked by safeNext (which refuses what the URL parser would have changed).
 */
function returnTo (original: OriginalUrl | undefined, ownOrigin: string, redirectHosts: RedirectHosts): string {
  if (!original) return HOME
  const { text, uri, url } = original
  if (url.origin === ownOrigin && url.username === '' && url.password === '') return safeNext(uri)
  return safeNext(text, redirectHosts)
}

export async function forwardAuth (app: FastifyInstance, { config, providers, access, accessTokens, bearerReports, assertions, metrics }: ForwardAuthDeps): Promise<void> {
  const trusted = trustTest(config.server.trustProxy)
  const ownOrigin = new URL(config.server.baseUrl).origin
  const ownHost = new URL(ownOrigin).hostname
  const redirectHosts = new RedirectHosts(config.forwardAuth.allowedRedirectHosts, ownOrigin)
  const proxySent = proxySecretTest(config.forwardAuth, metrics)
  /** Why this is no auth request of the proxy in front (forwardAuth.proxySecret, browserOwn, a host untold); undefined when it may be. */
  function notTheProxy (request: FastifyRequest, fromProxy: boolean, original: OriginalUrl | undefined): string | undefined {
    if (!proxySent(request)) return NO_PROXY_SECRET
    if (browserOwn(request, fromProxy, original, ownHost)) return BROWSER_OWN
    // Whose host's rules apply only a trusted proxy can say: answering a stranger would skip them.
    return !fromProxy && config.forwardAuth.hosts.size > 0 ? HOST_UNTOLD : undefined
  }
  // Each host's rules compiled once (their path globs included); the query's are compiled per request.
  const hostJudges = new Map([...config.forwardAuth.hosts].map(([host, rules]) => [host, compileRules(rules)]))
  const hostBearers = new HostBearers(config, accessTokens, bearerReports)
  // Whose names its people's may read as (access/name-spaces.ts).
  const spaces = nameSpaces(config.providers)
  // Each bearer host's series shows in /metrics from the start, at 0.
  for (const host of config.forwardAuth.bearer.keys()) bearerReports.for(`forward-auth:${host}`)

  /**
   * Who signs the assertion for the original URL's origin, the audience an upstream behind nginx
   * or Caddy checks: only the gateway's own origin and hosts listed in forwardAuth.hosts (whose
   * rules the gate applies) get one; a host that is merely a redirect target does not.
   */
  function signerFor (provider: string, audience: string | undefined): Guard['signer'] {
    if (assertions === undefined || audience === undefined) return undefined
    if (audience !== ownOrigin && !config.forwardAuth.hosts.has(hostKey(new URL(audience)))) return undefined
    return assertions.forAnyAudience(provider, audience)
  }

  app.addHook('onSend', async (_request, reply) => {
    reply.header('cache-control', 'no-store')
  })

  app.get<{ Params: { provider: string }, Querystring: Record<string, string | string[] | undefined> }>(FORWARD_AUTH_ROUTE, async (request, reply) => {
    const provider = request.params.provider
    if (!providers.signsIn(provider)) throw unknownProvider(provider)
    // Whether a trusted proxy asks, and the X-Original-URL it names, read once for every use below.
    const fromProxy = trusted(request.socket.remoteAddress ?? '', 0)
    const named = fromProxy ? namedUrl(request) : undefined
    const original = originalUrl(fromProxy, request, named)
    const notFromProxy = notTheProxy(request, fromProxy, original)
    // Its line says the refusal, as the rules' 403 does (an attacker's finding: no decision at all).
    if (notFromProxy !== undefined) throw new GatewayError('forbidden', notFromProxy, { details: { audit: { decision: 'forbidden', reason: 'not_from_proxy' } } })
    const back = returnTo(original, ownOrigin, redirectHosts)
    const login = loginUrl(config, provider, back)
    const host = forwardedHost(fromProxy, request, named)
    if (host === null) throw refusal({ kind: 'invalid_request', reason: 'the forwarded host is not a host name' }, { subject: 'this provider' })
    if (host !== undefined && config.forwardAuth.hosts.size > 0 && namedOnlyInUrl(request)) throw refusal({ kind: 'invalid_request', reason: NAMED_ONLY_IN_URL }, { subject: 'this provider' })
    // The query's rules, and the host's rules from gateway.yaml besides: a caller that leaves out the
    // query (or a proxy configured without it) gets no more than the host allows. Both judge the
    // original request (its method and path), not this one. Compiled per request: a few rules, no
    // `public` globs. Never a redirect: the proxy in front answers a browser (X-Login-URL).
    const hostJudge = host === undefined ? undefined : hostJudges.get(host)
    const subject = originalRequest(fromProxy, request, original)
    refuseUnreadParameters(request.query, request.url)
    const judge = forwardJudge(queryRules(request.query), hostJudge, subject)
    const gate = compileGate({ path: undefined, auth: 'required', provider, rules: { allow: undefined, deny: [] }, public: [], spaces }, () => login, judge)
    // Only the host a trusted proxy names can have a bearer block: a stranger's token is not looked at.
    const bearer = hostBearers.guard(host, provider)
    const audience = original?.url.origin
    const signer = signerFor(provider, audience)
    const guard: Guard = bearer === undefined ? { gate, signer } : { gate, signer, bearer, bearerSigner: (issuer) => signerFor(issuer, audience) }
    const authorization = bearer === undefined ? undefined : credential(request.raw.headersDistinct[bearer.header])
    const verdict = await access.authorize(guard, { method: request.method, target: request.url, address: subject.address, html: false, cookie: request.headers.cookie, authorization })
    const site: Site = { kind: 'forward-auth', identityHeaders: DEFAULT_IDENTITY_HEADERS, claimHeaders: [], switchAccountUrl: (next) => switchAccountUrl(config, provider, next), retry: () => ({ loginUrl: login }) }
    const answer = respond(verdict, authorization, site, back)
    if (verdict.kind === 'forbidden' && verdict.refusedBy !== undefined) metrics.ruleRefusals.inc({ route: 'forward-auth', refused_by: verdict.refusedBy })
    request.audit = forwardAudit(answer.audit, request, fromProxy, { uri: original?.uri, method: subject.method, path: subject.path }, back)
    // The responder never forwards forward-auth's public path nor redirects it (a 500 if it did).
    if (answer.kind !== 'forward' || answer.allowed === undefined) throw answer.kind === 'refuse' ? answer.error : new Error(`forward-auth was answered ${answer.kind}`)
    const allowed = answer.allowed
    reply.header('authorization', `Bearer ${allowed.accessToken}`)
    reply.headers(identityHeaders(allowed.identity, DEFAULT_IDENTITY_HEADERS, {}))
    if (allowed.assertion !== undefined) reply.header(config.assertion.header, allowed.assertion)
    return reply.code(200).send()
  })
}
