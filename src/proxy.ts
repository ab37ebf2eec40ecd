// One encapsulated scope per route: an auth gate (protected routes only) and @fastify/http-proxy
// with the request-header rewrite (bearer injected, gateway cookies removed, X-Forwarded-* set).
// Upstream failures are translated here: timeouts to gateway_timeout, the rest to bad_gateway.
import httpProxy, { type FastifyHttpProxyOptions } from '@fastify/http-proxy'
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify'
import type { IncomingHttpHeaders } from 'node:http'
import type { Readable } from 'node:stream'
import type { GatewayConfig, PublicRule, RouteConfig } from './config.js'
import { wantsHtml } from './error-handler.js'
import { GatewayError } from './errors.js'
import { loginUrl } from './oauth/routes.js'
import type { Metrics } from './metrics.js'
import type { TokenRefresher } from './oauth/refresh.js'
import type { Session, Sessions, TokenSet } from './session.js'
import { isAllowed, type Identity } from './identity.js'

declare module 'fastify' {
  interface FastifyRequest {
    /** The provider's access token for this request, set by the auth gate of a protected route. */
    accessToken: string | undefined
    /** Who the user is at the route's provider (identity headers), set by the auth gate. */
    identity: Identity | undefined
  }
}

export interface ProxyDeps {
  config: GatewayConfig
  sessions: Sessions
  refresher: TokenRefresher
  metrics: Metrics
}

/** What the header rewrite reads of a request (HTTP/1 and HTTP/2 requests both have it). */
type ForwardedRequest = Pick<FastifyRequest, 'protocol' | 'host' | 'accessToken' | 'identity'> & { socket: { remoteAddress?: string } }

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

const FORWARDED_TO_WEBSOCKET = new Set(['authorization', 'cookie', 'x-forwarded-for', 'x-forwarded-proto', 'x-forwarded-host', 'user-agent'])

function upstreamError (error: Error & { code?: string }, retryUrl: string): GatewayError {
  // reply-from's timeout while waiting for the answer; undici's while reading a buffered body.
  if (error.code === 'FST_REPLY_FROM_GATEWAY_TIMEOUT' || error.code === 'UND_ERR_BODY_TIMEOUT') {
    return new GatewayError('gateway_timeout', 'The application did not answer in time.', { cause: error, details: { retryUrl } })
  }
  return new GatewayError('bad_gateway', 'The application could not be reached.', { cause: error, details: { retryUrl } })
}

/** Upstream bodies of declared length up to this size are read whole and sent in one write. */
const BUFFERED_BODY_MAX = 64 * 1024

/** What @fastify/reply-from hands to onResponse over undici (its types describe the node:http variant). */
interface UpstreamResponse {
  headers: IncomingHttpHeaders
  stream: Readable & { arrayBuffer?: () => Promise<ArrayBuffer> }
}

type OnResponse = NonNullable<NonNullable<FastifyHttpProxyOptions['replyOptions']>['onResponse']>

/**
 * Sends the upstream's answer on. A small body of declared length is read whole, then sent with
 * the headers in one write: piping it through a stream pipeline instead cost about a sixth of a
 * proxied request's CPU (measured with `npm run bench`). Everything else streams as it arrives:
 * no declared length (chunked, server-sent events), larger bodies, HEAD and bodiless statuses, and
 * answers without a content-type (Fastify would give a buffer one the upstream never sent).
 */
function sendUpstreamResponse (request: Parameters<OnResponse>[0], reply: Parameters<OnResponse>[1], { headers, stream }: UpstreamResponse): void {
  const status = reply.statusCode
  const small = Number(headers['content-length']) <= BUFFERED_BODY_MAX && headers['content-type'] !== undefined &&
    request.method !== 'HEAD' && status >= 200 && status !== 204 && status !== 304
  if (!small || stream.arrayBuffer === undefined) {
    reply.send(stream)
    return
  }
  stream.arrayBuffer().then((body) => reply.send(Buffer.from(body)), (error: Error) => {
    // Nothing was sent yet: answer a clean 502/504 without any of the upstream's headers.
    for (const name of Object.keys(reply.getHeaders())) reply.removeHeader(name)
    reply.send(upstreamError(error, request.url))
  })
}

/** Compiles a route's `public` rules into one test of method and path (`*` matches anything). */
function publicMatcher (rules: PublicRule[]): (method: string, path: string) => boolean {
  const compiled = rules.map(({ method, path }) => ({
    method,
    path: path === '*' ? /^/ : new RegExp(`^${path.split('*').map((part) => part.replace(/[.+?^${}()|[\]\\]/g, '\\$&')).join('.*')}$`),
  }))
  return (method, path) => compiled.some((rule) => (rule.method === '*' || rule.method === method) && rule.path.test(path))
}

export async function proxyRoutes (app: FastifyInstance, { config, sessions, refresher, metrics }: ProxyDeps): Promise<void> {
  app.decorateRequest('accessToken', undefined)
  app.decorateRequest('identity', undefined)
  app.decorateRequest('upstreamStart', undefined)
  const gatewayCookies = [sessions.cookieName, `${sessions.cookieName}_flow`]
  // Headers never copied from the client: identity headers (on every route, whatever names any route
  // uses), the ones rebuilt below, and on protected routes the client's own credentials.
  const rebuilt = ['cookie', 'x-forwarded-for', 'x-forwarded-proto', 'x-forwarded-host', 'x-forwarded-user', 'x-forwarded-email', 'x-forwarded-groups',
    ...config.routes.flatMap((route) => Object.values(route.identityHeaders))]
  const notCopied = { none: new Set(rebuilt), required: new Set([...rebuilt, 'authorization']) }

  function rewriteHeaders (route: RouteConfig, request: ForwardedRequest, headers: IncomingHttpHeaders): IncomingHttpHeaders {
    // A new object rather than deletes on a copy: deleting keys makes V8 fall back to a slow object.
    const out: IncomingHttpHeaders = {}
    const skip = notCopied[route.auth]
    for (const name of Object.keys(headers)) if (!skip.has(name)) out[name] = headers[name]
    const cookie = stripCookies(headers.cookie, gatewayCookies)
    if (cookie !== undefined) out.cookie = cookie
    if (route.auth === 'required') {
      // A protected route never forwards the client's own credentials, even on a public path.
      if (request.accessToken) out.authorization = `Bearer ${request.accessToken}`
      const identity = request.identity
      if (identity) {
        out[route.identityHeaders.user] = identity.sub
        if (identity.email) out[route.identityHeaders.email] = identity.email
        if (identity.groups.length > 0) out[route.identityHeaders.groups] = identity.groups.join(',')
      }
    }
    const peer = request.socket.remoteAddress ?? ''
    const chain = config.server.trustProxy ? headers['x-forwarded-for'] : undefined
    out['x-forwarded-for'] = chain ? `${chain}, ${peer}` : peer
    out['x-forwarded-proto'] = request.protocol
    out['x-forwarded-host'] = request.host
    return out
  }

  /** Headers of the upstream WebSocket handshake: only what the gateway itself vouches for. */
  function websocketHeaders (route: RouteConfig, request: FastifyRequest): Record<string, string> {
    const out: Record<string, string> = {}
    const forwarded = new Set([...FORWARDED_TO_WEBSOCKET, ...Object.values(route.identityHeaders)])
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
      if (route.auth === 'required') {
        const provider = route.provider!
        const isPublic = publicMatcher(route.public)
        /** Lets the request through with the session's token and identity, unless an allow rule refuses it. */
        const admit = (request: FastifyRequest, session: Session, token: TokenSet) => {
          const identity = session.record.identities?.[provider]
          if (route.allow && !isAllowed(identity, route.allow)) {
            throw new GatewayError('forbidden', `${identity?.email ?? identity?.sub ?? 'This account'} may not use this application.`, {
              details: { loginUrl: loginUrl(config, provider, request.url) },
            })
          }
          request.accessToken = token.access_token
          request.identity = identity
        }
        /** The full gate: the session from the store, the token refreshed if need be, else sign in. */
        const gate = async (request: FastifyRequest, reply: FastifyReply) => {
          let token: TokenSet | undefined
          let session: Session | null = null
          try {
            session = await sessions.load(request)
            token = session ? await refresher.usableToken(session, provider) : undefined
          } catch (error) {
            if (error instanceof GatewayError) error.details.loginUrl ??= loginUrl(config, provider, request.url)
            throw error
          }
          if (session && token) return admit(request, session, token)
          const login = loginUrl(config, provider, request.url)
          if (wantsHtml(request)) return reply.redirect(login, 302)
          throw new GatewayError('unauthenticated', 'Sign in first: there is no access token for this route.', {
            details: { loginUrl: login, headers: { 'www-authenticate': `Bearer realm="${provider}"` } },
          })
        }
        // A callback hook: a session this instance verified moments ago, with a fresh token, goes
        // through without a promise or a store round trip; anything else takes the full gate.
        scope.addHook('onRequest', (request, reply, done) => {
          if (route.public.length > 0 && isPublic(request.method, request.url.split('?', 1)[0]!)) return done()
          const session = sessions.cached(request)
          const token = session && refresher.freshToken(session, provider)
          if (!session || !token) {
            gate(request, reply).then(() => done(), done)
            return
          }
          try {
            admit(request, session, token)
          } catch (error) {
            return done(error as Error)
          }
          done()
        })
      }
      const options: FastifyHttpProxyOptions = {
        upstream: route.upstream,
        prefix: route.path,
        // SPEC: without rewritePrefix the path is forwarded unchanged.
        rewritePrefix: route.rewritePrefix ?? route.path,
        undici: { headersTimeout: route.timeoutMs, bodyTimeout: route.timeoutMs, connections: 128, pipelining: 1 },
        disableRequestLogging: true,
        replyOptions: {
          rewriteRequestHeaders: (request, headers) => {
            request.upstreamStart = performance.now()
            return rewriteHeaders(route, request, headers)
          },
          onError: (reply, { error }) => reply.send(upstreamError(error, reply.request.url)),
          // reply-from's types describe the node:http response; over undici it is UpstreamResponse.
          onResponse: (request, reply, response) => sendUpstreamResponse(request, reply, response as unknown as UpstreamResponse),
        },
      }
      // The upgrade request goes through the same gate; the upstream handshake gets the same headers.
      // (@fastify/http-proxy documents wsClientOptions.rewriteRequestHeaders; its types omit it.)
      const wsClientOptions: WsClientOptions = { rewriteRequestHeaders: (_headers, request) => websocketHeaders(route, request) }
      await scope.register(httpProxy, route.websocket ? { ...options, websocket: true, wsClientOptions } : options)
    })
  }
}
