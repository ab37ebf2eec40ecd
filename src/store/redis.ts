// ioredis implementation of SessionStore: one Redis command per method. Redis errors become
// `session_store_unavailable` here, once; an outage is logged once, not once per retry.
import { Redis, Cluster, type RedisOptions } from 'ioredis'
import type { FastifyBaseLogger } from 'fastify'
import type { StoreConfig } from '../config.js'
import { GatewayError } from '../errors.js'
import type { SessionStore } from './store.js'

/** Short timeouts and no offline queue: during an outage a request fails fast instead of queueing. */
const CLIENT_OPTIONS = {
  enableOfflineQueue: false,
  connectTimeout: 1000,
  commandTimeout: 500,
  maxRetriesPerRequest: 1,
  retryStrategy: (attempt: number) => Math.min(100 * attempt, 1000),
} satisfies RedisOptions

function hostPort (address: string): { host: string, port: number } {
  const url = new URL(address.includes('://') ? address : `redis://${address}`)
  return { host: url.hostname, port: Number(url.port || 6379) }
}

function createClient (config: StoreConfig): Redis | Cluster {
  const keyPrefix = config.keyPrefix
  if (config.cluster) {
    const first = new URL(config.cluster[0]!)
    return new Cluster(config.cluster.map(hostPort), {
      keyPrefix,
      enableOfflineQueue: false,
      clusterRetryStrategy: CLIENT_OPTIONS.retryStrategy,
      redisOptions: {
        ...CLIENT_OPTIONS,
        username: decodeURIComponent(first.username) || undefined,
        password: decodeURIComponent(first.password) || undefined,
        tls: first.protocol === 'rediss:' ? {} : undefined,
      },
    })
  }
  if (config.sentinel) {
    return new Redis({ ...CLIENT_OPTIONS, keyPrefix, name: config.sentinel.name, sentinels: config.sentinel.nodes.map(hostPort) })
  }
  return new Redis(config.url ?? 'redis://127.0.0.1:6379/0', { ...CLIENT_OPTIONS, keyPrefix })
}

export class RedisStore implements SessionStore {
  private readonly client: Redis | Cluster
  /** A second connection in subscriber mode, made on the first subscribe. */
  private subscriber: Redis | Cluster | undefined
  private readonly listeners = new Map<string, (message: string) => void>()
  private readonly channelPrefix: string
  private down = false

  /** `onCommandError` is told of every failed command (for the store-errors metric). */
  constructor (config: StoreConfig, private readonly log: FastifyBaseLogger, private readonly onCommandError: () => void = () => {}) {
    this.client = createClient(config)
    this.channelPrefix = config.keyPrefix
    this.client.on('error', (error: Error) => this.markDown(error))
    this.client.on('ready', () => this.markUp())
  }

  /** An outage is logged once, when it starts, and once when it ends. */
  private markDown (error: unknown): void {
    if (this.down) return
    this.down = true
    this.log.warn({ reason: error instanceof Error ? error.message : String(error) }, 'session store unreachable; requests that need it get 503 until it is back')
  }

  private markUp (): void {
    if (!this.down) return
    this.down = false
    this.log.info('session store reachable again')
  }

  /** Waits (bounded) for the first connection, so the first requests after start do not fail. */
  async waitUntilReady (timeoutMs: number): Promise<boolean> {
    if (this.client.status === 'ready') return true
    return await new Promise((resolve) => {
      const done = (ready: boolean) => {
        clearTimeout(timer)
        this.client.off('ready', onReady)
        resolve(ready)
      }
      const onReady = () => done(true)
      const timer = setTimeout(() => done(false), timeoutMs)
      this.client.once('ready', onReady)
    })
  }

  private async run<T> (command: () => Promise<T>): Promise<T> {
    try {
      const result = await command()
      this.markUp()
      return result
    } catch (error) {
      this.onCommandError()
      this.markDown(error)
      throw new GatewayError('session_store_unavailable', 'The session store is unreachable.', { cause: error })
    }
  }

  get (key: string) { return this.run(() => this.client.get(key)) }
  getAndTouch (key: string, ttlMs: number) { return this.run(() => this.client.getex(key, 'PX', ttlMs)) }
  async set (key: string, value: string, ttlMs: number) { await this.run(() => this.client.set(key, value, 'PX', ttlMs)) }
  take (key: string) { return this.run(() => this.client.getdel(key)) }
  async delete (key: string) { await this.run(() => this.client.del(key)) }
  async claim (key: string, value: string, ttlMs: number) {
    return (await this.run(() => this.client.set(key, value, 'PX', ttlMs, 'NX'))) === 'OK'
  }

  async publish (channel: string, message: string): Promise<void> {
    await this.client.publish(this.channelPrefix + channel, message).catch(() => {})
  }

  async subscribe (channel: string, onMessage: (message: string) => void): Promise<void> {
    if (!this.subscriber) {
      // Queued while disconnected, and re-subscribed by ioredis after each reconnect.
      const subscriber = this.client instanceof Cluster
        ? this.client.duplicate(undefined, { enableOfflineQueue: true, redisOptions: { ...this.client.options.redisOptions, enableOfflineQueue: true, commandTimeout: undefined } })
        : this.client.duplicate({ enableOfflineQueue: true, commandTimeout: undefined })
      subscriber.on('error', () => {})
      subscriber.on('message', (name: string, message: string) => this.listeners.get(name)?.(message))
      this.subscriber = subscriber
    }
    this.listeners.set(this.channelPrefix + channel, onMessage)
    // Not awaited: with Redis down at start this would wait for it; ioredis subscribes once connected.
    this.subscriber.subscribe(this.channelPrefix + channel).catch((error: unknown) => {
      this.log.warn({ reason: error instanceof Error ? error.message : String(error) }, 'could not subscribe to session invalidations yet; ioredis retries on reconnect')
    })
  }

  async ping () { await this.run(() => this.client.ping()) }

  async close (): Promise<void> {
    await Promise.all([this.client, this.subscriber].map(async (connection) => {
      if (!connection) return
      try {
        await connection.quit()
      } catch {
        connection.disconnect()
      }
    }))
  }
}
