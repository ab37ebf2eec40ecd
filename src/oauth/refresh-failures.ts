// What a token refresh that failed is: a failure at the provider (the request may go on with a token
// still valid: refresh.ts), the pause a 429 asks for, and the marks that keep a failing provider
// from being asked by every request of the session.
import { describeCause, GatewayError, withOwn } from '../errors.js'

/** The seconds a refresh failure asks to wait before the next (a provider's 429, oauth/client.ts), if it does. */
export function pausedFor (error: unknown): number | undefined {
  const after = error instanceof GatewayError && error.code === 'token_exchange_failed' ? error.details.headers?.['retry-after'] : undefined
  return after === undefined ? undefined : Number(after)
}

/** A refresh that failed at the provider: its token endpoint, or its discovery or keys (an ID token in the answer). */
export const PROVIDER_FAILURES = new Set(['token_exchange_failed', 'provider_unavailable'])

/** Another request's refresh of this token failed just now (failureKey): not asked again yet. */
export class FailedJustNow extends GatewayError {
  constructor () {
    super('token_exchange_failed', 'The token refresh failed just now. Please try again shortly.')
  }
}

/** The provider's last 429 asks for a pause that is not over: not asked (checkPause). */
export class Paused extends GatewayError {
  constructor (seconds: number) {
    super('token_exchange_failed', `The sign-in provider asked for a pause; try again in ${seconds} s.`, { details: { headers: { 'retry-after': String(seconds) } } })
  }
}

/**
 * Marks a refresh that failed, for the requests that waited on its lock (they then do not ask
 * again), and, while it stands (the provider's timeout plus 5 s), for those of a token still valid
 * (they go on with it); whoever next takes the lock without having waited, for an expired token,
 * deletes it: a failure before that is history. Its own key space: a provider's name cannot make it
 * another's lock.
 */
export const failureKey = (sessionId: string, provider: string) => `refresh-failed:${sessionId}:${provider}`

/**
 * `error`, a refresh of an expired token that failed (the request fails with it), with its one log
 * line: `token refresh failed` at the provider, naming it, its endpoint and the cause, as when the
 * token was still valid (operations.md has operators alert on that line; an outside tester's
 * finding: only `request failed` was logged, with no provider); at debug when it was not asked (a
 * pause, or a failure just now: the failure was logged when it happened).
 */
export function expiredRefreshFailed (error: GatewayError, fields: { provider: string, session: string }): GatewayError {
  // On a copy: the failure may be shared (a provider's discovery is answered alike for seconds).
  if (error instanceof Paused || error instanceof FailedJustNow) {
    return withOwn(error, { log: { msg: 'token refresh not asked (a pause, or a failure just now); the token has expired, so the request fails', fields: { ...fields, reason: error.message }, level: 'debug' } })
  }
  if (!PROVIDER_FAILURES.has(error.code) || error.details.log?.level === 'debug') return error
  // The token endpoint's own fields (url, reason, cause) when it was asked; else what kept it from being asked (its discovery).
  const asked = error.details.log?.fields ?? { reason: error.message, cause: describeCause(error.cause) }
  const copy = withOwn(error, {})
  copy.details.log = { msg: 'token refresh failed; the token has expired, so the request fails', fields: { ...asked, ...fields, retryAfterS: pausedFor(error) } }
  return copy
}
