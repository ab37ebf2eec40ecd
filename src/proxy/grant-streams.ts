// An agent's open answers end with its grant: MCP's SSE answers and long-held GET streams are
// responses in flight, which a grant's end would otherwise leave running for as long as the
// upstream keeps them open. A registry per instance, by the grant's session id, of the responses
// in flight for a token the gateway issued (websockets are session-sockets.ts's); when the session
// ends (Sessions.onEnded: sign-out everywhere, a revoke, back-channel logout, on every instance),
// each is cut (its socket destroyed: a stream has no status left to say why; the client's next
// request gets 401 invalid_token and says it). A response that ends by itself leaves the registry.
import type { ServerResponse } from 'node:http'
import type { Logger } from '../ops/logger.js'
import type { Sessions } from '../session/session.js'

export class GrantStreams {
  private readonly open = new Map<string, Set<ServerResponse>>()

  constructor (sessions: Pick<Sessions, 'onEnded'>, private readonly log: Logger) {
    sessions.onEnded((id) => this.end(id))
  }

  /** Keeps `response` (an agent's request just let through) with its grant's session (`id`, its store id). */
  hold (id: string, response: ServerResponse): void {
    if (response.writableEnded) return
    let open = this.open.get(id)
    if (open === undefined) this.open.set(id, open = new Set())
    const held = open
    held.add(response)
    response.once('close', () => {
      held.delete(response)
      if (held.size === 0 && this.open.get(id) === held) this.open.delete(id)
    })
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
