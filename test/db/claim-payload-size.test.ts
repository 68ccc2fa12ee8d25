/**
 * The claim returns each payload's stored size (pg_column_size), which bounds how much payload a
 * worker's prefetch holds (PREFETCH_PAYLOAD_BYTES, src/worker/local-queue.ts).
 */
import { randomBytes } from 'node:crypto'
import { describe, expect, it } from 'vitest'
import { createClient } from '../../src/client.ts'
import { executionClaimBatch } from '../../src/db/queries/claim.ts'
import { useTestDb } from '../db.ts'

const t = useTestDb()
const WORKER = '00000000-0000-7000-8000-00000000c1a1'

describe('the claim', () => {
  it('returns the stored size of each payload', async () => {
    const client = createClient({ db: t.db, tenant: 'acme' })
    // 120,000 characters of random base64: PostgreSQL cannot compress it much
    const big = randomBytes(90_000).toString('base64')
    const small = await client.submitJob({ type: 'sized.k', queue: 'payload-size', payload: { n: 1 } })
    const large = await client.submitJob({ type: 'sized.k', queue: 'payload-size', payload: { big } })
    const claimed = await executionClaimBatch(t.db, { workerId: WORKER, queues: ['payload-size'], types: ['sized.k'], limit: 2, leaseMs: 60_000 })
    const size = (jobId: string) => claimed.find((c) => c.jobId === jobId)?.payloadBytes
    expect(size(small.job.id)).toBeGreaterThan(0)
    expect(size(small.job.id)).toBeLessThan(100)
    expect(size(large.job.id)).toBeGreaterThan(big.length * 0.9)
    expect(size(large.job.id)).toBeLessThan(big.length * 1.1)
  })
})
