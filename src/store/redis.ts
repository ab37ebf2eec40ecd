// ioredis implementation of every store role: one Redis command per method, or one Lua script on
// one key where a method must compare and then act (releasing a lock, a conditional write, the sets). Redis errors become `session_store_unavailable` here,
// once; an outage is logged once when it starts and once when it ends (per node on a Redis Cluster),
// never once per retry or per failed request (outage-log.ts), naming the connection's last real
// error; a command Redis answers with an error (OOM, READONLY, NOPERM) is a refusal, logged apart
// (command-refusal-log.ts). Writes that must be on a replica before they count (store.waitForReplica) go
// with a WAIT on a connection of their own (replica-wait.ts).
import { Redis, Cluster, ReplyError } from 'ioredis'
import type { Logger } from '../ops/logger.js'
import type { StoreConfig } from '../config/types.js'
import { GatewayError } from '../errors.js'
import { systemClock, type Clock } from '../ops/clock.js'
import { causeOf, DEFAULT_HYSTERESIS, OutageLog, type Hysteresis } from './outage-log.js'
import { CommandRefusalLog, commandRefusalReason } from './command-refusal-log.js'
import { closeWithin, RedisSubscription, type ChannelListener } from './redis-subscription.js'
import { SentinelWatch, type MasterSwitch } from './sentinel-watch.js'
import { lockOwner, ReplicaUnacknowledged, StoreRefusal, type LockHandle, type CommandRefusalReason, type SessionStore, type StoreHealth, type WriteOptions } from './store.js'
import { ReplicaWait } from './replica-wait.js'
import { connectBoundMs, connected, connectionCause, createClient, hostPort, nodeKey, noConnection, sentinelConnection, storeName, SUBSCRIBER } from './redis-connection.js'
import { defineScripts, REPLACE } from './redis-scripts.js'
import { answeredWithin } from './deadline.js'

/** The same bytes as a Buffer (ioredis sends a Buffer argument as it is, other views as text). */
function asBuffer (bytes: Uint8Array): Buffer {
  return Buffer.isBuffer(bytes) ? bytes : Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength)
}

/** How long an ending no replica has acknowledged is known as such ({@link RedisStore.unsettled}) at least: longer than anyone tries again. */
const UNSETTLED_MS = 3_600_000

/**
 * The key that marks `key`'s ending unsettled, under `keyPrefix` as ioredis adds it: a hash tag of
 * the key's whole name, so that on a Cluster it shares `key`'s slot, which the one script that
 * ends both (END_MARKED) needs. The keys ended have no braces; a prefix has none, or a tag of its own first, which then
 * decides both slots (store.keyPrefix's pattern).
 */
export function unsettledMark (keyPrefix: string, key: string): string {
  return `{${keyPrefix}${key}}:unsettled`
}

export interface RedisStoreOptions {
  /** Told of every failed command (for the store-errors metric), with the reason when Redis refused it. */
  onCommandError?: (refusal?: CommandRefusalReason) => void
  /** How long failures (and then answers) must persist before the outage lines are logged. */
  hysteresis?: Hysteresis
  /** The outage lines' clock (how long an outage lasted) and the refusal lines' window. Expiry itself is Redis's own. */
  clock?: Clock
  /**
   * How long a key an ending deleted could still be on a replica that has not had the delete: its
   * copy there expires by then (session.ttl, as every read renews a session for that long). An
   * ending's unsettled mark lives that long, an hour at least (an attacker's finding: a retry
   * after an outage longer than the mark's hour answered done while the replica still held it).
   */
  endedLiveMs?: number
}

export class RedisStore implements SessionStore {
  /** The connection, for a library that keeps its own keys beside the sessions (the sign-in rate limiter). */
  readonly redis: Redis | Cluster
  /** A second connection in subscriber mode, made on the first subscribe. */
  private subscription: RedisSubscription | undefined
  /** store.keyPrefix: ioredis puts it before every key; the channels and the hash tags of unsettled marks say it themselves. */
  private readonly keyPrefix: string
  /** store.timeout: also how long closing waits for each connection. */
  private readonly timeoutMs: number
  /** How long an unsettled mark lives (RedisStoreOptions.endedLiveMs). */
  private readonly unsettledMs: number
  private readonly name: string
  /** The whole store, as its commands see it. */
  private readonly outage: OutageLog
  /** Each node of a Redis Cluster, as its own connection sees it. */
  private readonly nodes = new Map<string, OutageLog>()
  /** Commands Redis answered with an error: the store is reachable but refuses them. */
  private readonly refusals: CommandRefusalLog
  /** The Sentinel form: each sentinel's `+switch-master`. */
  private readonly sentinels: SentinelWatch | undefined
  /** store.waitForReplica: the writes that count only once a replica has them, on their own connection. */
  private readonly replicaWait: ReplicaWait | undefined

  private readonly onCommandError: (refusal?: CommandRefusalReason) => void
  private readonly hysteresis: Hysteresis
  private readonly clock: Clock

  constructor (config: StoreConfig, private readonly log: Logger, options: RedisStoreOptions = {}) {
    this.onCommandError = options.onCommandError ?? (() => {})
    // Failures with no cause yet wait for the connection attempt that ends with one (outage-log.ts).
    this.hysteresis = { causeWaitMs: connectBoundMs(config.timeoutMs), ...(options.hysteresis ?? DEFAULT_HYSTERESIS) }
    this.clock = options.clock ?? systemClock
    this.redis = createClient(config)
    defineScripts(this.redis)
    this.keyPrefix = config.keyPrefix
    this.timeoutMs = config.timeoutMs
    this.unsettledMs = Math.max(UNSETTLED_MS, options.endedLiveMs ?? 0)
    this.name = storeName(config)
    this.outage = new OutageLog(log, { store: this.name }, this.hysteresis, this.clock)
    this.refusals = new CommandRefusalLog(log, { store: this.name }, this.clock)
    // ioredis needs an error listener, or it reports each failed reconnection on stderr. The error
    // event carries the cause (ECONNREFUSED, WRONGPASS, NOAUTH, a certificate that does not verify);
    // the close that follows it carries none, so it keeps the cause the outage log already has.
    this.redis.on('error', (error: Error) => this.outage.failed(connectionCause(error)))
    this.redis.on('ready', () => this.outage.succeeded())
    if (this.redis instanceof Cluster) this.watchNodes(this.redis)
    else this.redis.on('close', () => this.outage.connectionClosed())
    if (config.waitForReplica > 0) this.replicaWait = this.replicaConnection(config.waitForReplica)
    if (config.sentinel) {
      this.sentinels = new SentinelWatch({
        name: config.sentinel.name,
        sentinels: config.sentinel.nodes.map(hostPort),
        connection: sentinelConnection(config.sentinel, config.timeoutMs),
        log,
        hysteresis: this.hysteresis,
        clock: this.clock,
        onSwitch: (change) => this.switched(change),
      })
    }
  }

  /**
   * The connection of the writes that wait for a replica: the store's own duplicated (the same
   * node or sentinels, credentials, timeouts and key prefix). Its connection errors are the store's
   * own connection's too, which logs them; its commands' failures are logged as the store's.
   */
  private replicaConnection (replicas: number): ReplicaWait {
    // Its commands are bounded by ioredis at store.timeout (the WAIT at twice that): replica-wait.ts
    // tells a write queued behind a WAIT by that timeout.
    const commandTimeout = this.timeoutMs
    const connection = this.redis instanceof Cluster
      ? this.redis.duplicate(undefined, { redisOptions: { ...this.redis.options.redisOptions, commandTimeout } })
      : this.redis.duplicate({ commandTimeout })
    connection.on('error', () => {})
    return new ReplicaWait(connection, replicas, this.timeoutMs, new OutageLog(this.log, { replicasOf: this.name }, this.hysteresis, this.clock))
  }

  /**
   * The sentinels promoted another node: every connection is dropped (at most store.timeout for
   * the old master to close its side) and reconnect, asking a sentinel for the master again. Only a
   * connection made to a node ('connect', 'ready'): one not yet made asks a sentinel anyway, and
   * one dropped while ioredis's Sentinel connector awaits a sentinel's answer would end for good
   * (ioredis sets it to 'end' and never reconnects it).
   */
  private switched (change: MasterSwitch): void {
    this.log.info(change, 'sentinels announced a new master; reconnecting to it')
    for (const connection of [this.redis, this.subscription?.connection, this.replicaWait?.connection]) {
      if (connection instanceof Redis && (connection.status === 'ready' || connection.status === 'connect')) connection.disconnect(true)
    }
  }

  /** One outage log per cluster node, fed by that node's own connection. */
  private watchNodes (cluster: Cluster): void {
    cluster.on('node error', (error: unknown, key: string) => this.node(key).failed(causeOf(error)))
    cluster.on('+node', (redis: Redis) => {
      const key = nodeKey(redis)
      this.node(key)
      redis.on('ready', () => this.node(key).succeeded())
    })
    // After a slot refresh the pool holds the cluster as it is now: a node no longer in it (a dead
    // master whose replica took over) will not come back as such, so its outage ends here.
    cluster.on('refresh', () => {
      const current = new Set(cluster.nodes('all').map(nodeKey))
      for (const [key, outage] of this.nodes) {
        if (current.has(key)) continue
        if (outage.isDown) this.log.info({ node: key }, 'session store node left the cluster; other nodes serve its slots')
        outage.close()
        this.nodes.delete(key)
      }
    })
  }

  private node (key: string): OutageLog {
    let outage = this.nodes.get(key)
    if (!outage) this.nodes.set(key, outage = new OutageLog(this.log, { node: key }, this.hysteresis, this.clock))
    return outage
  }

  /** Waits (bounded) for the first connection, so the first requests after start do not fail. */
  async ready (timeoutMs: number): Promise<boolean> {
    const connections = [this.redis, ...(this.replicaWait ? [this.replicaWait.connection] : [])]
    return (await Promise.all(connections.map((connection) => connected(connection, timeoutMs)))).every(Boolean)
  }

  /**
   * One command, ended at store.timeout (deadline.ts: judged after the sockets are read), or at the
   * bounds of its own when `deadline` is false (a write that waits for a replica).
   */
  private async run<T> (command: () => Promise<T>, deadline = true): Promise<T> {
    // On a cluster a command tells of one node, unnamed: the nodes' own connections tell their
    // state, and the cluster's connection events the whole store's.
    const outage = this.redis instanceof Cluster ? undefined : this.outage
    try {
      const result = await (deadline ? answeredWithin(command(), this.timeoutMs) : command())
      outage?.succeeded()
      return result
    } catch (error) {
      if (error instanceof ReplyError) throw this.refused(error as Error)
      this.onCommandError()
      // Written, but maybe on the master alone: the store answers (replica-wait.ts logs it).
      if (error instanceof ReplicaUnacknowledged) throw new GatewayError('session_store_unavailable', 'No replica of the session store acknowledged the write in time.', { cause: error })
      // A command refused because there is no connection tells nothing new: the connection's own
      // error said why. A timeout on a connection that is up is a cause.
      outage?.failed(this.redis.status === 'ready' && !noConnection(error) ? causeOf(error) : undefined)
      throw new GatewayError('session_store_unavailable', 'The session store is unreachable.', { cause: error })
    }
  }

  /**
   * Redis answered, with an error: not an outage of the connection (reads may work), so logged
   * apart, by reason. Only Redis's error text is kept; ioredis's error also holds the command's
   * arguments (keys, sealed values), which never go further than here.
   */
  private refused (error: Error): GatewayError {
    const reason = commandRefusalReason(error.message)
    this.onCommandError(reason)
    this.refusals.refused(reason, error.message)
    return new GatewayError('session_store_unavailable', 'The session store refused the request.', { cause: new StoreRefusal(reason, error.message) })
  }

  get (key: string) { return this.run(() => this.redis.get(key)) }
  getBytes (key: string) { return this.run(() => this.redis.getBuffer(key)) }
  getAndTouchBytes (key: string, ttlMs: number) { return this.run(() => this.redis.getexBuffer(key, 'PX', ttlMs)) }

  async remainingMs (key: string) {
    // PTTL: -2 for a key that is absent, -1 for one without an expiry.
    const ms = await this.run(() => this.redis.pttl(key))
    return ms === -2 ? null : ms === -1 ? Infinity : ms
  }

  async capExpiry (key: string, ttlMs: number) { await this.run(() => this.redis.capExpiry(key, ttlMs)) }

  async set (key: string, value: string | Uint8Array, ttlMs: number, options: WriteOptions = {}) {
    const bytes = typeof value === 'string' ? value : asBuffer(value)
    const replicas = options.replicated === true ? this.replicaWait : undefined
    if (replicas) await this.run(() => replicas.write((pipeline) => pipeline.set(key, bytes, 'PX', ttlMs)), false)
    else await this.run(() => this.redis.set(key, Buffer.isBuffer(value) || typeof value === 'string' ? value : Buffer.from(value), 'PX', ttlMs))
  }

  async replace (key: string, expected: Uint8Array, value: string | Uint8Array, ttlMs: number, options: WriteOptions = {}) {
    const bytes = typeof value === 'string' ? value : asBuffer(value)
    const replicas = options.replicated === true ? this.replicaWait : undefined
    if (!replicas) return (await this.run(() => this.redis.replaceValue(key, asBuffer(expected), bytes, ttlMs))) === 1
    // EVAL, not the script's EVALSHA: a NOSCRIPT answer would send it again after the WAIT.
    return (await this.run(() => replicas.write<number>((pipeline) => pipeline.eval(REPLACE, 1, key, asBuffer(expected), bytes, ttlMs)), false)) === 1
  }

  take (key: string) { return this.run(() => this.redis.getdel(key)) }
  async delete (key: string) { await this.run(() => this.redis.del(key)) }

  async end (key: string) {
    if (this.replicaWait === undefined) return await this.run(() => this.redis.del(key)) > 0
    // One script: both or neither (one slot: the mark's hash tag is the key's whole name).
    return await this.run(() => this.redis.endMarked(key, this.unsettledKey(key), this.unsettledMs)) === 1
  }

  async settled (key: string) {
    const replicas = this.replicaWait
    if (replicas === undefined) return
    // The key deleted again where the wait is sent: after a Sentinel switch between the ending's
    // delete (the store's connection, on the old master) and this wait (its own connection, on the
    // new one), the new master may hold the key the old one deleted (an attacker's reading). Then
    // the mark, its own key in `key`'s slot (a hash tag of its whole name, prefix included): a
    // write that always replicates, so the WAIT counts it and the node's writes before it. Kept
    // while no replica has it (unsettled).
    const marker = this.unsettledKey(key)
    await this.run(() => replicas.write((pipeline) => pipeline.del(key).set(marker, '1', 'PX', this.unsettledMs)), false)
    await this.delete(marker).catch(() => {})
  }

  async unsettled (key: string) {
    return this.replicaWait !== undefined && await this.get(this.unsettledKey(key)) !== null
  }

  private unsettledKey (key: string): string {
    return unsettledMark(this.keyPrefix, key)
  }

  async claim (key: string, value: string, ttlMs: number) {
    return (await this.run(() => this.redis.set(key, value, 'PX', ttlMs, 'NX'))) === 'OK'
  }

  addMember (key: string, member: string, ttlMs: number) { return this.run(() => this.redis.addMember(key, member, ttlMs)) }
  async extend (key: string, ttlMs: number) { await this.run(() => this.redis.growExpiry(key, ttlMs)) }
  members (key: string) { return this.run(() => this.redis.smembers(key)) }
  async removeMember (key: string, member: string) { await this.run(() => this.redis.srem(key, member)) }
  addRanked (key: string, member: Buffer, score: number, ttlMs: number, max: number, exempt?: Buffer) { return this.run(() => this.redis.addRankedBuffer(key, member, score, ttlMs, max, exempt ?? Buffer.alloc(0))) }
  async addRankedIfRoom (key: string, member: Buffer, score: number, ttlMs: number, max: number) { return (await this.run(() => this.redis.addRankedIfRoom(key, member, score, ttlMs, max))) === 1 }
  rankedMembers (key: string) { return this.run(() => this.redis.zrangeBuffer(key, 0, -1)) }
  async removeRanked (key: string, member: Buffer) { await this.run(() => this.redis.zrem(key, member)) }

  async acquire (key: string, ttlMs: number): Promise<LockHandle | null> {
    const owner = lockOwner()
    try {
      return await this.claim(key, owner, ttlMs) ? { key, owner } : null
    } catch (error) {
      // The claim may have run, its reply lost (a late reply): let go of it, or the lock stays held
      // by nobody until ttlMs, and every request waiting on it with it (a tester's finding: a
      // refresh's retry waited the provider's timeout plus 5 s).
      await this.release({ key, owner }).catch(() => false)
      throw error
    }
  }

  async release ({ key, owner }: LockHandle): Promise<boolean> {
    return (await this.run(() => this.redis.releaseLock(key, owner))) === 1
  }

  async publish (channel: string, message: string): Promise<void> {
    await this.redis.publish(this.keyPrefix + channel, message).catch(() => {})
  }

  async subscribe (channel: string, onMessage: (message: string) => void, onListening?: ChannelListener['onListening']): Promise<void> {
    if (!this.subscription) {
      const subscriber = this.redis instanceof Cluster
        ? this.redis.duplicate(undefined, { redisOptions: { ...this.redis.options.redisOptions, ...SUBSCRIBER } })
        : this.redis.duplicate(SUBSCRIBER)
      this.subscription = new RedisSubscription(subscriber, this.log, this.clock)
    }
    // Not awaited: with Redis down at start this would wait for it; subscribed once connected.
    this.subscription.add(this.keyPrefix + channel, { onMessage, onListening })
  }

  async ping () { await this.run(() => this.redis.ping()) }

  /**
   * A single Redis is up or down. A cluster is asked node by node (every master ioredis knows):
   * down when none answers, degraded when some do not or are logged unreachable.
   */
  async health (): Promise<StoreHealth> {
    const cluster = this.redis
    if (!(cluster instanceof Cluster)) {
      return await this.ping().then(() => ({ state: 'up' as const, unreachable: [] }), () => ({ state: 'down' as const, unreachable: [this.name] }))
    }
    const masters = cluster.nodes('master')
    const answers = await Promise.all(masters.map(async (redis) => {
      const key = nodeKey(redis)
      try {
        await answeredWithin(redis.ping(), this.timeoutMs)
        this.node(key).succeeded()
        return { key, ok: true }
      } catch (error) {
        this.node(key).failed(causeOf(error))
        return { key, ok: false }
      }
    }))
    const unreachable = new Set([...answers.filter((a) => !a.ok).map((a) => a.key), ...[...this.nodes].filter(([, o]) => o.isDown).map(([key]) => key)])
    const answered = answers.filter((a) => a.ok).length
    return { state: answered === 0 ? 'down' : unreachable.size > 0 ? 'degraded' : 'up', unreachable: [...unreachable].sort() }
  }

  async close (): Promise<void> {
    this.outage.close()
    this.sentinels?.close()
    this.replicaWait?.close()
    for (const outage of this.nodes.values()) outage.close()
    // Each connection within store.timeout, whatever its state (frozen, never connected).
    await Promise.all([
      closeWithin(this.redis, this.timeoutMs),
      this.subscription?.close(this.timeoutMs),
      this.replicaWait && closeWithin(this.replicaWait.connection, this.timeoutMs),
    ])
  }
}
