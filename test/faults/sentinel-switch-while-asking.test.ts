// A +switch-master heard while the store's connection is still asking a sentinel which node is the
// master (the sentinel it asks is frozen; the other one announces a forced failover): the store
// leaves that connection to finish asking, and it reaches the promoted replica. ioredis ends a
// Sentinel connection for good (status 'end', never reconnecting) when it is dropped while asking.
import type { FastifyBaseLogger } from 'fastify'
import pino from 'pino'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { stringify } from 'yaml'
import { parseConfig } from '../../src/config/config.js'
import { loggerOptions } from '../../src/ops/logger.js'
import { RedisStore } from '../../src/store/redis.js'
import { logCollector } from '../helpers/gateway.js'
import { waitFor } from '../helpers/net.js'
import { startSentinelSet, type TestSentinelSet } from '../helpers/redis-sentinel.js'

/**
 * store.timeout, which is also how long a sentinel's answer is waited for: the frozen sentinel
 * holds the reconnection this long, the window in which the other one's announcement must come
 * (a forced failover announces within about a second).
 */
const TIMEOUT_MS = 3000
/** After the frozen sentinel's wait: a reconnection delay (at most 1 s), asking the other, connecting. */
const RECONNECTED_WITHIN_MS = TIMEOUT_MS + 1000 + 2 * TIMEOUT_MS

let set: TestSentinelSet
let store: RedisStore

beforeAll(async () => {
  set = await startSentinelSet({ sentinels: 2 })
  const { stream } = logCollector()
  const config = parseConfig(stringify({ store: { type: 'redis', sentinel: { name: 'mymaster', nodes: set.nodes }, timeout: `${TIMEOUT_MS}ms` } }), {}, 'test.yaml').store
  store = new RedisStore(config, pino(loggerOptions('info'), stream) as unknown as FastifyBaseLogger)
  expect(await store.ready(10_000)).toBe(true)
})
afterAll(async () => {
  for (const sentinel of set?.sentinels ?? []) sentinel.thaw()
  await store?.close()
  await set?.stop()
})

const clientList = (port: number) => set.ask(port, async (redis) => (await redis.call('CLIENT', 'LIST') as string).split('\n'))

describe('a +switch-master heard while the store is asking a frozen sentinel for the master', () => {
  it('lets the connection finish asking, and it reaches the promoted replica', async () => {
    const [first, second] = set.sentinels as [TestSentinelSet['sentinel'], TestSentinelSet['sentinel']]
    // The store's +switch-master connection to the sentinel that will announce.
    await waitFor(async () => (await clientList(first.port)).some((client) => / sub=1 /.test(client)), 5000, 'the store subscribed to the first sentinel')
    const watcher = set.client(first.port, { retryStrategy: () => 100 })
    let statusAtAnnouncement = ''
    const announced = new Promise<void>((resolve) => watcher.on('message', () => {
      statusAtAnnouncement = store.redis.status
      resolve()
    }))
    await watcher.subscribe('+switch-master')

    // ioredis asks the sentinel after the one that answered last: the second, now frozen.
    second.freeze()
    await set.ask(set.master.port, (redis) => redis.call('CLIENT', 'KILL', 'TYPE', 'normal'))
    await waitFor(async () => store.redis.status === 'connecting', TIMEOUT_MS, 'the store to reconnect')
    await set.ask(first.port, (redis) => redis.call('SENTINEL', 'FAILOVER', 'mymaster'))
    await announced
    watcher.disconnect()
    // The scenario itself: the announcement came while the store was still asking.
    expect(statusAtAnnouncement).toBe('connecting')

    await waitFor(async () => { await store.ping(); return true }, RECONNECTED_WITHIN_MS, 'the store to answer')
    // On the promoted replica: a write is taken there (the old master, now a replica, refuses it).
    await store.set('after', 'x', 60_000)
    expect(await set.ask(set.replica.port, (redis) => redis.get(`${store.redis.options.keyPrefix ?? ''}after`))).toBe('x')
  }, 30_000)
})
