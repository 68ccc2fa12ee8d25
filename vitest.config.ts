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
  },
})
