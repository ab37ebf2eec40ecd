// What happens once per finished response, in the one place Fastify calls for every response anyway
// (its LogController): the gateway's log line, and the route's count and upstream latency. Doing
// it here rather than in onResponse hooks keeps hook machinery off the hot path.
import { LogController, type FastifyReply, type FastifyRequest } from 'fastify'
import { refusedTarget } from './edge.js'
import { loggableUrl } from '../ops/logger.js'
import type { RouteMetrics } from '../ops/metrics.js'

declare module 'fastify' {
  interface FastifyRequest {
    /** The metrics of the proxy route that answered, if one did (a getter set in the route's scope). */
    readonly routeMetrics?: RouteMetrics
    /** When the request was sent upstream (performance.now()), for the latency histogram. */
    upstreamStart: number | undefined
  }
}

export class RequestEnd extends LogController {
  constructor () {
    // Fastify's own per-request lines are off: this class writes the gateway's one line instead.
    super({ disableRequestLogging: true })
  }

  override requestCompleted (error: Error | null | undefined, request: FastifyRequest, reply: FastifyReply): void {
    request.routeMetrics?.record(reply.statusCode, request.upstreamStart)
    const line = { method: request.method, url: loggableUrl(refusedTarget(request.raw) ?? request.url), statusCode: reply.statusCode, responseTime: Math.round(reply.elapsedTime) }
    if (error) reply.log.error({ ...line, err: error }, 'request errored')
    else reply.log.info(line, 'request completed')
  }
}
