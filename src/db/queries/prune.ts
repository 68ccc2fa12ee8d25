/**
 * Retention: terminal executions finished before `olderThanMs` ago are
 * deleted, `limit` at a time (SKIP LOCKED: concurrent pruners split the work),
 * then one-time jobs left with no execution and no trigger, with their
 * idempotency keys (see pruneIn). An execution's output chunks (pgsched.execution_output) go in
 * the same statement.
 */
import { sql, type Kysely } from 'kysely'
import type { DB } from '../schema.ts'

export interface ExecutionPruneParams {
  olderThanMs: number
  limit: number
}

export async function executionPruneFinished(db: Kysely<DB>, params: ExecutionPruneParams): Promise<{ executions: number; jobs: number }> {
  if (db.isTransaction) return pruneIn(db, params)
  return db.transaction().execute((trx) => pruneIn(trx, params))
}

/**
 * In one transaction, three statements: the executions go; then the jobs they belonged to are locked,
 * in id order; then, with a snapshot taken after those locks, the jobs left with nothing go. A
 * statement reading its one snapshot would miss what committed while it waited for a job's row (a
 * retry or rerun of the job, which locks it first, then gives it a new execution) and what another
 * pruner deleted of the same job's executions (each would see the other's, and keep the job for ever).
 */
async function pruneIn(trx: Kysely<DB>, params: ExecutionPruneParams): Promise<{ executions: number; jobs: number }> {
  const { rows: deleted } = await sql<{ job_id: string }>`
    with doomed as (
      select id, job_id
        from pgsched.execution_history
       where finished_at < now() - ${params.olderThanMs}::bigint * interval '1 millisecond'
       limit ${params.limit}::int
         for update skip locked
    ),
    deleted as (
      delete from pgsched.execution_history e
       using doomed d
       where e.id = d.id and e.job_id = d.job_id
      returning e.job_id
    ),
    output as (
      -- the output chunks of every attempt of the doomed executions (primary key prefix)
      delete from pgsched.execution_output o
       using doomed d
       where o.execution_id = d.id
    )
    select job_id from deleted`.execute(trx)
  if (deleted.length === 0) return { executions: 0, jobs: 0 }
  const jobIds = [...new Set(deleted.map((r) => r.job_id))].sort()
  await sql`select id from pgsched.jobs where id = any(${jobIds}::uuid[]) order by id for update`.execute(trx)
  const { rows } = await sql<{ jobs: string }>`
    with orphan_jobs as (
      -- one-time jobs whose every execution is now gone
      delete from pgsched.jobs j
       where j.id = any(${jobIds}::uuid[])
         and j.created_at < now() - ${params.olderThanMs}::bigint * interval '1 millisecond'
         and not exists (select 1 from pgsched.triggers t where t.job_id = j.id)
         and not exists (select 1 from pgsched.execution_history x where x.job_id = j.id)
         and not exists (select 1 from pgsched.due x where x.job_id = j.id)
         and not exists (select 1 from pgsched.runs x where x.job_id = j.id)
      returning j.id, j.tenant, j.idempotency_key
    ),
    keys as (
      delete from pgsched.job_idempotency_keys k
       using orphan_jobs o
       where o.idempotency_key is not null and k.tenant = o.tenant and k.idempotency_key = o.idempotency_key
    )
    select count(*)::text as jobs from orphan_jobs`.execute(trx)
  return { executions: deleted.length, jobs: Number(rows[0]?.jobs ?? 0) }
}
