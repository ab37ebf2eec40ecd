// What happens once per finished response, in the one place Fastify calls for every response anyway
// (its LogController): the gateway's log line, and the route's count and upstream latency. Doing
// it here rather than in onResponse hooks keeps hook machinery off the hot path. A streamed answer
// that breaks off never finishes: Fastify calls streamError instead, on the error path only.
import { LogController, type FastifyReply, type FastifyRequest } from 'fastify'
import type { ServerResponse } from 'node:http'
import { malformedTarget } from './edge.js'
import { loggableUrl } from '../ops/logger.js'
import type { Audit } from '../ops/audit.js'
import type { RouteMetrics } from '../ops/metrics.js'

declare module 'fastify' {
  interface FastifyRequest {
    /** The metrics of the proxy route that answered, if one did (a getter set in the route's scope). */
    readonly routeMetrics?: RouteMetrics
    /** When the request was sent upstream (performance.now()), for the latency histogram. */
    upstreamStart: number | undefined
    /**
     * On a proxy route (a getter set in its scope): the log fields of an upstream failure that
     * broke off an answer already under way, or undefined when the failure was not the upstream's
     * (the client left).
     */
    readonly upstreamCutOff?: (error: Error, request: FastifyRequest) => Record<string, unknown> | undefined
    /** On a protected request (a route's or forward-auth's): the audit fields of its log line (access/responder.ts). */
    audit: Audit | undefined
  }
}

/** Answers the gateway cut under way, with why (cutByGateway): their request's line says so, not that the client left. */
const cut = new WeakMap<ServerResponse, string>()

/**
 * Cuts `response`, a streamed answer under way, for `why` (a session or token that ended): its
 * connection is closed, since a stream has no status left to say it, and its request's line says
 * the gateway cut it (a fault tester's finding: it said the client went away).
 */
export function cutByGateway (response: ServerResponse, why: string): void {
  cut.set(response, why)
  response.destroy()
}

export class RequestEnd extends LogController {
  constructor () {
    // Fastify's own per-request lines are off: this class writes the gateway's one line instead.
    super({ disableRequestLogging: true })
  }

  override requestCompleted (error: Error | null | undefined, request: FastifyRequest, reply: FastifyReply): void {
    request.routeMetrics?.record(reply.statusCode, request.upstreamStart)
    if (error) reply.log.error({ ...line(request, reply), err: error }, 'request errored')
    else reply.log.info(line(request, reply), 'request completed')
  }

  /**
   * Called by Fastify, in place of requestCompleted, when a streamed answer fails after its headers
   * went out (or its client left): the client can only see the connection end, so the operator
   * gets one line and a count, without a stack (the upstream failed, not the gateway).
   */
  override streamError (error: Error, request: FastifyRequest, reply: FastifyReply): void {
    const why = cut.get(reply.raw)
    if (why !== undefined) {
      request.routeMetrics?.record(reply.statusCode, request.upstreamStart)
      return reply.log.info({ ...line(request, reply), why }, 'request cut by the gateway: the stream\'s session or token ended')
    }
    const cutOff = request.upstreamCutOff?.(error, request)
    if (cutOff === undefined) return logAbandoned(request, reply, 'during')
    request.routeMetrics?.recordCutOff(reply.statusCode, request.upstreamStart)
    reply.log.error({ ...line(request, reply), ...cutOff }, 'request errored')
  }
}

/**
 * The line of a request whose client went away before its answer was sent (`before`: before the
 * upstream answered, so the status is 499, as nginx logs a client that closed its request) or
 * while it was (`during`: the status that began). Fastify writes none, and an admitted request
 * that reached the upstream had no line and no audit fields at all (an attacker's finding).
 */
export function logAbandoned (request: FastifyRequest, reply: FastifyReply, when: 'before' | 'during'): void {
  const statusCode = when === 'before' ? CLIENT_CLOSED : reply.statusCode
  request.routeMetrics?.record(statusCode, request.upstreamStart)
  reply.log.info({ ...line(request, reply), statusCode }, `request abandoned: the client went away ${when} the answer`)
}

/** nginx's status for a request its client closed before the answer: counted and logged as a 4xx. */
const CLIENT_CLOSED = 499

/**
 * The log line of a websocket upgrade the gateway passes on: Fastify writes none for it (the socket
 * is handed over, no response is sent), so the audit fields would be missing. Written once, when the
 * client's upgrade is answered 101 (the upstream's leg is open by then), at the level of
 * `request completed`.
 */
export function logUpgrade (request: FastifyRequest): void {
  const fields = { method: request.method, url: loggableUrl(request.url), statusCode: 101 }
  request.log.info(request.audit === undefined ? fields : { ...fields, ...audited(request.audit) }, 'request upgraded')
}

/**
 * The audit fields of a protected request's line. `credential` and `reason` are left out of the
 * line where they were not set (pino writes no field whose value is undefined).
 */
function audited (audit: Audit) {
  return { decision: audit.decision, user: audit.user, rule: audit.rule, credential: audit.credential, reason: audit.reason }
}

function line (request: FastifyRequest, reply: FastifyReply) {
  const fields = { method: request.method, url: loggableUrl(malformedTarget(request.raw) ?? request.url), statusCode: reply.statusCode, responseTime: Math.round(reply.elapsedTime) }
  const audit = request.audit
  if (audit === undefined) return fields
  const original = audit.original
  const withAudit = { ...fields, ...audited(audit) }
  // Forward-auth's own fields (returnTo is only ever set there): a proxied request's line is built without them.
  return original === undefined ? withAudit : { ...withAudit, originalMethod: original.method, originalUrl: original.url, originalSent: original.sent, returnTo: audit.returnTo }
}
