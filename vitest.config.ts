import { availableParallelism } from 'node:os'
import { defineConfig } from 'vitest/config'

// `npm test`: units and single-process integration tests against a real PostgreSQL.
// Tests that start several processes, inject faults or run the benchmark are named
// *.system.test.ts and run with `npm run test:system` (vitest.system.config.ts).
export default defineConfig({
  test: {
    globalSetup: ['test/global-setup.ts'],
    include: ['test/**/*.test.ts'],
    exclude: ['test/**/*.system.test.ts', '**/node_modules/**'],
    testTimeout: 60_000,
    hookTimeout: 120_000,
    pool: 'forks',
    // Files in parallel: most of a test's time is spent waiting for PostgreSQL and for the processes
    // it starts, so one fork per core less one (vitest's default: a single fork on two cores) leaves
    // the cores idle. Three forks on two cores ran the suite in 466–632 s against 1,000 s for one.
    maxWorkers: Math.max(3, availableParallelism() - 1),
  },
})
