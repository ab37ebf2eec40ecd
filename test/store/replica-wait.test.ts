// store.waitForReplica (reliability round 3): a write the gateway counts on (a new session, a
// refreshed one) is followed by WAIT 1 <store.timeout> on the connection that took it, and counts
// only when a replica acknowledged it. Its default per store form; with it off no WAIT is sent (the
// server's own command counts say so); with it on, a Redis without a replica refuses the write with
// session_store_unavailable (ReplicaUnacknowledged), while writes that did not ask never wait; on
// a master with a replica the acknowledged write is on the replica the moment it counts.
import { Redis } from 'ioredis'
import pino from 'pino'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { parseConfig } from '../../src/config/config.js'
import type { StoreConfig } from '../../src/config/types.js'
import { GatewayError } from '../../src/errors.js'
import { emptyRecord, withSignIn, withTokens } from '../../src/session/record.js'
import { Sealer } from '../../src/session/seal.js'
import { Sessions } from '../../src/session/session.js'
import fc from 'fast-check'
import { RedisStore, unsettledMark } from '../../src/store/redis.js'
import { ReplicaUnacknowledged, storeKeys, unacknowledgedByReplica } from '../../src/store/store.js'
import { startRedis, type TestRedis } from '../helpers/redis.js'
import { waitFor } from '../helpers/net.js'
import { redisCli, startRedisCluster, type TestCluster } from '../helpers/redis-cluster.js'
import { startSentinelSet, type TestSentinelSet } from '../helpers/redis-sentinel.js'

const silent = pino({ level: 'silent' })
/** store.timeout where WAIT is to fail: each such write waits that long. */
const TIMEOUT_MS = 200
/**
 * store.timeout where a replica is to acknowledge: long enough for a replica starved of the CPU by
 * the rest of the suite (a healthy one answers within a millisecond, bench/replica-wait.ts).
 */
const PATIENT_MS = 2000

function storeConfig (form: Partial<StoreConfig>): StoreConfig {
  return { type: 'redis', url: undefined, cluster: undefined, sentinel: undefined, keyPrefix: 'rw:', timeoutMs: TIMEOUT_MS, readiness: 'required', waitForReplica: 0, ...form }
}

/** How many WAIT commands the Redis at `url` has run (INFO commandstats). */
async function waits (url: string): Promise<number> {
  const redis = new Redis(url)
  try {
    return Number(/cmdstat_wait:calls=(\d+)/.exec(await redis.info('commandstats'))?.[1] ?? 0)
  } finally {
    redis.disconnect()
  }
}

/** store.keyPrefix as the config reads it (throws what --check says). */
const keyPrefixOf = (value: string) => parseConfig(`store:\n  type: redis\n  keyPrefix: ${JSON.stringify(value)}\n`, {}).store.keyPrefix

describe('store.waitForReplica in the config', () => {
  const store = (yaml: string) => parseConfig(`store:\n  type: redis\n${yaml}`, {}).store.waitForReplica
  it('is one replica for the Sentinel and Cluster forms, none for one URL, and as given when given (true: one)', () => {
    expect(store('  sentinel: { name: mymaster, nodes: ["127.0.0.1:26379"] }')).toBe(1)
    expect(store('  cluster: ["redis://127.0.0.1:7000"]')).toBe(1)
    expect(store('  url: redis://127.0.0.1:6379')).toBe(0)
    expect(store('  sentinel: { name: mymaster, nodes: ["127.0.0.1:26379"] }\n  waitForReplica: false')).toBe(0)
    expect(store('  url: redis://127.0.0.1:6379\n  waitForReplica: true')).toBe(1)
    expect(store('  sentinel: { name: mymaster, nodes: ["127.0.0.1:26379"] }\n  waitForReplica: 2')).toBe(2)
  })

  it.each([['0'], ['17'], ['1.5'], ['"all"']])('refuses waitForReplica: %s, naming the key', (value) => {
    expect(() => store(`  sentinel: { name: mymaster, nodes: ["127.0.0.1:26379"] }\n  waitForReplica: ${value}`)).toThrow(/store\.waitForReplica/)
  })
})

describe('a Redis without a replica', () => {
  let redis: TestRedis
  beforeAll(async () => { redis = await startRedis('spawn') })
  afterAll(async () => { await redis?.stop() })

  it('with waitForReplica false: a write that asks for a replica is written at once, and no WAIT is sent', async () => {
    const store = new RedisStore(storeConfig({ url: redis.url, waitForReplica: 0 }), silent)
    try {
      // Connected first: the store queues nothing while it connects (a command then is a 503 by design).
      expect(await store.ready(5000)).toBe(true)
      const before = await waits(redis.url)
      await store.set('off', 'v', 10_000, { replicated: true })
      expect(await store.replace('off', Buffer.from('v'), 'w', 10_000, { replicated: true })).toBe(true)
      expect(await store.get('off')).toBe('w')
      expect(await waits(redis.url)).toBe(before)
    } finally {
      await store.close()
    }
  })

  it('with waitForReplica true: the write is refused as unacknowledged after WAIT; writes that do not ask never wait', async () => {
    const store = new RedisStore(storeConfig({ url: redis.url, waitForReplica: 1 }), silent)
    try {
      expect(await store.ready(5000)).toBe(true)
      const before = await waits(redis.url)
      await store.set('plain', 'v', 10_000)
      expect(await waits(redis.url)).toBe(before)
      const refused = await store.set('asked', 'v', 10_000, { replicated: true }).then(() => undefined, (error: unknown) => error)
      expect(refused).toBeInstanceOf(GatewayError)
      expect((refused as GatewayError).code).toBe('session_store_unavailable')
      expect((refused as GatewayError).cause).toBeInstanceOf(ReplicaUnacknowledged)
      expect(((refused as GatewayError).cause as Error).message).toBe(`no replica acknowledged the write within ${TIMEOUT_MS} ms (WAIT 1 ${TIMEOUT_MS} answered 0)`)
      const replaced = await store.replace('plain', Buffer.from('v'), 'w', 10_000, { replicated: true }).then(() => undefined, (error: unknown) => error)
      expect((replaced as GatewayError).cause).toBeInstanceOf(ReplicaUnacknowledged)
      expect(await waits(redis.url)).toBe(before + 2)
      // The store answers all the while: the other commands go on their own connection.
      expect(await store.get('plain')).toBe('w')
    } finally {
      await store.close()
    }
  })
})

describe('sessions on a Redis without a replica, with waitForReplica true', () => {
  const SECRET = 'replica-wait-secret-0123456789-abcdefghij'
  const CONFIG = { cookieName: 'gw_session', secret: SECRET, ttlMs: 60_000, cookieSecure: true, cacheTtlMs: 0, maxAgeMs: 86_400_000, previousSecrets: [] }
  const RECORD = withSignIn(emptyRecord(Date.now()), 'demo', { tokens: { access_token: 'at-1', refresh_token: 'rt-1' }, identity: { sub: 'alice', groups: [] } })
  let redis: TestRedis
  let plain: RedisStore
  let waiting: RedisStore
  beforeAll(async () => {
    redis = await startRedis('spawn')
    plain = new RedisStore(storeConfig({ url: redis.url, keyPrefix: 'sw:' }), silent)
    waiting = new RedisStore(storeConfig({ url: redis.url, keyPrefix: 'sw:', waitForReplica: 1 }), silent)
    expect(await plain.ready(5000)).toBe(true)
    expect(await waiting.ready(5000)).toBe(true)
  })
  afterAll(async () => {
    await plain?.close()
    await waiting?.close()
    await redis?.stop()
  })
  const sessionKeys = async () => {
    const raw = new Redis(redis.url)
    try { return await raw.keys('sw:session:*') } finally { raw.disconnect() }
  }

  it('starts no session: the sign-in is refused, its record deleted again, and the session the browser had is kept', async () => {
    const before = await new Sessions(plain, new Sealer(SECRET), CONFIG).start(undefined, RECORD)
    const sessions = new Sessions(waiting, new Sealer(SECRET), CONFIG)
    const refused = await sessions.start(`gw_session=${before.cookie}`, RECORD).then(() => undefined, (error: unknown) => error)
    expect(unacknowledgedByReplica(refused)).toBe(true)
    expect(await sessionKeys()).toEqual([`sw:session:${before.id}`])
    expect((await sessions.load(`gw_session=${before.cookie}`))?.id).toBe(before.id)
  })

  it('keeps an ending\'s unsettled mark as long as the ended key could live on a replica (session.ttl), an hour at least', async () => {
    const eightHours = new RedisStore(storeConfig({ url: redis.url, keyPrefix: 'sw:', waitForReplica: 1 }), silent, { endedLiveMs: 8 * 3_600_000 })
    const raw = new Redis(redis.url)
    try {
      expect(await eightHours.ready(5000)).toBe(true)
      await eightHours.set('kept-8h', 'v', 60_000)
      await waiting.set('kept-1h', 'v', 60_000)
      expect(await eightHours.end('kept-8h')).toBe(true)
      expect(await waiting.end('kept-1h')).toBe(true)
      expect(await waiting.end('kept-1h')).toBe(false)
      // An attacker's finding: the mark lived an hour whatever session.ttl was, and a sign-out
      // tried again after a longer outage answered done while the replica still held the session.
      expect(await raw.pttl(`sw:${unsettledMark('sw:', 'kept-8h')}`)).toBeGreaterThan(7 * 3_600_000)
      const hour = await raw.pttl(`sw:${unsettledMark('sw:', 'kept-1h')}`)
      expect(hour).toBeGreaterThan(3_000_000)
      expect(hour).toBeLessThanOrEqual(3_600_000)
    } finally {
      raw.disconnect()
      await eightHours.close()
    }
  })

  it('keeps no refresh: the refreshed record is refused as unacknowledged (503 to the request)', async () => {
    const started = await new Sessions(plain, new Sealer(SECRET), CONFIG).start(undefined, RECORD)
    const sessions = new Sessions(waiting, new Sealer(SECRET), CONFIG)
    const session = (await sessions.load(`gw_session=${started.cookie}`))!
    const read = (await sessions.reload(session))!
    const refreshed = withTokens(read.record, 'demo', { access_token: 'at-2', refresh_token: 'rt-2' })
    const refused = await sessions.update(session, read, refreshed).then(() => undefined, (error: unknown) => error)
    expect(unacknowledgedByReplica(refused)).toBe(true)
    expect((refused as GatewayError).statusCode).toBe(503)
  })
})

describe('a Sentinel master with a replica', () => {
  let set: TestSentinelSet
  beforeAll(async () => { set = await startSentinelSet() })
  afterAll(async () => { await set?.stop() })

  it('counts a write once the replica has it: it is on the replica the moment the write resolves', async () => {
    const store = new RedisStore(storeConfig({ sentinel: { name: 'mymaster', nodes: set.nodes }, waitForReplica: 1, timeoutMs: PATIENT_MS }), silent)
    try {
      expect(await store.ready(5000)).toBe(true)
      for (let i = 0; i < 20; i++) {
        await store.set(`s${i}`, `v${i}`, 10_000, { replicated: true })
        expect(await set.ask(set.replica.port, (replica) => replica.get(`rw:s${i}`))).toBe(`v${i}`)
      }
      expect(await store.replace('s0', Buffer.from('v0'), 'changed', 10_000, { replicated: true })).toBe(true)
      expect(await set.ask(set.replica.port, (replica) => replica.get('rw:s0'))).toBe('changed')
    } finally {
      await store.close()
    }
  })
})

describe('a Sentinel master with one replica, told to wait for two', () => {
  let set: TestSentinelSet
  beforeAll(async () => { set = await startSentinelSet() })
  afterAll(async () => { await set?.stop() })

  it('refuses the write as unacknowledged, saying how many replicas had it', async () => {
    const store = new RedisStore(storeConfig({ sentinel: { name: 'mymaster', nodes: set.nodes }, waitForReplica: 2 }), silent)
    try {
      expect(await store.ready(5000)).toBe(true)
      const refused = await store.set('two', 'v', 10_000, { replicated: true }).then(() => undefined, (error: unknown) => error)
      expect(unacknowledgedByReplica(refused)).toBe(true)
      expect((refused as GatewayError & { cause: Error }).cause.message).toBe(`1 of the 2 replicas acknowledged the write within ${TIMEOUT_MS} ms (WAIT 2 ${TIMEOUT_MS} answered 1)`)
    } finally {
      await store.close()
    }
  })
})

describe('a Redis Cluster with a replica per master, one replica killed', () => {
  /** Sent at once: about a third land on the master without a replica. */
  const WRITES = 12
  let cluster: TestCluster
  beforeAll(async () => { cluster = await startRedisCluster({ replicas: 1 }) }, 60_000)
  afterAll(async () => { await cluster?.stop() })

  /** The slot the cluster's own nodes give a key (CLUSTER KEYSLOT), not a client's reckoning of it. */
  const keyslot = async (raw: Redis, key: string) => Number(await raw.call('CLUSTER', 'KEYSLOT', key))

  // First, while every replica is up.
  it('property: an ending\'s unsettled mark shares its key\'s slot for every prefix store.keyPrefix takes (as ioredis adds it)', async () => {
    const raw = new Redis({ host: '127.0.0.1', port: cluster.ports[0]! })
    try {
      const text = fc.string({ unit: 'binary', maxLength: 16 })
      const prefixes = fc.oneof(text, fc.tuple(text, fc.string({ maxLength: 6 }), text).map(([before, tag, after]) => `${before}{${tag}}${after}`))
      const taken = (value: string) => { try { return keyPrefixOf(value) === value } catch { return false } }
      await fc.assert(fc.asyncProperty(prefixes.filter(taken), fc.stringMatching(/^[A-Za-z0-9_-]{43}$/), fc.constantFrom(storeKeys.session, storeKeys.pendingSignIn), async (prefix, id, named) => {
        expect(await keyslot(raw, `${prefix}${unsettledMark(prefix, named(id))}`)).toBe(await keyslot(raw, `${prefix}${named(id)}`))
      }), { numRuns: 300 })
    } finally {
      raw.disconnect()
    }
  })

  it('ends a session under a prefix that is a hash tag ({gw}:); a stray brace, which the config refuses, would split its two keys (CROSSSLOT)', async () => {
    const ending = async (prefix: string) => {
      const store = new RedisStore(storeConfig({ cluster: cluster.urls, keyPrefix: prefix, waitForReplica: 1, timeoutMs: PATIENT_MS }), silent)
      try {
        expect(await store.ready(10_000)).toBe(true)
        await store.set('session:x', 'record', 60_000)
        const ended = await store.end('session:x').then(String, (error: unknown) => String((error as { cause?: unknown }).cause))
        await store.settled('session:x').catch(() => {})
        return ended
      } finally {
        await store.close()
      }
    }
    expect(await ending('{gw}:')).toBe('true')
    expect(await ending('gw}:')).toMatch(/CROSSSLOT/)
  })

  it('waits on the node that took each write: exactly the writes to that replica\'s master are refused', async () => {
    const roles = await Promise.all(cluster.ports.map(async (port) => ({ port, role: await redisCli(port, 'role') })))
    const lonely = roles.find(({ role }) => role.startsWith('master'))!.port
    const replica = Number(/slave0:ip=[^,]+,port=(\d+)/.exec(await redisCli(lonely, 'info', 'replication'))![1])
    await cluster.kill(replica)
    await waitFor(async () => /connected_slaves:0/.test(await redisCli(lonely, 'info', 'replication')), 10_000, 'the master to lose its replica')

    const store = new RedisStore(storeConfig({ cluster: cluster.urls, waitForReplica: 1, timeoutMs: PATIENT_MS }), silent)
    try {
      expect(await store.ready(10_000)).toBe(true)
      // At once: those on that master queue behind each other's WAIT, and are refused as unacknowledged too.
      const outcomes = await Promise.all(Array.from({ length: WRITES }, async (_, i) => {
        const error = await store.set(`k${i}`, 'v', 60_000, { replicated: true }).then(() => undefined, (failure: unknown) => failure)
        return { key: `rw:k${i}`, error }
      }))
      const refused = outcomes.filter(({ error }) => error !== undefined)
      for (const { error } of refused) expect((error as GatewayError).cause).toBeInstanceOf(ReplicaUnacknowledged)
      // Each was written on its master all the same (the queued ones once the WAITs before them end).
      const onLonely = async () => new Set((await redisCli(lonely, '--scan', '--pattern', 'rw:k*')).split('\n').filter(Boolean))
      // Each WAIT there holds the connection store.timeout at most.
      await waitFor(async () => (await onLonely()).size >= refused.length, (refused.length + 1) * PATIENT_MS, 'the queued writes to run')
      expect(refused.length).toBeGreaterThan(0)
      expect(refused.length).toBeLessThan(WRITES)
      expect(refused.map(({ key }) => key).sort()).toEqual([...await onLonely()].sort())
    } finally {
      await store.close()
    }
  }, 90_000)
})
