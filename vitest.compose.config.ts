import { defineConfig } from 'vitest/config'

// Only for scripts/compose-check.sh, against a running docker-compose stack.
export default defineConfig({
  test: { include: ['test/compose/*.check.ts'], testTimeout: 90_000 },
})
