// Proxied websockets opened with a machine client's bearer token end with the token, as a session's
// end with the session (session-sockets.ts). Each socket whose upgrade a token let through gets one
// timer at the end of that token's verification: a JWT's `exp`, where its sockets close; an
// introspected token's answer may be reused at most 60 s (and never past its `exp`), so its sockets'
// token is checked again then: still active, the next check is set; refused (revoked, expired), they
// close. Both legs close with 1008. A check whose issuer cannot be reached is tried again shortly and
// leaves the sockets open meanwhile. The admission travels from the upgrade request to the upstream
// leg as session-sockets.ts's does (admit, handing, opening, connected).
import type { WebSocket } from 'ws'
import type { Logger } from '../ops/logger.js'
import { MAX_TIMER_MS, nodeTimers, type Clock, type Timers } from '../ops/clock.js'
import { LegAdmissions } from './leg-admissions.js'
import { closeLeg } from './websocket.js'

/** The close code and reason both legs get when their token ends (RFC 6455 §7.4.1: policy violation). */
export const TOKEN_ENDED_CODE = 1008
export const TOKEN_ENDED_REASON = 'token ended'

/** WebSocket.OPEN, as a plain number. */
const OPEN = 1
/** How long after a check that failed (the issuer unreachable) it runs again. */
const RETRY_MS = 5000

/** How long a token's verification holds: clock ms, and whether its issuer's introspection vouched for it. */
export interface TokenHold {
  readonly until: number
  readonly introspected: boolean
}

/** Checks the token again: its new hold, or undefined when it is refused. Rejects when its issuer cannot be asked. */
export type TokenRecheck = () => TokenHold | undefined | Promise<TokenHold | undefined>

interface Watch {
  hold: TokenHold
  readonly recheck: TokenRecheck
}

/** One proxied websocket, its token, and its one timer. */
interface Legs {
  readonly source: WebSocket
  readonly target: WebSocket
  readonly watch: Watch
  cancel: (() => void) | undefined
}

export class BearerSockets {
  private readonly admissions = new LegAdmissions<Watch>()
  private readonly live = new Set<Legs>()
  private readonly timers: Timers

  constructor (private readonly deps: { clock: Clock, timers?: Timers | undefined, log: Logger }) {
    this.timers = deps.timers ?? nodeTimers
  }

  /**
   * Keeps the token that let `request` (an upgrade) through: how long it holds, and how to check it
   * again. False, and nothing kept, when it holds no more: a JWT past its `exp` still passes within
   * the clock tolerance, but its socket would close as it opened (the upgrade is refused instead).
   */
  admit (request: object, hold: TokenHold, recheck: TokenRecheck): boolean {
    if (hold.until <= this.deps.clock.now()) return false
    this.admissions.admit(request, { hold, recheck })
    return true
  }

  /** The upstream leg of `request`'s websocket is about to be created. */
  handing (request: object): void {
    this.admissions.handing(request)
  }

  /** The upstream leg just created belongs to the request last handed. */
  opening (target: WebSocket): void {
    this.admissions.opening(target)
  }

  /** Both legs are open (the link's onConnect): watched until their token ends, if a token let them through. */
  connected (source: WebSocket, target: WebSocket): void {
    const watch = this.admissions.of(target)
    if (watch === undefined || source.readyState !== OPEN || target.readyState !== OPEN) return
    const legs: Legs = { source, target, watch, cancel: undefined }
    this.live.add(legs)
    const gone = () => {
      legs.cancel?.()
      this.live.delete(legs)
    }
    source.once('close', gone)
    target.once('close', gone)
    this.schedule(legs, watch.hold.until)
  }

  /** Cancels every timer (the gateway is closing; its sockets are closed by the proxy). */
  close (): void {
    for (const legs of this.live) legs.cancel?.()
    this.live.clear()
  }

  private schedule (legs: Legs, at: number): void {
    const delay = Math.min(Math.max(at - this.deps.clock.now(), 0), MAX_TIMER_MS)
    legs.cancel = this.timers.setTimeout(() => { void this.check(legs) }, delay)
  }

  /** At the end of the token's hold: a JWT's sockets close; an introspected token is asked about again. */
  private async check (legs: Legs): Promise<void> {
    const { watch } = legs
    if (this.deps.clock.now() < watch.hold.until) return this.schedule(legs, watch.hold.until)
    if (!watch.hold.introspected) return this.end(legs, 'expired')
    let hold: TokenHold | undefined
    try {
      hold = await watch.recheck()
    } catch (error) {
      this.deps.log.warn({ err: error }, 'a websocket\'s bearer token could not be checked again; trying again shortly')
      if (this.live.has(legs)) this.schedule(legs, this.deps.clock.now() + RETRY_MS)
      return
    }
    // Closed while the check was under way: nothing is left to do.
    if (!this.live.has(legs)) return
    if (hold === undefined || hold.until <= this.deps.clock.now()) return this.end(legs, hold === undefined ? 'refused' : 'expired')
    watch.hold = hold
    this.schedule(legs, hold.until)
  }

  private end (legs: Legs, why: string): void {
    this.live.delete(legs)
    const { source, target } = legs
    if (source.readyState === OPEN) closeLeg(source, TOKEN_ENDED_CODE, TOKEN_ENDED_REASON)
    if (target.readyState === OPEN) closeLeg(target, TOKEN_ENDED_CODE, TOKEN_ENDED_REASON)
    this.deps.log.info({ why }, 'websocket closed: its bearer token ended')
  }
}
