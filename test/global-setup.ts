// Once per `vitest run`, in its main process: after the last test file, the Redis servers the test
// workers kept for reuse (test/helpers/redis.ts, `idle`) end: the containers are stopped and
// removed, the spawned servers killed.
import { endPooledServers, removePooledContainers } from './helpers/redis.js'

export async function teardown (): Promise<void> {
  await Promise.all([removePooledContainers(process.pid), endPooledServers(process.pid)])
}
