// An agent's open answers end with its grant: MCP's SSE answers and long-held GET streams are
// responses in flight, which a grant's end would otherwise leave running for as long as the
// upstream keeps them open. A registry per instance, by the grant's session id, of the responses
// in flight for a token the gateway issued (websockets are session-sockets.ts's); when the session
// ends (Sessions.onEnded: sign-out everywhere, a revoke, back-channel logout, on every instance),
// each is cut (its socket destroyed: a stream has no status left to say why; the client's next
// request gets 401 invalid_token and says it). Each is also cut at its own deadline: the end of
// the access token it was opened with or of the grant's `session.maxAge`, whichever comes first
// (an outside tester's finding: a stream outlived both, while the grant's websocket closed at
// them). A response that ends by itself leaves the registry, and its timer with it.
import type { ServerResponse } from 'node:http'
import { MAX_TIMER_MS, nodeTimers, systemClock, type Clock, type Timers } from '../ops/clock.js'
import type { Logger } from '../ops/logger.js'
import type { Sessions } from '../session/session.js'

export class GrantStreams {
  private readonly open = new Map<string, Set<ServerResponse>>()

  constructor (sessions: Pick<Sessions, 'onEnded'>, private readonly log: Logger, private readonly clock: Clock = systemClock, private readonly timers: Timers = nodeTimers) {
    sessions.onEnded((id) => this.end(id))
  }

  /**
   * Keeps `response` (an agent's request just let through) with its grant's session (`id`, its
   * store id), until `until` (clock ms) at the latest.
   */
  hold (id: string, response: ServerResponse, until: number): void {
    if (response.writableEnded) return
    let open = this.open.get(id)
    if (open === undefined) this.open.set(id, open = new Set())
    const held = open
    held.add(response)
    const cancel = this.deadline(response, until)
    response.once('close', () => {
      cancel()
      held.delete(response)
      if (held.size === 0 && this.open.get(id) === held) this.open.delete(id)
    })
  }

  /** Cuts `response` at `until`; a deadline beyond the longest timer is set again when that one fires. */
  private deadline (response: ServerResponse, until: number): () => void {
    let cancel: () => void = () => {}
    const arm = () => {
      const delay = until - this.clock.now()
      if (delay <= 0) {
        this.log.info({ streams: 1 }, 'agent stream closed: its token or its grant\'s session.maxAge ended')
        response.destroy()
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
    const open = this.open.get(id)
    if (open === undefined) return
    this.open.delete(id)
    for (const response of open) response.destroy()
    this.log.info({ session: id.slice(0, 8), streams: open.size }, 'agent streams closed: their grant ended')
  }
}
