// A session's record as it is stored: its format byte, the JSON of its wire form, sealed to its
// cookie with the secret the cookie was made under (./seal.ts), and the cookie's own shape (its
// random part, then that secret's key id). ./session.ts reads and writes sessions with these.
import type { Sealer, SealingKey } from './seal.js'
import { KEY_ID_LENGTH, randomToken } from './seal.js'
import type { SessionRecord } from './record.js'
import { fromWire, holdsUnreadUserName, toWire, type WireRecord } from './record-wire.js'

/** 256 random bits, then the key id of the secret the cookie was made under. */
export const COOKIE_VALUE = /^[A-Za-z0-9_-]{43}\.[A-Za-z0-9_-]{8}$/
const COOKIE_TOKEN_LENGTH = 43
export const SESSION_PURPOSE = 'session'

/** A new session's cookie: 256 random bits, then the key id of the current secret ({@link COOKIE_VALUE}). */
export function newCookie (sealer: Sealer): string {
  return `${randomToken()}.${sealer.current.kid}`
}

/**
 * The first byte of a stored record, which says its format. Each format is the JSON of the record's
 * wire form (one-letter keys, ./record-wire.ts) sealed to the cookie; the sealed bytes follow the byte:
 * - `COMPACT_RECORD` (written now): sealed with the secret the cookie was made under.
 * - `REKEYED_RECORD` (1.0.0 wrote it for a cookie made under a secret other than the writer's
 *   current one): the key id of the writer's current secret (8 bytes), then the record sealed with
 *   it. An instance still at the first step of a rotation wrote such records for cookies made under
 *   the new secret, sealed with the old one: the last step signed those people out. Now a record is
 *   sealed with its cookie's secret, which the session needs anyway (its store id is of that
 *   secret), and the first read of such a record where its cookie's secret is the current one seals
 *   it again ({@link Sessions}' read).
 * The formats of the builds before 1.0.0 (byte 0x01, and base64url text), which were never
 * released, are not read: such a record opens to no session.
 */
const COMPACT_RECORD = 0x02
const REKEYED_RECORD = 0x03
/**
 * Records are sealed under a purpose of their own, so a format byte changed in the store (the byte
 * itself is not sealed) makes the record fail to open, never read in another format.
 */
const COMPACT_PURPOSE = 'session:compact'

/**
 * A session's record as read from the store, with the exact bytes it was read as. A write over it
 * (Sessions.update) is a compare-and-set against those bytes: they change at every write (a fresh
 * nonce) and are gone once the session ends, so no version field is needed in the record.
 */
export interface StoredRecord {
  readonly record: SessionRecord
  readonly stored: Buffer
}

/** The JSON that is sealed into a stored record (its wire form). */
export function storedJson (record: SessionRecord): string {
  return JSON.stringify(toWire(record))
}

/**
 * The secret a cookie was made under: the one whose key id it names, or undefined when the gateway
 * no longer holds it (or the value is no cookie of this gateway's).
 */
export function cookieKey (sealer: Sealer, cookie: string): SealingKey | undefined {
  return cookie.length > COOKIE_TOKEN_LENGTH ? sealer.key(cookie.slice(COOKIE_TOKEN_LENGTH + 1)) : undefined
}

/** The secret a session's cookie was made under, when the session's id is that secret's id for the cookie. */
export function sessionKey (sealer: Sealer, session: { id: string, cookie: string }): SealingKey | undefined {
  const key = cookieKey(sealer, session.cookie)
  return key?.idFor(SESSION_PURPOSE, session.cookie) === session.id ? key : undefined
}

/**
 * A record as the store keeps it: the format byte, then the record's stored JSON sealed to the
 * cookie with `key`, the secret the cookie was made under (by default the one it names, else
 * the current one). Never with another secret: the session lives as long as its cookie's secret is
 * held, whatever step of a rotation the writing instance is at, and no longer.
 */
export function encodeRecord (sealer: Sealer, cookie: string, record: SessionRecord, key = cookieKey(sealer, cookie) ?? sealer.current): Buffer {
  const sealed = key.sealBytes(COMPACT_PURPOSE, cookie, storedJson(record))
  const value = Buffer.allocUnsafe(1 + sealed.length)
  value[0] = COMPACT_RECORD
  sealed.copy(value, 1)
  return value
}

/**
 * Whether a stored record is worth sealing again: written by 1.0.0 under a secret other
 * than its cookie's, while its cookie's secret is the current one (so the session outlives the
 * previous secrets once its record no longer needs them). A cookie made under a previous secret
 * needs it anyway: its record is left as it is.
 */
export function sealedUnderAnother (sealer: Sealer, key: SealingKey, stored: Buffer): boolean {
  return key === sealer.current && stored[0] === REKEYED_RECORD && stored.toString('latin1', 1, 1 + KEY_ID_LENGTH) !== key.kid
}

/** The stored JSON of a record sealed with `key` (or the secret a rekeyed record names), or null. */
function openRecord (sealer: Sealer, key: SealingKey, cookie: string, stored: Buffer): string | null {
  switch (stored[0]) {
    case REKEYED_RECORD: {
      const named = sealer.key(stored.toString('latin1', 1, 1 + KEY_ID_LENGTH))
      return named ? named.openBytes(COMPACT_PURPOSE, cookie, stored.subarray(1 + KEY_ID_LENGTH)) : null
    }
    case COMPACT_RECORD: return key.openBytes(COMPACT_PURPOSE, cookie, stored.subarray(1))
    default: return null
  }
}

/**
 * The record in a stored value, or null when the cookie does not open it. `key`: the secret the
 * cookie was made under (by default the one it names).
 */
export function decodeRecord (sealer: Sealer, cookie: string, stored: Buffer | null, key = cookieKey(sealer, cookie)): SessionRecord | null {
  if (!stored || stored.length === 0 || !key) return null
  const json = openRecord(sealer, key, cookie, stored)
  if (!json) return null
  // Sealed by this gateway, so well formed; should one not be (a bug, a leaked secret), it is no
  // session rather than an error on every request that brings its cookie.
  try {
    const parsed: unknown = JSON.parse(json)
    // A session whose user name a sign-in no longer takes is none either: its person signs in again.
    return isRecordShaped(parsed) && !holdsUnreadUserName(parsed) ? fromWire(parsed) : null
  } catch {
    return null
  }
}

/** An object whose `c` (created) is a number and whose `t` (tokens) is an object: the two fields every record has. */
function isRecordShaped (value: unknown): value is WireRecord {
  if (typeof value !== 'object' || value === null) return false
  const fields = value as Record<string, unknown>
  return typeof fields.c === 'number' && typeof fields.t === 'object' && fields.t !== null
}
