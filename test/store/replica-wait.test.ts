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
import { RedisStore } from '../../src/store/redis.js'
import { ReplicaUnacknowledged } from '../../src/store/store.js'
import { startRedis, type TestRedis } from '../helpers/redis.js'
import { startSentinelSet, type TestSentinelSet } from '../helpers/redis-sentinel.js'

const silent = pino({ level: 'silent' })
const TIMEOUT_MS = 200

function storeConfig (form: Partial<StoreConfig>): StoreConfig {
  return { type: 'redis', url: undefined, cluster: undefined, sentinel: undefined, keyPrefix: 'rw:', timeoutMs: TIMEOUT_MS, readiness: 'required', waitForReplica: false, ...form }
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

describe('store.waitForReplica in the config', () => {
  const store = (yaml: string) => parseConfig(`store:\n  type: redis\n${yaml}`, {}).store.waitForReplica
  it('is on for the Sentinel and Cluster forms, off for one URL, and as given when given', () => {
    expect(store('  sentinel: { name: mymaster, nodes: ["127.0.0.1:26379"] }')).toBe(true)
    expect(store('  cluster: ["redis://127.0.0.1:7000"]')).toBe(true)
    expect(store('  url: redis://127.0.0.1:6379')).toBe(false)
    expect(store('  sentinel: { name: mymaster, nodes: ["127.0.0.1:26379"] }\n  waitForReplica: false')).toBe(false)
    expect(store('  url: redis://127.0.0.1:6379\n  waitForReplica: true')).toBe(true)
  })
})

describe('a Redis without a replica', () => {
  let redis: TestRedis
  beforeAll(async () => { redis = await startRedis('spawn') })
  afterAll(async () => { await redis?.stop() })

  it('with waitForReplica false: a write that asks for a replica is written at once, and no WAIT is sent', async () => {
    const store = new RedisStore(storeConfig({ url: redis.url, waitForReplica: false }), silent)
    try {
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
    const store = new RedisStore(storeConfig({ url: redis.url, waitForReplica: true }), silent)
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

describe('a Sentinel master with a replica', () => {
  let set: TestSentinelSet
  beforeAll(async () => { set = await startSentinelSet() })
  afterAll(async () => { await set?.stop() })

  it('counts a write once the replica has it: it is on the replica the moment the write resolves', async () => {
    const store = new RedisStore(storeConfig({ sentinel: { name: 'mymaster', nodes: set.nodes }, waitForReplica: true }), silent)
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
