// A session's record as it is stored: its format byte, the JSON of its wire form, sealed to its
// cookie with the secret the cookie was made under (./seal.ts), and the cookie's own shape (its
// random part, then that secret's key id). ./session.ts reads and writes sessions with these.
import type { Sealer, SealingKey } from './seal.js'
import { KEY_ID_LENGTH } from './seal.js'
import type { SessionRecord } from './record.js'
import { fromWire, toWire, type WireRecord } from './record-wire.js'

/** 256 random bits, then the key id of the secret the cookie was made under (absent: an earlier version's cookie). */
export const COOKIE_VALUE = /^[A-Za-z0-9_-]{43}(?:\.[A-Za-z0-9_-]{8})?$/
const COOKIE_TOKEN_LENGTH = 43
export const SESSION_PURPOSE = 'session'

/**
 * The first byte of a stored record, which says its format. Each sealed format is the record's JSON
 * sealed to the cookie, and the sealed bytes follow the byte as they are:
 * - `COMPACT_RECORD` (written now): the JSON of its wire form, one-letter keys (./record-wire.ts),
 *   sealed with the secret the cookie was made under.
 * - `REKEYED_RECORD` (written before, for a cookie made under a secret other than the writer's
 *   current one): the key id of the writer's current secret (8 bytes), then the compact record
 *   sealed with it. An instance still at the first step of a rotation wrote such records for cookies
 *   made under the new secret, sealed with the old one: the last step signed those people out. Now
 *   a record is sealed with its cookie's secret, which the session needs anyway (its store id is of
 *   that secret), and the first read of such a record where its cookie's secret is the current one
 *   seals it again ({@link Sessions}' read).
 * - `BINARY_RECORD` (written before): the JSON of the SessionRecord itself.
 * Records written before both are base64url text, whose first byte is a letter, digit, `-` or `_`.
 * Binary is smaller than text and the short keys smaller still, each moving a one-provider
 * session's Redis value into a smaller allocation (see docs/performance.md).
 */
const BINARY_RECORD = 0x01
const COMPACT_RECORD = 0x02
const REKEYED_RECORD = 0x03
/**
 * Compact records are sealed under a key of their own, so a format byte changed in the store (the
 * byte itself is not sealed) makes the record fail to open, never read in the other format.
 */
const COMPACT_PURPOSE = 'session:compact'

/** The JSON that is sealed into a stored record (its wire form). */
export function storedJson (record: SessionRecord): string {
  return JSON.stringify(toWire(record))
}

/** The key id a cookie names, or undefined for a cookie of an earlier version (none). */
function cookieKeyId (cookie: string): string | undefined {
  return cookie.length > COOKIE_TOKEN_LENGTH ? cookie.slice(COOKIE_TOKEN_LENGTH + 1) : undefined
}

/**
 * The secrets whose store id a cookie may have, in the order to try: the one it names (none when
 * the gateway no longer holds it), or, for a cookie without a key id, each secret, current first.
 */
export function cookieKeys (sealer: Sealer, cookie: string): readonly SealingKey[] {
  const kid = cookieKeyId(cookie)
  if (kid === undefined) return sealer.keys
  const key = sealer.key(kid)
  return key ? [key] : []
}

/** The secret a session's cookie was made under: the one it names, or the one whose id for it is the session's. */
export function sessionKey (sealer: Sealer, session: { id: string, cookie: string }): SealingKey | undefined {
  return cookieKeys(sealer, session.cookie).find((key) => key.idFor(SESSION_PURPOSE, session.cookie) === session.id)
}

/**
 * A record as the store keeps it: the format byte, then the record's stored JSON sealed to the
 * cookie with `cookieKey`, the secret the cookie was made under (by default the one it names, else
 * the current one). Never with another secret: the session lives as long as its cookie's secret is
 * held, whatever step of a rotation the writing instance is at, and no longer.
 */
export function encodeRecord (sealer: Sealer, cookie: string, record: SessionRecord, cookieKey = cookieKeys(sealer, cookie)[0] ?? sealer.current): Buffer {
  const sealed = cookieKey.sealBytes(COMPACT_PURPOSE, cookie, storedJson(record))
  const value = Buffer.allocUnsafe(1 + sealed.length)
  value[0] = COMPACT_RECORD
  sealed.copy(value, 1)
  return value
}

/**
 * Whether a stored record is worth sealing again: written by an earlier build under a secret other
 * than its cookie's, while its cookie's secret is the current one (so the session outlives the
 * previous secrets once its record no longer needs them). A cookie made under a previous secret
 * needs it anyway: its record is left as it is.
 */
export function sealedUnderAnother (sealer: Sealer, cookieKey: SealingKey, stored: Buffer): boolean {
  return cookieKey === sealer.current && stored[0] === REKEYED_RECORD && stored.toString('latin1', 1, 1 + KEY_ID_LENGTH) !== cookieKey.kid
}

/** The stored JSON of a record sealed with `key` (or the secret a rekeyed record names), or null. */
function openRecord (sealer: Sealer, key: SealingKey, cookie: string, stored: Buffer): string | null {
  switch (stored[0]) {
    case REKEYED_RECORD: {
      const named = sealer.key(stored.toString('latin1', 1, 1 + KEY_ID_LENGTH))
      return named ? named.openBytes(COMPACT_PURPOSE, cookie, stored.subarray(1 + KEY_ID_LENGTH)) : null
    }
    case COMPACT_RECORD: return key.openBytes(COMPACT_PURPOSE, cookie, stored.subarray(1))
    case BINARY_RECORD: return key.openBytes(SESSION_PURPOSE, cookie, stored.subarray(1))
    default: return key.open(SESSION_PURPOSE, cookie, stored.toString('latin1'))
  }
}

/**
 * The record in a stored value (any format), or null when the cookie does not open it. `cookieKey`:
 * the secret the cookie was made under (by default the one it names, else the current one).
 */
export function decodeRecord (sealer: Sealer, cookie: string, stored: Buffer | null, cookieKey = cookieKeys(sealer, cookie)[0]): SessionRecord | null {
  if (!stored || stored.length === 0 || !cookieKey) return null
  const format = stored[0]
  const json = openRecord(sealer, cookieKey, cookie, stored)
  if (!json) return null
  // Sealed by this gateway, so well formed; should one not be (a bug, a leaked secret), it is no
  // session rather than an error on every request that brings its cookie.
  try {
    const parsed: unknown = JSON.parse(json)
    if (format !== COMPACT_RECORD && format !== REKEYED_RECORD) return isRecordShaped(parsed, 'createdAt', 'tokens') ? parsed as SessionRecord : null
    return isRecordShaped(parsed, 'c', 't') ? fromWire(parsed as WireRecord) : null
  } catch {
    return null
  }
}

/** An object whose `created` is a number and whose `tokens` is an object (the two fields every record has). */
function isRecordShaped (value: unknown, created: string, tokens: string): boolean {
  if (typeof value !== 'object' || value === null) return false
  const fields = value as Record<string, unknown>
  return typeof fields[created] === 'number' && typeof fields[tokens] === 'object' && fields[tokens] !== null
}
