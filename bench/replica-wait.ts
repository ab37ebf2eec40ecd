// `node dist/bench/replica-wait.js [writes]`: what store.waitForReplica costs a sign-in. A
// Sentinel set of spawned servers (a master, a replica in sync, a sentinel: test/helpers), the
// gateway's own RedisStore in the Sentinel form, and `writes` (200) writes of a session-sized value
// each way, one after another: a plain SET, and the SET with its WAIT 1 <store.timeout> (one
// pipeline, replica-wait.ts). Prints the median and the 95th percentile of each and their
// difference, the time one sign-in (or one token refresh) waits for its replica. Asserts nothing.
import { randomBytes } from 'node:crypto'
import { performance } from 'node:perf_hooks'
import pino from 'pino'
import type { StoreConfig } from '../src/config/types.js'
import { RedisStore } from '../src/store/redis.js'
import { waitFor } from '../test/helpers/net.js'
import { startSentinelSet } from '../test/helpers/redis-sentinel.js'

const writes = Number(process.argv[2] ?? 200)
/** A one-provider session record's size (docs/performance.md: about 1 KB sealed). */
const value = randomBytes(1024)

const quantile = (samples: number[], q: number) => [...samples].sort((a, b) => a - b)[Math.min(samples.length - 1, Math.floor(q * samples.length))]!
const ms = (n: number) => `${n.toFixed(3)} ms`

const set = await startSentinelSet()
const config: StoreConfig = { type: 'redis', url: undefined, cluster: undefined, sentinel: { name: 'mymaster', nodes: set.nodes }, keyPrefix: 'bench:', timeoutMs: 500, readiness: 'required', waitForReplica: 1 }
const store = new RedisStore(config, pino({ level: 'silent' }))
try {
  if (!await store.ready(10_000)) throw new Error('the store did not connect')
  const timed = async (replicated: boolean) => {
    const samples: number[] = []
    for (let i = 0; i < writes; i++) {
      const started = performance.now()
      await store.set(`w:${i}`, value, 60_000, { replicated })
      samples.push(performance.now() - started)
    }
    return samples
  }
  // Warm-up: connections made, JIT settled. After its first full copy (diskless), the master
  // streams writes to the replica only from the replica's first acknowledgement, up to a second
  // later: until then no WAIT can be answered.
  await timed(false)
  const offset = (info: string) => /(?:^|\n)master_repl_offset:(\d+)/.exec(info)?.[1]
  await waitFor(async () => offset(await set.ask(set.replica.port, (r) => r.info('replication'))) === offset(await set.ask(set.master.port, (r) => r.info('replication'))), 10_000, 'the replica to follow the master')
  await timed(true)
  const plain = await timed(false)
  const replicated = await timed(true)
  const rows = [['plain SET', plain], ['SET + WAIT 1 500', replicated]] as const
  console.log(`${writes} writes of ${value.length} bytes each way, Node ${process.version}, one replica on the same host`)
  for (const [name, samples] of rows) console.log(`${name.padEnd(18)} median ${ms(quantile(samples, 0.5))}  p95 ${ms(quantile(samples, 0.95))}`)
  console.log(`the wait for the replica: median ${ms(quantile(replicated, 0.5) - quantile(plain, 0.5))}, p95 ${ms(quantile(replicated, 0.95) - quantile(plain, 0.95))}`)
} finally {
  await store.close()
  await set.stop()
}
