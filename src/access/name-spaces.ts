// Whose people a route names how. The people of two providers are two name spaces: `alice` at
// `corp` need not be `alice` at `partner`. On a route whose own provider is `corp`, a person of any
// other provider or bearer issuer is named `<provider>:<user>` (`partner:alice`) in `users` rules,
// the identity headers, the assertion's `sub` and the log's `user`. The own provider's people keep
// their plain name, unless it reads as a qualified name of any provider of the gateway, in any case
// or Unicode spelling (`partner:alice`, `Partner:alice`; Keycloak and many directories allow `:` in
// user names): that account is `corp:partner:alice`, on every route of `corp`, so that no name
// reaching an upstream from any route can be held by the people of two providers. A `deny` written
// for the name it had (`users: [partner:alice]`) still holds for it (`aka`).
import { foldName } from '../config/rule-lists.js'
import type { Identity } from '../session/record.js'

const NONE: ReadonlySet<string> = new Set()
const ASCII = /^[\x20-\x7e]*$/

/**
 * The name spaces of a gateway: its providers' names, as foldName spells them. Empty with one
 * provider (its people's names cannot read as another's).
 */
export function nameSpaces (providers: Readonly<Record<string, unknown>>): ReadonlySet<string> {
  let spaces = byConfig.get(providers)
  if (spaces === undefined) {
    const names = Object.keys(providers)
    spaces = names.length < 2 ? NONE : new Set(names.map(foldName))
    byConfig.set(providers, spaces)
  }
  return spaces
}

/** Each config's name spaces, made once: every route, forward-auth and the agents' consent share them. */
const byConfig = new WeakMap<object, ReadonlySet<string>>()

/**
 * Whether `identity`, of `issuer`, is named `<issuer>:<user>` on a route whose own provider is
 * `own`, in a gateway of the name spaces `spaces`: always when `issuer` is not `own`; for the own
 * provider's people, when the user name or subject starts with `<a provider>:` as foldName reads it
 * (own too: `corp:partner:alice` must stay the qualified name of the own account `partner:alice`,
 * never an own account's plain name). No route provider (`own` undefined): every issuer's people
 * keep their plain name.
 */
export function isQualified (identity: Identity, issuer: string, own: string | undefined, spaces: ReadonlySet<string>): boolean {
  if (own === undefined) return false
  if (issuer !== own) return true
  if (spaces.size === 0) return false
  const readsQualified = (name: string | undefined): boolean => {
    // An ASCII name without a colon reads as no qualified name (foldName would give none either).
    if (name === undefined || (!name.includes(':') && ASCII.test(name))) return false
    const folded = foldName(name)
    const colon = folded.indexOf(':')
    return colon > 0 && spaces.has(folded.slice(0, colon))
  }
  return readsQualified(identity.sub) || readsQualified(identity.subject)
}

/**
 * `identity` with its user name and subject qualified by `issuer`. The own provider's (`issuer` is
 * `own`) keeps the names it had as `aka`, which a `deny` also holds on.
 */
export function qualify (identity: Identity, issuer: string, own: string | undefined): Identity {
  const subject = identity.subject === undefined ? {} : { subject: `${issuer}:${identity.subject}` }
  const aka = issuer === own ? { aka: [identity.sub, ...identity.subject === undefined ? [] : [identity.subject]] } : {}
  return { ...identity, sub: `${issuer}:${identity.sub}`, ...subject, ...aka }
}

/** `identity`, of `issuer`, as a route (own provider `own`) of a gateway of the name spaces `spaces` names it. */
export function named (identity: Identity, issuer: string, own: string | undefined, spaces: ReadonlySet<string> = NONE): Identity {
  return isQualified(identity, issuer, own, spaces) ? qualify(identity, issuer, own) : identity
}
