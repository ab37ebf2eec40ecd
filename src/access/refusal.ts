// The gate's refusals as the one error type the error handler renders (src/errors.ts): 401
// `unauthenticated` with the sign-in address and WWW-Authenticate, 403 `forbidden`, 400
// `invalid_request`, and the store's or provider's own 503/502 for `unavailable`. Shared by the
// proxy and forward-auth so that both answer a refusal the same way.
// @see https://www.rfc-editor.org/rfc/rfc6750#section-3 (WWW-Authenticate: Bearer)
import { GatewayError } from '../errors.js'
import { unreachable, type Decision } from './gate.js'

/** The decisions that end the request with an error. */
export type Refusal = Extract<Decision, { kind: 'unauthenticated' | 'forbidden' | 'unavailable' | 'invalid_request' }>

export interface RefusalContext {
  /** What has no token, in the 401's message: "this route", "this provider". */
  subject: string
  /** On `unavailable`: where trying again may help (when the failure names no sign-in address). */
  retryUrl?: string
  /** On `unavailable`: the sign-in address to offer (when the failure names none). */
  loginUrl?: string
  /** On `unauthenticated`: response headers besides WWW-Authenticate. */
  headers?: Record<string, string>
}

/** The error that answers a refusing decision (its message is safe to show; causes stay in the log). */
export function refusal (decision: Refusal, context: RefusalContext): Error {
  switch (decision.kind) {
    case 'unauthenticated':
      return new GatewayError('unauthenticated', `Sign in first: there is no access token for ${context.subject}.`, {
        details: { loginUrl: decision.loginUrl, headers: { 'www-authenticate': `Bearer realm="${decision.realm}"`, ...context.headers } },
      })
    case 'forbidden': {
      const who = decision.identity?.email ?? decision.identity?.sub ?? 'This account'
      return new GatewayError('forbidden', `${who} may not use this application.`, { details: { loginUrl: decision.loginUrl } })
    }
    case 'invalid_request':
      return new GatewayError('invalid_request', `The request cannot be served: ${decision.reason}.`)
    case 'unavailable': {
      const error = decision.error
      // The store or the provider failed (503, 502): signing in again would not help, trying again may.
      if (error instanceof GatewayError) {
        if (context.loginUrl !== undefined) error.details.loginUrl ??= context.loginUrl
        if (context.retryUrl !== undefined && !error.details.loginUrl) error.details.retryUrl ??= context.retryUrl
        return error
      }
      // Anything else is a bug: the error handler answers 500 internal_error and logs the cause.
      return error instanceof Error ? error : new Error('the session could not be read', { cause: error })
    }
    default:
      return unreachable(decision)
  }
}
