// Proxied websockets opened with a machine client's bearer token end with the token, as a session's
// end with the session (session-sockets.ts), and so do its event streams (cut, as session-streams.ts
// cuts a browser's). Each socket whose upgrade a token let through gets one
// timer at the end of that token's verification: a JWT's `exp`, where its sockets close; an
// introspected token's answer may be reused at most 60 s (and never past its `exp`), so its sockets'
// token is checked again then: still active, the next check is set; refused (revoked, expired), they
// close. Both legs close with 1008. A check whose issuer cannot be reached is tried again shortly and
// leaves the sockets open meanwhile. The admission travels from the upgrade request to the upstream
// leg as session-sockets.ts's does (admit, handing, opening, connected).
import type { ServerResponse } from 'node:http'
import type { WebSocket } from 'ws'
import type { Logger } from '../ops/logger.js'
import { MAX_TIMER_MS, nodeTimers, type Clock, type Timers } from '../ops/clock.js'
import { isGatewayError } from '../errors.js'
import { cutByGateway } from '../http/request-end.js'
import { LegAdmissions } from './leg-admissions.js'
import { closeLeg } from './websocket.js'

/** The close code and reason both legs get when their token ends (RFC 6455 §7.4.1: policy violation). */
export const TOKEN_ENDED_CODE = 1008
export const TOKEN_ENDED_REASON = 'token ended'

/** WebSocket.OPEN, as a plain number. */
const OPEN = 1
/** How long after a check that failed (the issuer unreachable) it runs again. */
const RETRY_MS = 5000

/**
 * How long a token's verification holds (clock ms), whether it is asked again then (its issuer's
 * introspection vouched for it), and when the token itself ends (`ends`: past it, nothing it let
 * through outlives an issuer that cannot be asked; Infinity when it says no `exp`).
 */
export interface TokenHold {
  readonly until: number
  readonly introspected: boolean
  readonly ends: number
}

/** What the log lines about a hold say of it: its route, its person, its token's hash prefix (never the token). */
export type HoldFields = Readonly<Record<string, unknown>>

/** Checks the token again: its new hold, or undefined when it is refused. Rejects when its issuer cannot be asked. */
export type TokenRecheck = () => TokenHold | undefined | Promise<TokenHold | undefined>

interface Watch {
  hold: TokenHold
  readonly recheck: TokenRecheck
  readonly about: HoldFields
}

/** What a token let through, with its one timer: a proxied websocket's two legs, or a streamed answer. */
interface Held {
  readonly watch: Watch
  /** Ends it, as the token ends: `why` expired or refused. */
  readonly end: (why: string) => void
  cancel: (() => void) | undefined
}

export class BearerSockets {
  private readonly admissions = new LegAdmissions<Watch>()
  private readonly live = new Set<Held>()
  private readonly timers: Timers

  constructor (private readonly deps: { clock: Clock, timers?: Timers | undefined, log: Logger }) {
    this.timers = deps.timers ?? nodeTimers
  }

  /**
   * Keeps the token that let `request` (an upgrade) through: how long it holds, and how to check it
   * again. False, and nothing kept, when it holds no more: a JWT past its `exp` still passes within
   * the clock tolerance, but its socket would close as it opened (the upgrade is refused instead).
   */
  admit (request: object, hold: TokenHold, recheck: TokenRecheck, about: HoldFields): boolean {
    if (hold.until <= this.deps.clock.now()) return false
    this.admissions.admit(request, { hold, recheck, about })
    return true
  }

  /**
   * Holds `response`, a machine client's streamed answer, with the token that let its request
   * through: cut (its socket destroyed: a stream has no status left to say why) once the token ends,
   * as its websocket would close (an attacker's finding: an event stream outlived its token). Its
   * first check is `recheck`'s when the answer begins: refused, it is cut now; an issuer that cannot
   * say is asked again shortly (a fault tester's finding: such a stream was never held), until
   * `ends` (the token's end as its request was let through: a re-reader's finding, it was asked
   * again forever).
   */
  holdStream (response: ServerResponse, recheck: TokenRecheck, ends: number, about: HoldFields): void {
    const end = (why: string) => {
      cutByGateway(response, 'its bearer token ended')
      this.deps.log.info({ ...about, why }, 'stream closed: its bearer token ended')
    }
    Promise.resolve().then(recheck).then((hold) => hold, (error: unknown) => {
      this.checkFailed(error, about)
      return { until: this.deps.clock.now(), introspected: true, ends, failed: true }
    }).then((hold) => {
      if (response.writableEnded || response.destroyed) return
      if (hold === undefined) return end('refused')
      const held: Held = { watch: { hold, recheck, about }, end, cancel: undefined }
      this.watch(held, (gone) => response.once('close', gone), 'failed' in hold ? this.deps.clock.now() + RETRY_MS : hold.until)
    }, () => {})
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
    const end = (why: string) => {
      if (source.readyState === OPEN) closeLeg(source, TOKEN_ENDED_CODE, TOKEN_ENDED_REASON)
      if (target.readyState === OPEN) closeLeg(target, TOKEN_ENDED_CODE, TOKEN_ENDED_REASON)
      this.deps.log.info({ ...watch.about, why }, 'websocket closed: its bearer token ended')
    }
    this.watch({ watch, end, cancel: undefined }, (gone) => {
      source.once('close', gone)
      target.once('close', gone)
    })
  }

  /** Watches `held` until its token ends, or until it is gone by itself (`onGone` registers how that is heard); first checked `at`. */
  private watch (held: Held, onGone: (gone: () => void) => void, at = held.watch.hold.until): void {
    this.live.add(held)
    onGone(() => {
      held.cancel?.()
      this.live.delete(held)
    })
    this.schedule(held, at)
  }

  /**
   * A check the issuer could not answer, said once per question: of the sockets and streams held
   * with one token, the first to ask gets the issuer's failure, the others a copy at debug
   * (errors.ts waitedOn; a fault tester's finding: 20 streams wrote 20 warn lines every 5 s).
   */
  private checkFailed (error: unknown, about: HoldFields): void {
    const quiet = isGatewayError(error) && error.details.log?.level === 'debug'
    this.deps.log[quiet ? 'debug' : 'warn']({ ...about, err: error }, 'a websocket\'s or stream\'s bearer token could not be checked again; trying again shortly')
  }

  /** Cancels every timer (the gateway is closing; its sockets are closed by the proxy). */
  close (): void {
    for (const held of this.live) held.cancel?.()
    this.live.clear()
  }

  private schedule (held: Held, at: number): void {
    const delay = Math.min(Math.max(at - this.deps.clock.now(), 0), MAX_TIMER_MS)
    held.cancel = this.timers.setTimeout(() => { void this.check(held) }, delay)
  }

  /** At the end of the token's hold: a JWT's sockets and streams end; an introspected token is asked about again. */
  private async check (held: Held): Promise<void> {
    const { watch } = held
    if (this.deps.clock.now() < watch.hold.until) return this.schedule(held, watch.hold.until)
    if (!watch.hold.introspected) return this.end(held, 'expired')
    let hold: TokenHold | undefined
    try {
      hold = await watch.recheck()
    } catch (error) {
      if (!this.live.has(held)) return
      // Past the token's own end, nothing is left to ask (a fault tester's finding: an introspected
      // token's socket was asked every 5 s, forever, while its issuer failed).
      if (this.deps.clock.now() >= watch.hold.ends) return this.end(held, 'expired')
      this.checkFailed(error, watch.about)
      this.schedule(held, Math.min(this.deps.clock.now() + RETRY_MS, watch.hold.ends))
      return
    }
    // Closed while the check was under way: nothing is left to do.
    if (!this.live.has(held)) return
    if (hold === undefined || hold.until <= this.deps.clock.now()) return this.end(held, hold === undefined ? 'refused' : 'expired')
    watch.hold = hold
    this.schedule(held, hold.until)
  }

  private end (held: Held, why: string): void {
    this.live.delete(held)
    held.end(why)
  }
}
