// Once per `vitest run`, in its main process: after the last test file, the Redis containers the
// test workers kept for reuse (test/helpers/redis.ts, `idle`) are stopped and removed, and so are
// the spawned servers still running (`idleSpawned`, or one a killed worker left): vitest ends its
// workers with SIGTERM, which runs no exit handler, so this is where they stop.
import { readFileSync, readdirSync, rmSync } from 'node:fs'
import { removePooledContainers, spawnedPidDir } from './helpers/redis.js'

/** A directory a run with this same pid left (it was killed before its teardown) names nothing of this run. */
export function setup (): void {
  rmSync(spawnedPidDir(process.pid), { recursive: true, force: true })
}

export async function teardown (): Promise<void> {
  try {
    await removePooledContainers(process.pid)
  } finally {
    stopSpawned(spawnedPidDir(process.pid))
  }
}

/** SIGKILLs each listed pid that is still the redis-server on the port its file names, then removes the list. */
function stopSpawned (dir: string): void {
  let pids: string[] = []
  try {
    pids = readdirSync(dir)
  } catch {
    return
  }
  for (const pid of pids) {
    try {
      const port = readFileSync(`${dir}/${pid}`, 'utf8')
      // Its command line as redis-server rewrites it: `redis-server 127.0.0.1:<port>`.
      const command = readFileSync(`/proc/${pid}/cmdline`, 'utf8').replaceAll('\0', ' ')
      if (command.includes('redis-server') && new RegExp(`[: ]${port}\\b`).test(command)) process.kill(Number(pid), 'SIGKILL')
    } catch {
      // Gone already, or no /proc to tell what it is now: left alone.
    }
  }
  rmSync(dir, { recursive: true, force: true })
}
