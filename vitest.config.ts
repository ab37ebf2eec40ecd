import { availableParallelism, tmpdir } from 'node:os'
import { join } from 'node:path'
import { configDefaults, defineConfig } from 'vitest/config'
import { BaseSequencer, type TestSpecification } from 'vitest/node'

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
 * The quiet files run two at a time, the Redis Cluster failover first: it spends its seconds
 * waiting for Redis to notice a dead master (cluster-node-timeout) and loads nothing meanwhile, so
 * the two that load the machine run beside it, one after the other. That they never run beside
 * each other does not rest on this order or on timing: each holds a lock across the workers while
 * it runs (test/helpers/processes.ts, `exclusively`).
 */
class FailoverFirst extends BaseSequencer {
  override async sort (files: TestSpecification[]): Promise<TestSpecification[]> {
    const sorted = await super.sort(files)
    const first = (file: TestSpecification) => file.moduleId.endsWith(QUIET[0]!)
    return [...sorted.filter(first), ...sorted.filter((file) => !first(file))]
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
    // Removes the Redis containers the workers kept for reuse (test/helpers/redis.ts).
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
    sequence: { sequencer: FailoverFirst },
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
