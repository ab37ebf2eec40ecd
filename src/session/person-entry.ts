// One entry of the person index (./person-index.ts) as the store keeps it: a ranked-set member of
// 52 to 61 bytes, sealed with a session secret (./seal.ts, `sealSmall`) to the person key it is
// listed under, so an entry copied under another person's key opens nothing.
//
//   member    = format | sealed plaintext (12 bytes more than it)
//   0x01      : session id (32 bytes) | started (ms, 6) | browser (1)                      52 bytes
//   0x02      : the same | operating system (1) | client address (none, IPv4: 4, IPv6 /64: 8)  53, 57 or 61
//
// 64 bytes is as long as a Redis ranked-set member may be for the set to keep its compact form
// (zset-max-listpack-value): a key with one such member costs Redis about 265 bytes, one member
// longer costs it about 1,150 (measured: docs/performance.md, "Bytes per session"). So the entry
// holds only what cannot be found elsewhere: the public id is a keyed hash of the session id, the
// providers are the person keys that list it, and which secret sealed it is found by trying each;
// and of an IPv6 address only its network (./client-address.ts). A browser's sign-in writes 0x02,
// an agent's grant (no browser, no address of its own) 0x01, as every sign-in did before.
//
// No release wrote another form under these keys: 1.0.0's entries are under keys of the user name,
// which ./person-index.ts never reads, and the builds between (sealed JSON) were never released. A
// member of another form opens to nothing and is pruned like a gone session's.
import { BROWSER_FAMILIES, type BrowserFamily } from './browser-family.js'
import { addressBytes, addressText } from './client-address.js'
import { OPERATING_SYSTEMS, type OperatingSystem } from './operating-system.js'
import { SIV_BYTES, type Sealer, type SealingKey } from './seal.js'

/** A public id: 132 bits of a keyed hash of the session id, base64url (22 characters). */
export const PUBLIC_ID = /^[A-Za-z0-9_-]{22}$/
/** A session's store id: a keyed hash of its cookie, 256 bits, base64url (43 characters). */
const SESSION_ID = /^[A-Za-z0-9_-]{43}$/

/** Where a browser signed in from: its operating system (from the User-Agent) and the client address. */
export interface SignInOrigin {
  readonly os: OperatingSystem
  /** As sealEntry was given it: the client address as resolved; as openEntry gives it back: as kept (an IPv6 address as its /64). Absent when it was no IP address. */
  readonly address?: string
}

/** What an entry says of one session. */
export interface PersonEntry {
  /** Names the session on the page and in the revoke address; opens nothing, and without the secret says nothing of the session id. */
  readonly publicId: string
  /** The session's store id. */
  readonly sessionId: string
  /** When the session began (ms since the epoch). */
  readonly started: number
  readonly browser: BrowserFamily
  /** Absent for an agent's grant and for entries written before it was kept. */
  readonly origin?: SignInOrigin
}

/** The format byte of a member without its origin: a later format takes another. */
export const SEALED_ENTRY = 0x01
/** The format byte of a member with its origin. */
export const SEALED_ENTRY_WITH_ORIGIN = 0x02
const PURPOSE = 'person-index:entry'
const SESSION_ID_BYTES = 32
const STARTED_BYTES = 6
const PLAIN_BYTES = SESSION_ID_BYTES + STARTED_BYTES + 1
/** The plaintext lengths of a member with its origin: no address, IPv4, an IPv6 network. */
const WITH_ORIGIN_BYTES = [PLAIN_BYTES + 1, PLAIN_BYTES + 5, PLAIN_BYTES + 9]

/** The public id of a session listed with `key`'s secret. */
function publicIdOf (key: SealingKey, sessionId: string): string {
  return key.idFor('person-index:public-id', sessionId).slice(0, 22)
}

/** The plaintext of an entry: the session, then (when given) its origin. */
function plaintextOf (entry: Omit<PersonEntry, 'publicId'>): Buffer {
  if (!SESSION_ID.test(entry.sessionId) || Buffer.from(entry.sessionId, 'base64url').toString('base64url') !== entry.sessionId) {
    throw new Error('a session id is 32 bytes, base64url')
  }
  const plain = Buffer.allocUnsafe(PLAIN_BYTES)
  plain.write(entry.sessionId, 0, 'base64url')
  plain.writeUIntBE(entry.started, SESSION_ID_BYTES, STARTED_BYTES)
  plain[PLAIN_BYTES - 1] = BROWSER_FAMILIES.indexOf(entry.browser)
  if (entry.origin === undefined) return plain
  return Buffer.concat([plain, Buffer.from([OPERATING_SYSTEMS.indexOf(entry.origin.os)]), addressBytes(entry.origin.address)])
}

/** The member that lists a session under the person key `personKey`, sealed with the current secret. */
export function sealEntry (sealer: Sealer, personKey: string, entry: Omit<PersonEntry, 'publicId'>): Buffer {
  const format = entry.origin === undefined ? SEALED_ENTRY : SEALED_ENTRY_WITH_ORIGIN
  return Buffer.concat([Buffer.from([format]), sealer.current.sealSmall(PURPOSE, personKey, plaintextOf(entry))])
}

/** Whether `member` has a format and a length an entry is written in. */
function wellFormed (member: Buffer): boolean {
  const plainBytes = member.length - 1 - SIV_BYTES
  if (member[0] === SEALED_ENTRY) return plainBytes === PLAIN_BYTES
  return member[0] === SEALED_ENTRY_WITH_ORIGIN && WITH_ORIGIN_BYTES.includes(plainBytes)
}

/** The origin in a plaintext past the session's part; undefined for a 0x01 entry; null for an unknown operating system. */
function originOf (plain: Buffer): SignInOrigin | undefined | null {
  if (plain.length === PLAIN_BYTES) return undefined
  const os = OPERATING_SYSTEMS[plain[PLAIN_BYTES]!]
  if (os === undefined) return null
  const address = addressText(plain.subarray(PLAIN_BYTES + 1))
  return address === undefined ? { os } : { os, address }
}

/** The entry of a member {@link sealEntry} wrote under `personKey`, or null (another key, a secret no longer held, altered). */
export function openEntry (sealer: Sealer, personKey: string, member: Buffer): PersonEntry | null {
  if (!wellFormed(member)) return null
  for (const key of sealer.keys) {
    const plain = key.openSmall(PURPOSE, personKey, member.subarray(1))
    if (!plain) continue
    const browser = BROWSER_FAMILIES[plain[PLAIN_BYTES - 1]!]
    const origin = originOf(plain)
    if (browser === undefined || origin === null) return null
    const sessionId = plain.toString('base64url', 0, SESSION_ID_BYTES)
    const entry = { publicId: publicIdOf(key, sessionId), sessionId, started: plain.readUIntBE(SESSION_ID_BYTES, STARTED_BYTES), browser }
    return origin === undefined ? entry : { ...entry, origin }
  }
  return null
}
