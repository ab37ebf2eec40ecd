// CORS for what a web page may read without credentials: a client that runs in a page (a
// browser-based MCP client) registers itself, and reads an agents route's 401 to find where to
// authorize (its WWW-Authenticate). `Access-Control-Allow-Origin: *` and never credentials: a browser
// sends no cookie with such a request, and shows no page the answer to one that carried a cookie, so
// nothing of a person's can be read this way.
// @see https://fetch.spec.whatwg.org/#http-cors-protocol
import type { FastifyReply, FastifyRequest } from 'fastify'

/** How long a browser may keep a preflight's answer (seconds). */
const PREFLIGHT_MAX_AGE_S = '600'

/**
 * onRequest: any page may read the answer (set on the raw response, so that it holds for an answer
 * oidc-provider writes too); a preflight is answered here, before any budget is charged.
 */
export function openToPages (methods: string): (request: FastifyRequest, reply: FastifyReply) => Promise<void> {
  return async (request, reply) => {
    reply.raw.setHeader('access-control-allow-origin', '*')
    if (request.method !== 'OPTIONS' || request.headers['access-control-request-method'] === undefined) return
    const asked = request.headers['access-control-request-headers']
    await reply.code(204).headers({
      'access-control-allow-methods': methods,
      ...(typeof asked === 'string' ? { 'access-control-allow-headers': asked } : {}),
      'access-control-max-age': PREFLIGHT_MAX_AGE_S,
    }).send()
  }
}

/**
 * onSend of an agents route: the gateway's own answer (a refusal: the 401 whose challenge names
 * the route's metadata, a 403) may be read by any page, its challenge with it. An answer of the
 * upstream's keeps the upstream's own CORS headers, or none.
 */
export async function ownAnswerReadable (request: FastifyRequest, reply: FastifyReply, payload: unknown): Promise<unknown> {
  const decision = request.audit?.decision
  if (decision !== undefined && decision !== 'allow' && decision !== 'public') {
    reply.header('access-control-allow-origin', '*').header('access-control-expose-headers', 'WWW-Authenticate')
  }
  return payload
}
