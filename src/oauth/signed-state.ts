// The `state` the gateway sends through a provider and reads back: a compact JWS (RFC 7515), HS256,
// with iat and exp, signed and checked with node:crypto. Only this gateway issues and reads these
// tokens, so the header is fixed: a token whose header is not exactly `{"alg":"HS256"}` is refused
// before any MAC is computed (no `alg` choice to confuse). jose signs the same token through
// WebCrypto, at over ten times the cost (docs/performance.md, "Own code where a library would do");
// the tests check that jose reads what this signs and that this reads what jose signs.
import { createHmac, timingSafeEqual, type KeyObject } from 'node:crypto'

const HEADER = Buffer.from('{"alg":"HS256"}').toString('base64url')
const BASE64URL = /^[A-Za-z0-9_-]+$/

function mac (key: KeyObject, signingInput: string): string {
  return createHmac('sha256', key).update(signingInput).digest('base64url')
}

/** `claims` with iat (now) and exp (now + ttl, whole seconds), signed. */
export function signState (key: KeyObject, claims: Record<string, unknown>, ttlMs: number, nowMs: number): string {
  const iat = Math.floor(nowMs / 1000)
  const payload = Buffer.from(JSON.stringify({ ...claims, iat, exp: iat + Math.ceil(ttlMs / 1000) })).toString('base64url')
  const signingInput = `${HEADER}.${payload}`
  return `${signingInput}.${mac(key, signingInput)}`
}

export type OpenedState =
  | { ok: true, claims: Record<string, unknown> & { exp: number } }
  | { ok: false, reason: 'invalid' | 'expired' }

/**
 * The claims of a state this gateway signed with `key`, or why not: `invalid` (not three parts, another
 * header, a bad signature, a payload that is not a JSON object, no numeric exp) or `expired` (exp at
 * or before now, as jose counts it with no clock tolerance).
 */
export function openState (key: KeyObject, token: string, nowMs: number): OpenedState {
  const parts = token.split('.')
  if (parts.length !== 3 || parts[0] !== HEADER || !BASE64URL.test(parts[1]!) || !BASE64URL.test(parts[2]!)) return { ok: false, reason: 'invalid' }
  // Compared as the canonical base64url text: no second spelling of the same signature passes.
  const signature = Buffer.from(parts[2]!)
  const expected = Buffer.from(mac(key, `${parts[0]}.${parts[1]}`))
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
  if (exp <= Math.floor(nowMs / 1000)) return { ok: false, reason: 'expired' }
  return { ok: true, claims: claims as Record<string, unknown> & { exp: number } }
}
