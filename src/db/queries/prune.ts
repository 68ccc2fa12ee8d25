/**
 * Retention: terminal executions finished before `olderThanMs` ago are
 * deleted, `limit` at a time (SKIP LOCKED: concurrent pruners split the work),
 * then one-time jobs left with no execution and no trigger, with their
 * idempotency keys. An execution's output chunks (pgsched.execution_output) go in
 * the same statement.
 */
import { sql, type Kysely } from 'kysely'
import type { DB } from '../schema.ts'

export interface ExecutionPruneParams {
  olderThanMs: number
  limit: number
}

export async function executionPruneFinished(db: Kysely<DB>, params: ExecutionPruneParams): Promise<{ executions: number; jobs: number }> {
  const { rows } = await sql<{ executions: string; jobs: string }>`
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
    ),
    orphan_jobs as (
      -- one-time jobs whose every execution is now gone
      delete from pgsched.jobs j
       where j.id in (select distinct job_id from deleted)
         and j.created_at < now() - ${params.olderThanMs}::bigint * interval '1 millisecond'
         and not exists (select 1 from pgsched.triggers t where t.job_id = j.id)
         and not exists (select 1 from pgsched.execution_history x where x.job_id = j.id
                          and not (x.id, x.job_id) in (select id, job_id from doomed))
         and not exists (select 1 from pgsched.due x where x.job_id = j.id)
         and not exists (select 1 from pgsched.runs x where x.job_id = j.id)
      returning j.id, j.tenant, j.idempotency_key
    ),
    keys as (
      delete from pgsched.job_idempotency_keys k
       using orphan_jobs o
       where o.idempotency_key is not null and k.tenant = o.tenant and k.idempotency_key = o.idempotency_key
    )
    select (select count(*) from deleted)::text as executions, (select count(*) from orphan_jobs)::text as jobs
  `.execute(db)
  return { executions: Number(rows[0]?.executions ?? 0), jobs: Number(rows[0]?.jobs ?? 0) }
}
