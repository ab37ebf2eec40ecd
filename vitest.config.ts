import { availableParallelism } from 'node:os'
import { configDefaults, defineConfig } from 'vitest/config'

/**
 * Tests that kill processes or time answers under hundreds of concurrent requests: they run last,
 * one at a time, once the other files are done. Beside three other busy test files the machine
 * could answer too late for what they check (a cluster primary handing connections to a worker it
 * has not yet seen die; 300 timeouts that must each come within the route's timeout plus a margin).
 */
const QUIET = ['test/faults/worker-killed.test.ts', 'test/faults/cluster-failover.test.ts', 'test/faults/hung-upstream.test.ts']

export default defineConfig({
  test: {
    testTimeout: 30_000,
    hookTimeout: 120_000,
    pool: 'forks',
    // Most of a test's time is spent waiting on real parts (Redis, the authorization server, a
    // gateway process, Chromium), not on this process's CPU: two test files per core keep the cores
    // busy (measured on 2 cores: 153 s with one worker and a fresh module graph per file, 49 s so).
    maxWorkers: Math.min(8, 2 * availableParallelism()),
    // A worker imports fastify, oidc-provider and the gateway once, not once per file (88 s of
    // imports before, 15 s now). Test files share no module state: each starts its own servers,
    // stores and registries, and the one that fakes timers restores them after each test.
    isolate: false,
    projects: [
      { extends: true, test: { name: 'suite', include: ['test/**/*.test.ts'], exclude: [...configDefaults.exclude, ...QUIET] } },
      { extends: true, test: { name: 'quiet', include: QUIET, fileParallelism: false, sequence: { groupOrder: 1 } } },
    ],
  },
})
