// The client's request body as the upstream request reads it. undici destroys the body stream it
// was given when the upstream fails before reading it all (the connection dropped, the route's
// deadline came): given the client's own request, that destroyed it, and no answer could be sent
// (forward.ts takes a gone client's request as one to let go). The client, still uploading into a
// socket nobody reads, waited forever. So undici gets a stream of its own: destroying it lets the
// client's request go, unread, and the gateway answers 502/504 (with `Connection: close`, since the
// rest of the body was never read).
// A client that goes away mid-upload still aborts the upstream request (its request errors: `aborted`).
import type { IncomingMessage } from 'node:http'
import { PassThrough, type Readable } from 'node:stream'

/** Requests whose bodies the gateway has promised to deliver (forms kept across a sign-in, taken from the store). */
const promises = new WeakSet<IncomingMessage>()

/**
 * Marks `request` as one whose body the gateway has promised to deliver: it is not cancelled when
 * the client leaves before the answer (its body was taken from the store once, and a reload of its
 * page says it was delivered); only the answer is let go (forward.ts). The request, not its body
 * stream, is marked: a later hook may hand the body on in a stream of its own (an attacker's
 * finding: a route's method override did, and the mark was lost).
 */
export function mustArrive (request: IncomingMessage): void {
  promises.add(request)
}

/** Whether {@link mustArrive} marked `request`. */
export function promised (request: IncomingMessage): boolean {
  return promises.has(request)
}

/** A stream of `payload`'s bytes that undici may destroy without destroying `payload`. */
export function upstreamBody (payload: Readable): Readable {
  const body = new PassThrough()
  payload.pipe(body)
  body.once('close', () => payload.unpipe(body))
  payload.once('error', (error) => body.destroy(error))
  return body
}
