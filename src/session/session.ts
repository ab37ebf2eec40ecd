// Session cookie <-> store record: load, start (always a new id), end. The cookie is 256 random bits and the key id of
// the secret it was made under (`<43 chars>.<kid>`); the store key is a keyed hash of it under that secret, and the record
// is sealed with a key derived from it and that same secret (./seal.ts). A cookie of a secret no longer held: no store read.
// No Fastify here: callers hand in the Cookie header and set or clear the cookie themselves
// (src/http/session-cookie.ts), so every step can be called, and tested, without a server.
import type { SessionConfig } from '../config/types.js'
import type { Sealer, SealingKey } from './seal.js'
import type { Session, SessionRecord } from './record.js'
import { COOKIE_VALUE, SESSION_PURPOSE, cookieKey, decodeRecord, encodeRecord, newCookie, sealedUnderAnother, sessionKey, type StoredRecord } from './sealed-record.js'
import { SessionCache } from './cache.js'
import { PreviousSecretReads } from './previous-secret-reads.js'
import { Renames } from './renames.js'
import { SessionNews } from './news.js'
import { refusedByStore, storeKeys, unacknowledgedByReplica, type Broadcast, type KeyValue, type Lock, type WriteOptions } from '../store/store.js'
import { GatewayError, isGatewayError } from '../errors.js'
import { systemClock, type Clock } from '../ops/clock.js'
import { cookieValue, sessionCookieOptions, type CookieOptions } from './cookie.js'
import { Lifetime } from './lifetime.js'

export type { ProviderSession, Session, SessionRecord, TokenSet } from './record.js'
export type { StoredRecord } from './sealed-record.js'

/** A session just started: its `id` (store and logs) and the `cookie` value the browser gets. */
export interface Started {
  readonly id: string
  readonly cookie: string
}

/** What Sessions.start runs besides its writes: see there. */
export interface StartSteps {
  /** The record without what the replaced session held, should that session have ended meanwhile. */
  readonly alone?: () => SessionRecord
  /** Lists the new session where sign-outs look, before the replaced one ends. */
  readonly indexed?: (session: { id: string, record: SessionRecord }) => Promise<void>
}

/**
 * A session's record counts as written only once a replica has it (where store.waitForReplica says so): a browser is
 * never given a cookie, nor a refresh's result kept, for a record a master cut off from its replicas would lose when demoted.
 */
const REPLICATED: WriteOptions = { replicated: true }

/** Sessions over a key-value store: what a Cookie header opens; starting, refreshing, ending them (sealed to their cookie, ./seal.ts; cached, ./cache.ts). */
export class Sessions {
  readonly cookieOptions: CookieOptions
  private readonly cache: SessionCache
  private readonly lifetime: Lifetime
  /** Store reads under way, by cookie: concurrent requests of one session share one read. */
  private readonly reading = new Map<string, { generation: number, session: Promise<Session | null> }>()
  /** Sessions read within `session.ttl` that still need a previous secret (gateway_sessions_previous_secret). */
  private readonly previousSecretReads: PreviousSecretReads
  private readonly renames: Renames
  private readonly news: SessionNews

  constructor (
    private readonly store: KeyValue & Broadcast & Lock,
    private readonly sealer: Sealer,
    private readonly config: SessionConfig,
    /** What "now" is for the cache window and `session.maxAge`; tests move it. */
    clock: Clock = systemClock
  ) {
    this.cookieOptions = sessionCookieOptions(config)
    this.lifetime = new Lifetime(config, clock)
    this.cache = new SessionCache(config.cacheTtlMs, clock)
    this.previousSecretReads = new PreviousSecretReads(config.ttlMs, clock)
    this.renames = new Renames(store)
    this.news = new SessionNews(store, this.cache)
    this.news.onEnded({ ended: (id) => this.previousSecretReads.forget(id) })
  }

  /**
   * How many sessions this instance read from the store within the last `session.ttl` that still
   * need a previous secret: what dropping `session.previousSecrets` now would sign out (those this
   * instance knows of; other instances count theirs).
   */
  previousSecretSessions (): number {
    return this.previousSecretReads.count()
  }

  /** Listens for other instances' logouts and refreshes (call once, before serving). */
  async listen (): Promise<void> {
    await this.news.listen()
  }

  /**
   * Calls `listener` with the id of each session that ends, on this instance or any other sharing
   * the store (sign-out, sign-out everywhere, revoke, back-channel logout, maxAge). It may be
   * called twice for one id (here at once, then from the broadcast): it must not mind. `missed`:
   * after a gap in the broadcast, when endings may have gone unheard (see {@link exists}).
   */
  onEnded (listener: (id: string) => void, missed?: () => void): void {
    this.news.onEnded({ ended: listener, missed })
  }

  /** Whether the session with this store id is still in the store. */
  async exists (id: string): Promise<boolean> {
    return await this.store.remainingMs(storeKeys.session(id)) !== null
  }

  get cookieName (): string { return this.config.cookieName }

  /** The session cookie's value, read from the Cookie header itself: proxied requests do not pay for parsing every cookie. */
  private cookie (cookieHeader: string | undefined): string | undefined {
    const value = cookieValue(cookieHeader, this.config.cookieName)
    return value !== undefined && COOKIE_VALUE.test(value) ? value : undefined
  }

  /** The session of the Cookie header if this instance verified it within `session.cacheTtl`: no store round trip, no promise. */
  cached (cookieHeader: string | undefined): Session | undefined {
    const cookie = this.cookie(cookieHeader)
    const session = cookie === undefined ? undefined : this.cache.get(cookie)
    // Past maxAge it is not served from memory: load() ends it.
    return session !== undefined && this.lifetime.left(session.record) > 0 ? session : undefined
  }

  /** Called after a store read renewed a session that has provider sessions or identities (the back-channel logout and person indexes follow it). */
  private renewed: ((session: Session) => void) | undefined

  onRenewed (listener: (session: Session) => void): void {
    this.renewed = listener
  }

  /**
   * The session named by the Cookie header, its idle timeout renewed; null when there is none, or
   * when the cookie does not open a record (tampered, foreign, expired, signed out).
   */
  async load (cookieHeader: string | undefined): Promise<Session | null> {
    const cookie = this.cookie(cookieHeader)
    if (!cookie) return null
    const cached = this.cache.get(cookie)
    if (cached) {
      if (this.lifetime.left(cached.record) > 0) return cached
      // Past maxAge: ended here, so that what hangs off it ends too (the store has forgotten it by now).
      await this.endPastMaxAge(cached.id)
      return null
    }
    // A read that began before a sign-out or refresh elsewhere is not shared: it may hold the old record.
    const generation = this.cache.generation
    const under = this.reading.get(cookie)
    if (under?.generation === generation) return await under.session
    const session = this.read(cookie, generation)
    this.reading.set(cookie, { generation, session })
    try {
      return await session
    } finally {
      if (this.reading.get(cookie)?.session === session) this.reading.delete(cookie)
    }
  }

  private async read (cookie: string, generation: number): Promise<Session | null> {
    const found = await this.find(cookie)
    if (!found) return null
    const { id, key, record } = found
    if (!await this.withinMaxAge(id, storeKeys.session(id), record)) return null
    const session: Session = { id, cookie, record }
    if (this.sealer.keys.length > 1) this.previousSecretReads.note(id, key !== this.sealer.current || !await this.sealAgain(session, key, found.stored))
    // The record's idle timeout was just renewed in the store: what hangs off it is renewed too.
    if (record.providerSessions !== undefined || record.identities !== undefined) this.renewed?.(session)
    this.cache.set(session, generation)
    return session
  }

  /**
   * Whether the session read under `key` is still within `session.maxAge`. Past it, it is ended
   * (endById: every instance forgets it and what hangs off it, websockets included, ends with it);
   * within the idle timeout of it, the renewal just made is cut back to end at maxAge (the record's
   * sign-in time is sealed, so the store's expiry can only be capped once it is read).
   */
  private async withinMaxAge (id: string, key: string, record: SessionRecord): Promise<boolean> {
    const left = this.lifetime.left(record)
    if (left <= 0) {
      await this.endPastMaxAge(id)
      return false
    }
    if (left < this.config.ttlMs) await this.readAndTouch(key, left)
    return true
  }

  /** Ends a session past maxAge; a store that refuses writes, or no replica that has it, changes nothing: it is no session all the same. */
  private async endPastMaxAge (id: string): Promise<void> {
    await this.endById(id).catch((error: unknown) => { if (!refusedByStore(error) && !unacknowledgedByReplica(error)) throw error })
  }

  /**
   * The record a cookie opens and its store id: one read under the secret the cookie names (none
   * when the gateway no longer holds it).
   */
  private async find (cookie: string): Promise<{ id: string, key: SealingKey, record: SessionRecord, stored: Buffer } | null> {
    const key = cookieKey(this.sealer, cookie)
    if (!key) return null
    const id = key.idFor(SESSION_PURPOSE, cookie)
    const stored = await this.readAndTouch(storeKeys.session(id), this.config.ttlMs)
    const record = decodeRecord(this.sealer, cookie, stored, key)
    return record && stored ? { id, key, record, stored } : null
  }

  /**
   * Seals a record written under a secret other than its cookie's (1.0.0's, see
   * REKEYED_RECORD) again with its cookie's secret, when that is the current one, over the bytes just
   * read (compare-and-set: a refresh written meanwhile is never overwritten; it was sealed right).
   * The record is the same, so no cache is dropped. Once per record: what it writes needs no more.
   * Whether the record is (now) sealed as its cookie needs; a store that cannot take the write
   * leaves it for the next read.
   */
  private async sealAgain (session: Session, key: SealingKey, stored: Buffer): Promise<boolean> {
    if (!sealedUnderAnother(this.sealer, key, stored)) return true
    try {
      return await this.store.replace(storeKeys.session(session.id), stored, encodeRecord(this.sealer, session.cookie, session.record, key), this.lifetime.expiry(session.record))
    } catch (error) {
      if (isGatewayError(error) && error.code === 'session_store_unavailable') return false
      throw error
    }
  }

  /**
   * The stored record, its idle timeout renewed; a store that refuses writes (READONLY) still
   * gives it, unrenewed: a session is not lost because its renewal could not be written.
   */
  private async readAndTouch (key: string, ttlMs: number): Promise<Buffer | null> {
    try {
      return await this.store.getAndTouchBytes(key, ttlMs)
    } catch (error) {
      if (!refusedByStore(error)) throw error
      return await this.store.getBytes(key)
    }
  }

  /**
   * The session's record as it is in the store now (another request or instance may have changed
   * it), with the bytes it was read as: what {@link update} writes over. Null when it is gone.
   */
  async reload (session: Session): Promise<StoredRecord | null> {
    const key = sessionKey(this.sealer, session)
    const stored = key ? await this.store.getBytes(storeKeys.session(session.id)) : null
    const record = decodeRecord(this.sealer, session.cookie, stored, key)
    // Past maxAge it is no session to refresh (the next read ends it).
    return record && stored && this.lifetime.left(record) > 0 ? { record, stored } : null
  }

  /**
   * The session's record as the store holds it now and how long its idle timeout has left (ms),
   * without renewing it: for what outlives the request that loaded the session (an open websocket
   * is no activity). Null when it is gone (ended, or idle past `ttl`).
   */
  async peek (session: Session): Promise<{ record: SessionRecord, idleMs: number } | null> {
    const key = storeKeys.session(session.id)
    const [stored, idleMs] = await Promise.all([this.store.getBytes(key), this.store.remainingMs(key)])
    const record = decodeRecord(this.sealer, session.cookie, stored)
    return record && idleMs !== null ? { record, idleMs } : null
  }

  /**
   * Brings the session's idle timeout back to at most `idleMs` from now: a token refreshed for an
   * open websocket (its write renews the timeout) is no activity of the person's. Never lengthens
   * it. A request that renewed it in the moment between that write and this one loses its renewal.
   */
  async capIdle (session: Session, idleMs: number): Promise<void> {
    await this.store.capExpiry(storeKeys.session(session.id), idleMs)
  }

  /**
   * Writes `record` as the session's new record under the same id (token refresh; not a sign-in),
   * only while the store still holds `read` as it was read, and drops the old one from every
   * instance's cache. Null when nothing was written: the session was ended meanwhile (sign-out,
   * back-channel logout), and stays ended, or another writer changed it (read it again).
   */
  async update (session: Session, read: StoredRecord, record: SessionRecord): Promise<Session | null> {
    // The store id stays the one of the secret the cookie was made under, and the record is sealed with it.
    const key = sessionKey(this.sealer, session)
    const written = await this.store.replace(storeKeys.session(session.id), read.stored, encodeRecord(this.sealer, session.cookie, record, key), this.lifetime.expiry(record), REPLICATED)
      .catch(async (error: unknown) => {
        // Written on the master all the same: what every instance holds of the old record is stale.
        if (unacknowledgedByReplica(error)) await this.news.invalidate(session.id)
        throw error
      })
    if (!written) {
      // Whoever ended or changed it has told every instance; this one forgets what it holds now.
      this.cache.dropId(session.id)
      return null
    }
    // The write renewed its idle timeout as a read does (a session served from the cache is refreshed without one).
    if (this.sealer.keys.length > 1) this.previousSecretReads.note(session.id, key !== this.sealer.current)
    await this.news.invalidate(session.id)
    return { id: session.id, cookie: session.cookie, record }
  }

  /**
   * Stores `record` under a brand-new id (no fixation); runs `indexed`, which lists it where
   * sign-outs look, so that one that finds the old id finds this one too; then ends the session the
   * old Cookie header named, leaving its id pointing at the new one (./renames.ts). When `record`
   * was built on that session (a sign-in adds a provider) and it had ended meanwhile, `alone`
   * rebuilds it without what the ended one held, written only over the first write: a sign-out
   * that reached the new id too stays done (400 `invalid_state`). Each write counts only once a
   * replica has it (REPLICATED), else `session_store_unavailable` first. A step that fails deletes
   * the new record (no cookie named it), and the browser keeps the session it had.
   * @see https://owasp.org/www-community/attacks/Session_fixation
   */
  async start (oldCookieHeader: string | undefined, record: SessionRecord, { alone, indexed }: StartSteps = {}): Promise<Started & { record: SessionRecord }> {
    const cookie = newCookie(this.sealer)
    const id = this.sealer.current.idFor(SESSION_PURPOSE, cookie)
    const generation = this.cache.generation
    const key = storeKeys.session(id)
    // A new id: nothing was read under it, so nothing to compare with.
    const written = encodeRecord(this.sealer, cookie, record)
    await this.write(key, written, this.lifetime.expiry(record))
    const oldId = this.idOf(oldCookieHeader)
    let renamed = false
    try {
      await indexed?.({ id, record })
      if (oldId !== undefined) renamed = await this.renames.rename(oldId, id)
      if (oldId !== undefined && !renamed && alone) {
        record = alone()
        if (!await this.store.replace(key, written, encodeRecord(this.sealer, cookie, record), this.lifetime.expiry(record), REPLICATED)) {
          throw new GatewayError('invalid_state', 'This browser\'s session was signed out while the sign-in was being completed: sign in again.')
        }
      }
    } catch (error) {
      // No cookie ever named it: deleted, with no ending to wait for or list (an attacker's finding:
      // ended, its unsettled mark listed it on the sessions page for session.ttl).
      await this.store.delete(key).catch(() => {})
      throw error
    }
    if (oldId !== undefined) await this.renamed(oldId, renamed)
    // The browser's next request (the page it signed in for) is answered from this instance's
    // cache: the record was just written, so reading it back would only cost a round trip.
    this.cache.set({ id, cookie, record }, generation)
    return { id, cookie, record }
  }

  /**
   * After a sign-in over the session `oldId`: when it renamed it (`renamed`), what hangs off the old
   * id (an open websocket) ends with it on every instance, and comes back under the new cookie. Its
   * ending waits for a replica, best effort: nobody was told it ended, and a store fault must not
   * make the sign-in a sign-out (an attacker's finding); its mark, left when no replica answers,
   * makes a sign-out with the old cookie (another tab's) wait for one. An old ending left unsettled
   * (a sign-out answered 503 in this browser) is finished here too.
   */
  private async renamed (oldId: string, renamed: boolean): Promise<void> {
    if (renamed) await this.news.forget(oldId)
    const oldKey = storeKeys.session(oldId)
    if (renamed || await this.store.unsettled(oldKey).catch(() => false)) await this.store.settled(oldKey).catch(() => {})
  }

  /**
   * Writes a new session's record, counted only once a replica has it. One no replica acknowledged
   * is deleted again (best effort): no cookie will name it.
   */
  private async write (key: string, value: Buffer, ttlMs: number): Promise<void> {
    await this.store.set(key, value, ttlMs, REPLICATED).catch(async (error: unknown) => {
      if (unacknowledgedByReplica(error)) await this.store.delete(key).catch(() => {})
      throw error
    })
  }

  /** Ends a session known by its id: deleted, dropped from every instance's cache at once, done once a replica has it (KeyValue.settled, else 503). */
  async endById (id: string): Promise<void> {
    const key = storeKeys.session(id)
    await this.store.end(key)
    await this.news.forget(id)
    await this.store.settled(key)
  }

  /**
   * Ends `session`, as {@link load} returned it for the Cookie header, and the session that header's cookie was renamed to
   * within the last minute (./renames.ts), as another tab's sign-in does. A cookie whose session is gone and whose ending no
   * replica has (a sign-out tried again after a 503) is done once one has (KeyValue.unsettled, settled); a made-up cookie
   * costs a read or two, no write. The caller clears the cookie.
   */
  async end (session: Session | null, cookieHeader?: string): Promise<void> {
    if (session) await this.endById(session.id)
    const id = session?.id ?? this.idOf(cookieHeader)
    if (id === undefined) return
    await this.endRenamed(id)
    if (session === null && await this.store.unsettled(storeKeys.session(id))) await this.store.settled(storeKeys.session(id))
  }

  /** The ids a sign-in renamed `id` to in the last minute (./renames.ts), in order. */
  async renamedTo (id: string): Promise<string[]> {
    return await this.renames.chain(id)
  }

  /** Ends the sessions a sign-in renamed `id` to in the last minute (./renames.ts) but `skip`'s; how many. */
  async endRenamed (id: string, skip: ReadonlySet<string> = new Set()): Promise<number> {
    const renamed = (await this.renames.chain(id)).filter((to) => !skip.has(to))
    for (const to of renamed) await this.endById(to)
    return renamed.length
  }

  /** The store id the Cookie header's session cookie names, under the secret it names; undefined for none the gateway holds. */
  idOf (cookieHeader: string | undefined): string | undefined {
    const cookie = this.cookie(cookieHeader)
    return cookie === undefined ? undefined : cookieKey(this.sealer, cookie)?.idFor(SESSION_PURPOSE, cookie)
  }
}
