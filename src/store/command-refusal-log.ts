// Refusal lines an operator can read: a store that answers but refuses commands (OOM under
// `maxmemory` with `noeviction`, READONLY on a replica, NOPERM) is not an outage of the connection,
// so the outage lines (outage-log.ts) never tell of it. One warn line per reason per interval, with
// Redis's own error text and how many refusals of that reason went unlogged since the last line.
import type { Logger } from '../ops/logger.js'
import { systemClock, type Clock } from '../ops/clock.js'
import type { CommandRefusalReason } from './store.js'

/** At most one line per reason in this window. */
export const COMMAND_REFUSAL_LOG_INTERVAL_MS = 10_000

/** Redis's error code word (the first word of its error text), as one of the few the metric knows. */
export function commandRefusalReason (text: string): CommandRefusalReason {
  const word = /^[A-Z]+/.exec(text)?.[0]
  return word === 'OOM' || word === 'READONLY' || word === 'NOPERM' ? word : 'other'
}

export class CommandRefusalLog {
  /** Per reason: when its last line was written, and the refusals since that were not. */
  private readonly lines = new Map<CommandRefusalReason, { at: number, suppressed: number }>()

  constructor (
    private readonly log: Logger,
    private readonly subject: { store: string },
    /** The window's clock; tests move it. */
    private readonly clock: Clock = systemClock,
    private readonly intervalMs = COMMAND_REFUSAL_LOG_INTERVAL_MS
  ) {}

  /** One refused command; `text` is the store's error text (no key, no value). */
  refused (reason: CommandRefusalReason, text: string): void {
    const now = this.clock.now()
    const last = this.lines.get(reason)
    if (last && now - last.at < this.intervalMs) {
      last.suppressed++
      return
    }
    this.lines.set(reason, { at: now, suppressed: 0 })
    this.log.warn({ ...this.subject, refusal: reason, reason: text, suppressed: last?.suppressed ?? 0 },
      'session store refused a command; what needs it gets 503 session_store_unavailable (sign-ins, refreshes; a session whose access token is still valid keeps passing); counted in gateway_store_refusals_total')
  }
}
