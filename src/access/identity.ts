// Who the user is, per provider: the fields the gateway uses (user, email, name, groups) read from
// ID token claims and userinfo JSON through the provider's `claims` mapping, and the allow rules
// that decide whether that user may pass a route. An address the provider marks unverified
// (OIDC Core §5.1 `email_verified`) is kept and shown, but never satisfies an e-mail or domain rule,
// and never becomes the user's name: a sign-in whose user is such an address is refused.
import type { AllowRules, ClaimsMapping } from '../config/types.js'

/** The signed-in identity at one provider, as kept in the session and shown at /oauth/userinfo/. */
export interface Identity {
  readonly sub: string
  readonly email?: string
  /** Present, and false, only when the provider said the e-mail address is not verified. */
  readonly emailVerified?: false
  readonly name?: string
  readonly groups: readonly string[]
}

/**
 * The value at a dotted path (`a.b.c`) or JSON pointer (`/a/b/c`). Through an array, a non-numeric
 * step maps over its elements: `teams.slug` of `{teams: [{slug: x}, {slug: y}]}` is `[x, y]`.
 */
function pick (value: unknown, path: string): unknown {
  const steps = path.startsWith('/')
    ? path.slice(1).split('/').map((step) => step.replace(/~1/g, '/').replace(/~0/g, '~'))
    : path.split('.')
  let current: unknown = value
  for (const step of steps) {
    if (Array.isArray(current) && !/^\d+$/.test(step)) {
      current = current.map((item: unknown) => (typeof item === 'object' && item !== null ? (item as Record<string, unknown>)[step] : undefined))
    } else if (typeof current === 'object' && current !== null) {
      current = (current as Record<string, unknown>)[step]
    } else {
      return undefined
    }
  }
  return current
}

function text (value: unknown): string | undefined {
  if (typeof value === 'string' && value.trim() !== '') return value.trim()
  if (typeof value === 'number') return String(value)
  return undefined
}

function list (value: unknown): string[] {
  if (Array.isArray(value)) return value.flatMap((item) => text(item) ?? [])
  const single = text(value)
  return single ? single.split(/[,\s]+/).filter(Boolean) : []
}

/**
 * Whether `email_verified` says no: boolean false, or the string "false" that some providers send.
 * @see https://openid.net/specs/openid-connect-core-1_0.html#StandardClaims
 */
function unverified (value: unknown): boolean {
  return value === false || (typeof value === 'string' && value.trim().toLowerCase() === 'false')
}

/** The identity in `claims`, or undefined when the mapping's user field is missing. */
export function identityFrom (claims: Record<string, unknown>, mapping: ClaimsMapping): Identity | undefined {
  const sub = text(pick(claims, mapping.user))
  if (!sub) return undefined
  const email = text(pick(claims, mapping.email))?.toLowerCase()
  const name = text(pick(claims, mapping.name))
  return {
    sub,
    ...(email ? { email } : {}),
    ...(email && unverified(claims.email_verified) ? { emailVerified: false as const } : {}),
    ...(name ? { name } : {}),
    groups: list(pick(claims, mapping.groups)),
  }
}

/**
 * Whether `claims.user` names the e-mail claim (the path `email`, or the mapping's own e-mail path,
 * as `preset: google` maps it) and the provider said that address is not verified. Such a user
 * name is anyone's to claim, so the sign-in is refused. An absent `email_verified` counts as
 * verified, as for the e-mail header and the e-mail rules.
 * @see https://openid.net/specs/openid-connect-core-1_0.html#StandardClaims
 */
export function unverifiedUser (claims: Record<string, unknown>, mapping: ClaimsMapping): boolean {
  const user = mapping.user.replace(/^\//, '')
  return (user === 'email' || mapping.user === mapping.email) && unverified(claims.email_verified)
}

/**
 * A rule's conditions as written (config or query), in the form rules compare: trimmed, lower-case
 * e-mails and domains, no `@`, no blank values (which could match nothing).
 */
export function normalisedRule (raw: { emails?: readonly string[], domains?: readonly string[], groups?: readonly string[] }): AllowRules {
  const values = (list: readonly string[] | undefined, form: (value: string) => string): string[] =>
    (list ?? []).map((value) => form(value.trim())).filter((value) => value !== '')
  return {
    emails: values(raw.emails, (email) => email.toLowerCase()),
    domains: values(raw.domains, (domain) => domain.toLowerCase().replace(/^@/, '')),
    groups: values(raw.groups, (group) => group),
  }
}

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
