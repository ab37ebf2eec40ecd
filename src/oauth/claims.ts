// Who the user is, per provider: the fields the gateway uses (user, email, name, groups) read from
// ID token claims and userinfo JSON through the provider's `claims` mapping. An address the provider
// marks unverified (OIDC Core §5.1 `email_verified`) is kept and shown, but never satisfies an
// e-mail or domain rule (access/rules.ts), and never becomes the user's name: a sign-in whose user is
// such an address is refused.
import type { ClaimsMapping } from '../config/types.js'
import { notOneAddress, unreadUserName, type Identity, type PersonField } from '../session/record.js'

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
  if (typeof value === 'string') {
    const trimmed = trimSpaces(value)
    return trimmed === '' ? undefined : trimmed
  }
  if (typeof value === 'number') return String(value)
  return undefined
}

/**
 * A name that tells people apart (the user name, `sub`) as the provider gave it, or none when it has
 * white space at an end: trimmed, `…:ref:refs/heads/main\t` (another subject at the issuer) passed
 * a `users` rule on the name without it, and kept, it would reach the upstream as that name all the
 * same, since HTTP trims a header value's ends (an attacker's finding); so would `alice\u00a0` to an
 * application that trims (Go's TrimSpace, JavaScript's trim(), Python's strip(): a re-reading's).
 */
function exactName (value: unknown): string | undefined {
  const found = text(value)
  return typeof value === 'string' && (found !== value || SPACE_AT_AN_END.test(value)) ? undefined : found
}

/**
 * White space as the common trims read it, at either end: JavaScript's `\s`, NEL and U+180E, which
 * Go's and Python's take too, and the separators U+001C to U+001F, which Python's strip() takes.
 */
// eslint-disable-next-line no-control-regex -- the separators are the point: they are what Python's strip() takes
const SPACE_AT_AN_END = /^[\s\u0085\u180e\x1c-\x1f]|[\s\u0085\u180e\x1c-\x1f]$/

/** ASCII white space: a space, a tab, a line feed or carriage return, a form feed, a vertical tab. */
const asciiSpace = (code: number): boolean => code === 32 || (code >= 9 && code <= 13)

/**
 * `value` without the ASCII white space at its ends (a provider's `alice\r\n`): only that. A
 * Unicode space (no-break, ideographic, a line separator) or a BOM at an end is part of the name:
 * trimmed, `alice\u3000` was vouched for as `alice`, and `admins\u00a0` passed a rule on `admins`
 * (an outside tester's finding; JavaScript's trim() takes them all).
 */
function trimSpaces (value: string): string {
  let start = 0
  let end = value.length
  while (start < end && asciiSpace(value.charCodeAt(start))) start++
  while (end > start && asciiSpace(value.charCodeAt(end - 1))) end--
  return start === 0 && end === value.length ? value : value.slice(start, end)
}

/**
 * Groups as rules compare them: a list's texts, or one string split at its commas (`staff, ops`).
 * White space inside a name is part of it (`Domain Admins` is one group, as ADFS sends a single one).
 */
function list (value: unknown): string[] {
  if (Array.isArray(value)) return value.flatMap((item) => text(item) ?? [])
  const single = text(value)
  return single ? single.split(',').map(trimSpaces).filter(Boolean) : []
}

/**
 * Whether `email_verified` does not say yes: anything but boolean true or the string "true" that
 * some providers send (false, "false", 0, "no", null, a list, an object). Absent counts as yes, as
 * the standard claims' providers that verify every address leave it out.
 * @see https://openid.net/specs/openid-connect-core-1_0.html#StandardClaims
 */
function unverified (value: unknown): boolean {
  return value !== undefined && value !== true && !(typeof value === 'string' && trimSpaces(value).toLowerCase() === 'true')
}

/** A claim value as the values rules compare: text, numbers and booleans as written (`42`, `true`). */
function claimText (value: unknown): string | undefined {
  if (typeof value === 'string') return value
  if (typeof value === 'number' || typeof value === 'boolean') return String(value)
  return undefined
}

/**
 * Whether a claim's value can be read whole as rules read it: one value, or a list of values, each
 * one that `scalar` reads. A claim absent, or in a shape the gateway does not read (a list of lists,
 * an object, a list holding null or objects), cannot be: what the unread part says is not known.
 */
function readable (value: unknown, scalar: (item: unknown) => boolean): boolean {
  return value != null && (Array.isArray(value) ? value.every(scalar) : scalar(value))
}

/** The words of groups sent as one string whose names hold white space or `;` (Identity.groupWords); none otherwise. */
function wordsOf (value: unknown): { groupWords?: string[] } {
  const names = typeof value === 'string' ? list(value) : []
  const words = names.filter((name) => /[\s;]/.test(name)).flatMap((name) => name.split(/[\s;]+/)).filter(Boolean)
  return words.length > 0 ? { groupWords: words } : {}
}

/** A group as list() reads it: text or a number. */
const groupValue = (item: unknown) => typeof item === 'string' || typeof item === 'number'
/** A claim value as claimText reads it. */
const claimValue = (item: unknown) => claimText(item) !== undefined

/**
 * The claims at `paths` (the provider's keptClaims), each as a list of texts: an array claim's
 * elements, or a single value. A path the claims do not have is kept as no values: read and not
 * found, which rules tell from a path never read (one a rule added since names). A path whose value
 * is in a shape the gateway does not read (an object, a list of lists) is left out, as never read:
 * what it says cannot be told, so a `deny` on it holds. Undefined when no path is named.
 */
export function keptClaims (claims: Record<string, unknown>, paths: readonly string[]): Record<string, string[]> | undefined {
  if (paths.length === 0) return undefined
  return Object.fromEntries(paths.flatMap((path) => {
    const value = pick(claims, path)
    if (value != null && !readable(value, claimValue)) return []
    return [[path, (Array.isArray(value) ? value : [value]).flatMap((item) => claimText(item) ?? [])]]
  }))
}

/**
 * The identity in `claims`, or undefined when the mapping's user field is missing: the mapped user
 * name, and the stable `sub` (with its `iss`) that people are keyed on. `kept`: the claim paths
 * rules and claim headers name, kept besides (and only those). Groups or a kept claim in a shape the
 * gateway does not read are marked as what cannot be told (`unknown`, a path left out of `claims`).
 */
export function identityFrom (claims: Record<string, unknown>, mapping: ClaimsMapping, kept: readonly string[] = []): Identity | undefined {
  const sub = exactName(pick(claims, mapping.user))
  // A `sub` with white space at an end names nobody the gateway can tell apart: no identity, not the user name in its place.
  const subject = exactName(claims.sub)
  if (!sub || (typeof claims.sub === 'string' && subject === undefined)) return undefined
  const groups = pick(claims, mapping.groups)
  const emailClaim = pick(claims, mapping.email)
  const address = text(emailClaim)?.toLowerCase()
  // Text that is not one address (two, comma-separated; a display name; two `@`) cannot be told either.
  const email = address !== undefined && notOneAddress(address) ? undefined : address
  const name = text(pick(claims, mapping.name))
  const iss = text(claims.iss)
  return {
    sub,
    // A provider that names no `sub` gives nothing steadier than the user name (see --check's warning).
    subject: subject ?? sub,
    ...(iss ? { iss } : {}),
    ...(email ? { email } : {}),
    ...(email && unverified(claims.email_verified) ? { emailVerified: false as const } : {}),
    ...(name ? { name } : {}),
    groups: list(groups),
    ...wordsOf(groups),
    ...withClaims(keptClaims(claims, kept)),
    ...unknownOf(groups != null && !readable(groups, groupValue), emailClaim != null && email === undefined && !(typeof emailClaim === 'string' && trimSpaces(emailClaim) === '')),
  }
}

/**
 * Groups or an e-mail address in a shape the gateway does not read (objects, lists of lists; a list
 * of addresses, as `emails.value` maps SCIM's) cannot be told: a `deny` on them holds, as for a
 * token that lacks them. A provider that names no groups, or no address, at all means "none".
 */
function unknownOf (groups: boolean, email: boolean): { unknown?: PersonField[] } {
  const unknown: PersonField[] = [...(groups ? ['groups' as const] : []), ...(email ? ['email' as const] : [])]
  return unknown.length > 0 ? { unknown } : {}
}

function withClaims (claims: Readonly<Record<string, readonly string[]>> | undefined): { claims?: Readonly<Record<string, readonly string[]>> } {
  return claims === undefined ? {} : { claims }
}

/**
 * Why the user name `claims.user` maps cannot be taken: it names the e-mail claim (the path `email`,
 * or the mapping's own e-mail path, as `preset: google` maps it) and the provider said that address
 * is not verified (anyone's to claim); or, whatever claim names it, it holds an `@` and is not one
 * address, so that two readers could read it apart (unreadUserName). Such a sign-in is refused. An
 * absent `email_verified` counts as verified, as for the e-mail header and the e-mail rules.
 * Undefined when the name can be taken.
 * @see https://openid.net/specs/openid-connect-core-1_0.html#StandardClaims
 */
export function untakenUser (claims: Record<string, unknown>, mapping: ClaimsMapping): string | undefined {
  const user = mapping.user.replace(/^\//, '')
  if ((user === 'email' || mapping.user === mapping.email) && unverified(claims.email_verified)) return 'the provider has not verified this e-mail address'
  const name = exactName(pick(claims, mapping.user))
  return name !== undefined && unreadUserName(name) ? 'the user name the provider gives holds an @ but is not one e-mail address' : undefined
}

/**
 * The identity in a token's claims (with what the route's `claimsFrom` source added), marking what
 * they do not say of the person: no usable e-mail address, no groups claim, and (left out of
 * `claims`) each kept path they lack. A session's provider that says nothing means "none"; a token
 * saying nothing means only that access tokens seldom carry these claims. A claim in a shape the
 * gateway does not read counts as one the token lacks: a `deny` on it holds.
 */
function tokenIdentityFrom (claims: Record<string, unknown>, mapping: ClaimsMapping, kept: readonly string[]): Identity | undefined {
  const found = identityFrom(claims, mapping, kept)
  if (found === undefined) return undefined
  // The subject is the token's `sub` or nothing: no other claim (a client_id, a user name another
  // account can come to hold) may stand for the person `users` rules name.
  const { subject, ...identity } = found
  const sub = exactName(claims.sub)
  const unknown: PersonField[] = []
  if (identity.email === undefined) unknown.push('email')
  if (!readable(pick(claims, mapping.groups), groupValue)) unknown.push('groups')
  const carried = identity.claims && Object.fromEntries(Object.entries(identity.claims).filter(([path]) => readable(pick(claims, path), claimValue)))
  return { ...identity, ...(sub === undefined ? {} : { subject: sub }), ...withClaims(carried), ...(unknown.length > 0 ? { unknown } : {}) }
}

/**
 * The identity of a machine client's token: named by the mapping's user claim, else `sub`, else
 * `client_id`. A user name that is an e-mail address the issuer has not verified, or not one address,
 * is not taken (untakenUser: a sign-in with one is refused): the token's `sub` names it instead.
 * What the claims do not say of the person is marked unknown (tokenIdentityFrom), and so is the user
 * name when another claim stands in for it: a `users` rule cannot tell who it is.
 */
export function tokenIdentity (claims: Record<string, unknown>, mapping: ClaimsMapping, kept: readonly string[]): Identity | undefined {
  const named = (user: string) => {
    const by = { ...mapping, user }
    return untakenUser(claims, by) === undefined ? tokenIdentityFrom(claims, by, kept) : undefined
  }
  const mapped = named(mapping.user)
  if (mapped !== undefined) return mapped
  const fallback = named('sub') ?? named('client_id')
  // Named by another claim than the mapping's (its `sub`, its `client_id`): whose name that is cannot be told.
  return fallback === undefined ? undefined : { ...fallback, unknown: ['user', ...fallback.unknown ?? []] }
}
