// One encapsulated scope per route: on protected routes an onRequest hook that reads the session
// when the access gate (src/access/gate.ts) asks and acts on its decision, and @fastify/http-proxy
// with the request-header rewrite (bearer injected, gateway cookies removed, X-Forwarded-* set),
// over the route's own connection pool (proxy/upstream-pool.ts: the timeout covers the wait for a
// connection). Upstream failures are translated here: timeouts to gateway_timeout, the rest to
// bad_gateway, each logged as one warn line naming the route; an answer that breaks off after its
// headers went out is logged and counted by RequestEnd (proxy/cut-off.ts names what happened).
import httpProxy, { type FastifyHttpProxyOptions } from '@fastify/http-proxy'
import type { FastifyInstance, FastifyReply, FastifyRequest, HookHandlerDoneFunction } from 'fastify'
import type { IncomingHttpHeaders } from 'node:http'
import type { Readable } from 'node:stream'
import type { Assertions } from '../assertion/assertions.js'
import type { Dispatcher } from 'undici'
import type { GatewayConfig, RouteConfig } from '../config/types.js'
import { wantsHtml } from '../http/error-handler.js'
import { GatewayError } from '../http/errors.js'
import { loginUrl } from '../oauth/routes.js'
import type { Metrics } from '../ops/metrics.js'
import type { TokenRefresher } from '../oauth/refresh.js'
import type { Session, Sessions } from '../session/session.js'
import { compileGate, decide, failed, NO_SESSION, signedIn, UNREAD, type Decision, type SessionState } from '../access/gate.js'
import type { Identity } from '../access/identity.js'
import { refusal } from '../access/refusal.js'
import { BodyDeadlines } from './body-deadline.js'
import { cutOffFields, isUpstreamBodyError, type UpstreamTarget } from './cut-off.js'
import { forwardedHostOf } from './forwarded-host.js'
import { ClientHeaderFilter, clientBoundHeaders } from './headers.js'
import { UpstreamFailure, UpstreamPool } from './upstream-pool.js'
import { websocketHooks } from './websocket.js'

declare module 'fastify' {
  interface FastifyRequest {
    /** The provider's access token for this request, set by the auth gate of a protected route. */
    accessToken: string | undefined
    /** Who the user is at the route's provider (identity headers), set by the auth gate. */
    identity: Identity | undefined
    /** The signed identity assertion for the route's upstream, set by the gate of a route with `assertion: true`. */
    assertion: string | undefined
    /** The upstream's body while it streams to the client: what a cut-off's line counts the bytes of. */
    upstreamBody: Readable | undefined
  }
}

export interface ProxyDeps {
  config: GatewayConfig
  sessions: Sessions
  refresher: TokenRefresher
  metrics: Metrics
  /** Present when any route (or the `assertion` section) asks for signed assertions. */
  assertions?: Assertions | undefined
}

/** What the header rewrite reads of a request (HTTP/1 and HTTP/2 requests both have it). */
type ForwardedRequest = Pick<FastifyRequest, 'protocol' | 'ips' | 'accessToken' | 'identity' | 'assertion'> & { socket: { remoteAddress?: string } }

/** Removes the named cookies from a Cookie header; undefined when none is left. */
function stripCookies (header: string | undefined, names: readonly string[]): string | undefined {
  if (!header) return undefined
  if (!names.some((name) => header.includes(name))) return header
  const kept = header.split(';').filter((part) => {
    const name = part.slice(0, part.indexOf('=') === -1 ? undefined : part.indexOf('=')).trim()
    return name !== '' && !names.includes(name)
  })
  return kept.length > 0 ? kept.map((part) => part.trim()).join('; ') : undefined
}

type WsClientOptions = NonNullable<FastifyHttpProxyOptions['wsClientOptions']> & {
  rewriteRequestHeaders: (headers: Record<string, string>, request: FastifyRequest) => Record<string, string>
}

const FORWARDED_TO_WEBSOCKET = new Set(['authorization', 'cookie', 'origin', 'x-forwarded-for', 'x-forwarded-proto', 'x-forwarded-host', 'user-agent'])

/** Error codes of an upstream that took longer than the route's timeout (undici's, and reply-from's for its own). */
const TIMEOUTS = new Set(['UND_ERR_HEADERS_TIMEOUT', 'UND_ERR_BODY_TIMEOUT', 'UND_ERR_CONNECT_TIMEOUT', 'FST_REPLY_FROM_GATEWAY_TIMEOUT'])

/**
 * An upstream failure as the client sees it (504 for a timeout, 502 for anything else) and as the
 * operator does: one warn line naming the route, without a stack (the upstream is down, not the
 * gateway).
 * @see https://www.rfc-editor.org/rfc/rfc9110#section-15.6.3 (502) and #section-15.6.5 (504)
 */
function upstreamError (target: UpstreamTarget, error: Error & { code?: string }, retryUrl: string): GatewayError {
  if (TIMEOUTS.has(error.code ?? '')) {
    return new GatewayError('gateway_timeout', 'The application did not answer in time.', {
      details: { retryUrl, log: { msg: 'upstream timed out', fields: { ...target } } },
    })
  }
  // `errno`, not `code`: log fields named code are redacted (they usually hold OAuth values).
  const fields = { ...target, errno: error.code, reason: error.message }
  const msg = error.code === 'ECONNREFUSED' ? 'upstream refused the connection' : 'upstream failed'
  return new GatewayError('bad_gateway', 'The application could not be reached.', { details: { retryUrl, log: { msg, fields } } })
}

/** Upstream bodies of declared length up to this size are read whole and sent in one write. */
const BUFFERED_BODY_MAX = 64 * 1024

/** What @fastify/reply-from hands to onResponse over undici (its types describe the node:http variant). */
interface UpstreamResponse {
  headers: IncomingHttpHeaders
  /** The body, or why there is none (the route's pool answers failures this way). */
  stream: (Readable & { arrayBuffer?: () => Promise<ArrayBuffer> }) | UpstreamFailure
}

type OnResponse = NonNullable<NonNullable<FastifyHttpProxyOptions['replyOptions']>['onResponse']>

/**
 * Sends the upstream's answer on. A small body of declared length is read whole, then sent with
 * the headers in one write: piping it through a stream pipeline instead cost about a sixth of a
 * proxied request's CPU (measured with `npm run bench`). Nothing reaches the client until it is
 * all there, so the whole read is bounded by the route's timeout from the headers' arrival
 * (`deadlines`), not only the gaps between its chunks. Everything else streams as it arrives:
 * no declared length (chunked, server-sent events), larger bodies, HEAD and bodiless statuses, and
 * answers without a content-type (Fastify would give a buffer one the upstream never sent).
 */
function sendUpstreamResponse (target: UpstreamTarget, deadlines: BodyDeadlines, request: Parameters<OnResponse>[0], reply: Parameters<OnResponse>[1], { headers, stream }: UpstreamResponse): void {
  if (stream instanceof UpstreamFailure) {
    reply.send(upstreamError(target, stream.reason, request.url))
    return
  }
  const status = reply.statusCode
  const small = Number(headers['content-length']) <= BUFFERED_BODY_MAX && headers['content-type'] !== undefined &&
    request.method !== 'HEAD' && status >= 200 && status !== 204 && status !== 304
  if (!small || stream.arrayBuffer === undefined) {
    request.upstreamBody = stream
    reply.send(stream)
    return
  }
  const read = deadlines.start(stream)
  stream.arrayBuffer().then((body) => {
    deadlines.end(read)
    reply.send(Buffer.from(body))
  }, (error: Error) => {
    deadlines.end(read)
    // Nothing was sent yet: answer a clean 502/504 without any of the upstream's headers.
    withoutUpstreamHeaders(reply)
    reply.send(upstreamError(target, error, request.url))
  })
}

/** Drops the upstream's headers from a reply that has not started: those Fastify holds, and those a stream reply already put on the response. */
function withoutUpstreamHeaders (reply: HeadersOf & { raw: HeadersOf }): void {
  for (const name of Object.keys(reply.getHeaders())) reply.removeHeader(name)
  for (const name of Object.keys(reply.raw.getHeaders())) reply.raw.removeHeader(name)
}

/** What a Fastify reply and a node:http (or HTTP/2) response have alike for their headers. */
interface HeadersOf { getHeaders (): object, removeHeader (name: string): unknown }

export async function proxyRoutes (app: FastifyInstance, { config, sessions, refresher, metrics, assertions }: ProxyDeps): Promise<void> {
  app.decorateRequest('accessToken', undefined)
  app.decorateRequest('identity', undefined)
  app.decorateRequest('assertion', undefined)
  app.decorateRequest('upstreamStart', undefined)
  app.decorateRequest('upstreamBody', undefined)
  const gatewayCookies = [sessions.cookieName, `${sessions.cookieName}_flow`, `${sessions.cookieName}_signout`]
  /** The same names in lower case: what an upstream's Set-Cookie may never set. */
  const plantable = gatewayCookies.map((name) => name.toLowerCase())
  // Identity headers are dropped on every route, whatever names any route uses for them.
  // So is the assertion header, under the configured name as well as the default one.
  const identityHeaders = ['x-forwarded-user', 'x-forwarded-email', 'x-forwarded-groups', config.assertion.header, ...config.routes.flatMap((route) => Object.values(route.identityHeaders))]
  const filters = { none: new ClientHeaderFilter(identityHeaders, false), required: new ClientHeaderFilter(identityHeaders, true) }
  const forwardedHost = forwardedHostOf(config.server.baseUrl, config.server.trustProxy)

  function rewriteHeaders (route: RouteConfig, request: ForwardedRequest, headers: IncomingHttpHeaders): IncomingHttpHeaders {
    const out = filters[route.auth].copy(headers)
    const cookie = stripCookies(headers.cookie, gatewayCookies)
    if (cookie !== undefined) out.cookie = cookie
    if (route.auth === 'required') {
      // A protected route never forwards the client's own credentials, even on a public path.
      if (request.accessToken) out.authorization = `Bearer ${request.accessToken}`
      const identity = request.identity
      if (identity) {
        out[route.identityHeaders.user] = identity.sub
        // An address the provider did not verify is not vouched for to the upstream.
        if (identity.email && identity.emailVerified !== false) out[route.identityHeaders.email] = identity.email
        if (identity.groups.length > 0) out[route.identityHeaders.groups] = identity.groups.join(',')
      }
      if (route.assertion && request.assertion !== undefined) out[config.assertion.header] = request.assertion
    }
    // With trustProxy, the chain as far back as it runs through trusted hops (Fastify's request.ips,
    // nearest first), else only the peer: a client cannot plant an address upstreams would trust.
    out['x-forwarded-for'] = request.ips ? [...request.ips].reverse().join(', ') : (request.socket.remoteAddress ?? '')
    out['x-forwarded-proto'] = request.protocol
    // Not request.host: that is the client's Host (or the last of a trusted proxy's list), and an
    // upstream that builds absolute links from X-Forwarded-Host would print the client's choice.
    out['x-forwarded-host'] = forwardedHost(headers['x-forwarded-host'], request.socket.remoteAddress)
    return out
  }

  /** Headers of the upstream WebSocket handshake: only what the gateway itself vouches for. */
  function websocketHeaders (route: RouteConfig, request: FastifyRequest): Record<string, string> {
    const out: Record<string, string> = {}
    const forwarded = new Set([...FORWARDED_TO_WEBSOCKET, ...Object.values(route.identityHeaders), ...(route.assertion ? [config.assertion.header] : [])])
    for (const [name, value] of Object.entries(rewriteHeaders(route, request, request.headers))) {
      if (typeof value === 'string' && forwarded.has(name)) out[name] = value
    }
    return out
  }

  for (const route of config.routes) {
    await app.register(async (scope) => {
      // Counted when the response has finished (RequestEnd), by whichever route's scope answered it.
      const routeMetrics = metrics.forRoute(route.path)
      scope.decorateRequest('routeMetrics', { getter: () => routeMetrics })
      if (route.websocket) {
        // Browsers let any site open a websocket with the user's cookies (no CORS): only pages of
        // the gateway's own origin, or of one the route lists, may (cross-site websocket hijacking).
        const origins = new Set([new URL(config.server.baseUrl).origin, ...route.allowedOrigins])
        scope.addHook('onRequest', (request, _reply, done) => {
          if (request.headers.upgrade?.toLowerCase() !== 'websocket' || origins.has(request.headers.origin ?? '')) return done()
          done(new GatewayError('forbidden', 'This websocket connection was not opened by a page of this site.'))
        })
      }
      if (route.auth === 'required') {
        // The config requires a provider on a protected route (compileGate checks it again).
        const provider = route.provider!
        const gate = compileGate(route, (next) => loginUrl(config, provider, next))
        // Signed once per session and then read from a cache; only when it nears expiry is it signed again.
        const signer = route.assertion ? assertions?.forAudience(provider, new URL(route.upstream).origin) : undefined

        /**
         * Acts on the gate's decision, and on nothing else: only `allow` puts the session's token and
         * identity on the request (what rewriteHeaders forwards). Calls `done` unless it answered.
         */
        const act = (request: FastifyRequest, reply: FastifyReply, decision: Decision, session: Session | undefined, done: HookHandlerDoneFunction): void => {
          switch (decision.kind) {
            case 'allow':
              request.accessToken = decision.accessToken
              request.identity = decision.identity
              if (signer && session && decision.identity) {
                request.assertion = signer.ready(session)
                if (request.assertion === undefined) {
                  signer.assertion(session).then((assertion) => { request.assertion = assertion; done() }, done)
                  return
                }
              }
              return done()
            case 'public':
              return done()
            case 'read_session':
              readSession(request).then(({ state, session }) => {
                const next = decide(gate, request.method, request.url, wantsHtml(request), state)
                // A second read_session cannot come back (the state is no longer unread); guard anyway.
                if (next.kind === 'read_session') return done(new Error('the gate asked for the session twice'))
                act(request, reply, next, session, done)
              }, done)
              return
            case 'sign_in':
              reply.redirect(decision.loginUrl, 302)
              return
            case 'unauthenticated':
            case 'forbidden':
            case 'unavailable':
            case 'invalid_request':
              return done(refusal(decision, { subject: 'this route', retryUrl: request.url }))
          }
        }

        /** The session from the store, its token refreshed if need be, as the gate reads it. */
        const readSession = async (request: FastifyRequest): Promise<{ state: SessionState, session: Session | undefined }> => {
          try {
            const session = await sessions.load(request.headers.cookie) ?? undefined
            const token = session ? await refresher.usableToken(session, provider) : undefined
            return session && token
              ? { state: signedIn(token.access_token, session.record.identities?.[provider]), session }
              : { state: NO_SESSION, session: undefined }
          } catch (error) {
            return { state: failed(error), session: undefined }
          }
        }

        // A callback hook: a session this instance verified moments ago, with a fresh token, goes
        // through without a promise or a store round trip; anything else the gate asks the store for.
        scope.addHook('onRequest', (request, reply, done) => {
          const session = sessions.cached(request.headers.cookie)
          const token = session && refresher.freshToken(session, provider)
          const state = token ? signedIn(token.access_token, session.record.identities?.[provider]) : UNREAD
          act(request, reply, decide(gate, request.method, request.url, wantsHtml(request), state), session, done)
        })
      }
      const target: UpstreamTarget = { route: route.path, upstream: new URL(route.upstream).origin, timeoutMs: route.timeoutMs }
      const pool = new UpstreamPool({ origin: target.upstream, timeoutMs: route.timeoutMs, maxConnections: route.maxConnections })
      const deadlines = new BodyDeadlines(route.timeoutMs)
      // reply-from leaves a pool it was given open; requests in flight have finished by onClose.
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
      const options: FastifyHttpProxyOptions = {
        upstream: route.upstream,
        prefix: route.path,
        // SPEC: without rewritePrefix the path is forwarded unchanged.
        rewritePrefix: route.rewritePrefix ?? route.path,
        // reply-from uses any object with a request method as its undici dispatcher, and calls only
        // the callback form of request (the one UpstreamPool has).
        undici: pool as unknown as { request: Dispatcher['request'] },
        disableRequestLogging: true,
        replyOptions: {
          rewriteRequestHeaders: (request, headers) => {
            request.upstreamStart = performance.now()
            return rewriteHeaders(route, request, headers)
          },
          rewriteHeaders: (headers) => clientBoundHeaders(headers, plantable),
          onError: (reply, { error }) => { reply.send(upstreamError(target, error, reply.request.url)) },
          // reply-from's types describe the node:http response; over undici it is UpstreamResponse.
          onResponse: (request, reply, response) => sendUpstreamResponse(target, deadlines, request, reply, response as unknown as UpstreamResponse),
        },
      }
      // The upgrade request goes through the same gate; the upstream handshake gets the same headers.
      // (@fastify/http-proxy documents wsClientOptions.rewriteRequestHeaders; its types omit it.)
      // maxPayload bounds each message on both legs (ws holds a message whole until its last frame);
      // the hooks bound the bytes waiting to be sent on each (proxy/websocket.ts).
      // The upstream's handshake is bounded by the route's timeout, as its HTTP answers are: a client
      // leg is never held open (its messages queued) behind an upstream that never answers.
      const wsClientOptions: WsClientOptions = {
        rewriteRequestHeaders: (_headers, request) => websocketHeaders(route, request),
        maxPayload: route.websocketMaxMessage,
        handshakeTimeout: route.timeoutMs,
      }
      const websocket = { websocket: true, wsClientOptions, wsServerOptions: { maxPayload: route.websocketMaxMessage }, wsHooks: websocketHooks(route.websocketMaxMessage) } as const
      await scope.register(httpProxy, route.websocket ? { ...options, ...websocket } : options)
    })
  }
}
