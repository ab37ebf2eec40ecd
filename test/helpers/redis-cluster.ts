// A real Redis Cluster for tests: three `redis-server --cluster-enabled yes` on free loopback ports
// (each also needs port + 10000 free, for the cluster bus), joined with `redis-cli --cluster create`;
// optionally with a replica per master and a short node timeout, so that killing a master promotes
// its replica within seconds (failover tests).
import { execFile, spawn, type ChildProcess } from 'node:child_process'
import { mkdtemp } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { promisify } from 'node:util'
import { Redis } from 'ioredis'
import { bindable, freePort, waitFor } from './net.js'
import { launched } from './redis.js'
import { acknowledged } from './redis-sentinel.js'

const run = promisify(execFile)

export interface TestCluster {
  urls: string[]
  /** Every node's port, masters and replicas. */
  ports: number[]
  /** Kills one node (SIGKILL) and waits for it to exit. */
  kill (port: number): Promise<void>
  stop (): Promise<void>
}

export interface ClusterOptions {
  /** Replicas per master (default 0). */
  replicas?: number
  /** cluster-node-timeout: how soon a silent master is failed over (default Redis's 15 s). */
  nodeTimeoutMs?: number
}

/** Runs redis-cli against one node; its output. */
export async function redisCli (port: number, ...args: string[]): Promise<string> {
  return (await run('redis-cli', ['-p', String(port), ...args])).stdout
}

/** A free port whose cluster-bus port (+10000) is free too. */
async function clusterPort (taken: number[]): Promise<number> {
  for (let tries = 0; tries < 50; tries++) {
    const port = await freePort()
    if (port <= 55_535 && !taken.includes(port) && await bindable(port + 10_000)) return port
  }
  throw new Error('no free port pair for a Redis Cluster node')
}

/** How many port pairs a node is offered before the cluster's start counts as failed. */
const PORT_OFFERS = 5

export async function startRedisCluster (options: ClusterOptions = {}): Promise<TestCluster> {
  const replicas = options.replicas ?? 0
  const dir = await mkdtemp(join(tmpdir(), 'gw-cluster-'))
  const ports: number[] = []
  const children: ChildProcess[] = []
  const node = (port: number) => spawn('redis-server', [
    '--port', String(port), '--bind', '127.0.0.1', '--cluster-enabled', 'yes', '--cluster-config-file', `nodes-${port}.conf`,
    '--dir', dir, '--save', '', '--appendonly', 'no',
    // A replica's first full copy starts at once, not after Redis's default 5 s wait for more replicas.
    '--repl-diskless-sync-delay', '0',
    ...(options.nodeTimeoutMs ? ['--cluster-node-timeout', String(options.nodeTimeoutMs)] : []),
  ], { stdio: ['ignore', 'pipe', 'pipe'] })
  const killChild = async (child: ChildProcess) => {
    if (child.exitCode !== null || child.signalCode !== null) return
    const exited = new Promise((resolve) => child.once('exit', resolve))
    child.kill('SIGKILL')
    await exited
  }
  const stop = async () => { await Promise.all(children.map(killChild)) }
  try {
    // Each node waits on redis-server's own word (ready, or exited and why), never on a clock. Its
    // ports were free a moment before; the OS may meanwhile hand one to another socket (an outgoing
    // connection's own end), and then the node is offered another pair.
    for (let i = 0; i < 3 * (1 + replicas); i++) {
      for (let offer = 1; ; offer++) {
        const port = await clusterPort(ports)
        const child = node(port)
        try {
          await launched(child)
          ports.push(port)
          children.push(child)
          break
        } catch (error) {
          await killChild(child)
          if (offer === PORT_OFFERS || !String(error).includes('Address already in use')) throw error
        }
      }
    }
    await run('redis-cli', ['--cluster', 'create', ...ports.map((p) => `127.0.0.1:${p}`), '--cluster-replicas', String(replicas), '--cluster-yes'])
    for (const port of ports) {
      await waitFor(async () => (await run('redis-cli', ['-p', String(port), 'cluster', 'info'])).stdout.includes('cluster_state:ok'), 15_000, `cluster state ok on ${port}`)
    }
    // Every replica has finished its first full copy and follows its master: until then a write to
    // the master is not on the replica, and a failover test would lose it.
    if (replicas > 0) {
      for (const port of ports) {
        await waitFor(async () => {
          const info = (await run('redis-cli', ['-p', String(port), 'info', 'replication'])).stdout
          return info.includes('role:master') || (info.includes('master_link_status:up') && info.includes('master_sync_in_progress:0'))
        }, 30_000, `replica ${port} in sync with its master`)
      }
      // ...and acknowledging writes: after a full copy Redis streams to a replica only from its
      // first acknowledgement (up to a second later), and a sign-in waits for one
      // (store.waitForReplica). A key of each master's own slots: the first of a few that it takes.
      for (const port of ports) {
        if (!(await redisCli(port, 'role')).startsWith('master')) continue
        const redis = new Redis({ host: '127.0.0.1', port, maxRetriesPerRequest: 0 })
        redis.on('error', () => {})
        try {
          await waitFor(async () => {
            for (let n = 0; n < 256; n++) {
              const answer = await acknowledged(redis, `cluster-probe-${n}`)
              if (answer !== undefined) return answer
            }
            return false
          }, 10_000, `the replica of ${port} to acknowledge writes`)
        } finally {
          redis.disconnect()
        }
      }
    }
  } catch (error) {
    await stop()
    throw error
  }
  return { urls: ports.map((port) => `redis://127.0.0.1:${port}`), ports, kill: async (port) => killChild(children[ports.indexOf(port)]!), stop }
}
