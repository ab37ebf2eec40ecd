// What every instance sharing the store hears of a session: a change (its record written, so each
// cache drops it) and an ending (what hangs off it, an open websocket, ends with it on every
// instance). Told here at once and to the others through the store's pub/sub.
import type { Broadcast } from '../store/store.js'
import type { SessionCache } from './cache.js'

const INVALIDATIONS = 'session-invalidated'
/** Ids of sessions that ended (not changed): what hangs off a session on any instance ends with it. */
const ENDINGS = 'session-ended'

interface EndListener {
  readonly ended: (id: string) => void
  readonly missed?: (() => void) | undefined
}

export class SessionNews {
  private readonly endListeners: EndListener[] = []

  constructor (private readonly store: Broadcast, private readonly cache: SessionCache) {}

  /** Listens for other instances' logouts and refreshes (call once, before serving). */
  async listen (): Promise<void> {
    await this.store.subscribe(INVALIDATIONS, (id) => this.cache.dropId(id), (listening) => this.cache.listening(listening))
    // Heard again after a gap (a Redis restart): endings may have been missed (an outside tester's finding: an event stream outlived its sign-out).
    await this.store.subscribe(ENDINGS, (id) => this.ended(id), (listening) => { if (listening) for (const { missed } of this.endListeners) missed?.() })
  }

  /** See Sessions.onEnded. */
  onEnded (listener: EndListener): void {
    this.endListeners.push(listener)
  }

  /** Drops the session from every instance's cache (this one at once). */
  async invalidate (id: string): Promise<void> {
    this.cache.dropId(id)
    await this.store.publish(INVALIDATIONS, id)
  }

  /** A session that is gone from the store: dropped from every instance's cache, and its ending told to every instance. */
  async forget (id: string): Promise<void> {
    await this.invalidate(id)
    this.ended(id)
    await this.store.publish(ENDINGS, id)
  }

  private ended (id: string): void {
    for (const { ended } of this.endListeners) ended(id)
  }
}
