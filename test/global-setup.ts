// Once per `vitest run`, in its main process: after the last test file, the Redis containers the
// test workers kept for reuse (test/helpers/redis.ts, `idle`) are stopped and removed.
import { removePooledContainers } from './helpers/redis.js'

export async function teardown (): Promise<void> {
  await removePooledContainers(process.pid)
}
