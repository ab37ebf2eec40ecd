// The edge: every request (and every upgrade request) is made canonical before Fastify routes it,
// through Fastify's `rewriteUrl`, so routing, the access decision and the proxy all read one string
// (see canonical.ts). A target that cannot be made canonical, or a request with more than one Host
// header, is routed nowhere and answered 400 `invalid_request` by the first onRequest hook.
import type { FastifyInstance, RawRequestDefaultExpression } from 'fastify'
import { GatewayError } from './errors.js'
import { canonicalTarget } from './canonical.js'

/** Why the raw request was refused at the edge, kept on it between rewriteUrl and the first hook. */
const REFUSED = Symbol('refused at the edge')

type EdgeRequest = RawRequestDefaultExpression & { [REFUSED]?: string, originalUrl?: string }

/** Routed in place of a refused target: the onRequest hook answers 400 before any route runs. */
const REFUSED_PLACEHOLDER = '/'

function hostHeaders (rawHeaders: string[]): number {
  let count = 0
  for (let i = 0; i < rawHeaders.length; i += 2) {
    const name = rawHeaders[i]!
    if (name.length === 4 && name.toLowerCase() === 'host') count++
  }
  return count
}

/** Fastify's `rewriteUrl`: the canonical target, or a placeholder with the refusal noted on the request. */
export function rewriteUrl (raw: RawRequestDefaultExpression): string {
  const request = raw as EdgeRequest
  if (request[REFUSED] !== undefined) return REFUSED_PLACEHOLDER
  const target = canonicalTarget(request.url ?? '')
  let refusal = target.ok ? undefined : target.reason
  if (refusal === undefined && hostHeaders(request.rawHeaders) > 1) refusal = 'the request has more than one Host header'
  if (refusal === undefined) return (target as { url: string }).url
  request[REFUSED] = refusal
  return REFUSED_PLACEHOLDER
}

/** Refuses a request before it is routed (it is answered 400 `invalid_request` with `reason`). */
export function refuseAtEdge (raw: RawRequestDefaultExpression, reason: string): void {
  (raw as EdgeRequest)[REFUSED] = reason
}

/** The target as the client sent it, for the log line of a refused request (its query is dropped there). */
export function refusedTarget (raw: RawRequestDefaultExpression): string | undefined {
  const request = raw as EdgeRequest
  return request[REFUSED] === undefined ? undefined : request.originalUrl
}

/** The first onRequest hook, on every route and the 404 handler: answers what the edge refused. */
export function registerEdge (app: FastifyInstance): void {
  app.addHook('onRequest', (request, _reply, done) => {
    const refusal = (request.raw as EdgeRequest)[REFUSED]
    if (refusal === undefined) return done()
    done(new GatewayError('invalid_request', `The request cannot be served: ${refusal}.`))
  })
}
