// A person's sessions, for "your sessions", revoke and sign out everywhere. A person is a provider's
// `iss` + `sub` (Identity.subject), never the mapped user name, which a provider may let another
// account take: `person:<h>` holds one entry per session signed in as that subject at that provider,
// where `<h>` is a keyed hash of (provider, iss, subject), so a store dump shows no user id.
//
// Sessions written before the subject was kept (no `subject` in their identity) have no person key:
// they list nothing and sign out everywhere ends only themselves. Their entries, kept under a hash of
// the user name, are never read again and expire with their sessions: an entry says nothing of whose
// session it is beyond that name, so reading them would let a second account holding the name see
// and end them.
//
// Each entry is sealed
// (AES-256-GCM; a dump does not show which sessions, browsers or times) and holds a random public
// id (what the list and the revoke button name: not the cookie, not derived from it), the session's
// store id, when it started, the browser family and the providers.
//
// The key is a ranked set (score: the sign-in time) kept to MAX_SESSIONS entries: a sign-in beyond
// that drops the oldest entry and ends its session. The set lives as long as its longest-lived
// session (a sign-in and every renewal of a session's idle timeout grow its expiry, never shorten
// it), and entries whose session is gone are pruned when the list is read.
//
// Last seen is read from the session itself: its remaining idle time (PTTL) says when its timeout
// was last renewed, which a request does when it reads the record from the store (at most one
// cache window, `session.cacheTtl`, after it was last used on an instance).
//
// Keys: a list (the first writes, all read), so a rotated secret still finds and opens what its
// predecessor wrote; each sealed entry names the key that sealed it (4 bytes of a keyed hash).
import { createCipheriv, createDecipheriv, createHmac, randomBytes } from 'node:crypto'
import { systemClock, type Clock } from '../ops/clock.js'
import { storeKeys, type KeyValue, type Sets } from '../store/store.js'
import type { BrowserFamily } from './browser-family.js'
import type { SessionRecord } from './record.js'

/** The most sessions one person keeps; a sign-in beyond ends the oldest. */
export const MAX_SESSIONS = 50

/** A public id: 128 random bits, base64url (22 characters). */
export const PUBLIC_ID = /^[A-Za-z0-9_-]{22}$/

/** One of a person's sessions, as the list shows it. */
export interface PersonSession {
  /** Random; names the session on the page and in the revoke address. Opens nothing. */
  readonly publicId: string
  /** The session's store id (a keyed hash of its cookie): never shown. */
  readonly sessionId: string
  /** When the session began (ms since the epoch). */
  readonly started: number
  /** When its idle timeout was last renewed (ms since the epoch). */
  readonly lastSeen: number
  readonly browser: BrowserFamily
  readonly providers: readonly string[]
}

/** An entry as sealed in the store (short names: 50 per person). */
interface WireEntry { p: string, i: string, s: number, b: BrowserFamily, v: string[] }

/** An entry read back, with the store key and member it was found under (to remove it). */
interface Found { key: string, member: string, entry: WireEntry }

/** One key of the list: what hashes the store key, what seals, and the id an entry names it by. */
interface IndexKey { hash: Buffer, seal: Buffer, id: Buffer }

const KEY_ID_BYTES = 4
const IV_BYTES = 12
const TAG_BYTES = 16

function indexKey (secret: Uint8Array): IndexKey {
  const derive = (label: string) => createHmac('sha256', secret).update(label).digest()
  return { hash: derive('hash'), seal: derive('seal'), id: derive('id').subarray(0, KEY_ID_BYTES) }
}

/** A session as the index needs it: its store id and its record. */
export interface IndexedSession { readonly id: string, readonly record: SessionRecord }

export class PersonIndex {
  private readonly keys: readonly IndexKey[]

  constructor (
    private readonly store: Sets & Pick<KeyValue, 'remainingMs'>,
    /** Ends a session on every instance (Sessions.endById): an entry dropped beyond the bound. */
    private readonly end: (sessionId: string) => Promise<void>,
    /** The index's keys, derived from the session secrets: the first writes, all read. */
    secrets: readonly Uint8Array[],
    /** The session's idle timeout: how long an entry lives after its last sign-in or renewal. */
    private readonly ttlMs: number,
    private readonly clock: Clock = systemClock,
    private readonly max = MAX_SESSIONS
  ) {
    if (secrets.length === 0) throw new Error('PersonIndex needs at least one key')
    this.keys = secrets.map(indexKey)
  }

  private storeKey (key: IndexKey, provider: string, iss: string, subject: string): string {
    // JSON: one reading of the three parts, and no raw NUL, which every earlier (provider NUL user name) key holds.
    return storeKeys.person(createHmac('sha256', key.hash).update(JSON.stringify([provider, iss, subject])).digest('base64url'))
  }

  /** The person keys of a record's identities (one per provider that gave a subject), under `keys`. */
  private personKeys (record: SessionRecord, keys: readonly IndexKey[]): string[] {
    const found: string[] = []
    for (const key of keys) {
      for (const [provider, identity] of Object.entries(record.identities ?? {})) {
        if (identity.subject !== undefined) found.push(this.storeKey(key, provider, identity.iss ?? '', identity.subject))
      }
    }
    return found
  }

  private seal (entry: WireEntry): string {
    const key = this.keys[0]!
    const iv = randomBytes(IV_BYTES)
    const cipher = createCipheriv('aes-256-gcm', key.seal, iv)
    const body = Buffer.concat([cipher.update(JSON.stringify(entry), 'utf8'), cipher.final()])
    return Buffer.concat([key.id, iv, cipher.getAuthTag(), body]).toString('base64url')
  }

  /** The entry, or null when no key of the list sealed it or it was altered. */
  private open (member: string): WireEntry | null {
    const raw = Buffer.from(member, 'base64url')
    if (raw.length < KEY_ID_BYTES + IV_BYTES + TAG_BYTES) return null
    const key = this.keys.find((candidate) => candidate.id.equals(raw.subarray(0, KEY_ID_BYTES)))
    if (!key) return null
    try {
      const start = KEY_ID_BYTES + IV_BYTES
      const decipher = createDecipheriv('aes-256-gcm', key.seal, raw.subarray(KEY_ID_BYTES, start))
      decipher.setAuthTag(raw.subarray(start, start + TAG_BYTES))
      const entry = JSON.parse(Buffer.concat([decipher.update(raw.subarray(start + TAG_BYTES)), decipher.final()]).toString('utf8')) as WireEntry
      return typeof entry.p === 'string' && typeof entry.i === 'string' && typeof entry.s === 'number' ? entry : null
    } catch {
      return null
    }
  }

  /**
   * Lists a new session (a completed sign-in) under each of its providers' subject, with a new public
   * id. An entry dropped beyond the bound ends its session (on every instance).
   */
  async add (session: IndexedSession, browser: BrowserFamily): Promise<void> {
    const providers = Object.keys(session.record.identities ?? {})
    const member = this.seal({ p: randomBytes(16).toString('base64url'), i: session.id, s: session.record.createdAt, b: browser, v: providers })
    // Entries of sessions that are gone (the one this sign-in replaced, when it added a provider or
    // stepped up) are removed first: only live sessions count against the bound.
    await this.entries(session.record)
    // Ranked by this sign-in's time, not the session's start (a replaced session keeps its start):
    // the entry just added is the newest, never the one the bound drops.
    const now = this.clock.now()
    for (const key of this.personKeys(session.record, this.keys.slice(0, 1))) {
      const dropped = await this.store.addRanked(key, member, now, this.ttlMs, this.max)
      for (const gone of dropped) {
        const entry = this.open(gone)
        if (entry && entry.i !== session.id) await this.end(entry.i)
      }
    }
  }

  /** The session's idle timeout was renewed: its person keys live at least as long again. */
  async touch (record: SessionRecord): Promise<void> {
    for (const key of this.personKeys(record, this.keys)) await this.store.extend(key, this.ttlMs)
  }

  /** Every live entry of the person `record` signs in as; entries whose session is gone are removed. */
  private async entries (record: SessionRecord): Promise<Array<Found & { remaining: number }>> {
    const live: Array<Found & { remaining: number }> = []
    for (const key of this.personKeys(record, this.keys)) {
      // At most MAX_SESSIONS members: their sessions are asked about at once, not one after another.
      await Promise.all((await this.store.rankedMembers(key)).map(async (member) => {
        const entry = this.open(member)
        const remaining = entry ? await this.store.remainingMs(storeKeys.session(entry.i)) : null
        if (entry && remaining !== null) live.push({ key, member, entry, remaining })
        else await this.store.removeRanked(key, member)
      }))
    }
    return live
  }

  /**
   * The sessions of the person `record` signs in as (at any of its providers), newest first, one
   * per session however many providers list it.
   */
  async list (record: SessionRecord): Promise<PersonSession[]> {
    const now = this.clock.now()
    const sessions = new Map<string, PersonSession>()
    for (const { entry, remaining } of await this.entries(record)) {
      if (sessions.has(entry.i)) continue
      const lastSeen = Math.min(now, Math.max(entry.s, now - (this.ttlMs - remaining)))
      sessions.set(entry.i, { publicId: entry.p, sessionId: entry.i, started: entry.s, lastSeen, browser: entry.b, providers: entry.v })
    }
    return [...sessions.values()].sort((a, b) => b.started - a.started)
  }

  /**
   * The store id of the session listed as `publicId` for the person `record` signs in as, and its
   * entries removed; null when that person has no such session (another person's id included).
   */
  async take (record: SessionRecord, publicId: string): Promise<string | null> {
    if (!PUBLIC_ID.test(publicId)) return null
    let sessionId: string | null = null
    for (const { key, member, entry } of await this.entries(record)) {
      if (entry.p !== publicId) continue
      sessionId = entry.i
      await this.store.removeRanked(key, member)
    }
    return sessionId
  }

  /** The store ids of every other session of the person `record` signs in as, and their entries removed. */
  async takeOthers (record: SessionRecord, currentId: string): Promise<string[]> {
    const others = new Set<string>()
    for (const { key, member, entry } of await this.entries(record)) {
      if (entry.i === currentId) continue
      others.add(entry.i)
      await this.store.removeRanked(key, member)
    }
    return [...others]
  }
}
