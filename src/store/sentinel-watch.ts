// The sentinels' `+switch-master`, heard by the store itself: one subscribed connection to every
// configured sentinel, reconnecting like the store's other connections, each with an outage log of
// its own (one warn line when a sentinel is down, naming it and the cause; one info line when it is
// back), so that a sentinel that is down is never a line outside the JSON log. On the announcement
// of a new master for our group, `onSwitch` drops the store's connections to the old one.
import { Redis, ReplyError, type RedisOptions } from 'ioredis'
import type { Logger } from '../ops/logger.js'
import type { Clock } from '../ops/clock.js'
import { causeOf, OutageLog, type Hysteresis } from './outage-log.js'

const CHANNEL = '+switch-master'

/** A `+switch-master` message: `<name> <old-ip> <old-port> <new-ip> <new-port>`. */
export interface MasterSwitch {
  from: string
  to: string
}

export interface SentinelWatchOptions {
  /** The master group's name (store.sentinel.name): announcements for other groups are ignored. */
  name: string
  sentinels: Array<{ host: string, port: number }>
  /** Credentials, TLS and timeouts of a connection to a sentinel (as the store's own ones to it). */
  connection: RedisOptions
  log: Logger
  hysteresis: Hysteresis
  clock: Clock
  onSwitch: (change: MasterSwitch) => void
}

export class SentinelWatch {
  private readonly connections: Redis[]
  private readonly outages: OutageLog[] = []
  /** The last announcement acted on: every sentinel announces the same switch once. */
  private last = ''

  constructor (private readonly options: SentinelWatchOptions) {
    this.connections = options.sentinels.map((address) => this.watch(address))
  }

  private watch ({ host, port }: { host: string, port: number }): Redis {
    const { log, hysteresis, clock } = this.options
    const outage = new OutageLog(log, { sentinel: `${host}:${port}` }, hysteresis, clock)
    this.outages.push(outage)
    const redis = new Redis({
      ...this.options.connection,
      host,
      port,
      enableOfflineQueue: false,
      enableReadyCheck: false,
      // Subscribed here on each connection instead: a SUBSCRIBE refused once (a wrong password,
      // NOPERM) would otherwise never be sent again.
      autoResubscribe: false,
      commandTimeout: undefined,
    })
    redis.on('error', (error: Error) => outage.failed(causeOf(error)))
    redis.on('close', () => outage.connectionClosed())
    // ioredis may say 'ready' on a connection whose AUTH failed (without a ready check): only an
    // answered SUBSCRIBE counts as the sentinel being there. A refusal from the sentinel (NOPERM)
    // is a cause; a connection already closing is not (its own error said why).
    redis.on('ready', () => {
      redis.subscribe(CHANNEL).then(() => outage.succeeded(), (error: unknown) => outage.failed(error instanceof ReplyError ? causeOf(error) : undefined))
    })
    redis.on('message', (channel: string, message: string) => {
      if (channel === CHANNEL) this.announced(message)
    })
    return redis
  }

  private announced (message: string): void {
    const [name, oldHost, oldPort, newHost, newPort] = message.split(' ')
    if (name !== this.options.name || message === this.last) return
    this.last = message
    this.options.onSwitch({ from: `${oldHost ?? ''}:${oldPort ?? ''}`, to: `${newHost ?? ''}:${newPort ?? ''}` })
  }

  close (): void {
    for (const outage of this.outages) outage.close()
    for (const redis of this.connections) redis.disconnect()
  }
}
