// The rules that decide whether a signed-in identity may pass a route or a forward-auth host:
// `allow` (any match passes) and the rule lists of forwardAuth.hosts (`deny` wins). An address the
// provider marked unverified matches no e-mail or domain rule.
import type { AllowRules } from '../config/types.js'
import type { Identity } from '../session/record.js'

/** The address rules may match: none when the provider marked it unverified. */
function verifiedEmail (identity: Identity): string | undefined {
  return identity.emailVerified === false ? undefined : identity.email
}

/** Each condition of a rule on its own (an empty list is a condition not given). */
const CONDITIONS: ReadonlyArray<(identity: Identity, email: string | undefined, rules: AllowRules) => boolean | undefined> = [
  (_identity, email, rules) => rules.emails.length === 0 ? undefined : email !== undefined && rules.emails.includes(email),
  (_identity, email, rules) => rules.domains.length === 0 ? undefined : email !== undefined && rules.domains.includes(email.slice(email.lastIndexOf('@') + 1)),
  (identity, _email, rules) => rules.groups.length === 0 ? undefined : identity.groups.some((group) => rules.groups.includes(group)),
]

/**
 * Any match passes: an allowed e-mail, an e-mail in an allowed domain, or an allowed group. An
 * unverified e-mail address matches no e-mail or domain rule.
 */
export function isAllowed (identity: Identity | undefined, rules: AllowRules): boolean {
  if (!identity) return false
  const email = verifiedEmail(identity)
  return CONDITIONS.some((condition) => condition(identity, email, rules) === true)
}

/**
 * Whether one rule of `forwardAuth.hosts` holds: every condition it gives matches (a list inside a
 * condition matches any of its values). A rule that gives no condition holds for nobody.
 */
export function ruleHolds (identity: Identity | undefined, rule: AllowRules): boolean {
  if (!identity) return false
  const email = verifiedEmail(identity)
  const results = CONDITIONS.map((condition) => condition(identity, email, rule)).filter((result) => result !== undefined)
  return results.length > 0 && results.every(Boolean)
}

/**
 * Whether `allow` and `deny` lists of rules admit `identity`: no `deny` rule holds, and an `allow`
 * rule does (no `allow` list: any signed-in person). `deny` wins. A session without an identity
 * (a provider that gave none) passes only where no rule is given: there is nothing to judge.
 */
export function rulesAdmit (identity: Identity | undefined, allow: readonly AllowRules[] | undefined, deny: readonly AllowRules[]): boolean {
  if (allow === undefined && deny.length === 0) return true
  if (!identity) return false
  if (deny.some((rule) => ruleHolds(identity, rule))) return false
  return allow === undefined || allow.some((rule) => ruleHolds(identity, rule))
}
