// A deadline on the request bodies the gateway's own endpoints read (/oauth/...: the agents' token,
// registration and device endpoints, the back-channel logout, the sign-out and consent forms). Each
// is a few hundred bytes to 8 KiB: one still not whole OWN_BODY_MS after its headers is a client
// holding the socket, not one sending a form. It is answered 400 `invalid_request` (as a proxied
// route's form read for `_method` is at its route's timeout) and its connection closed. Before,
// only Node's requestTimeout (120 s, checked every 30 s) ended it: a stranger held each socket for
// up to 150 s. A request answered before its body arrived has its connection closed after the
// answer. The same holds for every other route of the gateway's own (the probes, /metrics, the
// `/` redirect, the /.well-known documents: an outside tester's finding, each answered and then
// waited for a trickled body); proxied routes' bodies are the upstream's to read, within the
// route's timeout (their routes say `config: { proxied: true }`).
import type { FastifyInstance, FastifyReply, FastifyRequest, onRequestHookHandler } from 'fastify'
import { GatewayError } from '../errors.js'
import { bodyFollows } from '../http/error-handler.js'
import { nodeTimers, type Timers } from '../ops/clock.js'

declare module 'fastify' {
  interface FastifyContextConfig {
    /** The route proxies to an upstream, which reads the body: no deadline of the gateway's own. */
    proxied?: boolean
  }
}

/** How long after its headers the body of a request to the gateway's own endpoints must have arrived. */
export const OWN_BODY_MS = 10_000

/** Answers the request that is still sending its body, if nothing has been answered yet, and closes its connection. */
function expire (request: FastifyRequest, reply: FastifyReply): void {
  const response = reply.raw
  const socket = request.raw.socket
  if (response.headersSent) {
    socket.destroy()
    return
  }
  const error = new GatewayError('invalid_request', `The request's body did not arrive within ${OWN_BODY_MS} ms.`)
  request.log.info({ error: error.code, message: error.message }, 'request rejected')
  const body = JSON.stringify({ error: error.code, message: error.message })
  response.writeHead(error.statusCode, { 'content-type': 'application/json; charset=utf-8', 'content-length': Buffer.byteLength(body), 'cache-control': 'no-store', 'x-content-type-options': 'nosniff', connection: 'close' })
  response.end(body, () => socket.destroy())
}

/**
 * Times the bodies of requests to the gateway's own endpoints: a first onRequest hook on each route
 * but the proxied ones as it is added, so that a proxied request runs none of it. `timers`: Node's
 * unless a test moves them.
 */
export function timeOwnBodies (app: FastifyInstance, timers: Timers = nodeTimers): void {
  const deadline: onRequestHookHandler = (request, reply, done) => {
    if (request.raw.complete || !bodyFollows(request.headers)) return done()
    const cancel = timers.setTimeout(() => { if (!request.raw.complete) expire(request, reply) }, OWN_BODY_MS)
    reply.raw.once('close', () => {
      cancel()
      // Answered before its body arrived (a size refused, a page that reads none): Node would keep
      // the connection open for the rest of the body, as long as the client trickles it.
      const socket = request.raw.socket
      if (!request.raw.complete && !socket.destroyed) socket.end(() => socket.destroy())
    })
    done()
  }
  app.addHook('onRoute', (route) => {
    if (route.config?.proxied !== true) route.onRequest = [deadline, ...[route.onRequest ?? []].flat()]
  })
}
