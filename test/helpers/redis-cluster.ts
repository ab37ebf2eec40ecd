// A real Redis Cluster for tests: three `redis-server --cluster-enabled yes` on free loopback ports
// (each also needs port + 10000 free, for the cluster bus), joined with `redis-cli --cluster create`.
import { execFile, spawn, type ChildProcess } from 'node:child_process'
import { mkdtemp } from 'node:fs/promises'
import { createServer } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { promisify } from 'node:util'
import { freePort, waitFor } from './net.js'

const run = promisify(execFile)

export interface TestCluster {
  urls: string[]
  stop (): Promise<void>
}

async function bindable (port: number): Promise<boolean> {
  const server = createServer()
  return await new Promise((resolve) => {
    server.once('error', () => resolve(false))
    server.listen(port, '127.0.0.1', () => server.close(() => resolve(true)))
  })
}

/** A free port whose cluster-bus port (+10000) is free too. */
async function clusterPort (taken: number[]): Promise<number> {
  for (let tries = 0; tries < 50; tries++) {
    const port = await freePort()
    if (port <= 55_535 && !taken.includes(port) && await bindable(port + 10_000)) return port
  }
  throw new Error('no free port pair for a Redis Cluster node')
}

export async function startRedisCluster (): Promise<TestCluster> {
  const dir = await mkdtemp(join(tmpdir(), 'gw-cluster-'))
  const ports: number[] = []
  for (let i = 0; i < 3; i++) ports.push(await clusterPort(ports))
  const children: ChildProcess[] = ports.map((port) => spawn('redis-server', [
    '--port', String(port), '--bind', '127.0.0.1', '--cluster-enabled', 'yes', '--cluster-config-file', `nodes-${port}.conf`,
    '--dir', dir, '--save', '', '--appendonly', 'no',
  ], { stdio: 'ignore' }))
  const stop = async () => {
    await Promise.all(children.map(async (child) => {
      if (child.exitCode !== null || child.signalCode !== null) return
      const exited = new Promise((resolve) => child.once('exit', resolve))
      child.kill('SIGKILL')
      await exited
    }))
  }
  try {
    for (const port of ports) {
      await waitFor(async () => (await run('redis-cli', ['-p', String(port), 'ping'])).stdout.trim() === 'PONG', 10_000, `cluster node ${port}`)
    }
    await run('redis-cli', ['--cluster', 'create', ...ports.map((p) => `127.0.0.1:${p}`), '--cluster-replicas', '0', '--cluster-yes'])
    for (const port of ports) {
      await waitFor(async () => (await run('redis-cli', ['-p', String(port), 'cluster', 'info'])).stdout.includes('cluster_state:ok'), 15_000, `cluster state ok on ${port}`)
    }
  } catch (error) {
    await stop()
    throw error
  }
  return { urls: ports.map((port) => `redis://127.0.0.1:${port}`), stop }
}
