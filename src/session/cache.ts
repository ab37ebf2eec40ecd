// Recently read sessions, by cookie: a busy session costs no store round trip per request.
import type { Clock } from '../ops/clock.js'
import type { Session } from './record.js'

/**
 * Recently read sessions, so a busy session costs no store round trip per request. Bounded, and
 * short-lived: an entry lives `ttlMs` (1 s by default). Logout and refresh drop the entry in every
 * instance at once through the store's pub/sub; the short life bounds it if a message is lost. While
 * the subscription is not made (the store unreachable at start, a lost connection), nothing is kept.
 */
export class SessionCache {
  private readonly byCookie = new Map<string, { session: Session, expiresAt: number }>()
  private readonly cookieById = new Map<string, string>()
  /**
   * Counts invalidations. A store read that was under way when one arrived may hold what the
   * logout or refresh replaced, so `set` refuses it (the next request reads the store again).
   */
  private invalidations = 0
  /** False while this instance may miss invalidations (the store's subscription is not made): nothing is kept. */
  private hearing = true

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

  /** Entries held, expired ones not yet swept included. */
  get size (): number {
    return this.byCookie.size
  }

  set (session: Session, generation: number): void {
    if (this.ttlMs <= 0 || !this.hearing || generation !== this.invalidations) return
    const now = this.clock.now()
    // Re-inserted, not updated in place, so the Map's order (insertion) is the order of expiry.
    this.byCookie.delete(session.cookie)
    this.sweep(now)
    if (this.byCookie.size >= this.maxEntries) this.dropCookie(this.byCookie.keys().next().value!)
    this.byCookie.set(session.cookie, { session, expiresAt: now + this.ttlMs })
    this.cookieById.set(session.id, session.cookie)
  }

  /**
   * Drops the expired entries at the front. Without it a session read once (every sign-in's) stayed
   * until `maxEntries` pushed it out: about 1 KB each, 10 MB of a worker's heap after a busy hour,
   * where a 1-second life needs only the sessions of the last second.
   */
  private sweep (now: number): void {
    for (const [cookie, entry] of this.byCookie) {
      if (entry.expiresAt > now) return
      this.dropCookie(cookie)
    }
  }

  /**
   * Whether invalidations are heard. Either way everything is dropped, and reads under way are not
   * kept: a message published while they were not heard never arrives, so an entry read before or
   * during that gap may be one a sign-out elsewhere ended. Until they are heard again, nothing is kept.
   */
  listening (hearing: boolean): void {
    this.invalidations++
    this.hearing = hearing
    this.byCookie.clear()
    this.cookieById.clear()
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
