// The client's request body as the upstream request reads it. undici destroys the body stream it
// was given when the upstream fails before reading it all (the connection dropped, the route's
// deadline came): given the client's own request, that destroyed it, and no answer could be sent
// (forward.ts takes a gone client's request as one to let go). The client, still uploading into a
// socket nobody reads, waited forever. So undici gets a stream of its own: destroying it lets the
// client's request go, unread, and the gateway answers 502/504 (with `Connection: close`, since the
// rest of the body was never read).
// A client that goes away mid-upload still aborts the upstream request (its request errors: `aborted`).
import { PassThrough, type Readable } from 'node:stream'

/** Request bodies the gateway has promised to deliver (forms kept across a sign-in, taken from the store). */
const promises = new WeakSet<NodeJS.ReadableStream>()

/**
 * `body`, marked as one the gateway has promised to deliver: its request is not cancelled when the
 * client leaves before the answer (it was taken from the store once, and a reload of its page says
 * it was delivered); only the answer is let go (forward.ts).
 */
export function mustArrive (body: NodeJS.ReadableStream): NodeJS.ReadableStream {
  promises.add(body)
  return body
}

/** Whether `body` is one {@link mustArrive} marked (or the upstream's stream of one). */
export function promised (body: NodeJS.ReadableStream | undefined): boolean {
  return body !== undefined && promises.has(body)
}

/** A stream of `payload`'s bytes that undici may destroy without destroying `payload`. */
export function upstreamBody (payload: Readable): Readable {
  const body = new PassThrough()
  if (promises.has(payload)) promises.add(body)
  payload.pipe(body)
  body.once('close', () => payload.unpipe(body))
  payload.once('error', (error) => body.destroy(error))
  return body
}
