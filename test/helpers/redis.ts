// A real Redis for a test file: testcontainers when a Docker engine answers (and the local test
// image exists), else a spawned `redis-server` on a free port, else REDIS_URL. Never a fake.
// TEST_REDIS=container|spawn|url forces one path.
import { spawn, type ChildProcess } from 'node:child_process'
import { existsSync, rmSync, writeFileSync } from 'node:fs'
import { mkdir, mkdtemp, readdir, readFile, rm } from 'node:fs/promises'
import { randomBytes } from 'node:crypto'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { freePort } from './net.js'

export type RedisKind = 'container' | 'spawn' | 'url'

export interface TestRedis {
  url: string
  kind: RedisKind
  /** Stops the server: an outage, for fault tests. */
  stop (): Promise<void>
  /**
   * The test file is done with it (afterAll): a container is emptied and kept for the next file of
   * this test worker (see `idle`); a spawned server is stopped. Nothing after stop().
   */
  release (): Promise<void>
  /** Starts it again on the same port (spawned servers only). */
  restart? (): Promise<void>
}

export interface RedisOptions {
  /** Keep data across restart() (append-only file, fsync always); spawned servers only. */
  persistent?: boolean
}

/** The image `scripts/docker-test-env.sh` builds (no registry is needed). */
export const REDIS_IMAGE = process.env.REDIS_TEST_IMAGE ?? 'gateway-test/redis:7'

process.env.TESTCONTAINERS_RYUK_DISABLED ??= 'true'

/**
 * testcontainers 12 needs Node >= 22.22 and crashes on load before that; the machine's Node 20 gets
 * 11 (installed under the alias `testcontainers-node20`), whose API this file uses the same way.
 */
export function testcontainersModule (version = process.versions.node): string {
  const [major = 0, minor = 0] = version.split('.').map(Number)
  return major > 22 || (major === 22 && minor >= 22) ? 'testcontainers' : 'testcontainers-node20'
}

async function loadTestcontainers (): Promise<typeof import('testcontainers')> {
  return await import(/* @vite-ignore */ testcontainersModule()) as typeof import('testcontainers')
}

function dockerConfigured (): boolean {
  return Boolean(process.env.DOCKER_HOST) || existsSync('/var/run/docker.sock')
}

/** True when a Docker engine answers and has the test image (checked once per process). */
let containerCheck: Promise<boolean> | undefined
export function containersAvailable (): Promise<boolean> {
  containerCheck ??= (async () => {
    if (!dockerConfigured()) return false
    try {
      const { getContainerRuntimeClient, ImageName } = await loadTestcontainers()
      const client = await getContainerRuntimeClient()
      return await client.image.exists(ImageName.fromString(REDIS_IMAGE))
    } catch {
      return false
    }
  })()
  return containerCheck
}

/**
 * Servers of this test worker that a finished test file released, emptied, for the next file to
 * take: starting and removing a container costs the engine about as much as a test file's own work
 * (on 2 cores, 2026-11-25: the suite took 47-53 s with one container per file, 38-41 s with one per
 * worker), and a test worker forking a redis-server for each file cost the suite about 5 s of its
 * CPU (a worker's fork copies its page tables, and a worker holds the whole module graph). The files
 * of one worker run one after another, and a released server has no client left, no keys, no
 * scripts (`clean`), checked again when the next file takes it, so a file still gets a Redis no
 * other file is using. A server a file stopped (an outage), or one a test asked for by kind (the
 * fault tests, which set its config and users), is never kept.
 */
interface Pooled { url: string, end (): Promise<void> }
const idle: Record<'container' | 'spawn', Pooled[]> = { container: [], spawn: [] }

/** The label every pooled container carries: the vitest run's pid (the workers' parent), for the teardown in test/global-setup.ts. */
export const POOL_LABEL = 'gateway-test.run'

/** Stops and removes the containers this vitest run (`runPid`) left in its workers' pools. */
export async function removePooledContainers (runPid: number): Promise<void> {
  if (!await containersAvailable()) return
  const { getContainerRuntimeClient } = await loadTestcontainers()
  const client = await getContainerRuntimeClient()
  const ours = (await client.container.list()).filter((info) => info.Labels[POOL_LABEL] === String(runPid))
  await Promise.all(ours.map(async (info) => {
    const container = client.container.getById(info.Id)
    await client.container.stop(container, { timeout: 0 })
    await client.container.remove(container, { removeVolumes: true })
  }))
}

/**
 * With `empty` (when released): closes every other connection and empties the server. Then, and
 * when a file takes it: true only if no other client is connected and no key is left, so a client
 * a failed test left behind (one that reconnected after being closed) never meets the next file.
 */
async function clean (url: string, empty: boolean): Promise<boolean> {
  const { Redis } = await import('ioredis')
  // Bounded: a container that answers nothing counts as unclean after one command's 2 s (no ready
  // check and no CLIENT SETINFO, each of which would wait as long).
  const client = new Redis(url, { lazyConnect: true, maxRetriesPerRequest: 0, retryStrategy: () => null, connectTimeout: 2000, commandTimeout: 2000, enableReadyCheck: false, disableClientInfo: true })
  try {
    await client.connect()
    if (empty) {
      await client.call('CLIENT', 'KILL', 'TYPE', 'normal', 'SKIPME', 'yes')
      await client.call('CLIENT', 'KILL', 'TYPE', 'pubsub')
      await client.flushall()
      await client.script('FLUSH')
    }
    const clients = /connected_clients:(\d+)/.exec(await client.info('clients'))?.[1]
    return clients === '1' && await client.dbsize() === 0
  } catch {
    return false
  } finally {
    client.disconnect()
  }
}

/** A server of `kind` a previous file released that is still clean, else undefined (the unclean ones are ended). */
async function takeIdle (kind: keyof typeof idle): Promise<Pooled | undefined> {
  for (let taken = idle[kind].pop(); taken; taken = idle[kind].pop()) {
    if (await clean(taken.url, false)) return taken
    await taken.end().catch(() => {})
  }
  return undefined
}

/**
 * `server` as a test file's Redis: released, it goes back to the worker's pool when `pooled` and
 * it was never stopped and empties cleanly; otherwise it is stopped.
 */
function lent (server: Pooled & { kind: keyof typeof idle, restart?: () => Promise<void> }, pooled: boolean): TestRedis {
  let inUse = true
  let stopped = false
  const stop = async () => {
    if (!inUse) return
    stopped = true
    await server.end()
  }
  return {
    url: server.url,
    kind: server.kind,
    stop,
    ...(server.restart ? { restart: server.restart } : {}),
    release: async () => {
      if (!inUse) return
      if (pooled && !stopped && await clean(server.url, true)) {
        inUse = false
        idle[server.kind].push(server)
      } else {
        await stop()
        inUse = false
      }
    },
  }
}

async function startContainer (pooled: boolean): Promise<TestRedis> {
  process.env.TESTCONTAINERS_HOST_OVERRIDE ??= 'localhost'
  const taken = pooled ? await takeIdle('container') : undefined
  if (taken) return lent({ ...taken, kind: 'container' }, true)
  const { GenericContainer, Wait } = await loadTestcontainers()
  const container = await new GenericContainer(REDIS_IMAGE)
    .withExposedPorts(6379)
    .withLabels({ [POOL_LABEL]: String(process.ppid) })
    .withWaitStrategy(Wait.forLogMessage('Ready to accept connections'))
    .start()
  let ended: Promise<unknown> | undefined
  const end = async () => { await (ended ??= container.stop({ timeout: 1000 })) }
  return lent({ url: `redis://${container.getHost()}:${container.getMappedPort(6379)}`, kind: 'container', end }, pooled)
}

export function redisServerPath (): string | undefined {
  for (const dir of (process.env.PATH ?? '').split(':')) {
    if (dir && existsSync(`${dir}/redis-server`)) return `${dir}/redis-server`
  }
  return undefined
}

/** redis-server said it is ready, or it exited first (its own words say why, such as a port taken meanwhile). */
export async function launched (child: ChildProcess): Promise<void> {
  let said = ''
  await new Promise<void>((resolve, reject) => {
    const listen = (chunk: Buffer) => {
      if (said.length < 8192) said += chunk.toString()
      if (said.includes('Ready to accept connections')) resolve()
    }
    child.stdout!.on('data', listen)
    child.stderr!.on('data', listen)
    child.once('exit', (code, signal) => { reject(new Error(`redis-server exited (${code ?? signal}) before it was ready: ${said.trim().split('\n').slice(-3).join(' | ')}`)) })
  })
}

/** The user a spawned server's URL signs in as (see startSpawned). */
const SPAWNED_USER = 'gateway-test'

/** How many ports from the OS a spawned redis-server is offered before its start counts as failed. */
const PORT_OFFERS = 5

/**
 * Where the spawned servers of this vitest run (the workers' parent) that may be kept leave their pids while they
 * run, for the teardown in test/global-setup.ts: the servers a worker keeps for its next file
 * outlive the worker's last file, and a worker ends on a signal, with no exit handler run.
 */
function spawnedPidDir (runPid: number): string {
  return join(tmpdir(), `gateway-test-redis-${runPid}`)
}

/** Ends the spawned servers this vitest run (`runPid`) left running in its workers' pools. */
export async function endPooledServers (runPid: number): Promise<void> {
  const dir = spawnedPidDir(runPid)
  const pids = await readdir(dir).catch(() => [])
  for (const pid of pids.map(Number)) {
    // Only a redis-server: a pid whose server ended may have been given to another process since.
    const command = await readFile(`/proc/${pid}/comm`, 'utf8').catch(() => '')
    if (command.startsWith('redis-server')) process.kill(pid, 'SIGKILL')
  }
  await rm(dir, { recursive: true, force: true })
}

async function startSpawned (binary: string, options: RedisOptions, pooled: boolean): Promise<TestRedis> {
  const taken = pooled ? await takeIdle('spawn') : undefined
  if (taken) return lent({ ...taken, kind: 'spawn' }, true)
  const dir = options.persistent ? await mkdtemp(join(tmpdir(), 'gw-redis-')) : undefined
  // Only a server that may be kept for the next file leaves its pid (a bench, outside vitest, asks
  // for its own servers by kind and stops them itself).
  const pidDir = pooled ? spawnedPidDir(process.ppid) : undefined
  if (pidDir) await mkdir(pidDir, { recursive: true })
  let port = 0
  let child: ChildProcess
  let exited: Promise<void>
  // Waits on redis-server's own word (ready, or exited and why), never on a clock: a busy machine only makes it later.
  // The URL signs in as a user only this server has. Stopped, the server frees its port, and any
  // other process may take it; a redis-server another test file starts there would otherwise answer
  // the gateway's reconnections in this one's place (a full run once saw an outage logged twice,
  // with a recovery in between that no restart had made). That server refuses the user (WRONGPASS):
  // still an outage. The default user stays, without a password, for replicas and sentinels.
  const password = randomBytes(12).toString('hex')
  const start = async () => {
    child = spawn(binary, ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--user', SPAWNED_USER, 'on', `>${password}`, '~*', '&*', '+@all',
      ...(dir ? ['--appendonly', 'yes', '--appendfsync', 'always', '--dir', dir] : ['--appendonly', 'no'])], { stdio: ['ignore', 'pipe', 'pipe'] })
    const pidFile = pidDir && join(pidDir, String(child.pid))
    if (pidFile) writeFileSync(pidFile, '')
    exited = new Promise<void>((resolve) => child.once('exit', () => {
      if (pidFile) rmSync(pidFile, { force: true })
      resolve()
    }))
    await launched(child)
  }
  const end = async () => {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL')
    await exited
  }
  // redis-server cannot listen on port 0, so it is given a port the OS just freed; between that and
  // its bind, the OS may hand the same port to another socket (an outgoing connection's own end:
  // a full run saw it). Its own words say so, and then it is offered another port from the OS.
  for (let offer = 1; ; offer++) {
    port = await freePort()
    try {
      await start()
      break
    } catch (error) {
      if (offer === PORT_OFFERS || !String(error).includes('Address already in use')) throw error
    }
  }
  return lent({ url: `redis://${SPAWNED_USER}:${password}@127.0.0.1:${port}`, kind: 'spawn', end, restart: start }, pooled)
}

/**
 * A Redis for this test file. `kind` asks for one kind of server (a fault test that stops it, sets
 * its config or its users gets one of its own, never one kept for the next file); without it,
 * TEST_REDIS, else a container when the engine answers, else a spawned server, else REDIS_URL.
 */
export async function startRedis (kind?: RedisKind, options: RedisOptions = {}): Promise<TestRedis> {
  const forced = kind ?? process.env.TEST_REDIS as RedisKind | undefined
  const pooled = kind === undefined && !options.persistent
  if (forced === 'container' || (forced === undefined && await containersAvailable())) return await startContainer(pooled)
  const binary = redisServerPath()
  if (forced === 'spawn' || (forced === undefined && binary)) {
    if (!binary) throw new Error('TEST_REDIS=spawn, but redis-server is not on PATH (apt-get install -y redis-server)')
    return await startSpawned(binary, options, pooled)
  }
  if (process.env.REDIS_URL) return { url: process.env.REDIS_URL, kind: 'url', stop: async () => {}, release: async () => {} }
  throw new Error('No Redis for the tests: start a Docker engine with the test image (bash scripts/docker-test-env.sh), ' +
    'install redis-server (apt-get install -y redis-server), or set REDIS_URL')
}
