/**
 * The claim: the hot path. One statement takes up to `limit` due pending
 * executions of the worker's queues and types, highest priority first, locks
 * them with SKIP LOCKED (so concurrent workers never take the same row and
 * never wait on each other), leases them to the worker and returns what the
 * handler needs. Served by the partial index executions_claim_idx.
 */
import { sql, type Kysely } from 'kysely'
import type { DB } from '../schema.ts'

export interface ExecutionClaimBatchParams {
  workerId: string
  queues: readonly string[]
  types: readonly string[]
  limit: number
  leaseMs: number
  /** Pinned time for tests; null = database now(). */
  now?: Date | null
}

export interface ClaimedExecution {
  id: string
  jobId: string
  type: string
  queue: string
  priority: number
  attempt: number
  maxAttempts: number
  timeoutMs: number
  scheduledFor: Date
  payload: unknown
}

/** The claim statement itself, unexecuted (for EXPLAIN in `scheduler bench`). */
export function executionClaimBatchQuery(params: ExecutionClaimBatchParams) {
  return sql<ClaimedExecution>`
    with due as (
      select id, job_id
        from pgsched.executions
       where state = 'pending'
         and queue = any(${params.queues}::text[])
         and type = any(${params.types}::text[])              -- only types this worker can run
         and run_at <= coalesce(${params.now ?? null}::timestamptz, now())
       order by priority desc, run_at, id
       limit ${params.limit}::int
         for update skip locked                               -- rows other workers hold are skipped, not waited on
    )
    update pgsched.executions e
       set state = 'running',
           attempt = e.attempt + 1,
           worker_id = ${params.workerId}::uuid,
           lease_expires_at = coalesce(${params.now ?? null}::timestamptz, now()) + ${params.leaseMs}::int * interval '1 millisecond',
           started_at = coalesce(${params.now ?? null}::timestamptz, now())
      from due
      join pgsched.jobs j on j.id = due.job_id
     where e.id = due.id
       and e.job_id = due.job_id
    returning e.id, e.job_id as "jobId", e.type, e.queue, e.priority, e.attempt, e.max_attempts as "maxAttempts",
              e.timeout_ms as "timeoutMs", e.scheduled_for as "scheduledFor", j.payload
  `
}

export async function executionClaimBatch(db: Kysely<DB>, params: ExecutionClaimBatchParams): Promise<ClaimedExecution[]> {
  const { rows } = await executionClaimBatchQuery(params).execute(db)
  return rows
}
