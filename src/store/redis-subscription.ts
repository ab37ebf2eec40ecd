// The store's subscriber connection: a second connection in subscriber mode carrying the channels
// every instance broadcasts on (session invalidations, assertion key changes). Subscribed on each
// connection it makes, whenever that is (a start with Redis unreachable, a restart, a dropped
// connection), never from a queue a retry limit empties. Each channel's listener is told when its
// messages stop being heard (the connection closed, or not subscribed yet) and when they are again:
// messages published in between are lost for good, so what was derived from them (a cache) must
// not be trusted across that gap. One line when it is lost, one when it is back.
import { ReplyError, type Cluster, type Redis } from 'ioredis'
import type { Logger } from '../ops/logger.js'
import type { Clock } from '../ops/clock.js'
import { causeOf } from './outage-log.js'

/** One channel's listener. */
export interface ChannelListener {
  onMessage: (message: string) => void
  /** false: messages on the channel may be missed from now on; true: heard again (called only on a change). */
  onListening?: ((listening: boolean) => void) | undefined
}

/** How long to wait before sending a SUBSCRIBE that Redis refused again (NOPERM) on a connection that stays up. */
const REFUSED_AGAIN_MS = 1000

export class RedisSubscription {
  private readonly channels = new Map<string, ChannelListener>()
  /** The channels Redis confirmed on the current connection. */
  private readonly subscribed = new Set<string>()
  /** Set when the loss was logged: when, and why; the next subscription logs its end. */
  private lost: { since: number, reason: string } | undefined
  private timer: NodeJS.Timeout | undefined
  private closed = false

  constructor (readonly connection: Redis | Cluster, private readonly log: Logger, private readonly clock: Clock) {
    connection.on('ready', () => this.subscribeAll())
    connection.on('error', (error: Error) => this.unsubscribed(causeOf(error)))
    connection.on('close', () => this.unsubscribed())
    connection.on('message', (channel: string, message: string) => this.channels.get(channel)?.onMessage(message))
  }

  /** Listens on `channel` (already prefixed): subscribed now when connected, else once connected. */
  add (channel: string, listener: ChannelListener): void {
    this.channels.set(channel, listener)
    // Deaf until Redis confirms the SUBSCRIBE, on this connection or the next.
    listener.onListening?.(false)
    if (this.connection.status === 'ready') this.subscribeTo([channel])
  }

  private subscribeAll (): void {
    this.subscribeTo([...this.channels.keys()])
  }

  private subscribeTo (channels: string[]): void {
    if (channels.length === 0 || this.closed) return
    this.connection.subscribe(...channels).then(() => {
      if (this.connection.status !== 'ready') return
      for (const channel of channels) {
        if (this.subscribed.has(channel)) continue
        this.subscribed.add(channel)
        this.channels.get(channel)?.onListening?.(true)
      }
      if (this.lost && this.subscribed.size === this.channels.size) {
        this.log.info({ channels: [...this.subscribed], reason: this.lost.reason, unsubscribedForMs: this.clock.now() - this.lost.since }, 'subscribed to store broadcasts again')
        this.lost = undefined
      }
    }, (error: unknown) => {
      // A connection that closed meanwhile subscribes again when it is back ('ready'); a refusal
      // (NOPERM: the ACL user lacks the channel) leaves it up, so it is asked again after a while.
      if (!(error instanceof ReplyError)) return
      this.unsubscribed(causeOf(error), true)
      clearTimeout(this.timer)
      this.timer = setTimeout(() => { if (this.connection.status === 'ready') this.subscribeAll() }, REFUSED_AGAIN_MS)
      this.timer.unref()
    })
  }

  /** The connection failed or closed (or Redis refused the subscription): every channel is deaf until subscribed again. */
  private unsubscribed (reason?: string, refused = false): void {
    if (this.closed) return
    for (const channel of this.subscribed) this.channels.get(channel)?.onListening?.(false)
    this.subscribed.clear()
    // One line per time without the subscription, naming its first cause (the line that ends it repeats it).
    if (this.lost) return
    this.lost = { since: this.clock.now(), reason: reason ?? 'connection closed' }
    const fields = { channels: [...this.channels.keys()], reason: this.lost.reason }
    const msg = 'not subscribed to store broadcasts; subscribing as soon as the store accepts it (until then this instance caches no session)'
    if (refused) this.log.warn(fields, msg)
    else this.log.info(fields, msg)
  }

  /**
   * Stops listening: QUIT, waiting at most `timeoutMs` for Redis (a frozen one never answers, and a
   * subscriber connection has no command timeout), then the connection is dropped.
   */
  async close (timeoutMs: number): Promise<void> {
    this.closed = true
    clearTimeout(this.timer)
    await closeWithin(this.connection, timeoutMs)
  }
}

/**
 * Closes a connection within `timeoutMs`, whatever its state: QUIT on one that is ready (so Redis
 * sees it leave), waited for at most `timeoutMs`; any other (connecting, waiting to reconnect,
 * stuck in its ready check) is dropped at once, as is one whose QUIT failed or was not answered.
 */
export async function closeWithin (connection: Redis | Cluster, timeoutMs: number): Promise<void> {
  if (connection.status === 'end') return
  if (connection.status === 'ready') {
    let timer: NodeJS.Timeout | undefined
    const late = new Promise<void>((resolve) => { timer = setTimeout(resolve, timeoutMs) })
    await Promise.race([connection.quit().then(() => {}, () => {}), late])
    clearTimeout(timer)
  }
  // (Read again: the QUIT may have ended it meanwhile.)
  const status: string = connection.status
  if (status !== 'end') connection.disconnect()
}
