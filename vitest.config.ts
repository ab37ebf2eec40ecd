import { availableParallelism, tmpdir } from 'node:os'
import { join, relative } from 'node:path'
import { configDefaults, defineConfig } from 'vitest/config'
import { BaseSequencer, type TestSpecification } from 'vitest/node'
import { spread } from './test/helpers/suite-order.js'

/**
 * Fault tests that kill processes or time answers under hundreds of concurrent requests: they run
 * last, once the other files are done, since beside three other busy test files the machine could
 * answer too late for what they check (a cluster primary handing connections to a worker it has
 * not yet seen die; 300 timeouts that must each come within the route's timeout plus a margin; a
 * Redis restart whose every command after it must answer within a store.timeout of 250 ms: a
 * worker process starved of the CPU for longer runs the command's timer before it reads the reply
 * already waiting on the socket, and answers 503).
 */
const QUIET = ['test/faults/cluster-failover.test.ts', 'test/faults/worker-killed.test.ts', 'test/faults/hung-upstream.test.ts', 'test/faults/redis-restart.test.ts']

/**
 * Files that spend their seconds waiting on real servers' clocks (a Sentinel noticing a dead master,
 * a store command timing out, a replica that never acknowledges) rather than on the CPU.
 */
const WAITING = /^test\/(faults|store)\//

/**
 * The order the workers take the files in. Longest first (vitest's own order: the last run's
 * durations, else the largest files), except that the files that mostly wait are spread evenly
 * through the run, by their share of its time: started together, four workers once all waited at
 * the same moment while the cores stood idle (a third of the suite's wall time lost in those
 * dips, 2026-11-29). The quiet files then run two at a time, the Redis Cluster failover first: it
 * spends its seconds waiting for Redis to notice a dead master (cluster-node-timeout) and loads
 * nothing meanwhile, so the two that load the machine run beside it, one after the other. That
 * they never run beside each other does not rest on this order or on timing: each holds a lock
 * across the workers while it runs (test/helpers/processes.ts, `exclusively`).
 */
class Spread extends BaseSequencer {
  override async sort (files: TestSpecification[]): Promise<TestSpecification[]> {
    const sorted = await super.sort(files)
    const quiet = sorted.filter((file) => file.project.name === 'faults-quiet')
    const first = (file: TestSpecification) => file.moduleId.endsWith(QUIET[0]!)
    return [...this.spread(sorted.filter((file) => file.project.name !== 'faults-quiet')), ...quiet.filter(first), ...quiet.filter((file) => !first(file))]
  }

  /** `files` in their order, the waiting ones spread by the last run's durations, or by count when a file has none. */
  private spread (files: TestSpecification[]): TestSpecification[] {
    const path = (file: TestSpecification) => relative(this.ctx.config.root, file.moduleId)
    const durations = new Map(files.map((file) => [file, this.ctx.cache.getFileTestResults(`${file.project.name}:${path(file)}`)?.duration]))
    const known = [...durations.values()].every((duration) => duration !== undefined)
    return spread(files, (file) => known ? Math.max(1, durations.get(file)!) : 1, (file) => WAITING.test(path(file)))
  }
}

// Node's on-disk cache of compiled code (Node 22.1+), for the workers' packages and for every
// gateway, CLI and demo process the tests start (they inherit it): a gateway process starts on
// about a fifth less CPU. Stale entries are never used (each is checked against its source).
process.env.NODE_COMPILE_CACHE ??= join(tmpdir(), 'oauth-gateway-test-compile-cache')

export default defineConfig({
  test: {
    testTimeout: 30_000,
    hookTimeout: 120_000,
    pool: 'forks',
    // The transformed test and source modules are kept on disk (node_modules/.experimental-vitest-cache,
    // keyed by each file's content; gone with a new `npm ci`): a run after the first skips about a
    // tenth of the suite's CPU, the transforms in the main process and their round trips from the
    // workers (measured 2026-11-29: 114 against 125 s of CPU).
    experimental: { fsModuleCache: true },
    // Ends the Redis servers the workers kept for reuse (test/helpers/redis.ts).
    globalSetup: ['test/global-setup.ts'],
    // `npm test -- --coverage` (CI runs it so): V8's own counters, over the gateway's sources as the
    // tests run them in process (a gateway a test starts as a child process is not counted). The
    // summary is printed at the end of the run; coverage/ holds the per-file report.
    coverage: {
      provider: 'v8',
      include: ['src/**/*.ts'],
      exclude: ['src/config/schema.generated.ts'],
      reporter: ['text-summary', 'json-summary'],
    },
    // Most of a test's time is spent waiting on real parts (Redis, the authorization server, a
    // gateway process, Chromium), not on this process's CPU: two test files per core keep the cores
    // busy (see docs/performance.md).
    maxWorkers: Math.min(8, 2 * availableParallelism()),
    // A worker imports fastify, oidc-provider and the gateway once, not once per file (see
    // docs/performance.md). Test files share no module state but the worker's idle Redis
    // containers (emptied between files), Chromium (a context per file) and the shared stack's
    // authorization server and gateway address (test/helpers/stack.ts); each starts its own
    // gateways, stores and registries, and the one that fakes timers restores them after each test.
    isolate: false,
    sequence: { sequencer: Spread },
    // The fault tests (test/faults: processes killed, servers frozen or cut off) run beside the
    // rest, and alone with `npm run test:faults` (a path filter). Not a project of their own: a
    // worker keeps one module graph per project, so a third project imported fastify, oidc-provider
    // and the gateway again in every worker (see docs/performance.md). The QUIET files are a project
    // of their own, since a project has one place in the order and one worker count: theirs runs
    // last, two at a time.
    projects: [
      { extends: true, test: { name: 'suite', include: ['test/**/*.test.ts'], exclude: [...configDefaults.exclude, ...QUIET] } },
      { extends: true, test: { name: 'faults-quiet', include: QUIET, maxWorkers: 2, sequence: { groupOrder: 1 } } },
    ],
  },
})
