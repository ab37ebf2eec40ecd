// Closing the store whatever its connections are doing: SIGTERM to the CLI gateway while its Redis
// is frozen (SIGSTOP: connections stay open, nothing is answered) exits 0 within store.timeout and
// a little, not after server.shutdownTimeout with exit code 1; and a store that never connected
// (a frozen Redis took the connection, and never answered its ready check) closes within the same bound.
import { spawn } from 'node:child_process'
import { mkdtemp, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import pino from 'pino'
import { Redis } from 'ioredis'
import { stringify } from 'yaml'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { RedisStore } from '../../src/store/redis.js'
import { ONE_ANSWER_MS } from '../helpers/bounds.js'
import { TEST_SECRET } from '../helpers/gateway.js'
import { freePort, waitFor } from '../helpers/net.js'
import { Children } from '../helpers/processes.js'
import { startRedis, type TestRedis } from '../helpers/redis.js'

/** store.timeout in these tests. */
const TIMEOUT_MS = 300
/** What closing may take beyond store.timeout: the process's own work (closing the server, writing its last lines, exiting). */
const EXIT_ALLOWANCE_MS = ONE_ANSWER_MS
/**
 * store.timeout bounds a close: it is the disconnect timeout of each connection to the frozen Redis
 * (src/store/redis.ts), and the close waits for nothing else but the process's own work.
 */
const CLOSED_WITHIN_MS = TIMEOUT_MS + EXIT_ALLOWANCE_MS
/** server.shutdownTimeout: long enough that hitting it cannot pass for a bounded close. */
const SHUTDOWN_TIMEOUT_MS = 5000

let redis: TestRedis
const children = new Children()
/** The spawned redis-server's pid, while it is stopped (SIGSTOP). */
let frozen: number | undefined

beforeAll(async () => {
  redis = await startRedis('spawn')
})
afterAll(async () => {
  if (frozen !== undefined) process.kill(frozen, 'SIGCONT')
  await children.end()
  await redis?.release()
})

/** The pid of the redis-server answering at `url` (INFO server). */
async function redisPid (url: string): Promise<number> {
  const client = new Redis(url)
  try {
    return Number(/process_id:(\d+)/.exec(await client.info('server'))![1])
  } finally {
    client.disconnect()
  }
}

async function subscribers (url: string): Promise<number> {
  const client = new Redis(url)
  try {
    const [, count] = await client.pubsub('NUMSUB', 'gw:session-invalidated') as [string, number]
    return count
  } finally {
    client.disconnect()
  }
}

describe('SIGTERM while Redis is frozen', () => {
  it('exits 0 within store.timeout (and the process\'s own exit), with no request in flight', async () => {
    const port = await freePort()
    const file = join(await mkdtemp(join(tmpdir(), 'gw-frozen-')), 'gateway.yaml')
    await writeFile(file, stringify({
      server: { host: '127.0.0.1', port, shutdownTimeout: `${SHUTDOWN_TIMEOUT_MS}ms` },
      session: { secret: TEST_SECRET },
      store: { type: 'redis', url: redis.url, timeout: `${TIMEOUT_MS}ms` },
      routes: [{ path: '/public/', upstream: 'http://127.0.0.1:9', auth: 'none' }],
    }))
    const child = children.add(spawn(process.execPath, ['dist/src/main.js', '--config', file], { stdio: ['ignore', 'pipe', 'pipe'] }))
    let output = ''
    child.stdout.on('data', (chunk: Buffer) => { output += chunk.toString() })
    const exited = new Promise<{ code: number | null, at: number }>((resolve) => child.once('exit', (code) => resolve({ code, at: Date.now() })))
    // Its last lines may still be in the pipe when it has exited.
    const closed = new Promise((resolve) => child.once('close', resolve))
    await waitFor(async () => (await fetch(`http://127.0.0.1:${port}/readyz`)).ok, 10_000, 'the gateway to be ready')
    // Its subscriber connection is up (a QUIT on it would wait for the frozen Redis).
    await waitFor(async () => await subscribers(redis.url) === 1, 5000, 'the gateway to subscribe')

    frozen = await redisPid(redis.url)
    process.kill(frozen, 'SIGSTOP')
    const signalled = Date.now()
    child.kill('SIGTERM')
    const { code, at } = await exited

    expect({ code, ms: at - signalled < CLOSED_WITHIN_MS }).toEqual({ code: 0, ms: true })
    await closed
    expect(output).toContain('"msg":"shut down"')
    expect(output).not.toContain('did not finish within server.shutdownTimeout')
    process.kill(frozen, 'SIGCONT')
    frozen = undefined
  })
})

describe('a store that never connected', () => {
  const config = (url: string) => ({ type: 'redis' as const, url, cluster: undefined, sentinel: undefined, keyPrefix: 'gw:', timeoutMs: TIMEOUT_MS, readiness: 'required' as const, waitForReplica: 0 })

  /** Closes a store made for `url` that subscribed and never became ready; how long closing took. */
  async function closeUnconnected (url: string): Promise<number> {
    const store = new RedisStore(config(url), pino({ level: 'silent' }))
    await store.subscribe('session-invalidated', () => {})
    expect(await store.ready(TIMEOUT_MS)).toBe(false)
    const started = Date.now()
    await store.close()
    return Date.now() - started
  }

  it('closes within store.timeout when Redis took the connection but is frozen (its subscriber\'s QUIT would wait behind SUBSCRIBE)', async () => {
    frozen = await redisPid(redis.url)
    process.kill(frozen, 'SIGSTOP')
    const ms = await closeUnconnected(redis.url)
    process.kill(frozen, 'SIGCONT')
    frozen = undefined
    expect(ms).toBeLessThan(CLOSED_WITHIN_MS)
  })
})
