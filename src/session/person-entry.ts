// One entry of the person index (./person-index.ts) as the store keeps it: a ranked-set member of
// 52 bytes, sealed with a session secret (./seal.ts, `sealSmall`) to the person key it is listed
// under, so an entry copied under another person's key opens nothing.
//
//   member    = 0x01 | sealed plaintext (12 bytes more than it)
//   plaintext = session id (32 bytes) | started (ms, 6) | browser (1)
//
// 64 bytes is as long as a Redis ranked-set member may be for the set to keep its compact form
// (zset-max-listpack-value): a key with one such member costs Redis about 265 bytes, one member
// longer costs it about 1,150 (measured: docs/performance.md, "Bytes per session"). So the entry
// holds only what cannot be found elsewhere: the public id is a keyed hash of the session id, the
// providers are the person keys that list it, and which secret sealed it is found by trying each.
//
// No release wrote another form under these keys: 1.0.0's entries are under keys of the user name,
// which ./person-index.ts never reads, and the builds between (sealed JSON) were never released. A
// member of another form opens to nothing and is pruned like a gone session's.
import { BROWSER_FAMILIES, type BrowserFamily } from './browser-family.js'
import { SIV_BYTES, type Sealer, type SealingKey } from './seal.js'

/** A public id: 132 bits of a keyed hash of the session id, base64url (22 characters). */
export const PUBLIC_ID = /^[A-Za-z0-9_-]{22}$/
/** A session's store id: a keyed hash of its cookie, 256 bits, base64url (43 characters). */
const SESSION_ID = /^[A-Za-z0-9_-]{43}$/

/** What an entry says of one session. */
export interface PersonEntry {
  /** Names the session on the page and in the revoke address; opens nothing, and without the secret says nothing of the session id. */
  readonly publicId: string
  /** The session's store id. */
  readonly sessionId: string
  /** When the session began (ms since the epoch). */
  readonly started: number
  readonly browser: BrowserFamily
}

/** The format byte of a member: a later format takes another. */
export const SEALED_ENTRY = 0x01
const PURPOSE = 'person-index:entry'
const SESSION_ID_BYTES = 32
const STARTED_BYTES = 6
const PLAIN_BYTES = SESSION_ID_BYTES + STARTED_BYTES + 1

/** The public id of a session listed with `key`'s secret. */
function publicIdOf (key: SealingKey, sessionId: string): string {
  return key.idFor('person-index:public-id', sessionId).slice(0, 22)
}

/** The member that lists a session under the person key `personKey`, sealed with the current secret. */
export function sealEntry (sealer: Sealer, personKey: string, entry: Omit<PersonEntry, 'publicId'>): Buffer {
  if (!SESSION_ID.test(entry.sessionId) || Buffer.from(entry.sessionId, 'base64url').toString('base64url') !== entry.sessionId) {
    throw new Error('a session id is 32 bytes, base64url')
  }
  const plain = Buffer.allocUnsafe(PLAIN_BYTES)
  plain.write(entry.sessionId, 0, 'base64url')
  plain.writeUIntBE(entry.started, SESSION_ID_BYTES, STARTED_BYTES)
  plain[PLAIN_BYTES - 1] = BROWSER_FAMILIES.indexOf(entry.browser)
  return Buffer.concat([Buffer.from([SEALED_ENTRY]), sealer.current.sealSmall(PURPOSE, personKey, plain)])
}

/** The entry of a member {@link sealEntry} wrote under `personKey`, or null (another key, a secret no longer held, altered). */
export function openEntry (sealer: Sealer, personKey: string, member: Buffer): PersonEntry | null {
  if (member[0] !== SEALED_ENTRY || member.length !== 1 + SIV_BYTES + PLAIN_BYTES) return null
  for (const key of sealer.keys) {
    const plain = key.openSmall(PURPOSE, personKey, member.subarray(1))
    if (!plain) continue
    const browser = BROWSER_FAMILIES[plain[PLAIN_BYTES - 1]!]
    if (browser === undefined) return null
    const sessionId = plain.toString('base64url', 0, SESSION_ID_BYTES)
    return { publicId: publicIdOf(key, sessionId), sessionId, started: plain.readUIntBE(SESSION_ID_BYTES, STARTED_BYTES), browser }
  }
  return null
}
