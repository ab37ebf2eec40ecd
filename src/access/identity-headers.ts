// The identity headers a protected request carries to its application (the proxy's upstream request)
// or back to the proxy in front (forward-auth's 200): written here once, with the rule that an
// address the provider did not verify is not vouched for.
import type { Identity } from '../session/record.js'

/** The header names, lower case: a route's `identityHeaders`, or forward-auth's defaults. */
export interface IdentityHeaderNames {
  readonly user: string
  readonly email: string
  readonly groups: string
}

/** Forward-auth's names, and a route's when its `identityHeaders` names none. */
export const DEFAULT_IDENTITY_HEADERS: IdentityHeaderNames = Object.freeze({ user: 'x-forwarded-user', email: 'x-forwarded-email', groups: 'x-forwarded-groups' })

/**
 * Puts the identity's headers into `headers` (and returns it): the user always, the e-mail address
 * only when the provider did not mark it unverified, the groups comma-joined when there are any.
 */
export function identityHeaders<T extends Record<string, unknown>> (identity: Identity | undefined, names: IdentityHeaderNames, headers: T): T {
  if (identity === undefined) return headers
  const out = headers as Record<string, unknown>
  out[names.user] = identity.sub
  if (identity.email && identity.emailVerified !== false) out[names.email] = identity.email
  if (identity.groups.length > 0) out[names.groups] = identity.groups.join(',')
  return headers
}
