// The store's own connections to the sentinels (src/store/sentinel-watch.ts), against a real
// Sentinel set and the real CLI: a store command answered 503 while the master is frozen never runs
// on the promoted replica afterwards (ioredis would send it again after reconnecting), and a
// sentinel that is killed, then started again on its port, is logged as JSON lines like any store
// outage (one when it goes, naming it and the refused connection; one when it is back), is listened
// to again, and leaves no line outside the JSON log on the gateway's stdout or stderr.
import { spawn, type ChildProcessByStdio } from 'node:child_process'
import { mkdtemp, readFile, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import type { Readable } from 'node:stream'
import type { FastifyBaseLogger } from 'fastify'
import pino from 'pino'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { stringify } from 'yaml'
import { parseConfig } from '../../src/config/config.js'
import { GatewayError } from '../../src/errors.js'
import { loggerOptions } from '../../src/ops/logger.js'
import { DEFAULT_HYSTERESIS } from '../../src/store/outage-log.js'
import { MAX_RECONNECT_DELAY_MS } from '../../src/store/redis-connection.js'
import { RedisStore } from '../../src/store/redis.js'
import { logCollector, TEST_SECRET } from '../helpers/gateway.js'
import { freePort, waitFor } from '../helpers/net.js'
import { Children } from '../helpers/processes.js'
import { startSentinelSet, type TestSentinelSet } from '../helpers/redis-sentinel.js'

/** store.timeout: one command; how long a dropped connection waits for the old master to close. */
const TIMEOUT_MS = 500
/**
 * How soon a sentinel's outage (or its end) is logged: the outage log's hysteresis, after at most
 * one reconnection delay and one connect timeout (2 x store.timeout).
 */
const LOGGED_WITHIN_MS = DEFAULT_HYSTERESIS.downAfterMs + MAX_RECONNECT_DELAY_MS + 2 * TIMEOUT_MS
/** After +switch-master: the old connection dropped (store.timeout), a reconnection delay, asking the sentinel and connecting. */
const AFTER_SWITCH_MS = TIMEOUT_MS + 100 + 2 * TIMEOUT_MS

interface Line { level: number, msg: string, store?: string, sentinel?: string, reason?: string, lastReason?: string }

let set: TestSentinelSet
const children = new Children()
let gateway: ChildProcessByStdio<null, Readable, Readable>
let gatewayUrl: string
let stdout = ''
let stderr = ''
let store: RedisStore
let storeLines: string[]
let keyPrefix: string

beforeAll(async () => {
  set = await startSentinelSet({ downAfterMs: 500, failoverTimeoutMs: 2000 })
  const storeConfig = { type: 'redis', sentinel: { name: 'mymaster', nodes: set.nodes }, timeout: `${TIMEOUT_MS}ms` }
  // The gateway as operators run it: the CLI, its own process, its stdout and stderr as they are.
  const port = await freePort()
  gatewayUrl = `http://127.0.0.1:${port}`
  const file = join(await mkdtemp(join(tmpdir(), 'gw-sentinel-watch-')), 'gateway.yaml')
  await writeFile(file, stringify({ server: { host: '127.0.0.1', port, baseUrl: gatewayUrl }, session: { secret: TEST_SECRET }, store: storeConfig }))
  gateway = children.add(spawn(process.execPath, ['dist/src/main.js', '--config', file], { stdio: ['ignore', 'pipe', 'pipe'] }))
  gateway.stdout.on('data', (chunk: Buffer) => { stdout += chunk.toString() })
  gateway.stderr.on('data', (chunk: Buffer) => { stderr += chunk.toString() })
  // A store as the gateway makes it, in this process, to send commands of our choosing.
  const { stream, lines } = logCollector()
  storeLines = lines
  const config = parseConfig(stringify({ store: storeConfig }), {}, 'test.yaml').store
  keyPrefix = config.keyPrefix
  store = new RedisStore(config, pino(loggerOptions('info'), stream) as unknown as FastifyBaseLogger)
  await waitFor(async () => await storeState() === 'up', 10_000, 'the gateway to reach the master')
  expect(await store.ready(10_000)).toBe(true)
})
afterAll(async () => {
  await children.end()
  await store?.close()
  await set?.stop()
})

/** What the CLI gateway's /readyz says of the store ('up' when its ping is answered). */
async function storeState (): Promise<string> {
  const response = await fetch(`${gatewayUrl}/readyz`)
  return ((await response.json()) as { store?: string }).store ?? `status ${response.status}`
}

const sentinelPort = () => Number(set.nodes[0]!.split(':')[1])
/** The sentinel's clients in subscriber mode: the gateways' +switch-master connections. */
const subscribed = async () => (await set.ask(sentinelPort(), (redis) => redis.call('CLIENT', 'LIST') as Promise<string>)).split('\n').filter((client) => / sub=[1-9]/.test(client)).length
const exists = (port: number, key: string) => set.ask(port, async (redis) => await redis.exists(keyPrefix + key) === 1)

const json = (line: string) => { try { return JSON.parse(line) as Line } catch { return undefined } }
const lines = (text: string) => text.split('\n').filter(Boolean)
/** The CLI's lines and the in-process store's, parsed (both log the sentinel). */
const logged = () => [...lines(stdout), ...storeLines].map(json).filter((line) => line !== undefined)

/**
 * `line` as docs/operations.md shows it: this set's ports written as the docs' (sentinel 26379,
 * master 6379, replica 6380), without what the docs cannot know (time, pid, hostname, durations, counts).
 */
function asDocumented (line: object, ports = { sentinel: sentinelPort(), master: set.master.port, replica: set.replica.port }): Record<string, unknown> {
  const { time: _time, pid: _pid, hostname: _hostname, downForMs: _down, failedWhileDown: _failed, ...rest } = line as Record<string, unknown>
  const text = JSON.stringify(rest).replaceAll(`:${ports.sentinel}`, ':26379').replaceAll(`:${ports.master}`, ':6379').replaceAll(`:${ports.replica}`, ':6380')
  return JSON.parse(text) as Record<string, unknown>
}
/** The JSON log lines docs/operations.md shows, as asDocumented gives them. */
async function documentedLines (): Promise<Array<Record<string, unknown>>> {
  const text = await readFile('docs/operations.md', 'utf8')
  return [...text.matchAll(/^\{"level":.*\}$/gm)].map(([line]) => asDocumented(JSON.parse(line) as object, { sentinel: 26379, master: 6379, replica: 6380 }))
}

async function unavailable (command: Promise<unknown>): Promise<string> {
  const error = await command.then(() => undefined, (error: unknown) => error)
  return error instanceof GatewayError ? error.code : `not a GatewayError: ${String(error)}`
}

describe('the store\'s own +switch-master connections to the sentinels', () => {
  it('never runs later a command it answered 503 while the master was frozen', async () => {
    const watcher = set.client(sentinelPort(), { retryStrategy: () => 100 })
    const switched = new Promise<void>((resolve) => watcher.on('message', () => resolve()))
    await watcher.subscribe('+switch-master')
    await store.set('state', 'a sign-in state', 60_000)
    await waitFor(() => exists(set.replica.port, 'state'), 5000, 'the replica to hold the sign-in state')

    set.master.freeze()
    // Each answered 503 once store.timeout passes: a write, a lock claim, a sign-in state taken.
    expect(await Promise.all([
      unavailable(store.set('written', 'x', 60_000)),
      unavailable(store.claim('lock', 'owner', 60_000)),
      unavailable(store.take('state')),
    ])).toEqual(['session_store_unavailable', 'session_store_unavailable', 'session_store_unavailable'])

    // Sentinel's own timings bound this wait: down-after 500 ms, then its failover (timeout 2 s).
    await switched
    watcher.disconnect()
    // Both stores left the frozen master for the promoted replica, the old one still frozen.
    await waitFor(async () => { await store.ping(); return true }, AFTER_SWITCH_MS + TIMEOUT_MS, 'the store to answer from the promoted replica')
    await waitFor(async () => await storeState() === 'up', AFTER_SWITCH_MS + 2 * TIMEOUT_MS, 'the gateway to answer from the promoted replica')

    // The promoted replica has seen every command sent before that ping: none of the three ran.
    expect({
      written: await exists(set.replica.port, 'written'),
      lock: await exists(set.replica.port, 'lock'),
      state: await exists(set.replica.port, 'state'),
    }).toEqual({ written: false, lock: false, state: true })
    const announcements = storeLines.map(json).filter((line) => line?.msg.startsWith('sentinels announced a new master'))
    expect(announcements).toHaveLength(1)
    expect(await documentedLines()).toContainEqual(asDocumented(announcements[0]!))
    // The outage's pair of lines names its one cause: reconnecting asked a sentinel that answered.
    const recovered = () => storeLines.map(json).filter((line) => line?.msg === 'session store reachable again')
    await waitFor(async () => recovered().length === 1, DEFAULT_HYSTERESIS.upAfterMs + TIMEOUT_MS, 'the store\'s recovery line')
    expect(recovered()[0]).toMatchObject({ store: 'sentinel:mymaster', reason: 'Command timed out' })
    expect(recovered()[0]).not.toHaveProperty('lastReason')
  }, 30_000)

  it('logs a sentinel that is down as JSON lines naming it and the cause, and listens to it again once back', async () => {
    await waitFor(async () => await subscribed() >= 2, LOGGED_WITHIN_MS, 'both stores subscribed to +switch-master')
    const node = set.nodes[0]!
    await set.sentinel.kill()
    const down = () => logged().filter((line) => line.msg.startsWith('sentinel unreachable') && line.sentinel === node)
    await waitFor(async () => down().length === 2, LOGGED_WITHIN_MS, 'a warn line from each store naming the sentinel')
    for (const line of down()) expect(line).toMatchObject({ level: 40, reason: `connect ECONNREFUSED ${node}` })
    expect(await documentedLines()).toContainEqual(asDocumented(down()[0]!))

    await set.sentinel.start()
    const back = () => logged().filter((line) => line.msg === 'sentinel reachable again' && line.sentinel === node)
    await waitFor(async () => back().length === 2, LOGGED_WITHIN_MS, 'an info line from each store')
    for (const line of back()) expect(line).toMatchObject({ level: 30, reason: `connect ECONNREFUSED ${node}` })
    expect(await documentedLines()).toContainEqual(asDocumented(back()[0]!))
    // Subscribed again, one connection per store (this process's and the CLI gateway's): a
    // +switch-master it announces now is heard.
    await waitFor(async () => await subscribed() === 2, LOGGED_WITHIN_MS, 'both stores subscribed again')

    expect([...lines(stdout), ...lines(stderr)].filter((line) => json(line) === undefined)).toEqual([])
    expect(logged().filter((line) => line.level >= 50)).toEqual([])
  }, 30_000)
})
