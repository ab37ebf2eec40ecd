// Answers in flight end with the session that let them through. A registry per instance, by
// session id (its store id), of the responses held here:
// - an agent's every answer (MCP's SSE answers and long-held GET streams), under its grant's
//   session, cut at the end of the access token it was opened with or of the grant's
//   `session.maxAge`, whichever comes first (an outside tester's finding: a stream outlived both,
//   while the grant's websocket closed at them);
// - a browser's event streams (an upstream's `text/event-stream` answer to a request a session
//   let through), under that session, cut at its `session.maxAge` or the end of the route's
//   `reauth.maxAge` for the sign-in it was admitted under (an outside tester's finding: a page's
//   SSE went on after its person signed out everywhere, while their websockets closed).
// When the session ends (Sessions.onEnded: sign-out, sign-out everywhere, a revoke, back-channel
// logout, on every instance) each is cut: its socket destroyed, since a stream has no status left
// to say why; the next request (an EventSource reconnects by itself) gets the sign-in or the 401
// that says it (a sign-in in another tab renames the session, ending its old id: the EventSource
// connects again under the new one). A response that ends by itself leaves the registry, and its
// timer with it.
// Websockets are session-sockets.ts's and bearer-sockets.ts's.
import type { ServerResponse } from 'node:http'
import { MAX_TIMER_MS, nodeTimers, systemClock, type Clock, type Timers } from '../ops/clock.js'
import { cutByGateway } from '../http/request-end.js'
import type { Logger } from '../ops/logger.js'
import { Lru } from '../ops/lru.js'
import { lookForEnded } from './missed-endings.js'
import type { Session, Sessions } from '../session/session.js'

/** How many ended sessions' ids are kept: far more than end while one store read is under way. */
const ENDED_KEPT = 4096

/** Whose streams a line of the log is about. */
export type StreamHolder = 'agent' | 'browser'

/** What ends a stream at its deadline, when its holder does not say which of them came first. */
const UNTIL: Record<StreamHolder, string> = {
  agent: 'its token, its grant\'s session.maxAge or its route\'s reauth.maxAge ended',
  browser: 'its session\'s maxAge or its route\'s reauth.maxAge ended',
}

export class SessionStreams {
  private readonly open = new Map<string, Set<ServerResponse>>()
  /** The sessions whose ending this instance heard last: a response held after that is cut at once. */
  private readonly ended = new Lru<string, true>(ENDED_KEPT)

  constructor (private readonly sessions: Pick<Sessions, 'onEnded' | 'cached' | 'load' | 'exists'>, private readonly log: Logger, private readonly clock: Clock = systemClock, private readonly timers: Timers = nodeTimers) {
    const held = { exists: (id: string) => sessions.exists(id), holds: (id: string) => this.open.has(id), end: (id: string) => this.end(id), timers, looking: new Map<string, boolean>() }
    sessions.onEnded((id) => this.end(id), () => lookForEnded(this.open.keys(), held))
  }

  /**
   * Keeps `response`, a browser's event stream, with the session its request's cookie named, until
   * `until(session)`: the session from this instance's cache (the access check has just read it),
   * else from the store (a slow upstream answered after the cache let it go). A session gone
   * meanwhile cuts the stream at once.
   */
  holdBrowser (cookie: string | undefined, response: ServerResponse, until: (session: Session) => number): void {
    const cached = this.sessions.cached(cookie)
    if (cached !== undefined) return this.hold(cached.id, response, until(cached), 'browser')
    this.sessions.load(cookie).then((session) => {
      if (session === null) {
        this.log.info({ streams: 1, who: 'browser' }, 'browser stream closed: its session ended before the upstream answered')
        cutByGateway(response, 'its session ended')
      } else {
        this.hold(session.id, response, until(session), 'browser')
      }
    }, (error: unknown) => {
      // The store cannot say: the stream goes on as a request already let through would.
      this.log.warn({ err: error }, 'a browser stream\'s session could not be read: it is not held with it')
    })
  }

  /**
   * Keeps `response` with the session (`id`, its store id) that let its request through, until
   * `until` (clock ms) at the latest; `why` is what its lines say ended it then (by default, the
   * limits that can end `who`'s streams, all of them).
   */
  hold (id: string, response: ServerResponse, until: number, who: StreamHolder, why = UNTIL[who]): void {
    // Gone already (its client left while the session was read): its 'close' has been heard, and it
    // would never leave the registry (a re-reading's finding).
    if (response.writableEnded || response.destroyed) return
    // Its session's ending was heard while it was read from the store: cut now, not at maxAge.
    if (this.ended.peek(id) !== undefined) {
      cutByGateway(response, 'its session ended')
      return
    }
    const cancel = this.deadline(response, until, who, why)
    this.place(id, response)
    response.once('close', () => {
      cancel()
      this.unplace(id, response)
    })
  }

  private place (id: string, response: ServerResponse): void {
    let open = this.open.get(id)
    if (open === undefined) this.open.set(id, open = new Set())
    open.add(response)
  }

  private unplace (id: string, response: ServerResponse): void {
    const open = this.open.get(id)
    if (open === undefined || !open.delete(response) || open.size > 0) return
    this.open.delete(id)
  }

  /** Cuts `response` at `until`; a deadline beyond the longest timer is set again when that one fires. */
  private deadline (response: ServerResponse, until: number, who: StreamHolder, why: string): () => void {
    let cancel: () => void = () => {}
    const arm = () => {
      const delay = until - this.clock.now()
      if (delay <= 0) {
        this.log.info({ streams: 1, who }, `${who} stream closed: ${why}`)
        cutByGateway(response, why)
        return
      }
      cancel = this.timers.setTimeout(arm, Math.min(delay, MAX_TIMER_MS))
    }
    arm()
    return () => cancel()
  }

  /** How many responses are held here, for the tests. */
  get size (): number {
    let size = 0
    for (const open of this.open.values()) size += open.size
    return size
  }

  private end (id: string): void {
    this.ended.set(id, true)
    const open = this.open.get(id)
    if (open === undefined) return
    this.open.delete(id)
    for (const response of open) cutByGateway(response, 'its session ended')
    this.log.info({ session: id.slice(0, 8), streams: open.size }, 'streams closed: their session ended')
  }
}
