// Once per `vitest run`, in its main process. Before the first test file: a temporary directory of
// the run's own, which the workers, and the gateways, Redis servers and browsers they start, take
// as their temporary directory (TMPDIR, which os.tmpdir() reads), so that the files tests write
// there (configs, keys, logs) go with the run. After the last test file: it is removed, and the
// Redis servers the test workers kept for reuse (test/helpers/redis.ts, `idle`) end: the containers
// are stopped and removed, the spawned servers killed.
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { endPooledServers, removePooledContainers } from './helpers/redis.js'

/** Set once the run has its directory: the setup runs once per vitest project, and the first one makes it. */
const MARKER = 'OAUTH_GATEWAY_TESTS_TMPDIR'
let runDir: string | undefined

export function setup (): void {
  if (process.env[MARKER] !== undefined) return
  runDir = mkdtempSync(join(tmpdir(), 'oauth-gateway-tests-'))
  process.env[MARKER] = runDir
  process.env.TMPDIR = runDir
}

export async function teardown (): Promise<void> {
  try {
    await Promise.all([removePooledContainers(process.pid), endPooledServers(process.pid)])
  } finally {
    if (runDir !== undefined) rmSync(runDir, { recursive: true, force: true })
  }
}
