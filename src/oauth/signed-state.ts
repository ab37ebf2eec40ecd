// The `state` the gateway sends through a provider and reads back: a compact JWS (RFC 7515), HS256,
// with iat and exp, signed and checked with node:crypto. Only this gateway issues and reads these
// tokens, so the headers are a fixed set: `{"alg":"HS256","kid":"<id>"}` for each secret the
// gateway holds (the kid picks the one key to try); a token with any other header (one without a
// kid, as the builds before 1.0.0 wrote) is refused before any MAC is computed (no `alg` choice to
// confuse, no key tried twice). jose signs the same token through
// WebCrypto, at over ten times the cost (docs/performance.md, "Own code where a library would do");
// the tests check that jose reads what this signs and that this reads what jose signs.
import { createHmac, timingSafeEqual, type KeyObject } from 'node:crypto'

const BASE64URL = /^[A-Za-z0-9_-]+$/

/** A key that signs and opens states, its id, and the encoded header that names it. */
export interface StateKey {
  readonly kid: string
  readonly key: KeyObject
  readonly header: string
}

/** `key` under the id `kid` (a secret's public key id). */
export function stateKey (kid: string, key: KeyObject): StateKey {
  return { kid, key, header: Buffer.from(JSON.stringify({ alg: 'HS256', kid })).toString('base64url') }
}

/** The keys states are opened with, by the exact header that names each; built once. */
export type StateKeyring = ReadonlyMap<string, StateKey>

/** The accepted headers of `keys`: each key's own. */
export function stateKeyring (keys: readonly StateKey[]): StateKeyring {
  return new Map(keys.map((key) => [key.header, key] as const))
}

function mac (key: KeyObject, signingInput: string): string {
  return createHmac('sha256', key).update(signingInput).digest('base64url')
}

/** `claims` with iat (now) and exp (now + ttl, whole seconds), signed; the header names the key's id. */
export function signState (key: StateKey, claims: Record<string, unknown>, ttlMs: number, nowMs: number): string {
  const iat = Math.floor(nowMs / 1000)
  const payload = Buffer.from(JSON.stringify({ ...claims, iat, exp: iat + Math.ceil(ttlMs / 1000) })).toString('base64url')
  const signingInput = `${key.header}.${payload}`
  return `${signingInput}.${mac(key.key, signingInput)}`
}

export type OpenedState =
  | { ok: true, claims: Record<string, unknown> & { exp: number }, /** the id of the key that opened it */ kid: string }
  | { ok: false, reason: 'invalid' }
  /** `claims`: what the gateway signed, authentic but no longer valid (a page may read where the flow was going); `kid`: the key that signed it. */
  | { ok: false, reason: 'expired', claims: Record<string, unknown>, kid: string }

/**
 * The claims of a state this gateway signed with one of `keys` (the one its header names: one MAC),
 * or why not: `invalid` (not three parts, a header not in the set, a bad signature, a payload that is not a JSON object, no numeric exp) or `expired` (exp at
 * or before now, as jose counts it with no clock tolerance).
 */
export function openState (keys: StateKeyring, token: string, nowMs: number): OpenedState {
  const parts = token.split('.')
  const key = parts.length === 3 ? keys.get(parts[0]!) : undefined
  if (key === undefined || !BASE64URL.test(parts[1]!) || !BASE64URL.test(parts[2]!)) return { ok: false, reason: 'invalid' }
  // Compared as the canonical base64url text: no second spelling of the same signature passes.
  const signature = Buffer.from(parts[2]!)
  const expected = Buffer.from(mac(key.key, `${parts[0]}.${parts[1]}`))
  if (signature.length !== expected.length || !timingSafeEqual(signature, expected)) return { ok: false, reason: 'invalid' }
  let claims: unknown
  try {
    claims = JSON.parse(Buffer.from(parts[1]!, 'base64url').toString('utf8'))
  } catch {
    return { ok: false, reason: 'invalid' }
  }
  if (typeof claims !== 'object' || claims === null || Array.isArray(claims)) return { ok: false, reason: 'invalid' }
  const exp = (claims as { exp?: unknown }).exp
  if (typeof exp !== 'number' || !Number.isFinite(exp)) return { ok: false, reason: 'invalid' }
  if (exp <= Math.floor(nowMs / 1000)) return { ok: false, reason: 'expired', claims: claims as Record<string, unknown>, kid: key.kid }
  return { ok: true, claims: claims as Record<string, unknown> & { exp: number }, kid: key.kid }
}
