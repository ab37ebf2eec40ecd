// The identity headers a protected request carries to its application (the proxy's upstream request)
// or back to the proxy in front (forward-auth's 200): written here once, with the rule that an
// address the provider did not verify is not vouched for. And a route's claim headers (`headers:`),
// whose values are sent whole or not at all. A list (the groups, a claim's values) is comma-joined
// with each element encoded so that no element can be read as two (listHeaderValue).
import type { ClaimHeader } from '../config/types.js'
import type { Identity } from '../session/record.js'

/** The header names, lower case: a route's `identityHeaders`, or forward-auth's defaults. */
export interface IdentityHeaderNames {
  readonly user: string
  readonly email: string
  readonly groups: string
}

/** Forward-auth's names, and a route's when its `identityHeaders` names none. */
export const DEFAULT_IDENTITY_HEADERS: IdentityHeaderNames = Object.freeze({ user: 'x-forwarded-user', email: 'x-forwarded-email', groups: 'x-forwarded-groups' })

/** Any character beyond ASCII. */
const NON_ASCII = /[\u0080-\uffff]/

/**
 * `text` as a header value: its UTF-8 bytes in the latin1 string Node's HTTP code writes byte for
 * byte (as the claim headers are sent). A character beyond U+00FF could not be written at all (the
 * request would fail), and one in U+0080-U+00FF would go as one latin1 byte no UTF-8 reader reads.
 * ASCII, the common case, is returned as it is.
 */
export function headerText (text: string): string {
  return NON_ASCII.test(text) ? Buffer.from(text, 'utf8').toString('latin1') : text
}

/** Characters a list reader splits on or unquotes by (`,`, `;`, `"`), and `%` itself, so that decoding is exact. */
const LIST_SPECIAL = /[%,;"]/g

/**
 * White space that trimming takes off an element's ends (JavaScript's and Java's, Python's and Go's,
 * which add NEL); all of it in the BMP, so one UTF-16 unit is one character here.
 */
const LIST_SPACE = /[\s\u0085]/

/**
 * One element of a list-valued header: `%`, `,`, `;` and `"` percent-encoded, and so is white
 * space at either end, so an application that splits the value on `,` (or `;`) and trims each
 * piece reads exactly this element, and decodeURIComponent gives back the original. An element
 * without those characters is sent as it is.
 */
function listElement (value: string): string {
  const encoded = value.replace(LIST_SPECIAL, (char) => encodeURIComponent(char))
  let start = 0
  while (start < encoded.length && LIST_SPACE.test(encoded[start]!)) start++
  let end = encoded.length
  while (end > start && LIST_SPACE.test(encoded[end - 1]!)) end--
  if (start === 0 && end === encoded.length) return encoded
  return `${encodeURIComponent(encoded.slice(0, start))}${encoded.slice(start, end)}${encodeURIComponent(encoded.slice(end))}`
}

/**
 * The values of a list-valued header (the groups, a claim header), comma-joined, each element
 * encoded by listElement: a role named `viewer,admin` arrives as `viewer%2Cadmin`, never as two.
 */
export function listHeaderValue (values: readonly string[]): string {
  return values.map(listElement).join(',')
}

/**
 * Puts the identity's headers into `headers` (and returns it): the user always, the e-mail address
 * only when the provider did not mark it unverified, the groups comma-joined when there are any
 * (listHeaderValue), each as UTF-8 (headerText).
 */
export function identityHeaders<T extends Record<string, unknown>> (identity: Identity | undefined, names: IdentityHeaderNames, headers: T): T {
  if (identity === undefined) return headers
  const out = headers as Record<string, unknown>
  out[names.user] = headerText(identity.sub)
  if (identity.email && identity.emailVerified !== false) out[names.email] = headerText(identity.email)
  if (identity.groups.length > 0) out[names.groups] = groupsValue(identity)
  return headers
}

/** Each identity's groups header value, made once: a session's identity is one object across its requests. */
const groupsValues = new WeakMap<Identity, string>()

function groupsValue (identity: Identity): string {
  let value = groupsValues.get(identity)
  if (value === undefined) {
    value = headerText(listHeaderValue(identity.groups))
    groupsValues.set(identity, value)
  }
  return value
}

/** The longest value a claim header carries, in bytes as sent (UTF-8): a longer one refuses the request. */
export const CLAIM_HEADER_MAX_BYTES = 4096

/** Whether `text` holds a control character (C0, DEL): in a header value one could end the line or split it. */
function hasControl (text: string): boolean {
  for (let i = 0; i < text.length; i++) {
    const code = text.charCodeAt(i)
    if (code < 0x20 || code === 0x7f) return true
  }
  return false
}

/**
 * Why `text` cannot be a header value as it is: a control character would make Node refuse the
 * whole message; a lone surrogate would go as U+FFFD, the spelling of another name (`x\ud800` and
 * `x\ufffd` reached the upstream as one user: an attacker's finding). Undefined when it can.
 */
function unsendableText (text: string): string | undefined {
  if (hasControl(text)) return 'holds a control character'
  return LONE_SURROGATE.test(text) ? 'is not valid Unicode' : undefined
}

/** A surrogate not in a pair: read by code point (`u`), a pair is one code point of its own. */
const LONE_SURROGATE = /\p{Cs}/u

/**
 * The identity header whose value cannot be sent, and why; undefined when every one can. A user
 * name, address or group that cannot (an issuer's claim, or a signed token's) is refused whole, as a
 * claim header is, never cleaned.
 */
export function unsendableIdentity (identity: Identity | undefined, names: IdentityHeaderNames): { readonly header: string, readonly problem: string } | undefined {
  if (identity === undefined) return undefined
  let found = unsendableFields.get(identity)
  if (found === undefined) {
    found = unsendableField(identity)
    unsendableFields.set(identity, found)
  }
  return found === null ? undefined : { header: names[found.field], problem: found.problem }
}

/**
 * Each identity's field that cannot be sent, and why (null: none), judged once: identities are
 * immutable and shared by every request of a session or token, so the proxy's hot path pays a
 * WeakMap lookup, not a scan and a join per request.
 */
const unsendableFields = new WeakMap<Identity, { field: keyof IdentityHeaderNames, problem: string } | null>()

function unsendableField (identity: Identity): { field: keyof IdentityHeaderNames, problem: string } | null {
  const user = unsendableText(identity.sub)
  if (user !== undefined) return { field: 'user', problem: user }
  const email = identity.email !== undefined && identity.emailVerified !== false ? unsendableText(identity.email) : undefined
  if (email !== undefined) return { field: 'email', problem: email }
  for (const group of identity.groups) {
    const problem = unsendableText(group)
    if (problem !== undefined) return { field: 'groups', problem }
  }
  return null
}

/** What the claim headers of a route come to for one identity: the header lines, or why none may be sent. */
export type ClaimHeaderValues =
  | { readonly ok: true, readonly headers: ReadonlyArray<readonly [name: string, value: string]> }
  | { readonly ok: false, readonly header: string, readonly problem: string }

const NONE: ClaimHeaderValues = Object.freeze({ ok: true, headers: Object.freeze([]) })

/**
 * The route's claim headers (`headers:`) for `identity`: each claim's values comma-joined
 * (listHeaderValue), as UTF-8 bytes in the latin1 string Node's HTTP clients write byte for byte. A claim the identity
 * lacks sends no header. A value holding a control character, or longer than
 * CLAIM_HEADER_MAX_BYTES, is refused whole, never cut or cleaned: the caller answers 403 and the
 * upstream is not asked (an application that reads a shortened list of roles would read a different
 * person).
 * @see https://www.rfc-editor.org/rfc/rfc9110#section-5.5
 */
export function claimHeaderValues (identity: Identity | undefined, mapping: readonly ClaimHeader[]): ClaimHeaderValues {
  if (mapping.length === 0 || identity?.claims === undefined) return NONE
  // Made once per identity and route: a session's identity is one object across its requests.
  let byRoute = claimValues.get(identity)
  if (byRoute === undefined) {
    byRoute = new Map()
    claimValues.set(identity, byRoute)
  }
  let values = byRoute.get(mapping)
  if (values === undefined) {
    values = claimHeaderValuesOf(identity.claims, mapping)
    byRoute.set(mapping, values)
  }
  return values
}

/** Each identity's claim header values, by the route's mapping (one array per route). */
const claimValues = new WeakMap<Identity, Map<readonly ClaimHeader[], ClaimHeaderValues>>()

function claimHeaderValuesOf (claims: NonNullable<Identity['claims']>, mapping: readonly ClaimHeader[]): ClaimHeaderValues {
  const headers: Array<readonly [string, string]> = []
  for (const { name, claim } of mapping) {
    // Own properties only: a claim named `constructor` must not read Object's.
    const values = Object.hasOwn(claims, claim) ? claims[claim] : undefined
    if (values === undefined || values.length === 0) continue
    // Judged on the values as given: the list encoding would turn a control character at an
    // element's end into `%0D`, a value cleaned rather than refused.
    if (values.some(hasControl)) return { ok: false, header: name, problem: 'holds a control character' }
    const joined = listHeaderValue(values)
    const size = Buffer.byteLength(joined, 'utf8')
    if (size > CLAIM_HEADER_MAX_BYTES) return { ok: false, header: name, problem: `is longer than ${CLAIM_HEADER_MAX_BYTES} bytes` }
    if (size === joined.length) {
      headers.push([name, joined])
      continue
    }
    // A lone surrogate has no UTF-8 form: it would go as U+FFFD, a value the provider never gave.
    if (LONE_SURROGATE.test(joined)) return { ok: false, header: name, problem: 'is not valid Unicode' }
    headers.push([name, Buffer.from(joined, 'utf8').toString('latin1')])
  }
  return Object.freeze({ ok: true, headers: Object.freeze(headers) })
}
