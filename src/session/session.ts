// Session cookie <-> store record: load, start (always a new id), end. The cookie is 256 random
// bits; the store key is a keyed hash of it and the record is sealed with a key derived from it.
import type { CookieSerializeOptions } from '@fastify/cookie'
import type { FastifyReply, FastifyRequest } from 'fastify'
import type { SessionConfig } from '../config/config.js'
import type { Identity } from '../access/identity.js'
import type { Sealer } from './seal.js'
import { randomToken } from './seal.js'
import { storeKeys, type Broadcast, type KeyValue } from '../store/store.js'
import { systemClock, type Clock } from '../ops/clock.js'

/** A token endpoint response as kept for one provider (RFC 6749 §5.1). */
export interface TokenSet {
  access_token: string
  token_type: string
  /** Seconds since the epoch, from `expires_in`. */
  expires_at?: number
  refresh_token?: string
  scope?: string
}

/**
 * What sign-out needs of a provider's own session, kept apart from the token set (a refresh
 * replaces that): the ID token for `id_token_hint` (only when the provider has an end-session
 * endpoint), and the ID token's `sid` and `sub`, which a back-channel logout names.
 * @see https://openid.net/specs/openid-connect-rpinitiated-1_0.html#RPLogout
 * @see https://openid.net/specs/openid-connect-backchannel-1_0.html#LogoutToken
 */
export interface ProviderSession {
  idToken?: string
  sid?: string
  sub?: string
}

/** What one session holds: a token set per provider, and who the user is there. */
export interface SessionRecord {
  createdAt: number
  tokens: Record<string, TokenSet>
  identities?: Record<string, Identity>
  providerSessions?: Record<string, ProviderSession>
}

/** A loaded session: `id` (a keyed hash of the cookie) names it in the store and in logs; `cookie` opens it. */
export interface Session {
  id: string
  cookie: string
  record: SessionRecord
}

const COOKIE_VALUE = /^[A-Za-z0-9_-]{43}$/
const PURPOSE = 'session'

const INVALIDATIONS = 'session-invalidated'

/** The value of the first cookie called `name` in a Cookie header (RFC 6265 §5.4), undefined if none. */
export function cookieValue (header: string | undefined, name: string): string | undefined {
  if (!header) return undefined
  let start = 0
  while (start < header.length) {
    let end = header.indexOf(';', start)
    if (end === -1) end = header.length
    const eq = header.indexOf('=', start)
    if (eq !== -1 && eq < end && header.slice(start, eq).trim() === name) return header.slice(eq + 1, end).trim()
    start = end + 1
  }
  return undefined
}

/**
 * Recently read sessions, so a busy session costs no store round trip per request. Bounded, and
 * short-lived: an entry lives `ttlMs` (1 s by default). Logout and refresh drop the entry in every
 * instance at once through the store's pub/sub; the short life bounds it if a message is lost.
 */
class SessionCache {
  private readonly byCookie = new Map<string, { session: Session, expiresAt: number }>()
  private readonly cookieById = new Map<string, string>()
  /**
   * Counts invalidations. A store read that was under way when one arrived may hold what the
   * logout or refresh replaced, so `set` refuses it (the next request reads the store again).
   */
  private invalidations = 0

  constructor (private readonly ttlMs: number, private readonly clock: Clock, private readonly maxEntries = 10_000) {}

  get (cookie: string): Session | undefined {
    const entry = this.byCookie.get(cookie)
    if (!entry) return undefined
    if (entry.expiresAt > this.clock.now()) return entry.session
    this.dropCookie(cookie)
    return undefined
  }

  /** Taken before a store read, and handed back to `set` with what was read. */
  get generation (): number {
    return this.invalidations
  }

  set (session: Session, generation: number): void {
    if (this.ttlMs <= 0 || generation !== this.invalidations) return
    if (this.byCookie.size >= this.maxEntries && !this.byCookie.has(session.cookie)) {
      // Maps iterate in insertion order: the first entry is the oldest.
      this.dropCookie(this.byCookie.keys().next().value!)
    }
    this.byCookie.set(session.cookie, { session, expiresAt: this.clock.now() + this.ttlMs })
    this.cookieById.set(session.id, session.cookie)
  }

  dropId (id: string): void {
    this.invalidations++
    const cookie = this.cookieById.get(id)
    if (cookie !== undefined) this.dropCookie(cookie)
  }

  private dropCookie (cookie: string): void {
    const entry = this.byCookie.get(cookie)
    this.byCookie.delete(cookie)
    if (entry) this.cookieById.delete(entry.session.id)
  }
}

export class Sessions {
  readonly cookieOptions: CookieSerializeOptions
  private readonly cache: SessionCache
  /** Store reads under way, by cookie: concurrent requests of one session share one read. */
  private readonly reading = new Map<string, { generation: number, session: Promise<Session | null> }>()

  constructor (
    private readonly store: KeyValue & Broadcast,
    private readonly sealer: Sealer,
    private readonly config: SessionConfig,
    /** What "now" is for the cache window; tests move it. */
    clock: Clock = systemClock
  ) {
    this.cookieOptions = {
      path: '/',
      httpOnly: true,
      sameSite: 'lax',
      secure: config.cookieSecure,
      // session.cookieDomain: hosts under one parent domain share the sign-in (forward-auth).
      ...(config.cookieDomain ? { domain: config.cookieDomain } : {}),
    }
    this.cache = new SessionCache(config.cacheTtlMs, clock)
  }

  /** Listens for other instances' logouts and refreshes (call once, before serving). */
  async listen (): Promise<void> {
    await this.store.subscribe(INVALIDATIONS, (id) => this.cache.dropId(id))
  }

  /** Drops the session from every instance's cache (this one at once). */
  private async invalidate (id: string): Promise<void> {
    this.cache.dropId(id)
    await this.store.publish(INVALIDATIONS, id)
  }

  get cookieName (): string {
    return this.config.cookieName
  }

  /**
   * The session cookie's value, read from the Cookie header itself (the first one of that name, as
   * browsers send the most specific first): proxied requests do not pay for parsing every cookie.
   */
  private cookie (request: FastifyRequest): string | undefined {
    const value = cookieValue(request.headers.cookie, this.config.cookieName)
    return value !== undefined && COOKIE_VALUE.test(value) ? value : undefined
  }

  /** The request's session if this instance verified it moments ago: no store round trip, no promise. */
  cached (request: FastifyRequest): Session | undefined {
    const cookie = this.cookie(request)
    return cookie === undefined ? undefined : this.cache.get(cookie)
  }

  /** The request's session, its idle timeout renewed; null when there is none (or it cannot be opened). */
  /** Called after a store read renewed a session that has provider sessions (the back-channel logout index follows it). */
  private renewed: ((session: Session) => void) | undefined

  onRenewed (listener: (session: Session) => void): void {
    this.renewed = listener
  }

  async load (request: FastifyRequest): Promise<Session | null> {
    const cookie = this.cookie(request)
    if (!cookie) return null
    const cached = this.cache.get(cookie)
    if (cached) return cached
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
    const id = this.sealer.idFor(PURPOSE, cookie)
    const record = this.open(cookie, await this.store.getAndTouch(storeKeys.session(id), this.config.ttlMs))
    if (!record) return null
    const session = { id, cookie, record }
    // The record's idle timeout was just renewed in the store: what hangs off it is renewed too.
    if (record.providerSessions !== undefined) this.renewed?.(session)
    this.cache.set(session, generation)
    return session
  }

  /** The session's record as it is in the store now (another request or instance may have changed it). */
  async reload (session: Session): Promise<SessionRecord | null> {
    return this.open(session.cookie, await this.store.get(storeKeys.session(session.id)))
  }

  /** Writes the session's record back under the same id (token refresh; not a sign-in). */
  async update (session: Session): Promise<void> {
    await this.store.set(storeKeys.session(session.id), this.sealer.seal(PURPOSE, session.cookie, JSON.stringify(session.record)), this.config.ttlMs)
    await this.invalidate(session.id)
  }

  private open (cookie: string, sealed: string | null): SessionRecord | null {
    const json = sealed ? this.sealer.open(PURPOSE, cookie, sealed) : null
    return json ? JSON.parse(json) as SessionRecord : null
  }

  /**
   * Stores the record under a brand-new id (no fixation) and drops the request's old session.
   * Returns the new session's id.
   */
  async start (request: FastifyRequest, reply: FastifyReply, record: SessionRecord): Promise<string> {
    const old = this.cookie(request)
    const cookie = randomToken()
    const id = this.sealer.idFor(PURPOSE, cookie)
    await this.store.set(storeKeys.session(id), this.sealer.seal(PURPOSE, cookie, JSON.stringify(record)), this.config.ttlMs)
    if (old) await this.drop(old)
    reply.setCookie(this.config.cookieName, cookie, this.cookieOptions)
    return id
  }

  /** Ends a session known by its id only (a back-channel logout): deleted, and dropped from every instance's cache. */
  async endById (id: string): Promise<void> {
    await this.store.delete(storeKeys.session(id))
    await this.invalidate(id)
  }

  /** Deletes the session in the store and clears the cookie. */
  async end (request: FastifyRequest, reply: FastifyReply): Promise<void> {
    const cookie = this.cookie(request)
    if (cookie) await this.drop(cookie)
    reply.clearCookie(this.config.cookieName, this.cookieOptions)
  }

  private async drop (cookie: string): Promise<void> {
    await this.endById(this.sealer.idFor(PURPOSE, cookie))
  }
}
