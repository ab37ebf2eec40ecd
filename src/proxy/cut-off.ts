// An upstream answer that fails while it streams to the client (the upstream closed its connection,
// or a body chunk came later than the route's timeout). Before the answer's headers went out the
// gateway still answers 502/504 (routes.ts).

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
