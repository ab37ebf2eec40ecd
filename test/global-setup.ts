// Once per `vitest run`, in its main process: after the last test file, the Redis containers the
// test workers kept for reuse (test/helpers/redis.ts, `idle`) are stopped and removed, and so are
// the spawned servers a killed worker left (`idleSpawned`; a worker that exits stops its own).
import { readdirSync, rmSync } from 'node:fs'
import { removePooledContainers, spawnedPidDir } from './helpers/redis.js'

export async function teardown (): Promise<void> {
  await removePooledContainers(process.pid)
  const dir = spawnedPidDir(process.pid)
  let pids: string[] = []
  try {
    pids = readdirSync(dir)
  } catch {
    return
  }
  for (const pid of pids) {
    try {
      process.kill(Number(pid), 'SIGKILL')
    } catch {
      // Gone already.
    }
  }
  rmSync(dir, { recursive: true, force: true })
}
