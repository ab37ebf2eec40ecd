// Proxied websockets end with the session they were admitted with. A registry per instance, by
// session id, of the open websockets (both legs) whose upgrade a session let through; bearer-token
// and public websockets have no session and are not kept. Each session with open sockets gets:
// - the sessions' endings (Sessions.onEnded: sign-out, sign-out everywhere, revoke, back-channel
//   logout, on every instance): its sockets close at once with 1008;
// - one timer (per session, not per socket) at its next known deadline: the end of its lifetime
//   (createdAt + session.maxAge), of its idle time as the store counts it, or of the access token
//   of a provider its sockets were admitted for. The check then reads the session without renewing
//   it (an open websocket is no activity) and asks for a usable token (the refresher may refresh
//   it; the idle timeout its write renewed is put back): gone, past maxAge, or no usable token
//   closes the sockets with 1008; else the next deadline is set. A socket of a route with `reauth`
//   also closes once the sign-in it was admitted under is older than `reauth.maxAge`, as a request
//   of that route would be sent to sign in again (an outside tester's finding: such a socket lasted
//   as long as its session). The same check runs once when a
//   session's first socket is kept: an ending heard before that (between the upgrade's admission
//   and the upstream's answer) is found there.
// Which session let an upstream leg through is kept as leg-admissions.ts says, and read back once
// both legs are open (connected).
import type { WebSocket } from 'ws'
import { GatewayError } from '../errors.js'
import { MAX_TIMER_MS, nodeTimers, type Clock, type Timers } from '../ops/clock.js'
import type { Logger } from '../ops/logger.js'
import type { Session, Sessions, TokenSet } from '../session/session.js'
import { LegAdmissions } from './leg-admissions.js'
import { lookForEnded } from './missed-endings.js'
import { closeLeg } from './websocket.js'

/** The close code and reason both legs get when their session ends (RFC 6455 §7.4.1: policy violation). */
export const SESSION_ENDED_CODE = 1008
export const SESSION_ENDED_REASON = 'session ended'

/** WebSocket.OPEN, as a plain number. */
const OPEN = 1
/** The least time between two checks of one session: a deadline already past never spins. */
const MIN_DELAY_MS = 1000
/** How long after a check that failed (the store or the provider unreachable) it runs again; the sockets stay open meanwhile. */
const RETRY_MS = 5000

export interface SessionSocketsDeps {
  sessions: Pick<Sessions, 'cached' | 'load' | 'peek' | 'capIdle' | 'onEnded' | 'exists'>
  /** A usable token of `provider` in `session`, refreshed if need be (oauth/refresh.ts); undefined: none. */
  usableToken: (session: Session, provider: string) => Promise<TokenSet | undefined>
  /** session.maxAge. */
  maxAgeMs: number
  /** What "now" is for the deadlines (the gateway's clock). */
  clock: Clock
  timers?: Timers
  log: Logger
}

/** When a route's `reauth` no longer admits `session` (clock ms): its sign-in's time plus `reauth.maxAge`; undefined: never. */
export type StepUpDeadline = (session: Session) => number | undefined

/** The session an upgrade request was let through with, the provider of its route, and when the route's step-up ends. */
interface Admission {
  readonly session: Session
  readonly provider: string
  readonly until: number | undefined
}

/** One proxied websocket: the client's leg, the upstream's, the provider its route signs in with, and when its step-up ends. */
interface Legs {
  readonly source: WebSocket
  readonly target: WebSocket
  readonly provider: string
  readonly until: number | undefined
}

/** A session with open sockets: them, and its one timer. */
interface Entry {
  session: Session
  readonly legs: Set<Legs>
  cancel: (() => void) | undefined
}

/** What a check found: every socket ends (`all`), or those of some providers and those whose step-up is past, and when to look again. */
type Outcome = { kind: 'all', why: string } | { kind: 'some', refused: ReadonlySet<string>, stale: ReadonlySet<Legs>, at: number }

export class SessionSockets {
  private readonly entries = new Map<string, Entry>()
  private readonly admissions = new LegAdmissions<Admission>()
  private readonly timers: Timers

  constructor (private readonly deps: SessionSocketsDeps) {
    this.timers = deps.timers ?? nodeTimers
    const held = { exists: (id: string) => deps.sessions.exists(id), holds: (id: string) => this.entries.has(id), end: (id: string) => this.end(id, 'ended'), timers: this.timers, looking: new Map<string, boolean>() }
    deps.sessions.onEnded((id) => this.end(id, 'ended'), () => lookForEnded(this.entries.keys(), held))
  }

  /**
   * Keeps the session that let `request` (an upgrade) through. From this instance's cache (the
   * pipeline has just read it) when it is there, else read again; a session ended meanwhile refuses
   * the upgrade (401).
   */
  admit (request: object, cookie: string | undefined, provider: string, stepUp?: StepUpDeadline): Promise<void> | undefined {
    const cached = this.deps.sessions.cached(cookie)
    if (cached !== undefined) {
      this.admissions.admit(request, { session: cached, provider, until: stepUp?.(cached) })
      return undefined
    }
    return this.deps.sessions.load(cookie).then((session) => {
      if (session === null) throw new GatewayError('unauthenticated', 'The session ended before this websocket connection was made.')
      this.admissions.admit(request, { session, provider, until: stepUp?.(session) })
    })
  }

  /** The upstream leg of `request`'s websocket is about to be created. */
  handing (request: object): void {
    this.admissions.handing(request)
  }

  /** The upstream leg just created belongs to the request last handed. */
  opening (target: WebSocket): void {
    this.admissions.opening(target)
  }

  /** Both legs are open (the link's onConnect): kept under their session, if a session let them through. */
  connected (source: WebSocket, target: WebSocket): void {
    const admission = this.admissions.of(target)
    if (admission === undefined || source.readyState !== OPEN || target.readyState !== OPEN) return
    const { session, provider, until } = admission
    let entry = this.entries.get(session.id)
    const first = entry === undefined
    if (entry === undefined) {
      entry = { session, legs: new Set(), cancel: undefined }
      this.entries.set(session.id, entry)
    }
    const legs: Legs = { source, target, provider, until }
    entry.legs.add(legs)
    const gone = () => this.forget(session.id, legs)
    source.once('close', gone)
    target.once('close', gone)
    if (first) void this.check(entry)
  }

  /** How many sessions have open sockets here, and how many sockets (pairs of legs) in all. */
  get size (): { sessions: number, sockets: number } {
    let sockets = 0
    for (const entry of this.entries.values()) sockets += entry.legs.size
    return { sessions: this.entries.size, sockets }
  }

  /** Cancels every timer (the gateway is closing; its sockets are closed by the proxy). */
  close (): void {
    for (const entry of this.entries.values()) entry.cancel?.()
    this.entries.clear()
  }

  private forget (id: string, legs: Legs): void {
    const entry = this.entries.get(id)
    if (entry === undefined || !entry.legs.delete(legs) || entry.legs.size > 0) return
    entry.cancel?.()
    this.entries.delete(id)
  }

  /** Closes every socket of session `id` (`why`: for the log line). */
  private end (id: string, why: string): void {
    const entry = this.entries.get(id)
    if (entry === undefined) return
    entry.cancel?.()
    this.entries.delete(id)
    this.closeLegs(id, [...entry.legs], why)
  }

  private closeLegs (id: string, legs: readonly Legs[], why: string): void {
    for (const { source, target } of legs) {
      // Both legs at once, so each end hears why; the link's own close handler then finds them closing.
      if (source.readyState === OPEN) closeLeg(source, SESSION_ENDED_CODE, SESSION_ENDED_REASON)
      if (target.readyState === OPEN) closeLeg(target, SESSION_ENDED_CODE, SESSION_ENDED_REASON)
    }
    this.deps.log.info({ session: id.slice(0, 8), sockets: legs.length, why }, 'websockets closed: their session ended')
  }

  /** Checks the session of `entry` now and acts on what it finds (see the header). */
  private async check (entry: Entry): Promise<void> {
    entry.cancel?.()
    entry.cancel = undefined
    let outcome: Outcome
    try {
      outcome = await this.outcome(entry)
    } catch (error) {
      this.deps.log.warn({ err: error, session: entry.session.id.slice(0, 8) }, 'websockets\' session could not be checked; trying again shortly')
      outcome = { kind: 'some', refused: new Set(), stale: new Set(), at: this.deps.clock.now() + RETRY_MS }
    }
    const id = entry.session.id
    // Ended (or its sockets all closed) while the check was under way: nothing is left to do.
    if (this.entries.get(id) !== entry) return
    if (outcome.kind === 'all') return this.end(id, outcome.why)
    if (outcome.refused.size > 0 || outcome.stale.size > 0) {
      const refused = [...entry.legs].filter((legs) => outcome.refused.has(legs.provider) || outcome.stale.has(legs))
      for (const legs of refused) entry.legs.delete(legs)
      this.closeLegs(id, refused, outcome.refused.size > 0 ? 'token' : 'reauth')
      if (entry.legs.size === 0) {
        this.entries.delete(id)
        return
      }
    }
    const delay = Math.min(Math.max(outcome.at - this.deps.clock.now(), MIN_DELAY_MS), MAX_TIMER_MS)
    entry.cancel = this.timers.setTimeout(() => { void this.check(entry) }, delay)
  }

  /** The session as the store has it now: whether its sockets end, and else its next deadline. */
  private async outcome (entry: Entry): Promise<Outcome> {
    const now = this.deps.clock.now()
    const lifetimeEnd = entry.session.record.createdAt + this.deps.maxAgeMs
    if (lifetimeEnd <= now) return { kind: 'all', why: 'maxAge' }
    const peeked = await this.deps.sessions.peek(entry.session)
    if (peeked === null) return { kind: 'all', why: 'gone' }
    const session: Session = { ...entry.session, record: peeked.record }
    entry.session = session
    let at = Math.min(lifetimeEnd, now + peeked.idleMs)
    const refused = new Set<string>()
    let refreshed = false
    for (const provider of new Set([...entry.legs].map((legs) => legs.provider))) {
      const token = await this.deps.usableToken(session, provider)
      if (token === undefined) refused.add(provider)
      else if (token.expires_at !== undefined) at = Math.min(at, token.expires_at * 1000)
      refreshed ||= token !== undefined && token !== session.record.tokens[provider]
    }
    // The refresh's write renewed the idle timeout: an open websocket is no activity, so it is put back.
    if (refreshed) await this.deps.sessions.capIdle(session, peeked.idleMs)
    // A route's step-up ends with the sign-in the socket was admitted under (a newer one renames the session, which ends this one's sockets).
    const stale = new Set<Legs>()
    for (const legs of entry.legs) {
      if (legs.until === undefined) continue
      if (legs.until <= now) stale.add(legs)
      else at = Math.min(at, legs.until)
    }
    return { kind: 'some', refused, stale, at }
  }
}
