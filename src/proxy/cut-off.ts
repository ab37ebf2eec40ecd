// An upstream answer that fails while it streams to the client (the upstream closed its connection,
// or a body chunk came later than the route's timeout). Before the answer's headers went out the
// gateway still answers 502/504 (upstream-response.ts); after, the client can only see the connection end,
// and this names what happened for the one `request errored` line (http/request-end.ts).
import type { Flowed } from './chunk-collector.js'

/** Where the route's upstream failures are logged from: its path, its origin (never userinfo), its timeout. */
export interface UpstreamTarget { route: string, upstream: string, timeoutMs: number }

/**
 * Whether a streamed body failed through the upstream: undici's errors (the connection closed,
 * the body timed out), except the one it raises when the gateway itself let the body go because
 * the client had left.
 */
export function isUpstreamBodyError (error: unknown): error is Error & { code: string } {
  const code = error instanceof Error ? (error as { code?: unknown }).code : undefined
  return typeof code === 'string' && code.startsWith('UND_ERR_') && code !== 'UND_ERR_ABORTED'
}

/**
 * The log fields of an upstream failure that broke off an answer already under way (route, the
 * bytes of its body passed on to the client, the upstream's error; never a header or body byte), or
 * undefined when it was the client that left.
 * @see https://www.rfc-editor.org/rfc/rfc9112#section-8 (an incomplete message: all the client can tell)
 */
export function cutOffFields (target: UpstreamTarget, error: Error, body: Flowed | undefined): Record<string, unknown> | undefined {
  if (!isUpstreamBodyError(error)) return undefined
  // `errno`, not `code`: log fields named code are redacted (they usually hold OAuth values).
  return { ...target, bytesSent: body?.bytes, errno: error.code, reason: error.message }
}
