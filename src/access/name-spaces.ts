// Whose people a route names how. The people of two providers are two name spaces: `alice` at
// `corp` need not be `alice` at `partner`. On a route whose own provider is `corp`, a person of any
// other provider or bearer issuer is named `<provider>:<user>` (`partner:alice`) in `users` rules,
// the identity headers, the assertion's `sub` and the log's `user`. The own provider's people keep
// their plain name, unless it reads as one of the route's qualified names: an own account named
// `partner:alice` (Keycloak and many directories allow `:` in user names) is `corp:partner:alice`
// there, so that no name on the route can be held by the people of two providers.
import type { Identity } from '../session/record.js'

const NONE: ReadonlySet<string> = new Set()

/**
 * The name spaces of a route besides its own provider's: its other providers (`providers: [a, b]`)
 * and its bearer `issuers`. Empty when the route has none (its people keep their names, whatever
 * they read).
 */
export function foreignSpaces (own: string | undefined, ...lists: ReadonlyArray<readonly string[] | undefined>): ReadonlySet<string> {
  const names = new Set(lists.flatMap((list) => list ?? []))
  if (own !== undefined) names.delete(own)
  return names.size === 0 ? NONE : names
}

/**
 * Whether `identity`, of `issuer`, is named `<issuer>:<user>` on a route whose own provider is `own`
 * and whose other name spaces are `foreign`: always when `issuer` is not `own`; for the own
 * provider's people, when the route has other name spaces and the user name or subject starts with
 * `<one of them, or own>:` (own too: `corp:partner:alice` must stay the qualified name of the own
 * account `partner:alice`, never an own account's plain name). No route provider (`own`
 * undefined): every issuer's people keep their plain name.
 */
export function isQualified (identity: Identity, issuer: string, own: string | undefined, foreign: ReadonlySet<string>): boolean {
  if (own === undefined) return false
  if (issuer !== own) return true
  if (foreign.size === 0) return false
  const readsQualified = (name: string | undefined): boolean => {
    const colon = name === undefined ? -1 : name.indexOf(':')
    if (colon <= 0) return false
    const space = name!.slice(0, colon)
    return space === own || foreign.has(space)
  }
  return readsQualified(identity.sub) || readsQualified(identity.subject)
}

/** `identity` with its user name and subject qualified by `issuer`. */
export function qualify (identity: Identity, issuer: string): Identity {
  const subject = identity.subject === undefined ? {} : { subject: `${issuer}:${identity.subject}` }
  return { ...identity, sub: `${issuer}:${identity.sub}`, ...subject }
}

/** `identity`, of `issuer`, as the route (own provider `own`, other name spaces `foreign`) names it. */
export function named (identity: Identity, issuer: string, own: string | undefined, foreign: ReadonlySet<string> = NONE): Identity {
  return isQualified(identity, issuer, own, foreign) ? qualify(identity, issuer) : identity
}
