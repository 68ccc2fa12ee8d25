import { defineConfig } from 'vitest/config'

// `npm run test:faults`: the full fault scenario (test/faults/*.faults.ts, 20,000+ jobs)
// with the fuzz and security files beside it, one file at a time so the scenario's
// recovery times are not skewed by another file's load.
export default defineConfig({
  test: {
    globalSetup: ['test/global-setup.ts'],
    include: ['test/faults/*.faults.ts', 'test/faults/fuzz.system.test.ts', 'test/faults/security.system.test.ts'],
    testTimeout: 600_000,
    hookTimeout: 120_000,
    pool: 'forks',
    fileParallelism: false,
  },
})
