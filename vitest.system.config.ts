import { defineConfig } from 'vitest/config'

// `npm run test:system`: real worker and API processes killed and frozen (the short fault
// scenario), recurring dispatch across processes, the fuzzer, the key-leak scan and the
// benchmark smoke run. One file at a time: each starts processes whose timing the others'
// load would skew on a small machine.
export default defineConfig({
  test: {
    globalSetup: ['test/global-setup.ts'],
    include: ['test/**/*.system.test.ts'],
    testTimeout: 300_000,
    hookTimeout: 120_000,
    pool: 'forks',
    fileParallelism: false,
  },
})
