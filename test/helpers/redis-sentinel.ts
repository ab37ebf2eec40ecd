// A real Redis Sentinel for tests: one `redis-server --sentinel` on a free loopback port watching
// a given Redis as the master "mymaster" (quorum 1).
import { spawn } from 'node:child_process'
import { mkdtemp, writeFile } from 'node:fs/promises'
import { Socket } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { freePort, waitFor } from './net.js'

export interface TestSentinel {
  /** host:port, as store.sentinel.nodes takes it */
  node: string
  stop (): Promise<void>
}

async function knowsMaster (port: number): Promise<boolean> {
  return await new Promise((resolve) => {
    const socket = new Socket()
    const done = (ok: boolean) => { socket.destroy(); resolve(ok) }
    socket.setTimeout(500, () => done(false))
    socket.once('error', () => done(false))
    socket.connect(port, '127.0.0.1', () => socket.write('SENTINEL get-master-addr-by-name mymaster\r\n'))
    socket.once('data', (data) => done(data.toString().startsWith('*2')))
  })
}

export async function startSentinel (masterUrl: string): Promise<TestSentinel> {
  const master = new URL(masterUrl)
  const port = await freePort()
  const dir = await mkdtemp(join(tmpdir(), 'gw-sentinel-'))
  const file = join(dir, 'sentinel.conf')
  await writeFile(file, `port ${port}\nbind 127.0.0.1\ndir ${dir}\nsentinel monitor mymaster ${master.hostname} ${master.port} 1\n`)
  const child = spawn('redis-server', [file, '--sentinel'], { stdio: 'ignore' })
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()))
  await waitFor(() => knowsMaster(port), 10_000, `redis sentinel on port ${port}`)
  return {
    node: `127.0.0.1:${port}`,
    stop: async () => {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL')
      await exited
    },
  }
}
