import { createClient } from './dist/src/index.js'
const client = createClient({ databaseUrl: process.env.DATABASE_URL })
const jobs = Array.from({ length: 10000 }, (_, i) => ({ type: 'bench.noop', payload: { seq: i } }))
const t0 = performance.now()
for (let k = 0; k < Number(process.argv[2] ?? 10); k++) await client.submitJobs(jobs)
console.log('ms', performance.now() - t0)
await client.close?.()
