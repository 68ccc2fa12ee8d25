/**
 * The claim: the hot path. One statement takes up to `limit` due pending
 * executions of the worker's queues and types, highest priority first, locks
 * them with SKIP LOCKED (so concurrent workers never take the same row and
 * never wait on each other), leases them to the worker and returns what the
 * handler needs. Served by the partial index executions_claim_idx. Paused and
 * limited queues are skipped; a limited queue is claimed by queueClaimLimited.
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
  /**
   * The claim of one limited queue (`queues` holds just it): its concurrency limit. The statement
   * then takes at most the limit minus the executions of the queue running now, and does not skip
   * the queue for having a limit. The caller holds the lock of the queue's settings row, taken
   * before this statement (so its snapshot sees every claim that held the lock before).
   */
  capacity?: number
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
  const one = params.queues.length === 1 || params.capacity !== undefined
  const queueMatch = one ? sql`queue = ${params.queues[0]}::text` : sql`queue = any(${params.queues}::text[])`
  // Paused and limited queues are not this statement's (see migrations/0012): one probe of
  // pgsched.queues per statement (a one-time filter, or an array computed once).
  const settingsMatch =
    params.capacity !== undefined
      ? sql``
      : one
        ? sql`and not exists (select 1 from pgsched.queues s where s.name = ${params.queues[0]}::text and (s.paused or s.concurrency_limit is not null))`
        : sql`and queue <> all(array(select s.name from pgsched.queues s where s.paused or s.concurrency_limit is not null))`
  const limit =
    params.capacity === undefined
      ? sql`${params.limit}::int`
      : sql`least(${params.limit}::int, greatest(0, ${params.capacity}::int - (select count(*)::int from pgsched.executions r
                                                                          where r.state = 'running' and r.queue = ${params.queues[0]}::text)))`
  return sql<ClaimedExecution>`${sql.raw(PREPARE)}
    with due as materialized (
      select id, job_id
        from pgsched.executions
       where state = 'pending'
         and ${queueMatch}
         ${settingsMatch}
         and type = any(${params.types}::text[])              -- only types this worker can run
         and run_at <= coalesce(${now}::timestamptz, now())
       order by priority desc, run_at, id
       limit ${limit}
         for update skip locked                               -- rows other workers hold are skipped, not waited on
    )
    update pgsched.executions e
       set state = 'running',
           attempt = e.attempt + 1,
           worker_id = ${params.workerId}::uuid,
           lease_expires_at = coalesce(${now}::timestamptz, now()) + ${params.leaseMs}::int * interval '1 millisecond',
           -- the moment the row was taken, not the statement's start: a claim that waited or was
           -- starved must not date its rows before those of claims that ran in the meantime
           started_at = coalesce(${now}::timestamptz, clock_timestamp())
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

export interface QueueSetting {
  name: string
  paused: boolean
  concurrencyLimit: number | null
}

/** The settings of `queues` that have any (a queue without a row is active and unlimited). */
export async function queueSettingsOf(db: Kysely<DB>, queues: readonly string[]): Promise<QueueSetting[]> {
  const { rows } = await sql<QueueSetting>`${sql.raw(PREPARE)}
    select name, paused, concurrency_limit as "concurrencyLimit" from pgsched.queues where name = any(${queues}::text[])`.execute(db)
  return rows
}

/**
 * Claims from one limited queue: locks its settings row (claims of the queue take turns; a pause
 * waits for them), then claims at most its limit minus what runs now. Nothing when the queue is
 * paused or no longer limited (the ordinary claim takes it then). `full`: the limit, not a lack of
 * due work, held the claim back (as far as the running count read with the lock tells).
 */
export async function queueClaimLimited(
  db: Kysely<DB>,
  params: Omit<ExecutionClaimBatchParams, 'capacity'>,
): Promise<{ claimed: ClaimedExecution[]; full: boolean }> {
  const queue = params.queues[0] as string
  return db.transaction().execute(async (trx) => {
    const { rows } = await sql<{ paused: boolean; limit: number | null; running: number }>`${sql.raw(PREPARE)}
      select paused, concurrency_limit as limit,
             (select count(*)::int from pgsched.executions r where r.state = 'running' and r.queue = ${queue}::text) as running
        from pgsched.queues where name = ${queue}::text for update`.execute(trx)
    const setting = rows[0]
    if (!setting || setting.paused || setting.limit === null) return { claimed: [], full: false }
    const claimed = (await executionClaimBatchQuery({ ...params, queues: [queue], capacity: setting.limit }).execute(trx)).rows
    return { claimed, full: claimed.length < params.limit && setting.running + claimed.length >= setting.limit }
  })
}
