// One encapsulated scope per route: an auth gate (protected routes only) and @fastify/http-proxy
// with the request-header rewrite (bearer injected, gateway cookies removed, X-Forwarded-* set).
// Upstream failures are translated here: timeouts to gateway_timeout, the rest to bad_gateway.
import httpProxy, { type FastifyHttpProxyOptions } from '@fastify/http-proxy'
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify'
import type { IncomingHttpHeaders } from 'node:http'
import type { GatewayConfig, RouteConfig } from './config.js'
import { wantsHtml } from './error-handler.js'
import { GatewayError } from './errors.js'
import { loginUrl } from './oauth/routes.js'
import type { Metrics } from './metrics.js'
import type { TokenRefresher } from './oauth/refresh.js'
import type { Sessions, TokenSet } from './session.js'

declare module 'fastify' {
  interface FastifyRequest {
    /** The provider's access token for this request, set by the auth gate of a protected route. */
    accessToken: string | undefined
    /** When the request was sent upstream (performance.now()), for the latency histogram. */
    upstreamStart: number | undefined
  }
}

export interface ProxyDeps {
  config: GatewayConfig
  sessions: Sessions
  refresher: TokenRefresher
  metrics: Metrics
}

/** What the header rewrite reads of a request (HTTP/1 and HTTP/2 requests both have it). */
type ForwardedRequest = Pick<FastifyRequest, 'protocol' | 'host' | 'accessToken'> & { socket: { remoteAddress?: string } }

/** Removes the named cookies from a Cookie header; undefined when none is left. */
export function stripCookies (header: string | undefined, names: ReadonlySet<string>): string | undefined {
  if (!header) return undefined
  const kept = header.split(';').filter((part) => {
    const name = part.slice(0, part.indexOf('=') === -1 ? undefined : part.indexOf('=')).trim()
    return name !== '' && !names.has(name)
  })
  return kept.length > 0 ? kept.map((part) => part.trim()).join('; ') : undefined
}

type WsClientOptions = NonNullable<FastifyHttpProxyOptions['wsClientOptions']> & {
  rewriteRequestHeaders: (headers: Record<string, string>, request: FastifyRequest) => Record<string, string>
}

const FORWARDED_TO_WEBSOCKET = new Set(['authorization', 'cookie', 'x-forwarded-for', 'x-forwarded-proto', 'x-forwarded-host', 'user-agent'])

function upstreamError (error: Error & { code?: string }, retryUrl: string): GatewayError {
  if (error.code === 'FST_REPLY_FROM_GATEWAY_TIMEOUT') {
    return new GatewayError('gateway_timeout', 'The application did not answer in time.', { cause: error, details: { retryUrl } })
  }
  return new GatewayError('bad_gateway', 'The application could not be reached.', { cause: error, details: { retryUrl } })
}

export async function proxyRoutes (app: FastifyInstance, { config, sessions, refresher, metrics }: ProxyDeps): Promise<void> {
  app.decorateRequest('accessToken', undefined)
  app.decorateRequest('upstreamStart', undefined)
  const gatewayCookies = new Set([sessions.cookieName, `${sessions.cookieName}_flow`])

  function rewriteHeaders (route: RouteConfig, request: ForwardedRequest, headers: IncomingHttpHeaders): IncomingHttpHeaders {
    const out: IncomingHttpHeaders = { ...headers }
    const cookie = stripCookies(headers.cookie, gatewayCookies)
    if (cookie === undefined) delete out.cookie
    else out.cookie = cookie
    if (route.auth === 'required') out.authorization = `Bearer ${request.accessToken}`
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
    for (const [name, value] of Object.entries(rewriteHeaders(route, request, request.headers))) {
      if (typeof value === 'string' && FORWARDED_TO_WEBSOCKET.has(name)) out[name] = value
    }
    return out
  }

  for (const route of config.routes) {
    await app.register(async (scope) => {
      scope.addHook('onResponse', async (request, reply) => {
        metrics.proxiedRequests.inc({ route: route.path, status_class: `${Math.floor(reply.statusCode / 100)}xx` })
        if (request.upstreamStart !== undefined) {
          metrics.upstreamDuration.observe({ route: route.path }, (performance.now() - request.upstreamStart) / 1000)
        }
      })
      if (route.auth === 'required') {
        const provider = config.providers[route.provider!]!
        scope.addHook('onRequest', async (request: FastifyRequest, reply: FastifyReply) => {
          let token: TokenSet | undefined
          try {
            const session = await sessions.load(request)
            token = session ? await refresher.usableToken(session, provider) : undefined
          } catch (error) {
            if (error instanceof GatewayError) error.details.loginUrl ??= loginUrl(config, provider.name, request.url)
            throw error
          }
          if (token) {
            request.accessToken = token.access_token
            return
          }
          const login = loginUrl(config, provider.name, request.url)
          if (wantsHtml(request)) return reply.redirect(login, 302)
          throw new GatewayError('unauthenticated', 'Sign in first: there is no access token for this route.', {
            details: { loginUrl: login, headers: { 'www-authenticate': `Bearer realm="${provider.name}"` } },
          })
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
        },
      }
      // The upgrade request goes through the same gate; the upstream handshake gets the same headers.
      // (@fastify/http-proxy documents wsClientOptions.rewriteRequestHeaders; its types omit it.)
      const wsClientOptions: WsClientOptions = { rewriteRequestHeaders: (_headers, request) => websocketHeaders(route, request) }
      await scope.register(httpProxy, route.websocket ? { ...options, websocket: true, wsClientOptions } : options)
    })
  }
}
