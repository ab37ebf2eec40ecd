// The Redis Sentinel form of store:, against a real sentinel (redis-server --sentinel) watching a
// real Redis: the gateway asks the sentinel for the master and keeps its sessions there; with ACL
// users required by the Redis nodes and by the sentinel, and over TLS everywhere (the gateway CLI
// trusting the servers' CA through NODE_EXTRA_CA_CERTS, its passwords written as ${VAR}).
/* eslint-disable no-template-curly-in-string -- gateway.yaml's ${VAR} references, as an operator writes them */
import { spawn } from 'node:child_process'
import { mkdtemp, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import type { FastifyBaseLogger } from 'fastify'
import { Redis } from 'ioredis'
import pino from 'pino'
import { stringify } from 'yaml'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { parseConfig } from '../../src/config/config.js'
import { loggerOptions } from '../../src/ops/logger.js'
import { DEFAULT_HYSTERESIS } from '../../src/store/outage-log.js'
import { RedisStore } from '../../src/store/redis.js'
import { Browser } from '../helpers/browser.js'
import { logCollector, oidcClient, startGatewayWithProvider, TEST_SECRET, type TestGateway } from '../helpers/gateway.js'
import { freePort, waitFor } from '../helpers/net.js'
import { startOidcProvider, type TestProvider } from '../helpers/oidc.js'
import { Children } from '../helpers/processes.js'
import { startRedis, type TestRedis } from '../helpers/redis.js'
import { startSentinel, startSentinelSet, type TestSentinel, type TestSentinelSet } from '../helpers/redis-sentinel.js'
import { startUpstream, type Upstream } from '../helpers/upstream.js'

describe('store.sentinel', () => {
  let master: TestRedis
  let sentinel: TestSentinel
  let stack: Awaited<ReturnType<typeof startGatewayWithProvider>>
  let upstream: Upstream
  let gateway: TestGateway

  beforeAll(async () => {
    master = await startRedis('spawn')
    sentinel = await startSentinel(master.url)
    upstream = await startUpstream()
    stack = await startGatewayWithProvider({
      // A master without a replica: nothing could acknowledge a sign-in (store.waitForReplica).
      store: { type: 'redis', sentinel: { name: 'mymaster', nodes: [sentinel.node] }, waitForReplica: false },
      routes: [{ path: '/app/', upstream: upstream.url, provider: 'demo' }],
    })
    gateway = stack.gateway
  })

  afterAll(async () => {
    await stack?.close()
    await upstream?.close()
    await sentinel?.stop()
    await master?.stop()
  })

  it('finds the master through the sentinel and keeps sessions there', async () => {
    const browser = new Browser()
    expect((await browser.navigate(`${gateway.url}/app/`)).status).toBe(200)
    expect((await fetch(`${gateway.url}/readyz`)).status).toBe(200)
    const client = new Redis(master.url)
    expect((await client.keys('gw:session:*')).length).toBe(1)
    await client.quit()
  })
})

/** Passwords of the tests below: they must never reach a log line. */
const REDIS_USER = { username: 'gateway', password: 'redis-pass-7f3a9c' }
const SENTINEL_USER = { username: 'watcher', password: 'sentinel-pass-2b8e1d' }

/**
 * The store's +switch-master connection (src/store/sentinel-watch.ts) is subscribed on the sentinel,
 * as the sentinel's ACL user (and over TLS when the set is): the sentinel's CLIENT LIST shows it.
 */
async function switchMasterHeard (set: TestSentinelSet, username = SENTINEL_USER.username): Promise<void> {
  const sentinel = set.client(Number(set.nodes[0]!.split(':')[1]))
  try {
    const listening = async () => (await sentinel.call('CLIENT', 'LIST') as string).split('\n').some((client) => / sub=1 /.test(client) && client.includes(` user=${username} `))
    await waitFor(listening, 5000, 'the gateway subscribed to the sentinel\'s +switch-master')
  } finally {
    sentinel.disconnect()
  }
}

describe('store.sentinel with ACL users on the Redis nodes and on the sentinel', () => {
  let set: TestSentinelSet
  let stack: Awaited<ReturnType<typeof startGatewayWithProvider>>
  let upstream: Upstream

  beforeAll(async () => {
    set = await startSentinelSet({ redisUser: REDIS_USER, sentinelUser: SENTINEL_USER })
    upstream = await startUpstream()
    stack = await startGatewayWithProvider({
      store: {
        type: 'redis',
        sentinel: { name: 'mymaster', nodes: set.nodes, username: REDIS_USER.username, password: REDIS_USER.password, sentinelUsername: SENTINEL_USER.username, sentinelPassword: SENTINEL_USER.password },
      },
      routes: [{ path: '/app/', upstream: upstream.url, provider: 'demo' }],
    })
  })
  afterAll(async () => {
    await stack?.close()
    await upstream?.close()
    await set?.stop()
  })

  it('signs in and keeps the session on the master, logging neither password', async () => {
    const browser = new Browser()
    expect((await browser.navigate(`${stack.gateway.url}/app/`)).status).toBe(200)
    expect((await fetch(`${stack.gateway.url}/readyz`)).status).toBe(200)
    const master = set.client(set.master.port)
    expect((await master.keys('gw:session:*')).length).toBe(1)
    master.disconnect()
    await switchMasterHeard(set)
    const logs = stack.gateway.logs.join('\n')
    expect(logs).not.toContain(REDIS_USER.password)
    expect(logs).not.toContain(SENTINEL_USER.password)
  })

  it('logs a sentinel that refuses the password as unreachable, naming WRONGPASS, and subscribes once it accepts it', async () => {
    const late = { username: 'late', password: 'late-pass-5c1e0a' }
    const { stream, lines } = logCollector()
    const config = parseConfig(stringify({
      store: { type: 'redis', sentinel: { name: 'mymaster', nodes: set.nodes, username: REDIS_USER.username, password: REDIS_USER.password, sentinelUsername: late.username, sentinelPassword: late.password } },
    }), {}, 'test.yaml').store
    const store = new RedisStore(config, pino(loggerOptions('info'), stream) as unknown as FastifyBaseLogger)
    const sentinelLines = (msg: string) => lines.map((line) => JSON.parse(line) as { msg: string, sentinel?: string, reason?: string }).filter((line) => line.msg.startsWith(msg) && line.sentinel === set.nodes[0])
    // Bounds: the outage log's hysteresis after a reconnection (1 s apart at most).
    const within = DEFAULT_HYSTERESIS.downAfterMs + 1000 + DEFAULT_HYSTERESIS.upAfterMs
    try {
      await waitFor(async () => sentinelLines('sentinel unreachable').length === 1, within, 'the sentinel unreachable line')
      expect(sentinelLines('sentinel unreachable')[0]!.reason).toMatch(/^WRONGPASS/)
      const sentinel = set.client(Number(set.nodes[0]!.split(':')[1]))
      await sentinel.call('ACL', 'SETUSER', late.username, 'on', `>${late.password}`, '+@all', '~*', '&*')
      sentinel.disconnect()
      await waitFor(async () => sentinelLines('sentinel reachable again').length === 1, within, 'the sentinel reachable again line')
      await switchMasterHeard(set, late.username)
      expect(lines.join('\n')).not.toContain(late.password)
    } finally {
      await store.close()
    }
  })
})

describe('store.sentinel over TLS, passwords from variables (the gateway CLI, its CA in NODE_EXTRA_CA_CERTS)', () => {
  const children = new Children()
  let set: TestSentinelSet
  let op: TestProvider
  let upstream: Upstream
  let url: string
  let output = ''

  beforeAll(async () => {
    set = await startSentinelSet({ tls: true, redisUser: REDIS_USER, sentinelUser: SENTINEL_USER })
    upstream = await startUpstream()
    const port = await freePort()
    url = `http://127.0.0.1:${port}`
    op = await startOidcProvider([{ client_id: 'c', client_secret: 's', redirect_uris: [`${url}/oauth/authorized/demo/`] }])
    const dir = await mkdtemp(join(tmpdir(), 'gw-sentinel-tls-'))
    const file = join(dir, 'gateway.yaml')
    await writeFile(file, stringify({
      server: { host: '127.0.0.1', port, baseUrl: url },
      session: { secret: TEST_SECRET },
      store: {
        type: 'redis',
        sentinel: {
          name: 'mymaster',
          nodes: set.nodes,
          username: REDIS_USER.username,
          password: '${REDIS_PASSWORD}',
          sentinelUsername: SENTINEL_USER.username,
          sentinelPassword: '${SENTINEL_PASSWORD}',
          tls: true,
        },
      },
      providers: { demo: oidcClient(op.issuer, 'c', 's') },
      routes: [{ path: '/app/', upstream: upstream.url, provider: 'demo' }],
    }))
    const env = { ...process.env, NODE_EXTRA_CA_CERTS: set.caFile, REDIS_PASSWORD: REDIS_USER.password, SENTINEL_PASSWORD: SENTINEL_USER.password }
    const child = children.add(spawn(process.execPath, ['dist/src/main.js', '--config', file], { env, stdio: ['ignore', 'pipe', 'pipe'] }))
    child.stdout.on('data', (chunk: Buffer) => { output += chunk.toString() })
    child.stderr.on('data', (chunk: Buffer) => { output += chunk.toString() })
    await waitFor(async () => (await fetch(`${url}/readyz`)).ok, 10_000, 'the gateway to reach the store over TLS').catch((error: Error) => {
      throw new Error(`${error.message}\n${output}`)
    })
  })
  afterAll(async () => {
    await children.end()
    await op?.close()
    await upstream?.close()
    await set?.stop()
  })

  it('signs in and keeps the session on the master, logging neither password', async () => {
    const browser = new Browser()
    expect((await browser.navigate(`${url}/app/`)).status).toBe(200)
    const master = set.client(set.master.port)
    expect((await master.keys('gw:session:*')).length).toBe(1)
    master.disconnect()
    await switchMasterHeard(set)
    expect(output).not.toContain(REDIS_USER.password)
    expect(output).not.toContain(SENTINEL_USER.password)
  })
})
