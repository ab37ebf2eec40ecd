// Outage lines name their real cause: a killed Redis (refused connection), a password changed on
// the server (WRONGPASS), a password set on a server the gateway reaches without one (NOAUTH) and a
// certificate that does not verify, each against a real redis-server, with commands failing all
// along as requests would. The cause is in the "unreachable" line and again in the "reachable again"
// line, never the failures that only follow from it ("connection closed", "Stream isn't
// writeable"), and each line is one docs/operations.md shows.
import { spawn, execFileSync, type ChildProcess } from 'node:child_process'
import { mkdtemp, readFile, rm } from 'node:fs/promises'
import { Socket } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import type { FastifyBaseLogger } from 'fastify'
import { Redis } from 'ioredis'
import pino from 'pino'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { stringify } from 'yaml'
import { parseConfig } from '../../src/config/config.js'
import { loggerOptions } from '../../src/ops/logger.js'
import { RedisStore } from '../../src/store/redis.js'
import { startDelayProxy } from '../helpers/delay-proxy.js'
import { logCollector } from '../helpers/gateway.js'
import { freePort, waitFor } from '../helpers/net.js'
import { redisServerPath, startRedis } from '../helpers/redis.js'

/** What Node 24 appends to a TLS verification error's message. */
const NODE_CA_HINT = '; if the root CA is installed locally, try running Node.js with --use-system-ca'
const escape = (text: string) => text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')

/** store.timeout of the stores here (storeFor). */
const STORE_TIMEOUT_MS = 250
/**
 * The outage is logged 200 ms after the failures began, the recovery 200 ms after the answers did.
 * The failures of the steady requests carry no cause; when none has been said by then, the store
 * waits for the connection attempt that says it (a TLS error, ECONNREFUSED, ETIMEDOUT at its connect
 * timeout: twice store.timeout), whatever the machine's load (outage-log.ts, causeWaitMs).
 */
const HYSTERESIS = { downAfterMs: 200, upAfterMs: 200 }
const BINARY = redisServerPath()

interface Line { level: number, msg: string, store?: string, reason?: string, lastReason?: string, [field: string]: unknown }

/**
 * A store as the gateway makes it (config through parseConfig), logging as the gateway does, with
 * requests going on: from the start (a store broken from the start), or, as the gateway serves,
 * once its first connection has opened (a store that breaks later, whose outage is then the only one).
 */
function storeFor (url: string, { timeoutMs = STORE_TIMEOUT_MS, requestsFrom = 'ready' }: { timeoutMs?: number, requestsFrom?: 'start' | 'ready' } = {}) {
  const { stream, lines } = logCollector()
  const log = pino(loggerOptions('info'), stream) as unknown as FastifyBaseLogger
  const config = parseConfig(stringify({ store: { type: 'redis', url, timeout: `${timeoutMs}ms` } }), {}, 'test.yaml').store
  const store = new RedisStore(config, log, { hysteresis: HYSTERESIS })
  // Steady requests, every 20 ms: their failures must not take the place of the cause.
  const state = { running: true }
  const load = (async () => {
    if (requestsFrom === 'ready') await store.ready(5000)
    while (state.running) {
      await store.get('gw-test').catch(() => {})
      await new Promise((resolve) => setTimeout(resolve, 20))
    }
  })()
  const parsed = () => lines.map((line) => JSON.parse(line) as Line)
  const withMsg = (start: string) => parsed().filter((line) => line.msg.startsWith(start))
  return {
    store,
    lines,
    unreachable: () => withMsg('session store unreachable'),
    back: () => withMsg('session store reachable again'),
    close: async () => {
      state.running = false
      await load
      await store.close()
    },
  }
}

type Watched = ReturnType<typeof storeFor>

async function outageLogged (watched: Watched): Promise<Line> {
  await waitFor(async () => watched.unreachable().length > 0, 5000, 'the "unreachable" line')
  return watched.unreachable()[0]!
}

async function recoveryLogged (watched: Watched): Promise<Line> {
  await waitFor(async () => watched.back().length > 0, 5000, 'the "reachable again" line')
  expect(watched.unreachable()).toHaveLength(1)
  expect(watched.back()).toHaveLength(1)
  return watched.back()[0]!
}

/** A redis-server with `args`, on `port` (else one from the OS); `port` is where clients connect (the TLS port with TLS). */
async function spawnRedis (args: (port: number) => string[], port?: number): Promise<{ port: number, stop (): Promise<void> }> {
  port ??= await freePort()
  const child: ChildProcess = spawn(BINARY!, ['--bind', '127.0.0.1', '--save', '', '--appendonly', 'no', ...args(port)], { stdio: 'ignore' })
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()))
  await waitFor(() => accepts(port), 10_000, `redis-server on port ${port}`)
  return {
    port,
    stop: async () => {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL')
      await exited
    },
  }
}

/** A redis-server that speaks TLS only, with a self-signed certificate for 127.0.0.1 made in `dir`. */
async function tlsRedis (dir: string, name: string): Promise<{ redis: Awaited<ReturnType<typeof spawnRedis>>, cert: string }> {
  const cert = join(dir, `${name}-cert.pem`)
  const key = join(dir, `${name}-key.pem`)
  execFileSync('openssl', ['req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes', '-days', '1',
    '-subj', '/CN=redis.test', '-addext', 'subjectAltName=IP:127.0.0.1', '-keyout', key, '-out', cert], { stdio: 'ignore' })
  const redis = await spawnRedis((port) => ['--port', '0', '--tls-port', String(port), '--tls-cert-file', cert, '--tls-key-file', key, '--tls-auth-clients', 'no'])
  return { redis, cert }
}

async function accepts (port: number): Promise<boolean> {
  return await new Promise((resolve) => {
    const socket = new Socket()
    socket.once('error', () => resolve(false))
    socket.connect(port, '127.0.0.1', () => { socket.destroy(); resolve(true) })
  })
}

/** A client of the test's own, authenticated with `password`, to change the server under the gateway. */
async function admin (port: number, password?: string): Promise<Redis> {
  const client = new Redis({ host: '127.0.0.1', port, password, lazyConnect: true, maxRetriesPerRequest: 0, retryStrategy: () => null })
  await client.connect()
  return client
}

/** Closes every client connection but the admin's: the gateway's reconnects, as after a network blip or a Redis restart. */
async function dropClients (client: Redis): Promise<void> {
  await client.call('CLIENT', 'KILL', 'TYPE', 'normal', 'SKIPME', 'yes')
}

/** The JSON log lines docs/operations.md shows. */
async function documentedLines (): Promise<Line[]> {
  const text = await readFile('docs/operations.md', 'utf8')
  return [...text.matchAll(/^\{"level":.*\}$/gm)].map(([line]) => JSON.parse(line) as Line)
}

/**
 * `line` with the test's port written as the docs' 6379, and only the fields the docs cannot know
 * in advance left out (time, pid, hostname, durations and counts).
 */
function asDocumented (line: Line, port: number): Record<string, unknown> {
  const { time: _time, pid: _pid, hostname: _hostname, downForMs: _down, failedWhileDown: _failed, ...rest } = line
  return JSON.parse(JSON.stringify(rest).replaceAll(`:${port}`, ':6379')) as Record<string, unknown>
}

async function expectDocumented (line: Line, port: number): Promise<void> {
  const documented = (await documentedLines()).map((doc) => asDocumented(doc, 6379))
  expect(documented).toContainEqual(asDocumented(line, port))
}

describe.skipIf(!BINARY)('outage lines name their real cause', () => {
  let dir: string
  beforeAll(async () => { dir = await mkdtemp(join(tmpdir(), 'gw-causes-')) })
  afterAll(async () => { await rm(dir, { recursive: true, force: true }) })

  it('a killed Redis: connect ECONNREFUSED, at the start and at the end', async () => {
    const redis = await startRedis('spawn')
    const port = Number(new URL(redis.url).port)
    const watched = storeFor(redis.url)
    try {
      expect(await watched.store.ready(5000)).toBe(true)
      await redis.stop()
      const down = await outageLogged(watched)
      expect(down).toMatchObject({ level: 40, store: `127.0.0.1:${port}`, reason: `connect ECONNREFUSED 127.0.0.1:${port}` })
      await redis.restart!()
      const back = await recoveryLogged(watched)
      expect(back).toMatchObject({ level: 30, reason: `connect ECONNREFUSED 127.0.0.1:${port}` })
      expect(back.lastReason).toBeUndefined()
      await expectDocumented(down, port)
      await expectDocumented(back, port)
    } finally {
      await watched.close()
      await redis.release()
    }
  })

  it("another test's Redis on the port a stopped one freed: WRONGPASS, the outage goes on (a test server's URL has its own user)", async () => {
    const redis = await startRedis('spawn')
    const port = Number(new URL(redis.url).port)
    const watched = storeFor(redis.url)
    let stranger: Awaited<ReturnType<typeof spawnRedis>> | undefined
    try {
      expect(await watched.store.ready(5000)).toBe(true)
      await redis.stop()
      await outageLogged(watched)
      stranger = await spawnRedis((p) => ['--port', String(p)], port)
      // Refused twice: after the first refusal the store dropped the connection and made another.
      const client = await admin(port)
      // ACL LOG: one entry per kind of refusal, with how often it happened.
      const refusals = async () => (await client.call('ACL', 'LOG') as unknown[][]).reduce<number>((sum, entry) => sum + Number(entry[entry.indexOf('count') + 1]), 0)
      try {
        await waitFor(async () => await refusals() >= 2, 5000, 'two sign-ins the other server refused')
      } finally {
        client.disconnect()
      }
      await expect(watched.store.get('gw-test')).rejects.toMatchObject({ code: 'session_store_unavailable' })
      expect(watched.back()).toEqual([])
    } finally {
      await watched.close()
      await stranger?.stop()
      await redis.release()
    }
  })

  it('a password changed on the server: WRONGPASS, with no password in any line', async () => {
    const redis = await spawnRedis((port) => ['--port', String(port), '--requirepass', 'first-password'])
    const watched = storeFor(`redis://:first-password@127.0.0.1:${redis.port}`)
    const client = await admin(redis.port, 'first-password')
    try {
      expect(await watched.store.ready(5000)).toBe(true)
      await client.config('SET', 'requirepass', 'second-password')
      await dropClients(client)
      const down = await outageLogged(watched)
      expect(down.reason).toBe('WRONGPASS invalid username-password pair or user is disabled.')
      await client.config('SET', 'requirepass', 'first-password')
      const back = await recoveryLogged(watched)
      expect(back.reason).toBe(down.reason)
      expect(watched.lines.join('\n')).not.toMatch(/first-password|second-password/)
      await expectDocumented(down, redis.port)
    } finally {
      client.disconnect()
      await watched.close()
      await redis.stop()
    }
  })

  it('a password the gateway does not send: NOAUTH', async () => {
    const redis = await spawnRedis((port) => ['--port', String(port)])
    const watched = storeFor(`redis://127.0.0.1:${redis.port}`)
    const client = await admin(redis.port)
    try {
      expect(await watched.store.ready(5000)).toBe(true)
      await client.config('SET', 'requirepass', 'now-required')
      await dropClients(client)
      const down = await outageLogged(watched)
      expect(down.reason).toBe('NOAUTH Authentication required.')
      await client.config('SET', 'requirepass', '')
      const back = await recoveryLogged(watched)
      expect(back.reason).toBe(down.reason)
      await expectDocumented(down, redis.port)
    } finally {
      client.disconnect()
      await watched.close()
      await redis.stop()
    }
  })

  it('a first connection slower than downAfterMs, with requests already coming: "no connection yet", never "connection closed"', async () => {
    const redis = await spawnRedis((port) => ['--port', String(port)])
    // Each way 150 ms: the ready check's answer comes 300 ms or more after the connection opened,
    // after the requests' failures (no connection yet, no cause) have lasted downAfterMs.
    const slow = await startDelayProxy({ host: '127.0.0.1', port: redis.port })
    slow.setDelay(150)
    const watched = storeFor(`redis://127.0.0.1:${slow.port}`, { requestsFrom: 'start' })
    try {
      const down = await outageLogged(watched)
      expect(down.reason).toBe('no connection yet')
      const back = await recoveryLogged(watched)
      expect(back.reason).toBe('no connection yet')
      const documented = (await readFile('docs/operations.md', 'utf8')).split('\n').find((line) => line.startsWith('| `no connection yet`'))
      expect(documented).toBeDefined()
    } finally {
      await watched.close()
      await slow.close()
      await redis.stop()
    }
  })

  it('a certificate that does not verify: the TLS error, until the gateway trusts it', async () => {
    const { redis, cert } = await tlsRedis(dir, 'self-signed')
    const watched = storeFor(`rediss://127.0.0.1:${redis.port}`, { requestsFrom: 'start' })
    try {
      const down = await outageLogged(watched)
      // Node 24 adds a hint to the same error (docs/operations.md shows both).
      expect(down.reason).toMatch(new RegExp(`^self-signed certificate(?:${escape(NODE_CA_HINT)})?$`))
      // The operator installs the CA (NODE_EXTRA_CA_CERTS, read at start): here the client's own TLS
      // options, which ioredis reads at each reconnection, are given it instead of restarting.
      const options = watched.store.redis.options as { tls?: Record<string, unknown> }
      options.tls = { ...options.tls, ca: await readFile(cert, 'utf8') }
      const back = await recoveryLogged(watched)
      expect(back.reason).toBe(down.reason)
      await expectDocumented({ ...down, reason: down.reason!.replace(NODE_CA_HINT, '') }, redis.port)
      expect(await readFile('docs/operations.md', 'utf8')).toContain(NODE_CA_HINT)
    } finally {
      await watched.close()
      await redis.stop()
    }
  })

  it('a certificate that does not verify, on a network slower than downAfterMs: the TLS error still, not "connection closed"', async () => {
    const { redis } = await tlsRedis(dir, 'slow')
    // The handshake's answer comes 300 ms after the attempt began (150 ms each way): after the
    // steady requests' failures, which say no cause, have lasted downAfterMs (200 ms), and well
    // within the attempt's connect timeout (twice store.timeout: 2 s here), which would otherwise
    // end it with ETIMEDOUT.
    const slow = await startDelayProxy({ host: '127.0.0.1', port: redis.port })
    slow.setDelay(150)
    const watched = storeFor(`rediss://127.0.0.1:${slow.port}`, { timeoutMs: 1000, requestsFrom: 'start' })
    try {
      const down = await outageLogged(watched)
      expect(down.reason).toMatch(new RegExp(`^self-signed certificate(?:${escape(NODE_CA_HINT)})?$`))
    } finally {
      await watched.close()
      await slow.close()
      await redis.stop()
    }
  })

  it('a plain redis:// URL to a TLS port: the reset or close the server answers with, never ioredis\'s "Stream isn\'t writeable"', async () => {
    const { redis } = await tlsRedis(dir, 'plain')
    const watched = storeFor(`redis://127.0.0.1:${redis.port}`, { requestsFrom: 'start' })
    try {
      const down = await outageLogged(watched)
      // The server resets the connection or closes it, as the bytes happen to meet: either is named.
      expect(['write ECONNRESET', 'read ECONNRESET', 'connection closed']).toContain(down.reason)
      const documented = (await readFile('docs/operations.md', 'utf8')).split('\n').find((line) => line.startsWith('| `write ECONNRESET`'))
      expect(documented).toContain(`\`${down.reason}\``)
    } finally {
      await watched.close()
      await redis.stop()
    }
  })
})
