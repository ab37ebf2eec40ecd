// A request sent on to its route's upstream, and the answer sent back: the request's canonical
// path under the route mapped to the upstream (upstream-path.ts) with the query the edge made, the
// header rewrite (request-headers.ts), the body streaming unparsed (request-body.ts), all through
// the route's pool (upstream-pool.ts); the answer's status and headers (hop-by-hop ones dropped,
// no Set-Cookie for the gateway's own cookies, a relative Location mapped back under the route,
// invalid characters removed), then its body (upstream-response.ts). @fastify/reply-from did this
// before: it copied the headers twice, built and cached a URL, and retried a GET answered 503 up
// to ten times; about a tenth of a proxied request's CPU (docs/performance.md).
import type { FastifyReply, FastifyRequest } from 'fastify'
import type { IncomingHttpHeaders, ServerResponse } from 'node:http'
import type { Readable } from 'node:stream'
import type { RouteConfig } from '../config/types.js'
import type { BodyDeadlines } from './body-deadline.js'
import type { UpstreamTarget } from './cut-off.js'
import { requestSpelling } from '../config/canonical.js'
import { logAbandoned } from '../http/request-end.js'
import { promised } from './request-body.js'
import { clientBoundHeaders, keepPersonal } from './headers.js'
import type { UpstreamHeaders } from './request-headers.js'
import { StreamedBody } from './upstream-body.js'
import type { UpstreamAnswer, UpstreamPool } from './upstream-pool.js'
import type { UpstreamPaths } from './upstream-path.js'
import { sendUpstreamResponse, upstreamError, withoutUpstreamHeaders } from './upstream-response.js'

/** What a route's forwarder is made of. */
export interface ForwardParts {
  route: RouteConfig
  target: UpstreamTarget
  pool: UpstreamPool
  paths: UpstreamPaths
  headers: UpstreamHeaders
  deadlines: BodyDeadlines
  /** The gateway's cookie names in lower case: what an upstream's Set-Cookie may never set. */
  plantable: readonly string[]
  /**
   * What replaces an upstream's WWW-Authenticate, when set: on an agents route, the gateway's own
   * challenge, so that no upstream can point the route's clients at another authorization server
   * (RFC 9728 `resource_metadata`).
   */
  challenge?: string | undefined
  /** A browser's event stream a session let through: held with that session, to end with it (session-streams.ts). */
  streams?: ((request: FastifyRequest, response: ServerResponse) => void) | undefined
  /** The route's event streams under way, which a shutdown ends cleanly (routes/proxy.ts); `closing` once it has begun. */
  eventStreams?: { readonly open: Set<StreamedBody>, closing: boolean } | undefined
}

/** The route's handler: sends each request upstream and its answer back. */
export function forwarder ({ route, target, pool, paths, headers, deadlines, plantable, challenge, streams, eventStreams }: ForwardParts): (request: FastifyRequest, reply: FastifyReply) => void {
  const host = new URL(route.upstream).host
  // The route's pages as browsers see them, for the headers that could reach past it (headers.ts originReach).
  const spelled = requestSpelling(route.path)
  const scope = spelled.endsWith('/') ? spelled : `${spelled}/`
  return (request, reply) => {
    const url = request.url
    const query = url.indexOf('?')
    const path = query === -1 ? paths.path(url) : `${paths.path(url.slice(0, query))}${url.slice(query)}`
    const out = headers.rewrite(route, request, request.headers)
    out.host = host
    // Every content type streams unparsed (the route's parser); GET and HEAD are not parsed at all.
    const body = request.body as Readable | undefined
    request.upstreamStart = performance.now()
    // The answer is handled in the async context of whichever request opened the pooled connection
    // it came on, not this one's: nothing from here on reads that context (tracing keeps each
    // request's span on the request). Binding it back (AsyncResource.bind) made a request cost 1.5
    // times the CPU (`npm run bench -- --against`, 2026-11-29).
    const sent = pool.request({ path, method: request.method, headers: out, body }, (answer) => { answered(request, reply, answer) })
    // A client gone before the answer: the upstream's request goes too, and its line is written
    // (after the answer, a no-op). `on`, not `once`: a response closes once, and once's wrapper is
    // one more allocation per request.
    if (!promised(request.raw)) reply.raw.on('close', () => { if (sent.cancel()) logAbandoned(request, reply, 'before') })
  }

  function answered (request: FastifyRequest, reply: FastifyReply, answer: UpstreamAnswer): void {
    const { statusCode, body } = answer
    // The client has gone meanwhile: nothing to answer, the upstream's answer is let go, and the
    // request's line is written (an attacker's finding: it left none; its close comes after this,
    // and finds nothing to cancel).
    if (request.raw.socket.destroyed) {
      body.destroy()
      logAbandoned(request, reply, 'before')
      return
    }
    // The pool hands on only final answers (200 and up); undici reads three digits, so up to 999.
    if (statusCode > 599) return refuse(request, reply, body, `the upstream answered with status ${statusCode}`)
    try {
      reply.code(statusCode)
      reply.headers(clientBoundHeaders(relocated(answer.headers, paths), plantable, scope))
      if (challenge !== undefined && answer.headers['www-authenticate'] !== undefined) reply.header('www-authenticate', challenge)
      const eventStream = streamed(request.method, answer)
      // An answer made for a person: no shared cache in front of the gateway keeps it for another.
      if (request.allowed !== undefined) {
        keepPersonal(reply, answer.headers)
        if (streams !== undefined && eventStream) streams(request, reply.raw)
      }
      // Ended cleanly by a shutdown (an outside tester's finding: nothing ended it, and it held the shutdown past its timeout).
      if (eventStream && eventStreams !== undefined && body instanceof StreamedBody) {
        // One answered after the shutdown began (its upstream slower than the hook: an attacker's finding) ends at once.
        if (eventStreams.closing) body.finish()
        eventStreams.open.add(body)
        body.once('close', () => eventStreams.open.delete(body))
      }
    } catch (error) {
      // Headers Node will not send as they are: the upstream's answer is not passed on.
      return refuse(request, reply, body, `the upstream's answer could not be passed on: ${(error as Error).message}`)
    }
    // An HTTP/1 connection cannot take another request until this one's body has been read.
    if (!request.raw.complete) reply.header('connection', 'close')
    sendUpstreamResponse(target, deadlines, request, reply, body)
  }

  /** Lets the upstream's answer go and answers 502 `bad_gateway` without any of its headers. */
  function refuse (request: FastifyRequest, reply: FastifyReply, body: UpstreamAnswer['body'], reason: string): void {
    body.destroy()
    withoutUpstreamHeaders(reply)
    reply.send(upstreamError(target, Object.assign(new Error(reason), { code: 'UPSTREAM_BAD_ANSWER' }), request.url))
  }
}

/**
 * The upstream's answer headers with a relative Location mapped back under the route's path, and
 * without characters a header value may not hold (Node would refuse to send the answer at all).
 */
function relocated (headers: IncomingHttpHeaders, paths: UpstreamPaths): IncomingHttpHeaders {
  for (const [name, value] of Object.entries(headers)) {
    if (typeof value === 'string' && INVALID_VALUE.test(value)) headers[name] = value.replace(INVALID_VALUE_ALL, '')
    else if (Array.isArray(value) && value.some((line) => INVALID_VALUE.test(line))) headers[name] = value.map((line) => line.replace(INVALID_VALUE_ALL, ''))
  }
  // Two Location headers (undici gives them as a list): each is mapped.
  const location = headers.location as string | string[] | undefined
  if (typeof location === 'string') headers.location = paths.location(location)
  else if (location !== undefined) (headers as Record<string, string | string[]>).location = location.map((value) => paths.location(value))
  return headers
}

/**
 * Whether an answer's Content-Type is `text/event-stream`, as a browser's EventSource reads it
 * (Fetch's "extract a MIME type": of a list, the last type that parses, `*\/*` passed over; any
 * case, any parameters). A re-reading's finding: `text/html, text/event-stream` is a stream to
 * Chromium, and was not held.
 * @see https://fetch.spec.whatwg.org/#concept-header-extract-mime-type
 */
export function isEventStream (type: string | readonly string[] | undefined): boolean {
  if (type === undefined) return false
  // Two Content-Type lines come as a list (undici), which Fetch reads joined (a re-reading's
  // finding: `split` on a list threw, and every answer to a signed-in person was a 502).
  const joined = typeof type === 'string' ? type : type.join(',')
  // Most answers name no event stream at all: no split, no array, on the proxied path.
  if (!EVENT_STREAM.test(joined)) return false
  let essence: string | undefined
  for (const value of mediaTypes(joined)) {
    const parsed = value.split(';', 1)[0]!.trim().toLowerCase()
    if (MEDIA_TYPE.test(parsed) && parsed !== '*/*') essence = parsed
  }
  return essence === 'text/event-stream'
}

/** A Content-Type value's types: split at each `,` outside a quoted parameter value (`x="a,b"` is one). */
function mediaTypes (value: string): string[] {
  const types: string[] = []
  let start = 0
  let quoted = false
  for (let i = 0; i < value.length; i++) {
    const code = value.charCodeAt(i)
    if (quoted && code === 92 /* \\ */) i++
    else if (code === 34 /* " */) quoted = !quoted
    else if (code === 44 /* , */ && !quoted) {
      types.push(value.slice(start, i))
      start = i + 1
    }
  }
  types.push(value.slice(start))
  return types
}

const EVENT_STREAM = /event-stream/i

/** A media type's essence: a token, `/`, a token (RFC 9110 §5.6.2). */
const MEDIA_TYPE = /^[!#$%&'*+.^_`|~0-9a-z-]+\/[!#$%&'*+.^_`|~0-9a-z-]+$/

/**
 * Whether an answer is a browser's event stream, held with its session (session-streams.ts): not a
 * HEAD's, a 204's or a 304's, which have no body. Other answers of no declared length (a download,
 * an NDJSON feed) are not held: a sign-in in another tab renames the session, which ends its old
 * id, and a first version that held them cut the person's own downloads so (a re-reading's
 * finding); an EventSource connects again by itself.
 */
function streamed (method: string, answer: UpstreamAnswer): boolean {
  if (method === 'HEAD' || answer.statusCode === 204 || answer.statusCode === 304) return false
  return isEventStream(answer.headers['content-type'] as string | string[] | undefined)
}

/** What RFC 9110 §5.5 does not allow in a field value (HTAB, SP to `~` and obs-text are allowed). */
const INVALID_VALUE = /[^\t\x20-\x7E\x80-\xFF]/
const INVALID_VALUE_ALL = new RegExp(INVALID_VALUE.source, 'g')
