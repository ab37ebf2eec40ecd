// One encapsulated scope per route: on protected routes an onRequest hook that asks the request
// pipeline (src/access/authorize.ts) and acts on its verdict, then the route's own path and
// everything under it sent on by the route's forwarder (proxy/forward.ts), with the request-header rewrite
// (proxy/request-headers.ts), over the route's own connection pool (proxy/upstream-pool.ts: the
// timeout covers the wait for a connection). The upstream path is the canonical one with the
// route's prefix rewritten and nothing else (proxy/upstream-path.ts); request bodies stream
// unparsed. Upstream failures are answered by proxy/upstream-response.ts; an answer that breaks
// off after its headers went out is logged and counted by RequestEnd (proxy/cut-off.ts names what
// happened). A websocket route's upgrades are taken over before the proxy's handler (routes/websocket-route.ts).
import { chooserUrl, loginUrlsOf } from './chooser.js'
import { namesNetworks } from '../access/networks.js'
import type { FastifyInstance, FastifyReply, FastifyRequest, HookHandlerDoneFunction } from 'fastify'
import type { Access, GrantGuard, Guard, Verdict } from '../access/authorize.js'
import { bearerToken, compileBearer, type BearerGuard } from '../access/bearer.js'
import type { BearerReports } from '../access/bearer-report.js'
import { compileGate } from '../access/gate.js'
import { nameSpaces } from '../access/name-spaces.js'
import { respond, type Site } from '../access/responder.js'
import type { Assertions } from '../assertion/assertions.js'
import { claimPaths } from '../config/rule-lists.js'
import type { GatewayConfig, ReauthConfig, RouteConfig } from '../config/types.js'
import { GatewayError } from '../errors.js'
import { ownAnswerReadable } from '../http/cors.js'
import { closeIfBodyUnread, wantsHtml } from '../http/error-handler.js'
import { upgradeOf } from '../http/upgrades.js'
import { allCookieNames, loginUrl, resourceMetadataUrl, switchAccountUrl } from '../oauth/urls.js'
import { stepUpEnds } from '../oauth/step-up.js'
import type { Session } from '../session/session.js'
import type { AccessTokens } from '../oauth/access-tokens.js'
import type { Metrics } from '../ops/metrics.js'
import { BodyDeadlines } from '../proxy/body-deadline.js'
import { cutOffFields, isUpstreamBodyError, type UpstreamTarget } from '../proxy/cut-off.js'
import { UpstreamHeaders } from '../proxy/request-headers.js'
import { upstreamBody } from '../proxy/request-body.js'
import { UpstreamPool } from '../proxy/upstream-pool.js'
import type { StreamedBody } from '../proxy/upstream-body.js'
import { upstreamPaths } from '../proxy/upstream-path.js'
import { upstreamError, withoutUpstreamHeaders } from '../proxy/upstream-response.js'
import { forwarder, type ForwardParts } from '../proxy/forward.js'
import type { SessionSockets } from '../proxy/session-sockets.js'
import type { BearerSockets } from '../proxy/bearer-sockets.js'
import type { SessionStreams } from '../proxy/session-streams.js'
import { TOKEN_SKEW_MS } from '../agents/grant-tokens.js'
import { methodOverrideHookFor } from './method-override-hook.js'
import type { FormReplay } from './form-replay.js'
import { websocketRoute } from './websocket-route.js'
import { admitBearerSockets, bearerHoldsOf, holdBearerStream, pastExp, tokenEnded, type BearerHolds } from './bearer-holds.js'

export interface ProxyDeps {
  config: GatewayConfig
  access: Access
  /** Checks machine clients' tokens on routes with `bearer:`. */
  accessTokens: AccessTokens
  metrics: Metrics
  /** Counts and logs each machine client's token a route checks. */
  bearerReports: BearerReports
  /** Present when any route (or the `assertion` section) asks for signed assertions. */
  assertions?: Assertions | undefined
  /** Keeps and delivers forms through a sign-in on routes with `preserveBody`. */
  forms?: FormReplay | undefined
  /** The open websockets of each session, closed when it ends (absent: they outlive it). */
  sockets?: SessionSockets | undefined
  /** The open websockets of machine clients' tokens, closed when the token ends (absent: they outlive it). */
  bearerSockets?: BearerSockets | undefined
  /** Tracing is on: the gateway's own `traceparent` goes upstream instead of the client's. */
  traced?: boolean
  /** The check of the tokens the gateway issued to agents, for a route with `agents: true` (absent: none). */
  grants?: ((route: RouteConfig) => GrantGuard | undefined) | undefined
  /** The answers in flight for agents' tokens and browsers' event streams, cut when their session ends (absent: they outlive it). */
  streams?: SessionStreams | undefined
}

/** What act() needs of the route besides the verdict: where it is answered, and its kept forms. */
interface RouteActs {
  readonly site: Site
  /** With `preserveBody`: keeps a browser's form POST before the redirect to sign in; resolves with the kept form's flow binding. */
  readonly keepForm?: ((request: FastifyRequest, reply: FastifyReply, loginUrl: string) => Promise<string | undefined>) | undefined
  /** Counts a refusal by the rules (gateway_rule_refusals_total). */
  readonly refused: (refusedBy: string) => void
}

/**
 * Acts on the pipeline's verdict as the responder (access/responder.ts) answers it, and on nothing
 * else: only an admitted request gets `request.allowed` (what the header rewrite forwards). Calls
 * `done` unless it answered.
 * @param authorization the header the route's bearer check reads, as sent (for the audit fields)
 */
function act (request: FastifyRequest, reply: FastifyReply, verdict: Verdict, authorization: string | undefined, route: RouteActs, done: HookHandlerDoneFunction): void {
  const answer = respond(verdict, authorization, route.site, request.url)
  request.audit = answer.audit
  switch (answer.kind) {
    case 'forward':
      request.allowed = answer.allowed
      return done()
    case 'refuse':
      if (verdict.kind === 'forbidden' && verdict.refusedBy !== undefined) route.refused(verdict.refusedBy)
      return done(answer.error)
    case 'redirect': {
      const location = answer.location
      if (route.keepForm === undefined) {
        closeIfBodyUnread(request, reply)
        reply.redirect(location, 302)
        return
      }
      // The login address (always with `?next=`) carries the kept form's binding into the flow's signed state.
      route.keepForm(request, reply, location).then((form) => {
        closeIfBodyUnread(request, reply)
        reply.redirect(form === undefined ? location : `${location}&form=${form}`, 302)
      }, done)
    }
  }
}

/** The route's guard: its gate, the signer of its assertions when it sends them, and its token check with `bearer:`. */
function guardOf (config: GatewayConfig, route: RouteConfig, assertions: Assertions | undefined, accessTokens: AccessTokens, reports: BearerReports, grants: GrantGuard | undefined): Guard {
  // The config requires a provider on a protected route (compileGate checks it again).
  const provider = route.provider!
  const metadata = route.bearer === undefined && !route.agents ? undefined : resourceMetadataUrl(config.server.baseUrl, route.path)
  // With several providers, a browser chooses (routes/chooser.ts) and an API client is told each one's address.
  const several = route.providers.length > 1
  const named = { ...route, spaces: nameSpaces(config.providers) }
  const gate = several
    ? compileGate(named, (next) => chooserUrl(config, next), undefined, metadata, (next) => loginUrlsOf(config, route, next))
    : compileGate(named, (next) => loginUrl(config, provider, next), undefined, metadata)
  // Signed once per session and then read from a cache; only when it nears expiry is it signed again.
  const audience = new URL(route.upstream).origin
  const signer = route.assertion ? assertions?.forAudience(provider, audience) : undefined
  const signers = several && route.assertion && assertions !== undefined ? Object.fromEntries(route.providers.map((name) => [name, assertions.forAudience(name, audience)])) : undefined
  if (route.bearer === undefined) return { gate, signer, signers, grants }
  // A machine client's identity keeps the claims this route's rules and headers read.
  const kept = [...new Set([...claimPaths(route.rules), ...route.headers.map((header) => header.claim)])]
  const bearer = compileBearer(route.bearer, config.providers, { own: provider, spaces: gate.spaces, kept }, accessTokens, metadata, reports.for(route.path))
  const bearerSigner = route.assertion && assertions !== undefined ? (issuer: string) => assertions.forAudience(issuer, audience) : undefined
  return { gate, signer, bearer, bearerSigner, grants }
}

export async function proxyRoutes (app: FastifyInstance, { config, access, accessTokens, metrics, bearerReports, assertions, forms, sockets, bearerSockets, traced = false, grants, streams }: ProxyDeps): Promise<void> {
  app.decorateRequest('allowed', undefined)
  app.decorateRequest('upstreamStart', undefined)
  app.decorateRequest('upstreamBody', undefined)
  const gatewayCookies = allCookieNames(config)
  /** The same names in lower case: what an upstream's Set-Cookie may never set. */
  const plantable = gatewayCookies.map((name) => name.toLowerCase())
  const headers = new UpstreamHeaders(config, gatewayCookies, traced)

  for (const route of config.routes) {
    await app.register(async (scope) => {
      // Counted when the response has finished (RequestEnd), by whichever route's scope answered it.
      const routeMetrics = metrics.forRoute(route.path)
      scope.decorateRequest('routeMetrics', { getter: () => routeMetrics })
      if (route.websocket) {
        // Browsers let any site open a websocket with the user's cookies (no CORS): only pages of
        // the gateway's own origin, or of one the route lists, may (cross-site websocket hijacking).
        // A machine client's bearer token is no such ambient credential (a page cannot put one on a
        // websocket's handshake), and a CLI or service sends no Origin: the token's check decides.
        const origins = new Set([new URL(config.server.baseUrl).origin, ...route.allowedOrigins])
        const bearerHeader = route.bearer?.header ?? (route.agents ? 'authorization' : undefined)
        scope.addHook('onRequest', (request, _reply, done) => {
          if (request.headers.upgrade?.toLowerCase() !== 'websocket' || origins.has(request.headers.origin ?? '')) return done()
          if (bearerHeader !== undefined && bearerToken(request.headers[bearerHeader]) !== undefined) return done()
          // Refused before the access hook: its line says so all the same (an attacker's finding: no decision at all).
          done(new GatewayError('forbidden', 'This websocket connection was not opened by a page of this site.', { details: { audit: { decision: 'forbidden', reason: 'origin' } } }))
        })
      }
      let holds: BearerHolds | undefined
      if (route.auth === 'required') {
        const guard = guardOf(config, route, assertions, accessTokens, bearerReports, grants?.(route))
        // An agent's token (src/agents/) comes in Authorization.
        const bearerHeader = route.bearer?.header ?? (route.agents ? 'authorization' : undefined)
        const limit = route.preserveBodyBytes
        let keepForm: RouteActs['keepForm']
        if (forms !== undefined && limit !== undefined) {
          keepForm = async (request, reply, loginUrl) => await forms.keep(app, request, reply, limit, loginUrl)
          scope.addHook('preParsing', forms.deliverer(route))
        }
        const switchAccount = switchAccountOf(config, route)
        const site: Site = { kind: 'route', identityHeaders: route.identityHeaders, claimHeaders: route.headers, switchAccountUrl: switchAccount, retry: (next) => ({ retryUrl: next }) }
        const acts: RouteActs = { site, keepForm, refused: (refusedBy) => metrics.ruleRefusals.inc({ route: route.path, refused_by: refusedBy }) }
        // The client address (proxy-addr's walk under trustProxy) only where a rule judges it.
        const judgesAddress = namesNetworks(route.rules)
        // A callback hook: a verdict the pipeline gives at once (a session this instance verified
        // moments ago, with a fresh token) goes through without a promise.
        scope.addHook('onRequest', (request, reply, done) => {
          const authorization = bearerHeader === undefined ? undefined : request.headers[bearerHeader]
          const verdict = access.authorize(guard, { method: request.method, target: request.url, address: judgesAddress ? request.ip : undefined, html: wantsHtml(request), cookie: request.headers.cookie, authorization })
          if (verdict instanceof Promise) verdict.then((settled) => act(request, reply, settled, authorization, acts, done), done)
          else act(request, reply, verdict, authorization, acts, done)
        })
        // After a kept form is delivered: its body's `_method` is judged too.
        const overrides = methodOverrideHookFor(route, guard.gate, switchAccount)
        if (overrides !== undefined) scope.addHook('preParsing', overrides)
        if (route.agents && streams !== undefined && guard.grants !== undefined) holdGrantStreams(scope, streams, guard.grants, bearerHeader ?? 'authorization', config.session.maxAgeMs, route)
        holds = bearerHoldsOf(route.path, bearerSockets, guard, judgesAddress)
        if (route.websocket) admitWebsockets(scope, route, guard, sockets, bearerSockets, holds)
      }
      const held = route.auth === 'required' ? heldStreams(route, streams, config.session.maxAgeMs, holds) : undefined
      await registerProxy(scope, route, { headers, plantable, sockets, bearerSockets, challenge: agentsChallenge(config, route), streams: held })
    })
  }
}

/** Where "Use another account" goes: with several providers, a sign-out back to the page, where the chooser lets the person pick again. */
function switchAccountOf (config: GatewayConfig, route: RouteConfig): (next: string) => string {
  const provider = route.providers.length > 1 ? undefined : route.provider
  return (next) => switchAccountUrl(config, provider, next)
}

/** After the access hook: each websocket kept with what let it through, to end with it. */
function admitWebsockets (scope: FastifyInstance, route: RouteConfig, guard: Guard, sockets: SessionSockets | undefined, bearerSockets: BearerSockets | undefined, holds: BearerHolds | undefined): void {
  if (sockets !== undefined) admitSockets(scope, sockets, route.provider!, route.reauth)
  // An agent's token comes where the access hook read it: the route's bearer header, else Authorization.
  if (bearerSockets !== undefined && guard.grants !== undefined) admitAgentSockets(scope, bearerSockets, guard.grants, route.bearer?.header ?? 'authorization')
  if (holds !== undefined) admitBearerSockets(scope, holds)
}

/**
 * After the access hook: an upgrade a session let through is kept with that session, so that its
 * websocket ends with it (proxy/session-sockets.ts); an agent's, with its grant's session. A
 * machine client's token has no session.
 */
function admitSockets (scope: FastifyInstance, sockets: SessionSockets, provider: string, reauth: ReauthConfig | undefined): void {
  // On a route with `reauth`, a socket lasts as long as the sign-in it was admitted under meets it.
  const stepUp = reauth === undefined ? undefined : (session: Session) => stepUpEnds(reauth, session.record.providerSessions?.[provider])
  scope.addHook('onRequest', (request, _reply, done) => {
    const credential = request.audit?.credential
    if (request.headers.upgrade?.toLowerCase() !== 'websocket' || request.audit?.decision !== 'allow' || (credential !== 'session' && credential !== 'agent')) return done()
    const admitted = sockets.admit(request, credential === 'agent' ? request.allowed?.grant?.cookie : request.headers.cookie, request.allowed?.provider ?? provider, stepUp)
    if (admitted === undefined) return done()
    admitted.then(() => done(), done)
  })
}

/**
 * After the access hook: an upgrade an agent's token let through is also kept with that token, so
 * that its websocket ends at the token's `exp` (1008, as a machine client's), or with its grant's
 * session (admitSockets), whichever comes first.
 */
function admitAgentSockets (scope: FastifyInstance, sockets: BearerSockets, grants: GrantGuard, header: BearerGuard['header']): void {
  scope.addHook('onRequest', (request, _reply, done) => {
    const token = bearerToken(request.headers[header])
    if (request.headers.upgrade?.toLowerCase() !== 'websocket' || request.audit?.decision !== 'allow' || request.audit.credential !== 'agent' || typeof token !== 'string') return done()
    // Checked by the access hook a moment ago; should it be gone from that cache, nothing says how long it holds.
    const until = grants.until(token)
    if (until === undefined) return done(tokenEnded())
    done(sockets.admit(request, { until, introspected: false, ends: until }, () => undefined, { route: request.routeOptions.url }) ? undefined : pastExp())
  })
}

/**
 * After the access hook: an agent's request (not an upgrade: its websocket is a session socket) is
 * held with its grant, so that its answer ends with it, and at the end of the token it came with,
 * of the grant's session.maxAge, or once the route's `reauth` no longer admits the grant's sign-in,
 * whichever is first (an outside tester's finding: a stream on a step-up route ran to the token's
 * end, an hour past what the person's browser got).
 */
function holdGrantStreams (scope: FastifyInstance, streams: SessionStreams, grants: GrantGuard, header: BearerGuard['header'], maxAgeMs: number, route: RouteConfig): void {
  const { reauth, websocket: websockets } = route
  scope.addHook('onRequest', (request, reply, done) => {
    const grant = request.allowed?.grant
    // An allowed verdict carries a grant only for an agent's token. Only a websocket the route takes
    // over is not an answer (its sockets are kept apart): any other Upgrade header is answered as
    // HTTP, and was not held (a re-reading's finding: `Upgrade: h2c` kept a stream past its grant).
    // upgrades.ts marks an upgrade by the websocket route's prefix: a route nested under it answers it as HTTP (a re-reading's finding).
    if (grant !== undefined && !(websockets && upgradeOf(request.raw) !== undefined)) {
      const token = bearerToken(request.headers[header])
      // Cut once the token would be refused: its exp plus the skew a request is let through with.
      const expires = typeof token === 'string' ? grants.until(token) : undefined
      const stepUp = reauth === undefined ? undefined : stepUpEnds(reauth, grant.signIns?.[request.allowed?.provider ?? route.provider!])
      // Whichever comes first, named in its lines (an attacker's finding: a stream cut for reauth was said to have ended with its token).
      const ends: Array<[number, string]> = [[grant.createdAt + maxAgeMs, 'its grant\'s session.maxAge ended'], [expires === undefined ? Infinity : expires + TOKEN_SKEW_MS, 'its token ended'], [stepUp ?? Infinity, 'its route\'s reauth.maxAge ended']]
      const [until, why] = ends.reduce((first, next) => next[0] < first[0] ? next : first)
      streams.hold(grant.sessionId, reply.raw, until, 'agent', why)
    }
    done()
  })
}

/**
 * A browser's streamed answer (an event stream, or a body of no declared length, to a request a
 * session let through) is held with that session, so that it ends with it, at its
 * `session.maxAge`, or once the route's `reauth` no longer admits the sign-in it was let through
 * under; a machine client's, with its token (routes/bearer-holds.ts).
 */
function heldStreams (route: RouteConfig, streams: SessionStreams | undefined, maxAgeMs: number, holds: BearerHolds | undefined): ForwardParts['streams'] {
  if (streams === undefined && holds === undefined) return undefined
  const { reauth } = route
  return (request, response) => {
    // A machine client's, with its token (routes/bearer-holds.ts).
    if (holds !== undefined && request.audit?.credential === 'bearer') return holdBearerStream(request, response, holds)
    if (streams === undefined || request.audit?.credential !== 'session') return
    const provider = request.allowed?.provider ?? route.provider!
    streams.holdBrowser(request.headers.cookie, response, (session) => {
      const stepUp = reauth === undefined ? undefined : stepUpEnds(reauth, session.record.providerSessions?.[provider])
      return Math.min(session.record.createdAt + maxAgeMs, stepUp ?? Infinity)
    })
  }
}

/** An agents route's clients find their authorization server in a 401's challenge: only the gateway's may name one. */
function agentsChallenge (config: GatewayConfig, route: RouteConfig): string | undefined {
  return route.agents ? `Bearer resource_metadata="${resourceMetadataUrl(config.server.baseUrl, route.path)}"` : undefined
}

interface ProxyParts {
  readonly headers: UpstreamHeaders
  readonly plantable: readonly string[]
  readonly sockets: SessionSockets | undefined
  readonly bearerSockets: BearerSockets | undefined
  /** What replaces an upstream's WWW-Authenticate (agents routes: the gateway's own challenge). */
  readonly challenge: string | undefined
  readonly streams: ForwardParts['streams']
}

/** The route's forwarder (proxy/forward.ts) in the route's scope, over the route's own pool, with its error handling. */
async function registerProxy (scope: FastifyInstance, route: RouteConfig, { headers, plantable, sockets, bearerSockets, challenge, streams }: ProxyParts): Promise<void> {
  const target: UpstreamTarget = { route: route.path, upstream: new URL(route.upstream).origin, timeoutMs: route.timeoutMs }
  const pool = new UpstreamPool({ origin: target.upstream, timeoutMs: route.timeoutMs, maxConnections: route.maxConnections })
  const deadlines = new BodyDeadlines(route.timeoutMs)
  // Requests in flight have finished by onClose.
  scope.addHook('onClose', async () => {
    deadlines.close()
    await pool.destroy()
  })
  // A streamed body that failed before its headers went out reaches the error handler: it is
  // the upstream's failure (502/504, its headers dropped); anything else goes on to the
  // gateway's handler. Once the headers went out, RequestEnd asks upstreamCutOff.
  scope.setErrorHandler((error, request, reply) => {
    if (!isUpstreamBodyError(error)) throw error
    withoutUpstreamHeaders(reply)
    throw upstreamError(target, error, request.url)
  })
  const upstreamCutOff = (error: Error, request: FastifyRequest) => cutOffFields(target, error, request.upstreamBody)
  scope.decorateRequest('upstreamCutOff', { getter: () => upstreamCutOff })
  const paths = upstreamPaths(route.path, route.rewritePrefix)
  // Bodies stream to the upstream as they come, whatever their type: nothing parses them here.
  // An upstream failing mid-upload must not end the client's request before it is answered (request-body.ts).
  scope.removeAllContentTypeParsers()
  scope.addContentTypeParser('*', (_request, payload, done) => { done(null, upstreamBody(payload)) })
  // The upgrade request goes through the same access hook; the upstream handshake gets the same
  // headers; the upstream's leg is opened before the client's upgrade is answered (websocket.ts).
  if (route.websocket) websocketRoute(scope, route, { target, headers, paths, sockets, bearerSockets })
  // The route's own path and everything under it.
  // A shutdown waits for the requests in flight, but an event stream never ends by itself: each is
  // ended cleanly first (its EventSource reconnects to another instance), as websockets are closed.
  const eventStreams = { open: new Set<StreamedBody>(), closing: false }
  scope.addHook('preClose', async () => {
    eventStreams.closing = true
    if (eventStreams.open.size > 0) scope.log.info({ route: route.path, streams: eventStreams.open.size }, 'event streams ended for the shutdown')
    for (const body of eventStreams.open) body.finish()
  })
  // A client in a web page reads the gateway's own 401 to find where to authorize (http/cors.ts).
  if (route.agents) scope.addHook('onSend', ownAnswerReadable)
  const handler = forwarder({ route, target, pool, paths, headers, deadlines, plantable, challenge, streams, eventStreams })
  const prefix = route.path === '/' ? '' : route.path
  for (const url of [prefix || '/', `${prefix}/*`]) scope.route({ method: PROXIED_METHODS, url, handler, config: { proxied: true } })
}

/** The methods a route proxies; any other is 404 `not_found`, as for a path no route has. */
const PROXIED_METHODS = ['DELETE', 'GET', 'HEAD', 'PATCH', 'POST', 'PUT', 'OPTIONS']
