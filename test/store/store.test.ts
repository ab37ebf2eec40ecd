// The SessionStore contract, run over every store: memory, Redis on the default path
// (testcontainers when a Docker engine answers), and Redis on a spawned redis-server too whenever
// the default path was the container one, so both keep working.
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import pino from 'pino'
import { GatewayError } from '../../src/http/errors.js'
import { MemoryStore } from '../../src/store/memory.js'
import { RedisStore } from '../../src/store/redis.js'
import type { SessionStore } from '../../src/store/store.js'
import { containersAvailable, redisServerPath, startRedis, type RedisKind, type TestRedis } from '../helpers/redis.js'

const silent = pino({ level: 'silent' })

const defaultPath: RedisKind = (process.env.TEST_REDIS as RedisKind | undefined) ??
  (await containersAvailable() ? 'container' : redisServerPath() ? 'spawn' : 'url')
const redisPaths: RedisKind[] = defaultPath === 'container' && redisServerPath() ? ['container', 'spawn'] : [defaultPath]

const backends: Array<[string, () => Promise<{ store: SessionStore, redis?: TestRedis }>]> = [
  ['memory', async () => ({ store: new MemoryStore() })],
  ...redisPaths.map((kind): [string, () => Promise<{ store: SessionStore, redis?: TestRedis }>] => [
    `redis (${kind})`,
    async () => {
      const redis = await startRedis(kind)
      const store = new RedisStore({ type: 'redis', url: redis.url, cluster: undefined, sentinel: undefined, keyPrefix: 'gw:', readiness: 'required' }, silent)
      await store.waitUntilReady(5000)
      return { store, redis }
    },
  ]),
]

describe.each(backends)('SessionStore contract: %s', (_name, open) => {
  let store: SessionStore
  let redis: TestRedis | undefined
  const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))

  beforeAll(async () => { ({ store, redis } = await open()) })
  afterAll(async () => {
    await store?.close()
    await redis?.stop()
  })

  it('gets what was set, and null for an absent key', async () => {
    await store.set('a', 'value-a', 10_000)
    expect(await store.get('a')).toBe('value-a')
    expect(await store.get('absent')).toBeNull()
  })

  it('expires a key after its ttl', async () => {
    await store.set('short', 'v', 100)
    await sleep(250)
    expect(await store.get('short')).toBeNull()
  })

  it('getAndTouch renews the expiry (sliding idle timeout)', async () => {
    // Without the touch at 600 ms the key would be gone at 1000 ms; with it, it lives to 1600 ms.
    await store.set('slide', 'v', 1000)
    await sleep(600)
    expect(await store.getAndTouch('slide', 1000)).toBe('v')
    await sleep(600)
    expect(await store.get('slide')).toBe('v')
    expect(await store.getAndTouch('absent', 1000)).toBeNull()
  })

  it('take returns the value to exactly one of many concurrent callers', async () => {
    await store.set('once', 'v', 10_000)
    const results = await Promise.all(Array.from({ length: 20 }, () => store.take('once')))
    expect(results.filter((r) => r === 'v')).toHaveLength(1)
    expect(await store.get('once')).toBeNull()
  })

  it('delete removes a key', async () => {
    await store.set('gone', 'v', 10_000)
    await store.delete('gone')
    expect(await store.get('gone')).toBeNull()
  })

  it('claim succeeds for one caller only, and again after expiry', async () => {
    const claims = await Promise.all(Array.from({ length: 10 }, (_, i) => store.claim('lock', `owner-${i}`, 150)))
    expect(claims.filter(Boolean)).toHaveLength(1)
    await sleep(250)
    expect(await store.claim('lock', 'later', 150)).toBe(true)
  })

  it('ping resolves while the store answers', async () => {
    await expect(store.ping()).resolves.toBeUndefined()
  })

  if (_name.startsWith('redis')) {
    it('keeps keys under the configured prefix, and fails with session_store_unavailable once Redis is gone', async () => {
      const { Redis } = await import('ioredis')
      const raw = new Redis(redis!.url)
      await store.set('prefixed', 'v', 10_000)
      expect(await raw.get('gw:prefixed')).toBe('v')
      await raw.quit()

      await redis!.stop()
      const started = Date.now()
      const error = await store.get('prefixed').catch((e: unknown) => e)
      expect(error).toBeInstanceOf(GatewayError)
      expect((error as GatewayError).code).toBe('session_store_unavailable')
      expect(Date.now() - started).toBeLessThan(1000)
      redis = undefined
    })
  }
})
