/**
 * The claim: the hot path. One statement takes up to `limit` due pending
 * executions of the worker's queues and types, highest priority first, locks
 * them with SKIP LOCKED (so concurrent workers never take the same row and
 * never wait on each other), leases them to the worker and returns what the
 * handler needs. Served by the partial index executions_claim_idx.
 */
import { sql, type Kysely } from 'kysely'
import type { DB } from '../schema.ts'
import { PREPARE } from '../pool.ts'

export interface ExecutionClaimBatchParams {
  workerId: string
  queues: readonly string[]
  types: readonly string[]
  limit: number
  leaseMs: number
  /** An injected time instead of the database's now() (null: now()); tests pin time with it. */
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
  /** The fire time (epoch ms): sent as a number, which costs less to read than a timestamp. */
  scheduledForMs: number
  /** When it became due (epoch ms; the claim takes due executions by priority, then this). */
  runAtMs: number
  payload: unknown
}

/** The claim statement itself, unexecuted (for EXPLAIN in `scheduler bench`). */
export function executionClaimBatchQuery(params: ExecutionClaimBatchParams) {
  const now = params.now ?? null
  // One queue: `queue = $1` lets each partition's claim index return rows already in priority
  // order (a merge append, then LIMIT). `queue = any(...)` cannot, and sorts every due row.
  const queueMatch = params.queues.length === 1 ? sql`queue = ${params.queues[0]}::text` : sql`queue = any(${params.queues}::text[])`
  return sql<ClaimedExecution>`${sql.raw(PREPARE)}
    with due as materialized (
      select id, job_id
        from pgsched.executions
       where state = 'pending'
         and ${queueMatch}
         and type = any(${params.types}::text[])              -- only types this worker can run
         and run_at <= coalesce(${now}::timestamptz, now())
       order by priority desc, run_at, id
       limit ${params.limit}::int
         for update skip locked                               -- rows other workers hold are skipped, not waited on
    )
    update pgsched.executions e
       set state = 'running',
           attempt = e.attempt + 1,
           worker_id = ${params.workerId}::uuid,
           lease_expires_at = coalesce(${now}::timestamptz, now()) + ${params.leaseMs}::int * interval '1 millisecond',
           started_at = coalesce(${now}::timestamptz, now())
     -- arrays rather than a join: the planner then probes the primary keys instead of hashing every partition
     where e.id = any(array(select id from due))
       and e.job_id = any(array(select job_id from due))
    returning e.id, e.job_id as "jobId", e.type, e.queue, e.priority, e.attempt, e.max_attempts as "maxAttempts",
              e.timeout_ms as "timeoutMs", (extract(epoch from e.scheduled_for) * 1000)::float8 as "scheduledForMs",
              (extract(epoch from e.run_at) * 1000)::float8 as "runAtMs",
              (select j.payload from pgsched.jobs j where j.id = e.job_id) as payload
  `
}

export async function executionClaimBatch(db: Kysely<DB>, params: ExecutionClaimBatchParams): Promise<ClaimedExecution[]> {
  const { rows } = await executionClaimBatchQuery(params).execute(db)
  return rows
}
