// The client's request body as the upstream request reads it. undici destroys the body stream it
// was given when the upstream fails before reading it all (the connection dropped, the route's
// deadline came): given the client's own request, that destroyed it, and no answer could be sent
// (forward.ts takes a gone client's request as one to let go). The client, still uploading into a
// socket nobody reads, waited forever. So undici gets a stream of its own: destroying it lets the
// client's request go, unread, and the gateway answers 502/504 (with `Connection: close`, since the
// rest of the body was never read).
// A client that goes away mid-upload still aborts the upstream request (its request errors: `aborted`).
import { PassThrough, type Readable } from 'node:stream'

/** A stream of `payload`'s bytes that undici may destroy without destroying `payload`. */
export function upstreamBody (payload: Readable): Readable {
  const body = new PassThrough()
  payload.pipe(body)
  body.once('close', () => payload.unpipe(body))
  payload.once('error', (error) => body.destroy(error))
  return body
}
