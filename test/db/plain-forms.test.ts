/**
 * Plain statement forms (migration 0042, plain-forms.ts): the claim, the completion and the common
 * submit leave out the event capture (and the submit the fair-share numbering) while nobody listens
 * and no queue of the batch is fair; a plain form that finds a listener or a fair queue fails with
 * PS001, writes nothing, and its writer runs the full form. Nothing captured is lost either way.
 */
import { sql } from 'kysely'
import { beforeEach, describe, expect, it, vi } from 'vitest'
import { createClient } from '../../src/client.ts'
import { normalizeSubmit } from '../../src/core/job.ts'
import { jobInsertMany } from '../../src/db/queries/jobs.ts'
import { uuidV7 } from '../../src/lib/uuid-v7.ts'
import { executionClaimBatch, executionClaimBatchQuery } from '../../src/db/queries/claim.ts'
import { eventListAfter, eventListenerOpen } from '../../src/db/queries/events.ts'
import { executionCompleteMany, executionCompleteManyQuery } from '../../src/db/queries/lease.ts'
import { FULL_FORM, plainFormFor, plainFormRefusal, resetPlainForms } from '../../src/db/queries/plain-forms.ts'
import { sequenceEvents } from '../../src/events/event-stream.ts'
import { useTestDb } from '../db.ts'

const t = useTestDb()
const WORKER = '00000000-0000-7000-8000-0000000000e2'
const PLAIN = { events: true, fair: true }

const claim = (limit = 10) => executionClaimBatch(t.db, { workerId: WORKER, queues: ['default'], types: ['t'], limit, leaseMs: 30_000 })
const count = async (table: 'due' | 'runs' | 'execution_history' | 'event_batches') => {
  const { rows } = await sql<{ n: number }>`select count(*)::int as n from ${sql.table(`pgsched.${table}`)}`.execute(t.db)
  return rows[0]?.n
}

describe('plain statement forms', () => {
  beforeEach(() => resetPlainForms())

  it('are tried first while this process has seen no refusal, and never inside a transaction', async () => {
    expect(plainFormFor(t.db)).toEqual({ events: true, fair: false })
    expect(plainFormFor(t.db, ['default'])).toEqual(PLAIN)
    await t.db.transaction().execute(async (trx) => {
      expect(plainFormFor(trx, ['default'])).toEqual(FULL_FORM)
    })
  })

  it('a plain claim or completion refuses while anyone listens and writes nothing', async () => {
    await createClient({ db: t.db, tenant: 'a' }).submitJob({ type: 't' })
    await eventListenerOpen(t.db, { tenant: 'someone-else', keepMs: 60_000 })
    const plainClaim = executionClaimBatchQuery({ workerId: WORKER, queues: ['default'], types: ['t'], limit: 10, leaseMs: 30_000, form: PLAIN })
    const refused = await plainClaim.execute(t.db).then(
      () => undefined,
      (err: unknown) => err,
    )
    expect(plainFormRefusal(refused)?.what).toBe('events')
    expect([await count('due'), await count('runs')]).toEqual([1, 0])
    // the full form claims it; a plain completion of it refuses in turn
    const [run] = await executionClaimBatchQuery({ workerId: WORKER, queues: ['default'], types: ['t'], limit: 10, leaseMs: 30_000 })
      .execute(t.db)
      .then((r) => r.rows)
    expect(run).toBeDefined()
    const completion = { id: String(run?.id), jobId: String(run?.jobId), attempt: 1, resultJson: '1', outputUri: null }
    const plainComplete = executionCompleteManyQuery({ workerId: WORKER, completions: [completion], form: PLAIN })
    expect(
      plainFormRefusal(
        await plainComplete.execute(t.db).then(
          () => undefined,
          (err: unknown) => err,
        ),
      )?.what,
    ).toBe('events')
    expect([await count('runs'), await count('execution_history')]).toEqual([1, 0])
  })

  it('capture every change of a listener that came after this process last used them, through the full form', async () => {
    const a = createClient({ db: t.db, tenant: 'a' })
    // nobody listens: plain forms, nothing written
    await a.submitJob({ type: 't' })
    const first = await claim()
    await executionCompleteMany(t.db, { workerId: WORKER, completions: first.map((c) => ({ ...c, resultJson: 'null', outputUri: null })) })
    expect(await count('event_batches')).toBe(0)
    expect(plainFormFor(t.db).events).toBe(true)
    // a listener now: each writer's plain form is refused once and the full form captures
    await eventListenerOpen(t.db, { tenant: 'a', keepMs: 60_000 })
    const { job } = await a.submitJob({ type: 't' })
    expect(plainFormFor(t.db).events).toBe(false)
    // each writer in turn meets the listener through its plain form
    resetPlainForms()
    const second = await claim()
    expect(second.map((c) => c.jobId)).toEqual([job.id])
    expect(plainFormFor(t.db).events).toBe(false)
    resetPlainForms()
    await executionCompleteMany(t.db, { workerId: WORKER, completions: second.map((c) => ({ ...c, resultJson: 'null', outputUri: null })) })
    expect(plainFormFor(t.db).events).toBe(false)
    await sequenceEvents(t.db)
    const events = await eventListAfter(t.db, { after: '0', tenant: 'a', filter: {}, limit: 100 })
    expect(events.map((e) => `${e.type}:${e.jobId === job.id}`)).toEqual(['submitted:true', 'started:true', 'succeeded:true'])
    expect(await count('execution_history')).toBe(2)
  })

  it('a submit to a fair queue through the plain form is refused and gets its fair key from the full form', async () => {
    const a = createClient({ db: t.db, tenant: 'a' })
    await a.queues.setFairShare('fair', true)
    // (one at a time: submitJobs writes its batch in a transaction, where only full forms run)
    const { job: plainJob } = await a.submitJob({ type: 't', queue: 'plain' })
    const { job: fairJob } = await a.submitJob({ type: 't', queue: 'fair' })
    expect(plainFormFor(t.db, ['fair']).fair).toBe(false)
    expect(plainFormFor(t.db, ['plain']).fair).toBe(true)
    const { rows } = await sql<{ job_id: string; fair_key: number | null }>`select job_id, fair_key from pgsched.due`.execute(t.db)
    const key = (id: string | undefined) => rows.find((r) => r.job_id === id)?.fair_key
    expect(key(plainJob?.id)).toBeNull()
    expect(Number.isFinite(key(fairJob?.id))).toBe(true)
    expect(rows).toHaveLength(2)
  })

  it('a submit in the caller\u2019s transaction with a listener live runs the full form and leaves the transaction usable', async () => {
    await eventListenerOpen(t.db, { tenant: 'a', keepMs: 60_000 })
    const a = createClient({ db: t.db, tenant: 'a' })
    await t.db.transaction().execute(async (trx) => {
      await a.submitJob({ type: 't' }, { trx })
      await a.submitJob({ type: 't' }, { trx })
    })
    expect(await count('due')).toBe(2)
    await sequenceEvents(t.db)
    expect(await eventListAfter(t.db, { after: '0', tenant: 'a', filter: {}, limit: 100 })).toHaveLength(2)
    // the refusal was never seen: the transaction ran the full form directly
    expect(plainFormFor(t.db).events).toBe(true)
  })
})

describe('plain statement forms: what a refusal teaches', () => {
  beforeEach(() => resetPlainForms())

  it('a refused submit names only the fair queues of its batch', async () => {
    const a = createClient({ db: t.db, tenant: 'a' })
    await a.queues.setFairShare('fair', true)
    // one statement for the three (as the submit batcher writes concurrent submits)
    const rows = ['plain', 'fair', 'other'].map((queue) => ({ ...normalizeSubmit({ type: 't', queue }, new Date()), id: uuidV7(), executionId: uuidV7() }))
    await jobInsertMany(t.db, { tenant: 'a', createdBy: 'test', jobs: rows })
    expect(plainFormFor(t.db, ['fair']).fair).toBe(false)
    expect(plainFormFor(t.db, ['plain', 'other']).fair).toBe(true)
    expect(await count('due')).toBe(3)
  })

  it('a submit on a caller\u2019s connection inside its BEGIN, with a listener live, runs the full form and the transaction commits', async () => {
    await eventListenerOpen(t.db, { tenant: 'a', keepMs: 60_000 })
    const a = createClient({ db: t.db, tenant: 'a' })
    const conn = await t.pool.connect()
    try {
      await conn.query('begin')
      await a.submitJob({ type: 't' }, { trx: conn })
      await a.submitJob({ type: 't' }, { trx: conn })
      await conn.query('commit')
    } finally {
      conn.release()
    }
    expect(await count('due')).toBe(2)
    expect(plainFormFor(t.db).events).toBe(true) // never refused: the full form ran directly
  })

  it('reads again, once its knowledge is old, whether anyone still listens, and goes back to the plain form', async () => {
    const a = createClient({ db: t.db, tenant: 'a' })
    await eventListenerOpen(t.db, { tenant: 'a', keepMs: 60_000 })
    await a.submitJob({ type: 't' })
    expect(plainFormFor(t.db).events).toBe(false)
    await sql`delete from pgsched.event_listeners`.execute(t.db)
    // still within the recheck interval: the full form, and what it knows stays
    await a.submitJob({ type: 't' })
    expect(plainFormFor(t.db).events).toBe(false)
    // once it is old, a statement reads it again first
    const realNow = performance.now.bind(performance)
    const later = realNow() + 11_000
    const spy = vi.spyOn(performance, 'now').mockImplementation(() => later)
    try {
      await a.submitJob({ type: 't' })
    } finally {
      spy.mockRestore()
    }
    expect(plainFormFor(t.db).events).toBe(true)
    expect(await count('due')).toBe(3)
  })
})
