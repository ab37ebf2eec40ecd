// Which sessions this instance read from the store (or refreshed) within the last idle timeout
// (`session.ttl`) that still need a previous secret: their cookie was made under one, or their record is sealed
// with one and could not be sealed again. Those are what dropping the previous secrets (the last
// step of a rotation) would sign out now; a session not read within `session.ttl` anywhere has
// expired. Read at scrape time as gateway_sessions_previous_secret (docs/operations.md, "Rotating
// the session secret"). Reliability round 3.
import type { Clock } from '../ops/clock.js'

export class PreviousSecretReads {
  /** Session id -> when it was last read needing a previous secret; in order of that time (re-inserted at each read). */
  private readonly lastRead = new Map<string, number>()

  constructor (private readonly windowMs: number, private readonly clock: Clock) {}

  /** A store read (or write) of session `id`, which renewed its idle timeout, and whether it still needs a previous secret after it. */
  note (id: string, needsPrevious: boolean): void {
    this.lastRead.delete(id)
    if (needsPrevious) this.lastRead.set(id, this.clock.now())
    this.prune()
  }

  /** A session that ended: nothing to count any more. */
  forget (id: string): void {
    this.lastRead.delete(id)
  }

  /** How many sessions read within the window still needed a previous secret at their last read. */
  count (): number {
    this.prune()
    return this.lastRead.size
  }

  /** Drops the reads older than the window: oldest first, so it stops at the first one within it. */
  private prune (): void {
    const since = this.clock.now() - this.windowMs
    for (const [id, at] of this.lastRead) {
      if (at > since) return
      this.lastRead.delete(id)
    }
  }
}
