// The upstream request's headers: what the client sent, less what it may not send (headers.ts), less
// the gateway's own cookies; on a protected route the bearer token, the identity headers, the route's
// claim headers (`headers:`) and, where the route asks, the signed assertion; and
// X-Forwarded-For/-Proto/-Host as the gateway vouches for them. A websocket handshake gets only what
// the gateway vouches for.
import type { FastifyRequest } from 'fastify'
import type { IncomingHttpHeaders } from 'node:http'
import { DEFAULT_IDENTITY_HEADERS, identityHeaders } from '../access/identity-headers.js'
import type { GatewayConfig, RouteConfig } from '../config/types.js'
import type { Admitted } from '../access/responder.js'
import { forwardedHostOf } from './forwarded-host.js'
import { ClientHeaderFilter } from './headers.js'

declare module 'fastify' {
  interface FastifyRequest {
    /** What an admitted request carries upstream (token, identity, claim headers, assertion), set by a protected route's access hook; undefined on a public path. */
    allowed: Admitted | undefined
  }
}

/** What the header rewrite reads of a request (HTTP/1 and HTTP/2 requests both have it). */
export type ForwardedRequest = Pick<FastifyRequest, 'protocol' | 'ips' | 'allowed'> & { socket: { remoteAddress?: string } }

const FORWARDED_TO_WEBSOCKET = new Set(['authorization', 'cookie', 'origin', 'x-forwarded-for', 'x-forwarded-proto', 'x-forwarded-host', 'user-agent'])

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

/** The trace context headers of W3C Trace Context and of the other formats tracers read. */
const TRACE_CONTEXT = ['traceparent', 'tracestate', 'b3', 'x-b3-traceid', 'x-b3-spanid', 'x-b3-parentspanid', 'x-b3-sampled', 'x-b3-flags',
  'uber-trace-id', 'x-datadog-trace-id', 'x-datadog-parent-id', 'x-datadog-sampling-priority', 'x-datadog-origin', 'x-datadog-tags',
  'sentry-trace', 'x-cloud-trace-context', 'request-id', 'x-amzn-trace-id', 'ot-tracer-traceid', 'ot-tracer-spanid', 'ot-tracer-sampled',
  'x-ot-span-context', 'grpc-trace-bin', 'elastic-apm-traceparent', 'newrelic', 'sw8', 'x-instana-t', 'x-instana-s', 'x-instana-l', 'x-dynatrace']

export class UpstreamHeaders {
  private readonly filters: Record<RouteConfig['auth'], ClientHeaderFilter>
  private readonly forwardedHost: ReturnType<typeof forwardedHostOf>
  private readonly assertionHeader: string

  /**
   * @param gatewayCookies the cookies the gateway sets (oauth/urls.ts): never forwarded
   * @param traced tracing is on: the client's `traceparent` and `tracestate` are not forwarded, since
   *   the gateway's request continues that trace and sends its own (W3C Trace Context §3: a
   *   participant replaces them), so the upstream sees exactly one; nor is a trace context in another
   *   format (B3, Jaeger, Datadog, Sentry, Google Cloud), which would have the application join the
   *   client's trace with its sampling decision beside the gateway's; off, they pass as they came
   */
  constructor (config: GatewayConfig, private readonly gatewayCookies: readonly string[], traced = false) {
    // Identity headers are dropped on every route, whatever names any route uses for them, and so
    // are the claim headers any route sends. So is the assertion header, under the configured name
    // as well as the default one.
    const identityNames = [
      ...Object.values(DEFAULT_IDENTITY_HEADERS), config.assertion.header,
      ...config.routes.flatMap((route) => [...Object.values(route.identityHeaders), ...route.headers.map((header) => header.name)]),
      ...(traced ? TRACE_CONTEXT : []),
    ]
    this.filters = { none: new ClientHeaderFilter(identityNames, false), required: new ClientHeaderFilter(identityNames, true) }
    this.forwardedHost = forwardedHostOf(config.server.baseUrl, config.server.trustProxy)
    this.assertionHeader = config.assertion.header
  }

  /** The upstream request's headers for `route`, from the client's `headers`. */
  rewrite (route: RouteConfig, request: ForwardedRequest, headers: IncomingHttpHeaders): IncomingHttpHeaders {
    const out = this.filters[route.auth].copy(headers)
    const cookie = stripCookies(headers.cookie, this.gatewayCookies)
    if (cookie !== undefined) out.cookie = cookie
    if (route.auth === 'required') {
      // A protected route never forwards the client's own credentials, even on a public path; a
      // machine client's token is forwarded as it came (in Authorization), or, when it came in
      // Proxy-Authorization, the client's own Authorization is the application's.
      const allowed = request.allowed
      if (allowed !== undefined) {
        if (allowed.accessToken) out.authorization = `Bearer ${allowed.accessToken}`
        else if (allowed.keepAuthorization && headers.authorization !== undefined) out.authorization = headers.authorization
        identityHeaders(allowed.identity, route.identityHeaders, out)
        if (allowed.claimHeaders !== undefined) for (const [name, value] of allowed.claimHeaders) out[name] = value
        if (route.assertion && allowed.assertion !== undefined) out[this.assertionHeader] = allowed.assertion
      }
    }
    // With trustProxy, the chain as far back as it runs through trusted hops (Fastify's request.ips,
    // nearest first), else only the peer: a client cannot plant an address upstreams would trust.
    out['x-forwarded-for'] = request.ips ? [...request.ips].reverse().join(', ') : (request.socket.remoteAddress ?? '')
    out['x-forwarded-proto'] = request.protocol
    // Not request.host: that is the client's Host (or the last of a trusted proxy's list), and an
    // upstream that builds absolute links from X-Forwarded-Host would print the client's choice.
    out['x-forwarded-host'] = this.forwardedHost(headers['x-forwarded-host'], request.socket.remoteAddress)
    return out
  }

  /** Headers of the upstream WebSocket handshake: only what the gateway itself vouches for. */
  websocket (route: RouteConfig, request: FastifyRequest): Record<string, string> {
    const out: Record<string, string> = {}
    const forwarded = new Set([
      ...FORWARDED_TO_WEBSOCKET, ...Object.values(route.identityHeaders), ...route.headers.map((header) => header.name),
      ...(route.assertion ? [this.assertionHeader] : []),
    ])
    for (const [name, value] of Object.entries(this.rewrite(route, request, request.headers))) {
      if (typeof value === 'string' && forwarded.has(name)) out[name] = value
    }
    return out
  }
}
