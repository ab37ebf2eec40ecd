// How the store connects to Redis: one URL, a Cluster or a Sentinel group, with the credentials,
// TLS, timeouts and reconnection of store config; the connection a sentinel is asked on; and what
// a connection's errors and names say (the outage lines' cause and store name).
import { Redis, Cluster, type RedisOptions } from 'ioredis'
import type { SentinelConfig, StoreConfig } from '../config/types.js'
import { causeOf } from './outage-log.js'

/** The longest ioredis waits between two reconnection attempts. */
export const MAX_RECONNECT_DELAY_MS = 1000

/** How long ioredis waits between reconnection attempts. */
const retryStrategy = (attempt: number) => Math.min(100 * attempt, MAX_RECONNECT_DELAY_MS)

/** How long a connection attempt may take before it fails with ETIMEDOUT (ioredis's connectTimeout): twice store.timeout. */
export function connectBoundMs (timeoutMs: number): number {
  return 2 * timeoutMs
}

/**
 * Short timeouts (store.timeout, 500 ms by default; connecting twice that) and no offline queue:
 * during an outage a request fails fast instead of queueing. Nor is a command sent again after a
 * reconnection (ioredis's autoResendUnfulfilledCommands): one that timed out was answered 503, and
 * must not run later (a lock claimed for nothing, a sign-in state consumed after its request
 * failed); one still unanswered when the connection closed ends at its deadline.
 *
 * The store's own commands end at store.timeout, judged after the sockets are read (deadline.ts).
 * ioredis's commandTimeout, which judges before, bounds what the store does not run itself on the
 * connection (the sign-in rate limiter's counter, a publish, ioredis's own ready check), at twice
 * that: set to store.timeout, it would fail a store command whose reply is waiting before the
 * store's own deadline could see it. So a process kept from the CPU for up to twice store.timeout
 * still uses a reply that came in time; one kept away longer fails the command as before.
 */
function clientOptions (config: StoreConfig) {
  return {
    enableOfflineQueue: false,
    autoResendUnfulfilledCommands: false,
    connectTimeout: connectBoundMs(config.timeoutMs),
    commandTimeout: 2 * config.timeoutMs,
    // A connection dropped (closing the store, a Sentinel switch) waits no longer than a command
    // for the other side to close its end: a frozen Redis never does.
    disconnectTimeout: config.timeoutMs,
    maxRetriesPerRequest: 1,
    retryStrategy,
  } satisfies RedisOptions
}

export function hostPort (address: string): { host: string, port: number } {
  const url = new URL(address.includes('://') ? address : `redis://${address}`)
  return { host: url.hostname, port: Number(url.port || 6379) }
}

/**
 * The Sentinel form. ioredis asks a sentinel for the master, then keeps its connection to it until
 * that connection fails; a frozen master (SIGSTOP, a partition) never fails it: commands time out,
 * the connection stays, and the gateway would keep answering 503 after the sentinels promoted a
 * replica, then write to the old master once it woke, until demoted (writes its resync drops).
 * So the store listens to the sentinels' `+switch-master` (sentinel-watch.ts) and drops the
 * connection then, and that drop does not wait more than one command timeout for the old master to
 * close its side (ioredis's disconnectTimeout, 2 s by default): a frozen one never does. A
 * sentinel's answer is waited for no longer than a command either.
 */
function sentinelOptions (sentinel: SentinelConfig, timeoutMs: number) {
  return {
    name: sentinel.name,
    sentinels: sentinel.nodes.map(hostPort),
    username: sentinel.username,
    password: sentinel.password,
    sentinelUsername: sentinel.sentinelUsername,
    sentinelPassword: sentinel.sentinelPassword,
    // TLS as for rediss://: Node's CAs, NODE_EXTRA_CA_CERTS included; to the sentinels and to the
    // master they name.
    ...(sentinel.tls === true ? { tls: {}, sentinelTLS: {}, enableTLSForSentinelMode: true } : {}),
    disconnectTimeout: timeoutMs,
    sentinelCommandTimeout: timeoutMs,
  } satisfies RedisOptions
}

/** A connection to one sentinel, as ioredis's own to ask for the master: credentials, TLS, timeouts. */
export function sentinelConnection (sentinel: SentinelConfig, timeoutMs: number): RedisOptions {
  const options = sentinelOptions(sentinel, timeoutMs)
  return {
    username: options.sentinelUsername,
    password: options.sentinelPassword,
    tls: 'sentinelTLS' in options ? options.sentinelTLS : undefined,
    connectTimeout: connectBoundMs(timeoutMs),
    disconnectTimeout: timeoutMs,
    retryStrategy,
  }
}

/**
 * The subscriber connection's own options: no command timeout (a SUBSCRIBE waits for its answer),
 * and subscribed by redis-subscription.ts on each connection, not by ioredis from its offline queue
 * (emptied after maxRetriesPerRequest failed attempts, so a start with Redis unreachable never
 * subscribed) nor by its autoResubscribe (which forgets a SUBSCRIBE refused or never answered).
 */
export const SUBSCRIBER = { enableOfflineQueue: false, commandTimeout: undefined, autoResubscribe: false } satisfies RedisOptions

export function createClient (config: StoreConfig): Redis | Cluster {
  const keyPrefix = config.keyPrefix
  if (config.cluster) {
    const first = new URL(config.cluster[0]!)
    return new Cluster(config.cluster.map(hostPort), {
      keyPrefix,
      enableOfflineQueue: false,
      clusterRetryStrategy: retryStrategy,
      // ioredis re-reads the slot map only after some errors ("Connection is closed.", MOVED); a
      // command that times out on a dead master triggers none, so a promoted replica could go
      // unnoticed. Re-reading it every 2 s bounds that (one CLUSTER SLOTS per 2 s).
      slotsRefreshInterval: 2000,
      redisOptions: {
        ...clientOptions(config),
        username: decodeURIComponent(first.username) || undefined,
        password: decodeURIComponent(first.password) || undefined,
        tls: first.protocol === 'rediss:' ? {} : undefined,
      },
    })
  }
  if (config.sentinel) return new Redis({ ...clientOptions(config), ...sentinelOptions(config.sentinel, config.timeoutMs), keyPrefix })
  return new Redis(config.url ?? 'redis://127.0.0.1:6379/0', { ...clientOptions(config), keyPrefix })
}

/**
 * A connection error's cause, none for one that has none: reconnecting, ioredis's Sentinel
 * connector reads its list of sentinels from where it stopped, past the one that answered last,
 * and may find it at its end, saying "All sentinels are unreachable. Retrying from scratch after
 * 10ms." without having asked one. When it did ask them all, the text ends with "Last error: ...".
 */
export function connectionCause (error: Error): string | undefined {
  return /^All sentinels are unreachable\.[^:]*$/.test(error.message) || noConnection(error) ? undefined : causeOf(error)
}

/**
 * ioredis's own words for a command that found no connection to go on (it is closing, closed, or
 * not made yet): a consequence of the connection's failure, whose error event names the cause.
 */
const NO_CONNECTION = [/^Stream isn't writeable/, /^Connection is closed\./, /^Reached the max retries per request limit/]
export function noConnection (error: unknown): boolean {
  return error instanceof Error && NO_CONNECTION.some((pattern) => pattern.test(error.message))
}

/** What the outage lines call a store: its address without credentials, or the sentinel group. */
export function storeName (config: StoreConfig): string {
  if (config.cluster) return 'cluster'
  if (config.sentinel) return `sentinel:${config.sentinel.name}`
  const { host, port } = hostPort(config.url ?? 'redis://127.0.0.1:6379')
  return `${host}:${port}`
}

/** A cluster node's name in ioredis's pool and in the outage lines. */
export function nodeKey (node: Redis): string {
  return `${node.options.host ?? ''}:${node.options.port ?? ''}`
}

/** Resolves true once `connection` is ready, false after `timeoutMs` without. */
export async function connected (connection: Redis | Cluster, timeoutMs: number): Promise<boolean> {
  if (connection.status === 'ready') return true
  return await new Promise((resolve) => {
    const done = (ready: boolean) => {
      clearTimeout(timer)
      connection.off('ready', onReady)
      resolve(ready)
    }
    const onReady = () => done(true)
    const timer = setTimeout(() => done(false), timeoutMs)
    connection.once('ready', onReady)
  })
}
