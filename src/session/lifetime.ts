// How long a session lives: at most `session.maxAge` after its sign-in however active it is, and
// in the store for the idle timeout (`session.ttl`) after each use, never beyond that.
import type { SessionConfig } from '../config/types.js'
import type { Clock } from '../ops/clock.js'
import type { SessionRecord } from './record.js'

export class Lifetime {
  constructor (private readonly config: Pick<SessionConfig, 'maxAgeMs' | 'ttlMs'>, private readonly clock: Clock) {}

  /**
   * When `record`'s session ends however active it is (`session.maxAge` after its sign-in), in
   * milliseconds since the epoch. A refresh or another provider's sign-in keeps `createdAt`, so
   * nothing extends it.
   */
  endsAt (record: SessionRecord): number {
    return record.createdAt + this.config.maxAgeMs
  }

  /** How long `record`'s session has left before `session.maxAge` (0 or less: past it). */
  left (record: SessionRecord): number {
    return this.endsAt(record) - this.clock.now()
  }

  /**
   * The store expiry of a write or renewal of `record`: the idle timeout, never beyond maxAge, so
   * the store forgets the session at maxAge however active it is (at least 1 ms: a store refuses 0).
   */
  expiry (record: SessionRecord): number {
    return Math.max(1, Math.min(this.config.ttlMs, this.left(record)))
  }
}
