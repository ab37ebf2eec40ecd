// The store contract, run over every store: memory, Redis on the default path (testcontainers when
// a Docker engine answers, else a spawned redis-server), a spawned redis-server too whenever the
// default path was the container one, a three-node Redis Cluster and a Redis behind a Sentinel.
// Time: the memory store's clock is moved; Redis's expiry is its own, so its tests read PTTL or use
// expiries of a few tens of milliseconds (no test waits longer than 60 ms for one).
import fc from 'fast-check'
import { Cluster, Redis } from 'ioredis'
import pino from 'pino'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import type { StoreConfig } from '../../src/config/types.js'
import { GatewayError } from '../../src/errors.js'
import { MemoryStore } from '../../src/store/memory.js'
import { RedisStore } from '../../src/store/redis.js'
import type { SessionStore } from '../../src/store/store.js'
import { startDelayProxy } from '../helpers/delay-proxy.js'
import { containersAvailable, redisServerPath, startRedis, type RedisKind, type TestRedis } from '../helpers/redis.js'
import { startRedisCluster } from '../helpers/redis-cluster.js'
import { startSentinel } from '../helpers/redis-sentinel.js'

const silent = pino({ level: 'silent' })

const defaultPath: RedisKind = (process.env.TEST_REDIS as RedisKind | undefined) ??
  (await containersAvailable() ? 'container' : redisServerPath() ? 'spawn' : 'url')
const redisPaths: RedisKind[] = defaultPath === 'container' && redisServerPath() ? ['container', 'spawn'] : [defaultPath]

interface Backend {
  store: SessionStore
  /** Moves the store's clock on (memory only; Redis keeps its own time). */
  advance?: (ms: number) => void
  /** A client without the key prefix, for PTTL and raw reads (Redis only). */
  raw?: Redis | Cluster
  /** The single Redis itself, for the outage case. */
  redis?: TestRedis
  stop (): Promise<void>
}

/** store.timeout of the Redis stores here: one command; connecting may take twice as long. */
const STORE_TIMEOUT_MS = 500

/** A ranked-set member from text (members are bytes). */
const m = (text: string) => Buffer.from(text)

function redisConfig (form: Partial<StoreConfig>): StoreConfig {
  return { type: 'redis', url: undefined, cluster: undefined, sentinel: undefined, keyPrefix: 'gw:', timeoutMs: STORE_TIMEOUT_MS, readiness: 'required', waitForReplica: 0, ...form }
}

async function redisBackend (config: StoreConfig, raw: Redis | Cluster, stop: () => Promise<void>, redis?: TestRedis): Promise<Backend> {
  const store = new RedisStore(config, silent)
  expect(await store.ready(10_000)).toBe(true)
  return {
    store,
    raw,
    redis,
    stop: async () => {
      await store.close()
      raw.disconnect()
      // The outage case has stopped a single Redis already.
      await stop().catch(() => {})
    },
  }
}

const backends: Array<[string, () => Promise<Backend>]> = [
  ['memory', async () => {
    let now = 1_700_000_000_000
    const store = new MemoryStore({ clock: { now: () => now } })
    return { store, advance: (ms) => { now += ms }, stop: () => store.close() }
  }],
  ...redisPaths.map((kind): [string, () => Promise<Backend>] => [`redis (${kind})`, async () => {
    const redis = await startRedis(kind)
    return await redisBackend(redisConfig({ url: redis.url }), new Redis(redis.url), () => redis.release(), redis)
  }]),
  ...(redisServerPath()
    ? [
        ['redis cluster', async () => {
          const cluster = await startRedisCluster()
          const raw = new Cluster(cluster.ports.map((port) => ({ host: '127.0.0.1', port })))
          return await redisBackend(redisConfig({ cluster: cluster.urls }), raw, () => cluster.stop())
        }] satisfies [string, () => Promise<Backend>],
        ['redis sentinel', async () => {
          const master = await startRedis('spawn')
          const sentinel = await startSentinel(master.url)
          const config = redisConfig({ sentinel: { name: 'mymaster', nodes: [sentinel.node] } })
          return await redisBackend(config, new Redis(master.url), async () => { await sentinel.stop(); await master.stop() })
        }] satisfies [string, () => Promise<Backend>],
      ]
    : []),
]

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))

describe.each(backends)('store contract: %s', (name, open) => {
  let backend: Backend
  let store: SessionStore

  beforeAll(async () => {
    backend = await open()
    store = backend.store
  }, 30_000)
  afterAll(async () => { await backend?.stop() })

  /** Lets `ms` pass for the store: the memory clock moves; Redis is given a short real wait. */
  async function elapse (ms: number): Promise<void> {
    if (backend.advance) return backend.advance(ms)
    expect(ms).toBeLessThanOrEqual(200)
    await sleep(ms)
  }

  /**
   * A ttl that no step of a test outlives, however busy the machine, where the test must act before
   * a key expires: Redis keeps its own time, so there a short ttl could pass between two commands;
   * the memory store's clock moves only when told.
   */
  const before = (ms: number) => backend.raw ? 10_000 + ms : ms

  /**
   * Ends `key`'s ttl now: Redis is told to expire it (PEXPIRE 1) and asked until it has, as if that
   * much time had passed; the memory store's clock moves on by `ms`.
   */
  async function outlive (key: string, ms: number): Promise<void> {
    if (backend.advance) return backend.advance(ms)
    await backend.raw!.pexpire(`gw:${key}`, 1)
    while (await pttl(key) !== -2) await sleep(1)
  }

  /** The key's remaining time in Redis (PTTL, under the prefix): -2 when absent. */
  async function pttl (key: string): Promise<number> {
    return await backend.raw!.pttl(`gw:${key}`)
  }

  it('gets what was set, and null for an absent key', async () => {
    await store.set('a', 'value-a', 10_000)
    expect(await store.get('a')).toBe('value-a')
    expect(await store.get('absent')).toBeNull()
  })

  it('keeps bytes as they are (every byte value), and reads a text value back as its UTF-8 bytes', async () => {
    const bytes = Buffer.from([...Array(256).keys(), 0x01, 0xff, 0x00, 0xc3])
    await store.set('bytes', bytes, 10_000)
    expect(await store.getBytes('bytes')).toEqual(bytes)
    expect(await store.getAndTouchBytes('bytes', 10_000)).toEqual(bytes)
    await store.set('text', 'grüße', 10_000)
    expect(await store.getBytes('text')).toEqual(Buffer.from('grüße', 'utf8'))
    expect(await store.getBytes('absent')).toBeNull()
    expect(await store.getAndTouchBytes('absent', 1000)).toBeNull()
    // A copy is kept: changing the caller's buffer afterwards changes nothing stored.
    const mine = Buffer.from('abc')
    await store.set('copied', mine, 10_000)
    mine[0] = 0x7a
    expect((await store.getBytes('copied'))!.toString()).toBe('abc')
  })

  it('expires a key after its ttl', async () => {
    if (backend.raw) {
      // The ttl reaches Redis (checked on a long one: a 30 ms key may be gone by the time PTTL runs on a busy machine).
      await store.set('long', 'v', 10_000)
      expect(await pttl('long')).toBeGreaterThan(0)
      expect(await pttl('long')).toBeLessThanOrEqual(10_000)
    }
    await store.set('short', 'v', 30)
    await elapse(60)
    expect(await store.get('short')).toBeNull()
  })

  it('remainingMs tells how long a key has left without renewing it; null when absent', async () => {
    await store.set('left', 'v', 10_000)
    if (backend.advance) {
      backend.advance(4000)
      expect(await store.remainingMs('left')).toBe(6000)
      backend.advance(6000)
    } else {
      const left = await store.remainingMs('left')
      expect(left).toBeGreaterThan(9000)
      expect(left).toBeLessThanOrEqual(10_000)
      // Asking did not renew it.
      expect(await pttl('left')).toBeLessThanOrEqual(left!)
      await store.delete('left')
    }
    expect(await store.remainingMs('left')).toBeNull()
    expect(await store.remainingMs('absent')).toBeNull()
  })

  it('capExpiry brings an expiry nearer, never further; nothing for a key that is absent', async () => {
    await store.set('capped', 'v', 10_000)
    await store.capExpiry('capped', 60_000)
    expect(await store.remainingMs('capped')).toBeLessThanOrEqual(10_000)
    await store.capExpiry('capped', 4000)
    expect(await store.remainingMs('capped')).toBeLessThanOrEqual(4000)
    expect(await store.remainingMs('capped')).toBeGreaterThan(3000)
    expect(await store.get('capped')).toBe('v')
    await store.capExpiry('absent', 4000)
    expect(await store.get('absent')).toBeNull()
    await store.delete('capped')
  })

  it('getAndTouchBytes renews the expiry (sliding idle timeout)', async () => {
    await store.set('slide', 'v', 1000)
    if (backend.advance) {
      // Without the touch at 600 ms the key would be gone at 1000 ms; with it, it lives to 1600 ms.
      backend.advance(600)
      expect(await store.getAndTouchBytes('slide', 1000)).toEqual(Buffer.from('v'))
      backend.advance(600)
      expect(await store.get('slide')).toBe('v')
      backend.advance(400)
      expect(await store.get('slide')).toBeNull()
    } else {
      expect(await pttl('slide')).toBeLessThanOrEqual(1000)
      expect(await store.getAndTouchBytes('slide', 60_000)).toEqual(Buffer.from('v'))
      expect(await pttl('slide')).toBeGreaterThan(1000)
    }
    expect(await store.getAndTouchBytes('absent', 1000)).toBeNull()
  })

  it('getAndTouchBytes never brings back a deleted key (a touch under way during a sign-out)', async () => {
    await store.set('touched', Buffer.from([2, 0, 255]), 10_000)
    await store.delete('touched')
    expect(await store.getAndTouchBytes('touched', 10_000)).toBeNull()
    expect(await store.getBytes('touched')).toBeNull()
    if (backend.raw) expect(await pttl('touched')).toBe(-2)
  })

  it('replace writes only over the exact bytes read, with the new ttl', async () => {
    const read = Buffer.from([2, ...Array(256).keys(), 0])
    await store.set('record', read, 1000)
    const next = Buffer.from([2, 7, 0, 255, 9])
    expect(await store.replace('record', read, next, 60_000)).toBe(true)
    expect(await store.getBytes('record')).toEqual(next)
    if (backend.raw) expect(await pttl('record')).toBeGreaterThan(1000)
    // What was read before that write no longer matches: a second writer holding it is refused.
    expect(await store.replace('record', read, Buffer.from('late'), 60_000)).toBe(false)
    expect(await store.getBytes('record')).toEqual(next)
    // A text value compares as its UTF-8 bytes.
    await store.set('text-record', 'grüße', 10_000)
    expect(await store.replace('text-record', Buffer.from('grüße', 'utf8'), 'next', 10_000)).toBe(true)
    expect(await store.get('text-record')).toBe('next')
  })

  it.each([
    ['one byte changed at the end', (read: Buffer) => Buffer.concat([read.subarray(0, -1), Buffer.from([read.at(-1)! ^ 1])])],
    ['one byte changed at the start', (read: Buffer) => Buffer.concat([Buffer.from([read[0]! ^ 1]), read.subarray(1)])],
    ['a prefix of it', (read: Buffer) => read.subarray(0, -1)],
    ['it and one byte more', (read: Buffer) => Buffer.concat([read, Buffer.from([0])])],
    ['nothing', () => Buffer.alloc(0)],
    ['the same bytes as text', (read: Buffer) => Buffer.from(read.toString('latin1'), 'utf8')],
  ])('replace refuses when the bytes read are %s, and writes nothing', async (_name, expected) => {
    const read = Buffer.from([2, 0x80, 0xff, 0x00, 0x41])
    await store.set('guarded', read, 10_000)
    expect(await store.replace('guarded', expected(read), Buffer.from('forged'), 10_000)).toBe(false)
    expect(await store.getBytes('guarded')).toEqual(read)
  })

  it('replace never creates a key: deleted, expired or never set, it stays absent', async () => {
    const read = Buffer.from([2, 1, 2, 3])
    await store.set('ended', read, 10_000)
    await store.delete('ended')
    expect(await store.replace('ended', read, Buffer.from([2, 9]), 10_000)).toBe(false)
    expect(await store.getBytes('ended')).toBeNull()
    await store.set('expiring', read, 30)
    await elapse(60)
    expect(await store.replace('expiring', read, Buffer.from([2, 9]), 10_000)).toBe(false)
    expect(await store.getBytes('expiring')).toBeNull()
    expect(await store.replace('never', Buffer.alloc(0), Buffer.from([2, 9]), 10_000)).toBe(false)
    expect(await store.getBytes('never')).toBeNull()
    if (backend.raw) for (const key of ['ended', 'expiring', 'never']) expect(await pttl(key)).toBe(-2)
  })

  it('of many concurrent replaces over the same bytes read, exactly one writes', async () => {
    const read = Buffer.from([2, 42])
    await store.set('contended', read, 10_000)
    const results = await Promise.all(Array.from({ length: 20 }, (_, i) => store.replace('contended', read, Buffer.from([2, i]), 10_000)))
    expect(results.filter(Boolean)).toHaveLength(1)
    expect(await store.getBytes('contended')).toEqual(Buffer.from([2, results.indexOf(true)]))
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
    // A ttl that outlives the race on a busy machine (30 ms let a second caller in once), then a short one for the expiry.
    const claims = await Promise.all(Array.from({ length: 10 }, (_, i) => store.claim('marker', `owner-${i}`, 10_000)))
    expect(claims.filter(Boolean)).toHaveLength(1)
    expect(await store.claim('short-marker', 'first', 30)).toBe(true)
    await elapse(60)
    expect(await store.claim('short-marker', 'later', 10_000)).toBe(true)
  })

  it('a lock is acquired by one of many concurrent callers, each with its own owner token', async () => {
    const handles = await Promise.all(Array.from({ length: 10 }, () => store.acquire('lock:many', 10_000)))
    const held = handles.filter((handle) => handle !== null)
    expect(held).toHaveLength(1)
    expect(held[0]).toMatchObject({ key: 'lock:many', owner: expect.stringMatching(/^[\w-]{20,}$/) })
    if (backend.raw) {
      expect(await backend.raw.get('gw:lock:many')).toBe(held[0]!.owner)
      expect(await pttl('lock:many')).toBeGreaterThan(5000)
    }
    expect(await store.release(held[0]!)).toBe(true)
    expect(await store.get('lock:many')).toBeNull()
    expect(await store.release(held[0]!)).toBe(false)
  })

  it("a slow holder whose lock expired cannot release the next holder's lock", async () => {
    const slow = await store.acquire('lock:slow', before(150))
    expect(slow).not.toBeNull()
    expect(await store.acquire('lock:slow', 10_000)).toBeNull()
    // The slow holder outlives its lock; a second holder takes it over.
    await outlive('lock:slow', 200)
    const next = await store.acquire('lock:slow', 10_000)
    expect(next).not.toBeNull()
    // The slow holder finishes and releases: the second holder's lock must survive.
    expect(await store.release(slow!)).toBe(false)
    expect(await store.get('lock:slow')).toBe(next!.owner)
    expect(await store.acquire('lock:slow', 10_000)).toBeNull()
    // Its own owner can release it, and then it is free.
    expect(await store.release(next!)).toBe(true)
    expect(await store.acquire('lock:slow', 10_000)).not.toBeNull()
  })

  it('releasing with another key or a made-up owner token removes nothing', async () => {
    const held = await store.acquire('lock:own', 10_000)
    expect(await store.release({ key: 'lock:own', owner: 'someone-else' })).toBe(false)
    expect(await store.release({ key: 'lock:other', owner: held!.owner })).toBe(false)
    expect(await store.get('lock:own')).toBe(held!.owner)
  })

  it('a set keeps every member added once, and members reads them without taking them', async () => {
    for (let i = 0; i < 200; i++) await store.addMember('set-all', `m${i}`, 10_000)
    await store.addMember('set-all', 'm0', 10_000)
    const read = await Promise.all([store.members('set-all'), store.members('set-all')])
    expect(read.map((members) => members.length)).toEqual([200, 200])
    expect(new Set(read[0])).toEqual(new Set(Array.from({ length: 200 }, (_, i) => `m${i}`)))
    expect(await store.members('set-absent')).toEqual([])
  })

  it('removeMember takes one member out and keeps the rest and the expiry; the last one out takes the set', async () => {
    await store.addMember('set-remove', 'a', 10_000)
    await store.addMember('set-remove', 'b', 10_000)
    await store.removeMember('set-remove', 'a')
    await store.removeMember('set-remove', 'never-there')
    await store.removeMember('set-absent-remove', 'a')
    if (backend.raw) expect(await pttl('set-remove')).toBeGreaterThan(9_000)
    expect(await store.members('set-remove')).toEqual(['b'])
    await store.addMember('set-emptied', 'a', 10_000)
    await store.removeMember('set-emptied', 'a')
    await store.addMember('set-emptied', 'b', 100)
    if (backend.raw) expect(await pttl('set-emptied')).toBeLessThanOrEqual(100)
    expect(await store.members('set-emptied')).toEqual(['b'])
  })

  it("a set's expiry only grows: adding or extending with a shorter ttl never shortens it", async () => {
    await store.addMember('set-grow', 'a', before(30))
    await store.addMember('set-grow', 'b', before(50_000))
    await store.addMember('set-grow', 'c', before(30))
    await store.extend('set-grow', before(30))
    if (backend.raw) expect(await pttl('set-grow')).toBeGreaterThan(before(30))
    else await elapse(60)
    expect((await store.members('set-grow')).sort()).toEqual(['a', 'b', 'c'])
  })

  it('extend keeps a set alive past its first ttl; without it the set expires', async () => {
    await store.addMember('set-kept', 'a', before(100))
    await store.addMember('set-gone', 'a', before(100))
    await store.extend('set-kept', before(50_000))
    await store.extend('set-absent', before(50_000))
    if (backend.raw) {
      expect(await pttl('set-absent')).toBe(-2)
      expect(await pttl('set-kept')).toBeGreaterThan(before(100))
    }
    // The first ttl passes (Redis: set-gone expired by its own clock, told to at once).
    if (backend.raw) await outlive('set-gone', 150)
    else await elapse(150)
    expect(await store.members('set-kept')).toEqual(['a'])
    expect(await store.members('set-gone')).toEqual([])
  })

  it('a ranked set keeps the `max` highest scores, hands back the ones it dropped (lowest first), and lists lowest first', async () => {
    expect(await store.addRanked('ranked', m('b'), 20, 10_000, 3)).toEqual([])
    expect(await store.addRanked('ranked', m('a'), 10, 10_000, 3)).toEqual([])
    expect(await store.addRanked('ranked', m('c'), 30, 10_000, 3)).toEqual([])
    expect(await store.rankedMembers('ranked')).toEqual([m('a'), m('b'), m('c')])
    expect(await store.addRanked('ranked', m('d'), 40, 10_000, 3)).toEqual([m('a')])
    expect(await store.addRanked('ranked', m('e'), 50, 10_000, 2)).toEqual([m('b'), m('c')])
    expect(await store.rankedMembers('ranked')).toEqual([m('d'), m('e')])
    await store.removeRanked('ranked', m('d'))
    await store.removeRanked('ranked', m('never-there'))
    expect(await store.rankedMembers('ranked')).toEqual([m('e')])
    expect(await store.rankedMembers('ranked-absent')).toEqual([])
  })

  it('a ranked set\'s exempt member, while there, is neither counted against `max` nor dropped', async () => {
    for (const [member, score] of [['a', 10], ['r', 20], ['b', 30]] as const) await store.addRanked('exempt', m(member), score, 10_000, 3)
    // Full: the next add drops the lowest but the exempt one, and keeps one more for it.
    expect(await store.addRanked('exempt', m('c'), 40, 10_000, 3, m('r'))).toEqual([])
    expect(await store.addRanked('exempt', m('d'), 50, 10_000, 3, m('r'))).toEqual([m('a')])
    expect(await store.addRanked('exempt', m('e'), 60, 10_000, 2, m('r'))).toEqual([m('b'), m('c')])
    expect(await store.rankedMembers('exempt')).toEqual([m('r'), m('d'), m('e')])
    // Not there: no room kept for it.
    expect(await store.addRanked('exempt', m('f'), 70, 10_000, 2, m('gone'))).toEqual([m('r'), m('d')])
  })

  it('property: a ranked add drops what a sorted list of the members says, with and without an exempt member', async () => {
    const step = fc.record({ member: fc.constantFrom('a', 'b', 'c', 'd', 'e', 'f'), max: fc.integer({ min: 1, max: 4 }), exempt: fc.option(fc.constantFrom('a', 'b', 'c', 'z'), { nil: undefined }) })
    let run = 0
    await fc.assert(fc.asyncProperty(fc.array(step, { minLength: 1, maxLength: 10 }), async (steps) => {
      const key = `ranked-model-${run++}`
      const model = new Map<string, number>()
      for (const [i, { member, max, exempt }] of steps.entries()) {
        model.set(member, i)
        const kept = exempt !== undefined && model.has(exempt) ? max + 1 : max
        const expected = [...model].sort((x, y) => x[1] - y[1]).map(([name]) => name).filter((name) => name !== exempt).slice(0, Math.max(0, model.size - kept))
        for (const name of expected) model.delete(name)
        expect((await store.addRanked(key, m(member), i, 10_000, max, exempt === undefined ? undefined : m(exempt))).map(String)).toEqual(expected)
      }
      expect((await store.rankedMembers(key)).map(String)).toEqual([...model].sort((x, y) => x[1] - y[1]).map(([name]) => name))
    }), { numRuns: 40 })
  })

  it('a ranked add within the bound: true and added while the set has room or holds the member, false and nothing changed when full', async () => {
    expect(await store.addRankedIfRoom('ranked-room', m('a'), 10, 10_000, 2)).toBe(true)
    expect(await store.addRankedIfRoom('ranked-room', m('b'), 20, 10_000, 2)).toBe(true)
    expect(await store.addRankedIfRoom('ranked-room', m('c'), 30, 10_000, 2)).toBe(false)
    expect(await store.rankedMembers('ranked-room')).toEqual([m('a'), m('b')])
    // A member already there is re-scored, full or not.
    expect(await store.addRankedIfRoom('ranked-room', m('a'), 40, 10_000, 2)).toBe(true)
    expect(await store.rankedMembers('ranked-room')).toEqual([m('b'), m('a')])
    await store.removeRanked('ranked-room', m('b'))
    expect(await store.addRankedIfRoom('ranked-room', m('c'), 30, 10_000, 2)).toBe(true)
    expect(await store.rankedMembers('ranked-room')).toEqual([m('c'), m('a')])
    // It has the expiry it was given (not none: PTTL -1).
    if (backend.raw) expect(await pttl('ranked-room')).toBeGreaterThan(0)
  })

  it("a ranked set's expiry only grows, extend lengthens it, and without it the set expires", async () => {
    await store.addRanked('ranked-grow', m('a'), 1, before(50_000), 10)
    await store.addRanked('ranked-grow', m('b'), 2, before(30), 10)
    await store.addRanked('ranked-gone', m('a'), 1, before(100), 10)
    await store.addRanked('ranked-kept', m('a'), 1, before(100), 10)
    await store.extend('ranked-kept', before(50_000))
    if (backend.raw) {
      expect(await pttl('ranked-grow')).toBeGreaterThan(before(30))
      expect(await pttl('ranked-kept')).toBeGreaterThan(before(100))
      await outlive('ranked-gone', 150)
    } else await elapse(150)
    expect(await store.rankedMembers('ranked-grow')).toEqual([m('a'), m('b')])
    expect(await store.rankedMembers('ranked-kept')).toEqual([m('a')])
    expect(await store.rankedMembers('ranked-gone')).toEqual([])
  })

  it('a ranked member is bytes, kept and compared as bytes: NUL, 0xff, invalid UTF-8, and ties ordered bytewise as Redis orders them', async () => {
    const members = [Buffer.from([0x01, 0x00, 0xff]), Buffer.from([0x01, 0x00]), Buffer.from([0xc3, 0x28]), Buffer.from([0x00])]
    for (const member of members) await store.addRanked('ranked-bytes', member, 5, 10_000, 10)
    expect(await store.rankedMembers('ranked-bytes')).toEqual([Buffer.from([0x00]), Buffer.from([0x01, 0x00]), Buffer.from([0x01, 0x00, 0xff]), Buffer.from([0xc3, 0x28])])
    await store.removeRanked('ranked-bytes', Buffer.from([0x01, 0x00]))
    expect(await store.addRanked('ranked-bytes', Buffer.from([0xff]), 6, 10_000, 3)).toEqual([Buffer.from([0x00])])
    expect(await store.rankedMembers('ranked-bytes')).toEqual([Buffer.from([0x01, 0x00, 0xff]), Buffer.from([0xc3, 0x28]), Buffer.from([0xff])])
  })

  it('publishes to every subscriber of a channel', async () => {
    const received: string[] = []
    await store.subscribe('contract', (message) => received.push(message))
    // A Redis subscription is made in the background: publish until it arrives (bounded).
    for (let i = 0; i < 100 && received.length === 0; i++) {
      await store.publish('contract', 'hello')
      if (received.length === 0) await sleep(20)
    }
    expect(received[0]).toBe('hello')
  })

  it('is ready, answers ping and reports itself up', async () => {
    expect(await store.ready(1000)).toBe(true)
    await expect(store.ping()).resolves.toBeUndefined()
    expect(await store.health()).toEqual({ state: 'up', unreachable: [] })
  })

  it('lends its Redis connection to a library that keeps keys beside the sessions, and only a Redis store does', () => {
    if (name === 'memory') expect(store.redis).toBeUndefined()
    else expect(store.redis).toBeDefined()
  })

  if (name.startsWith('redis (')) {
    it('uses a reply that came within store.timeout though the process ran again only after it: the deadline is judged after the socket is read', async () => {
      await store.set('starved', 'answered', 10_000)
      const { hostname, port } = new URL(backend.redis!.url)
      const relay = await startDelayProxy({ host: hostname, port: Number(port) })
      const starved = new RedisStore(redisConfig({ url: `redis://${relay.host}:${relay.port}` }), silent)
      try {
        expect(await starved.ready(10_000)).toBe(true)
        // The reply reaches the store's socket, then this process runs nothing for longer than
        // store.timeout: its command's timer is due before it reads that socket.
        relay.stallAfterNextAnswer(STORE_TIMEOUT_MS + 1)
        await expect(starved.get('starved')).resolves.toBe('answered')
      } finally {
        await starved.close()
        await relay.close()
      }
    })

    it('keeps keys under the configured prefix, and fails with session_store_unavailable once Redis is gone', async () => {
      await store.set('prefixed', 'v', 10_000)
      expect(await backend.raw!.get('gw:prefixed')).toBe('v')

      await backend.redis!.stop()
      const started = Date.now()
      for (const attempt of [store.get('prefixed'), store.acquire('lock:down', 1000), store.release({ key: 'lock:down', owner: 'x' })]) {
        const error = await attempt.catch((e: unknown) => e)
        expect(error).toBeInstanceOf(GatewayError)
        expect((error as GatewayError).code).toBe('session_store_unavailable')
      }
      // With Redis gone each fails at once (no offline queue), never waiting out the connect
      // timeout (2 x store.timeout) for a connection.
      expect(Date.now() - started).toBeLessThan(2 * STORE_TIMEOUT_MS)
    })
  }
})
