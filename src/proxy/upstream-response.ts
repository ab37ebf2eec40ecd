// The upstream's answer on its way to the client, and an upstream failure as the client and the
// operator see it: timeouts are 504 `gateway_timeout`, everything else 502 `bad_gateway`, each
// logged as one warn line naming the route (the upstream is down, not the gateway).
import type { FastifyReply, FastifyRequest } from 'fastify'
import { ERRORS, GatewayError } from '../errors.js'
import { logAbandoned } from '../http/request-end.js'
import type { BodyDeadlines } from './body-deadline.js'
import { chunkCollector, type Flowed } from './chunk-collector.js'
import type { UpstreamTarget } from './cut-off.js'
import { StreamedBody } from './upstream-body.js'
import { UpstreamFailure, type UpstreamAnswer } from './upstream-pool.js'

declare module 'fastify' {
  interface FastifyRequest {
    /** The bytes of the upstream's body that have streamed to the client: what a cut-off's line reports. */
    upstreamBody: Flowed | undefined
  }
}

/** Error codes of an upstream that took longer than the route's timeout (undici's, a websocket upgrade's: websocket-link.ts). */
const TIMEOUTS = new Set(['UND_ERR_HEADERS_TIMEOUT', 'UND_ERR_BODY_TIMEOUT', 'UND_ERR_CONNECT_TIMEOUT', 'WS_HANDSHAKE_TIMEOUT'])

/**
 * An upstream failure as the client sees it (504 for a timeout, 502 for anything else) and as the
 * operator does: one warn line naming the route, without a stack (the upstream is down, not the
 * gateway).
 * @see https://www.rfc-editor.org/rfc/rfc9110#section-15.6.3 (502) and #section-15.6.5 (504)
 */
export function upstreamError (target: UpstreamTarget, error: Error & { code?: string, status?: number | undefined }, retryUrl: string): GatewayError {
  if (TIMEOUTS.has(error.code ?? '')) {
    // The reason tells a request the upstream never got (no connection) from one it did not answer.
    return new GatewayError('gateway_timeout', ERRORS.gateway_timeout.explanation, {
      details: { retryUrl, log: { msg: 'upstream timed out', fields: { ...target, errno: error.code, reason: error.message } } },
    })
  }
  // `errno`, not `code`: log fields named code are redacted (they usually hold OAuth values).
  // `status`: what an upstream answered a websocket upgrade instead of 101.
  const fields = { ...target, errno: error.code, reason: error.message, ...(error.status === undefined ? {} : { status: error.status }) }
  const msg = error.code === 'ECONNREFUSED' ? 'upstream refused the connection' : 'upstream failed'
  // The catalogue's sentence: the page says it once (a newcomer's finding: it said it twice, in two wordings).
  return new GatewayError('bad_gateway', ERRORS.bad_gateway.explanation, { details: { retryUrl, log: { msg, fields } } })
}

/**
 * Sends the upstream's answer on. A small body of declared length (the pool decides which:
 * upstream-body.ts) is read whole, then sent with the headers in one write, which costs less CPU
 * than a stream pipeline (see docs/performance.md). Nothing reaches the client until it is all
 * there, so the whole read is bounded by the route's timeout from the headers' arrival
 * (`deadlines`), not only the gaps between its chunks. Any other body streams as it arrives.
 */
export function sendUpstreamResponse (target: UpstreamTarget, deadlines: BodyDeadlines, request: FastifyRequest, reply: FastifyReply, body: UpstreamAnswer['body']): void {
  if (body instanceof UpstreamFailure) {
    reply.send(upstreamError(target, body.reason, request.url))
    return
  }
  if (body instanceof StreamedBody) {
    // Its written chunks are freed every few MiB, not after tens of them (chunk-collector.ts).
    request.upstreamBody = chunkCollector().watch(body)
    reply.send(body)
    return
  }
  const read = deadlines.start(body)
  let gone: (() => void) | undefined
  body.read((error, whole) => {
    deadlines.end(read)
    if (gone !== undefined) {
      reply.raw.off('close', gone)
      // The client went away during the read: its line is written, there is nobody to answer.
      if (request.raw.socket.destroyed) return
    }
    if (error === null) {
      reply.send(whole)
      return
    }
    // Nothing was sent yet: answer a clean 502/504 without any of the upstream's headers.
    withoutUpstreamHeaders(reply)
    reply.send(upstreamError(target, error, request.url))
  })
  // Still reading (the body did not come with the headers): a client that goes meanwhile lets the
  // upstream's answer go at once, and its request's line is written (an attacker's finding: no line,
  // and the upstream's connection held to the route's timeout).
  if (read.body !== null) {
    gone = () => {
      body.destroy()
      logAbandoned(request, reply, 'before')
    }
    reply.raw.on('close', gone)
  }
}

/** Drops the upstream's headers from a reply that has not started: those Fastify holds, and those a stream reply already put on the response. */
export function withoutUpstreamHeaders (reply: HeadersOf & { raw: HeadersOf }): void {
  for (const name of Object.keys(reply.getHeaders())) reply.removeHeader(name)
  for (const name of Object.keys(reply.raw.getHeaders())) reply.raw.removeHeader(name)
}

/** What a Fastify reply and a node:http (or HTTP/2) response have alike for their headers. */
interface HeadersOf { getHeaders (): object, removeHeader (name: string): unknown }
