// Outage lines an operator can read: one line when a store (or one node of a Redis Cluster, or one
// sentinel of a Sentinel group, or the replicas that acknowledge writes) becomes unreachable and one when it is back, with hysteresis so that a flapping connection or a mix of
// failing and succeeding commands does not log a pair per flap. Both lines name the outage's cause:
// the last real error seen (a refused connection, a wrong password, a certificate), never the
// failures that only follow from it (a closed connection, a command with no connection to go on).
import type { Logger } from '../ops/logger.js'
import { systemClock, type Clock } from '../ops/clock.js'

/** How long failures must persist before "unreachable", and answers before "reachable again". */
export interface Hysteresis {
  /** Failures with no success in between for this long: the outage is logged. */
  downAfterMs: number
  /** Successes with no failure in between for this long: the recovery is logged. */
  upAfterMs: number
  /**
   * Failures that have not yet said why (a closed connection, a command with no connection) wait
   * this much longer for the connection attempt that ends with the cause (a refused connection, a
   * certificate, ETIMEDOUT at the connect timeout): the store's connect bound. 0 (the default)
   * logs at once what is known: "connection closed" (or "no connection yet" before any had opened).
   */
  causeWaitMs?: number
}

/**
 * An error's cause as an outage line names it: its message, or, for the AggregateError Node gives
 * when every address of a name failed (`localhost` as 127.0.0.1 and ::1, message ''), each
 * address's own message.
 */
export function causeOf (error: unknown): string {
  if (!(error instanceof Error)) return String(error)
  if (error.message !== '') return error.message
  if (error instanceof AggregateError && error.errors.length > 0) return error.errors.map(causeOf).join('; ')
  const code = (error as { code?: unknown }).code
  return typeof code === 'string' ? code : error.name
}

export const DEFAULT_HYSTERESIS: Hysteresis = { downAfterMs: 1000, upAfterMs: 1000 }

/** At most one line a minute for failures shorter than an outage (each ends with an answer). */
export const BLIPS_LINE_MS = 60_000

/**
 * The up/down state of one store or node. Feed it every failure and success (connection events and
 * command results); it logs a warn line when failures have persisted for `downAfterMs` with no
 * success, and an info line when successes have persisted for `upAfterMs` with no failure.
 */
export class OutageLog {
  private down = false
  private closed = false
  /** When the current run of failures (while up) or successes (while down) began. */
  private runStart: number | undefined
  private timer: NodeJS.Timeout | undefined
  /** The last real error of the current run of failures ('' when none has said why yet). */
  private lastReason = ''
  /** The cause the outage's first line named (the recovery line names it again). */
  private outageReason = ''
  private downSince = 0
  private failuresDuringOutage = 0
  /** Failures have lasted downAfterMs with no cause said yet: the line waits for one (causeWaitMs). */
  private awaitingCause = false
  /** Runs of failures shorter than an outage since the last line about them, and when that was. */
  private blipsUnsaid = 0
  private blipsSaidAt = -Infinity
  /**
   * Whether a connection has ever answered or closed: until then a failure that says no cause is a
   * first connection not open yet (a slow start), not a closed one.
   */
  private everConnected = false

  constructor (
    private readonly log: Logger,
    /**
     * What the lines name: `store` for the whole store, `node` for one cluster node (host:port),
     * `sentinel` for one sentinel of a Sentinel group (host:port), `replicasOf` for the replicas of
     * a store as writes that wait for one see them (store.waitForReplica).
     */
    private readonly subject: { store: string } | { node: string } | { sentinel: string } | { replicasOf: string },
    private readonly hysteresis: Hysteresis = DEFAULT_HYSTERESIS,
    /** How long an outage lasted; the hysteresis runs on setTimeout (vitest's fake timers move both). */
    private readonly clock: Clock = systemClock
  ) {}

  /** True once the outage has been logged, until the recovery has. */
  get isDown (): boolean {
    return this.down
  }

  /**
   * One failure. `reason`: its cause (an error's text); none for a failure that only follows from an
   * earlier one (the connection closing after its error, a command with no connection), which keeps
   * the cause already known.
   */
  failed (reason?: string): void {
    if (this.closed) return
    if (reason !== undefined) this.lastReason = reason
    if (this.awaitingCause) {
      if (reason !== undefined) this.markDown()
      return
    }
    if (this.down) {
      this.failuresDuringOutage++
      // A failure breaks the run of answers that would have ended the outage.
      this.cancel()
      return
    }
    if (this.runStart === undefined) this.start(this.hysteresis.downAfterMs, () => this.persisted())
  }

  /** The connection closed with no error of its own: a failure whose cause, if none comes, is that. */
  connectionClosed (): void {
    this.everConnected = true
    this.failed()
  }

  succeeded (): void {
    if (this.closed) return
    // The outage lasted downAfterMs, and ended before anything said why: logged as it was.
    if (this.awaitingCause) this.markDown()
    this.everConnected = true
    if (!this.down) {
      // A blip shorter than downAfterMs: not an outage, and its cause is not the next one's.
      if (this.runStart !== undefined) this.blip()
      this.cancel()
      this.lastReason = ''
      return
    }
    if (this.runStart === undefined) this.start(this.hysteresis.upAfterMs, () => this.markUp())
  }

  /** Stops logging: the store is being closed on purpose. */
  close (): void {
    this.closed = true
    this.cancel()
  }

  private start (afterMs: number, then: () => void): void {
    this.runStart = this.clock.now()
    this.timer = setTimeout(then, afterMs)
    this.timer.unref()
  }

  private cancel (): void {
    clearTimeout(this.timer)
    this.timer = undefined
    this.runStart = undefined
    this.awaitingCause = false
  }

  /**
   * Failures have lasted downAfterMs. With no cause said yet, the line waits up to causeWaitMs for
   * one; the wait is judged after the sockets have been read (setImmediate: Node runs due timers
   * before it reads the sockets), so an error already received is never logged as a closed connection.
   */
  private persisted (): void {
    const waitMs = this.hysteresis.causeWaitMs ?? 0
    if (this.lastReason !== '' || waitMs === 0) {
      this.markDown()
      return
    }
    this.awaitingCause = true
    this.timer = setTimeout(() => setImmediate(() => { if (this.awaitingCause) this.markDown() }), waitMs)
    this.timer.unref()
  }

  /**
   * A run of failures ended by an answer before it was an outage: requests that needed the store
   * then got 503 (a command whose reply came after store.timeout, a connection that came back). Said
   * at most once a minute, with how many such runs there were: before, only a debug line per
   * request told of them (an outside tester's finding). A sentinel's serve no request.
   */
  private blip (): void {
    this.blipsUnsaid++
    const now = this.clock.now()
    if ('sentinel' in this.subject || now - this.blipsSaidAt < BLIPS_LINE_MS) return
    const what = 'replicasOf' in this.subject
      ? 'no replica of the session store acknowledged a write in time, then one did; the sign-in or refresh that wrote it got 503 session_store_unavailable'
      : `${this.target} failed for less than ${this.hysteresis.downAfterMs} ms; requests that needed it then got 503 session_store_unavailable`
    this.log.warn({ ...this.subject, reason: this.reason, times: this.blipsUnsaid }, `${what} (said at most once a minute: times counts since the last such line)`)
    this.blipsUnsaid = 0
    this.blipsSaidAt = now
  }

  private markDown (): void {
    this.down = true
    this.downSince = this.runStart ?? this.clock.now()
    this.failuresDuringOutage = 0
    this.cancel()
    this.outageReason = this.reason
    this.log.warn({ ...this.subject, reason: this.outageReason }, this.downMessage())
  }

  /** The run's cause: the last real error, or what is known without one. */
  private get reason (): string {
    return this.lastReason || (this.everConnected ? 'connection closed' : 'no connection yet')
  }

  private downMessage (): string {
    if ('replicasOf' in this.subject) return 'no replica of the session store acknowledged a write in time; sign-ins, token refreshes, sign-outs and logouts get 503 session_store_unavailable (no cookie is given) until one does (store.waitForReplica)'
    if ('sentinel' in this.subject) return 'sentinel unreachable; until it is back the gateway hears of a failover only from the other sentinels'
    return `${this.target} unreachable; requests that need it get 503 session_store_unavailable until it is back (each such request is logged at debug level and counted in gateway_store_unavailable_requests_total)`
  }

  private get target (): string {
    return 'sentinel' in this.subject ? 'sentinel' : 'node' in this.subject ? 'session store node' : 'session store'
  }

  private markUp (): void {
    this.down = false
    this.cancel()
    // The cause may have changed while down (Redis back, but with another password): both are named.
    const last = this.lastReason && this.lastReason !== this.outageReason ? { lastReason: this.lastReason } : {}
    this.lastReason = ''
    const message = 'replicasOf' in this.subject ? 'a replica of the session store acknowledges writes again' : `${this.target} reachable again`
    this.log.info({ ...this.subject, reason: this.outageReason, ...last, downForMs: this.clock.now() - this.downSince, failedWhileDown: this.failuresDuringOutage }, message)
  }
}
