// What a `deny` compares of a person: their names and address folded harder than an `allow` may fold
// them (config/rule-lists.ts foldName, foldDeniedEmail), once per identity and in time linear in
// their length, since a deny runs on every request and a name is whatever the provider signed. A
// name or address longer than any person's cannot be told: every `deny` on it holds.
import { foldDeniedEmail, foldName } from '../config/rule-lists.js'
import type { Identity } from '../session/record.js'

/** The longest name or address a deny reads (an address has at most 254 characters, RFC 5321 §4.5.3.1.3). */
export const LONGEST_NAME = 1024

/** A deny's forms of each identity's names, and of its address (null: cannot be told). */
const names = new WeakMap<Identity, readonly string[] | null>()
const addresses = new WeakMap<Identity, string | null>()

/**
 * The names a `users` deny compares of `identity`: its subject, user name and old names (`aka`),
 * each as foldName spells it. Null when one is longer than LONGEST_NAME.
 */
export function deniedNames (identity: Identity): readonly string[] | null {
  let forms = names.get(identity)
  if (forms === undefined) {
    const all = [identity.subject, identity.sub, ...identity.aka ?? []].filter((name): name is string => name !== undefined)
    forms = all.some((name) => name.length > LONGEST_NAME) ? null : all.map(foldName)
    names.set(identity, forms)
  }
  return forms
}

/**
 * The address an `emails` deny compares (foldDeniedEmail), unverified ones too; undefined for none,
 * null when it cannot be told (too long, a domain IDNA refuses).
 */
export function deniedAddress (identity: Identity): string | null | undefined {
  const email = identity.email
  if (email === undefined) return undefined
  let form = addresses.get(identity)
  if (form === undefined) {
    form = email.length > LONGEST_NAME ? null : foldDeniedEmail(email) ?? null
    addresses.set(identity, form)
  }
  return form
}

/**
 * Whether `folded` is listed, or is a subaddress of a listed address (`mallory+2@x` of `mallory@x`,
 * `mallory+x+y@x` of `mallory+x@x`). Linear: each entry is compared once.
 */
export function listedOrSubaddress (listed: readonly string[], folded: string): boolean {
  for (const entry of listed) {
    if (entry === folded) return true
    const at = entry.lastIndexOf('@')
    if (at <= 0 || folded.length <= entry.length) continue
    const local = entry.slice(0, at)
    if (folded.startsWith(local) && folded[at] === '+' && folded.endsWith(entry.slice(at)) && folded.lastIndexOf('@') === folded.length - (entry.length - at)) return true
  }
  return false
}
