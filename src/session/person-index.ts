// A person's sessions, for "your sessions", revoke and sign out everywhere. A person is a provider's
// `iss` + `sub` (Identity.subject), never the mapped user name, which a provider may let another
// account take: `person:<h>` holds one entry per session signed in as that subject at that provider,
// where `<h>` is a keyed hash of (provider, iss, subject), so a store dump shows no user id. One
// issuer behind several provider entries (two clients of one Keycloak realm) is one person: the
// list, revoke and sign out everywhere read the keys of every provider configured with the same
// issuer (`siblings`), under the subject and `iss` the session's own sign-in gave. An outside
// tester's finding: a session signed in through the second entry was neither listed nor ended.
//
// Sessions written before the subject was kept (no `subject` in their identity) have no person key:
// they list nothing and sign out everywhere ends only themselves. Their entries, kept under a hash of
// the user name, are never read again and expire with their sessions: an entry says nothing of whose
// session it is beyond that name, so reading them would let a second account holding the name see
// and end them.
//
// Each entry is sealed with a session secret to the key it is listed under (./person-entry.ts: a
// dump does not show which sessions, browsers, addresses or times) and holds the session's store id,
// when it started, the browser family and, for a browser's sign-in, its operating system and client
// address, in at most 61 bytes: few enough for Redis to keep the key compact. What
// the list and the revoke button name is a public id, a keyed hash of the store id (not the cookie,
// and it opens nothing); the providers a session shows are those of this person's keys that list it.
//
// The key is a ranked set (score: the sign-in time) kept to MAX_SESSIONS live entries: a sign-in
// beyond that drops the oldest entry and ends its session. The set lives as long as its longest-lived
// session (a sign-in and every renewal of a session's idle timeout grow its expiry, never shorten
// it), and entries whose session is gone are pruned when the list is read or a sign-in finds the
// key full. A sign-in into a key with room is one store command (a script).
//
// Last seen is read from the session itself: its remaining idle time (PTTL) says when its timeout
// was last renewed, which a request does when it reads the record from the store (at most one
// cache window, `session.cacheTtl`, after it was last used on an instance).
//
// Keys: every secret of the Sealer (the current one seals, all open), so a rotated secret still
// finds and opens what its predecessor wrote; the store key is a keyed hash under each secret in turn.
import { createHmac, createSecretKey, type KeyObject } from 'node:crypto'
import { sameIssuer } from '../config/bearer-section.js'
import type { ProviderConfig } from '../config/types.js'
import { systemClock, type Clock } from '../ops/clock.js'
import { mark, markedWithin } from '../store/marks.js'
import { storeKeys, type KeyValue, type Sets } from '../store/store.js'
import type { BrowserFamily } from './browser-family.js'
import { openEntry, PUBLIC_ID, sealEntry, type PersonEntry, type SignInOrigin } from './person-entry.js'
import type { Identity, SessionRecord } from './record.js'
import type { Sealer } from './seal.js'

/** The most sessions one person keeps; a sign-in beyond ends the oldest. */
export const MAX_SESSIONS = 50

/** One of a person's sessions, as the list shows it. */
export interface PersonSession extends PersonEntry {
  /** When its idle timeout was last renewed (ms since the epoch). */
  readonly lastSeen: number
  /** The providers at which it is signed in as this person (those of this person's keys that list it). */
  readonly providers: readonly string[]
}

/** An entry read back, with the store key and member it was found under (to remove it). */
interface Found { key: string, provider: string, member: Buffer, entry: PersonEntry }

/** A session as the index needs it: its store id and its record. */
export interface IndexedSession { readonly id: string, readonly record: SessionRecord }

export class PersonIndex {
  /** Each secret's key for the store keys' hash, current first (KeyObjects: a raw key costs each HMAC about four times as much). */
  private readonly hashKeys: readonly KeyObject[]

  constructor (
    private readonly store: Sets & Pick<KeyValue, 'remainingMs' | 'get' | 'set' | 'unsettled'>,
    /** Ends a session on every instance (Sessions.endById): an entry dropped beyond the bound. */
    private readonly end: (sessionId: string) => Promise<void>,
    /** The session secrets' keys: the current one seals, all open. */
    private readonly sealer: Sealer,
    /** The session's idle timeout: how long an entry lives after its last sign-in or renewal. */
    private readonly ttlMs: number,
    private readonly clock: Clock = systemClock,
    /** The providers configured with the same issuer as `provider`, itself included (the one person's keys). */
    private readonly siblings: (provider: string) => readonly string[] = (provider) => [provider],
    private readonly max = MAX_SESSIONS
  ) {
    this.hashKeys = sealer.keys.map((key) => createSecretKey(createHmac('sha256', key.derive('person-index').export()).update('hash').digest()))
  }

  private storeKey (hashKey: KeyObject, provider: string, iss: string, subject: string): string {
    // JSON: one reading of the three parts, and no raw NUL, which every earlier (provider NUL user name) key holds.
    return storeKeys.person(createHmac('sha256', hashKey).update(JSON.stringify([provider, iss, subject])).digest('base64url'))
  }

  /**
   * The person keys of a record's identities (one per provider that gave a subject), under `hashKeys`,
   * with their provider; with `siblings`, also those of the providers configured with the same issuer.
   */
  private personKeys (record: SessionRecord, hashKeys: readonly KeyObject[], siblings = false): Array<{ key: string, provider: string }> {
    const found = new Map<string, string>()
    for (const hashKey of hashKeys) {
      for (const [own, identity] of Object.entries(record.identities ?? {})) {
        if (identity.subject === undefined) continue
        for (const provider of siblings ? this.siblings(own) : [own]) found.set(this.storeKey(hashKey, provider, identity.iss ?? '', identity.subject), provider)
      }
    }
    return [...found].map(([key, provider]) => ({ key, provider }))
  }

  /**
   * Lists a new session (a completed sign-in) under each of its providers' subject, with where a
   * browser signed in from (`origin`; none for an agent's grant). An entry dropped beyond the bound
   * ends its session (on every instance), but `replacing`'s: the session the new one replaces.
   */
  async add (session: IndexedSession, browser: BrowserFamily, origin?: SignInOrigin, replacing?: string): Promise<void> {
    const entry = { sessionId: session.id, started: session.record.createdAt, browser, ...(origin === undefined ? {} : { origin }) }
    // Ranked by this sign-in's time, not the session's start (a replaced session keeps its start):
    // the entry just added is the newest, never the one the bound drops.
    const now = this.clock.now()
    let pruned = false
    /** `replacing`'s entry under each key that lists it. */
    const replaced = new Map<string, Buffer>()
    for (const { key } of this.personKeys(session.record, this.hashKeys.slice(0, 1))) {
      const member = sealEntry(this.sealer, key, entry)
      // One script while the key has room. Entries of sessions that are gone (the one this sign-in
      // replaced, when it added a provider or stepped up) wait for the next read of the list, which
      // prunes them; when the key is full they are pruned first, so only live sessions count
      // against the bound, and what is still over it is dropped oldest first.
      if (await this.store.addRankedIfRoom(key, member, now, this.ttlMs, this.max)) continue
      // Pruning reads every key of this person: once per sign-in, however many of them are full.
      // The session this sign-in replaces ends right after (Sessions.start): it neither counts nor
      // is dropped, in the same script (an attacker's finding: taken out here, it was listed
      // nowhere when the sign-in then failed, and no revoke or sign out everywhere reached it;
      // a bound one higher instead let two sign-ins over it at once leave one session too many).
      if (!pruned) {
        for (const found of await this.entries(session.record)) {
          if (found.entry.sessionId === replacing) replaced.set(found.key, found.member)
        }
      }
      pruned = true
      for (const gone of await this.store.addRanked(key, member, now, this.ttlMs, this.max, replaced.get(key))) {
        const sessionId = openEntry(this.sealer, key, gone)?.sessionId
        // The session this sign-in replaces (its id ends right after, Sessions.start) is not ended
        // here: that would lose what it carries into the new one (found by an outside tester).
        if (sessionId !== undefined && sessionId !== session.id && sessionId !== replacing) await this.end(sessionId)
      }
    }
  }

  /** The session's idle timeout was renewed: its person keys live at least as long again. */
  async touch (record: SessionRecord): Promise<void> {
    for (const { key } of this.personKeys(record, this.hashKeys)) await this.store.extend(key, this.ttlMs)
  }

  /**
   * Every live entry of the person `record` signs in as; entries whose session is gone are removed
   * (their entries added to `gone`, when given). One whose ending no replica has yet (a revoke
   * answered 503) is still listed, so that it can be ended again (an attacker's finding: a revoke
   * tried after the list was read found nothing, and a failover brought the session back): with
   * no idle time left, as the master has it.
   */
  private async entries (record: SessionRecord, gone?: PersonEntry[]): Promise<Array<Found & { remaining: number }>> {
    const live: Array<Found & { remaining: number }> = []
    for (const { key, provider } of this.personKeys(record, this.hashKeys, true)) {
      // At most MAX_SESSIONS members: their sessions are asked about at once, not one after another.
      await Promise.all((await this.store.rankedMembers(key)).map(async (member) => {
        const entry = openEntry(this.sealer, key, member)
        const remaining = entry ? await this.store.remainingMs(storeKeys.session(entry.sessionId)) : null
        if (entry && remaining !== null) live.push({ key, provider, member, entry, remaining })
        else if (entry && await this.store.unsettled(storeKeys.session(entry.sessionId))) live.push({ key, provider, member, entry, remaining: 0 })
        else {
          if (entry) gone?.push(entry)
          await this.store.removeRanked(key, member)
        }
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
    const sessions = new Map<string, PersonSession & { providers: string[] }>()
    for (const { entry, provider, remaining } of await this.entries(record)) {
      const listed = sessions.get(entry.sessionId)
      if (listed) {
        if (!listed.providers.includes(provider)) listed.providers.push(provider)
        continue
      }
      const lastSeen = Math.min(now, Math.max(entry.started, now - (this.ttlMs - remaining)))
      sessions.set(entry.sessionId, { ...entry, lastSeen, providers: [provider] })
    }
    return [...sessions.values()].sort((a, b) => b.started - a.started)
  }

  /**
   * The store id of the session listed as `publicId` for the person `record` signs in as; null when
   * that person has no such session (another person's id included). Its entries stay until the
   * caller has ended it (the next read prunes them): a revoke whose store reply came late (a 503)
   * finds it again when tried again (an outside tester's finding: taken out first, it was left
   * running, unlisted, and no page could end it).
   */
  async find (record: SessionRecord, publicId: string): Promise<string | null> {
    if (!PUBLIC_ID.test(publicId)) return null
    for (const { entry } of await this.entries(record)) {
      if (entry.publicId === publicId) return entry.sessionId
    }
    return null
  }

  /**
   * The store ids of every other session of the person `record` signs in as (`others`: their
   * entries stay until the caller has ended them, as find's); and those listed whose session was
   * gone when read (`gone`), which the caller follows to where a sign-in renamed them (an outside
   * tester's finding: a session renamed between the list's read and its check was missed). First
   * the person is marked signed out everywhere (signedOutSince): a sign-in kept from before then
   * (an agent's consent page left open) is made no session.
   */
  async othersOf (record: SessionRecord, currentId: string): Promise<{ others: string[], gone: string[] }> {
    // Under every secret's key: an instance of a rolling rotation that seals with the other finds it.
    for (const { key } of this.personKeys(record, this.hashKeys, true)) await mark(this.store, storeKeys.signedOutEverywhere(key))
    const others = new Set<string>()
    const gone: PersonEntry[] = []
    for (const { entry } of await this.entries(record, gone)) {
      if (entry.sessionId !== currentId) others.add(entry.sessionId)
    }
    return { others: [...others], gone: gone.map((entry) => entry.sessionId).filter((id) => id !== currentId) }
  }

  /**
   * Whether a sign-in at `provider` as `identity` is the person `record` holds at that provider and
   * at each other of the same issuer (the same `iss` and subject; the user name for records from
   * before the subject was kept). A record that holds none of them is anyone's: a sign-in adding a
   * provider to a session cannot tell (security.md, "Upstream cookies").
   */
  samePerson (record: SessionRecord, provider: string, identity: Identity | undefined): boolean {
    for (const name of this.siblings(provider)) {
      const held = record.identities?.[name]
      if (held === undefined) continue
      // A record from before the subject was kept is compared by user name (a re-reading's point).
      const same = held.subject === undefined ? held.sub === identity?.sub : held.subject === identity?.subject
      if (identity === undefined || !same) return false
      if (held.iss !== undefined && identity.iss !== undefined && held.iss !== identity.iss) return false
    }
    return true
  }

  /**
   * Whether the person `record` signs in as signed out everywhere at or after `at` (this instance's
   * clock ms), at any of its providers' keys. The mark's age is read on the store's clock
   * (store/marks.ts): instances whose clocks disagree still agree on which came first.
   */
  async signedOutSince (record: SessionRecord, at: number): Promise<boolean> {
    const withinMs = this.clock.now() - at
    for (const { key } of this.personKeys(record, this.hashKeys, true)) {
      if (await markedWithin(this.store, storeKeys.signedOutEverywhere(key), withinMs)) return true
    }
    return false
  }
}

/**
 * The providers configured with the same issuer as each provider (itself included): one person's
 * sign-ins through any of them are one person's. Only OIDC ones (`openid` in the scope): their
 * subject is the ID token's `sub`, while another's may be its mapped user name where userinfo names
 * no `sub`, which someone could choose to equal a `sub` (an outside reviewer's point).
 */
export function issuerSiblings (providers: Readonly<Record<string, Pick<ProviderConfig, 'issuer' | 'openid'>>>): (provider: string) => readonly string[] {
  const byIssuer = new Map<string, string[]>()
  for (const [name, provider] of Object.entries(providers)) {
    if (provider.issuer === undefined || !provider.openid) continue
    const issuer = sameIssuer(provider.issuer)
    byIssuer.set(issuer, [...byIssuer.get(issuer) ?? [], name])
  }
  return (name) => {
    const provider = providers[name]
    return provider?.issuer === undefined || !provider.openid ? [name] : byIssuer.get(sameIssuer(provider.issuer)) ?? [name]
  }
}
