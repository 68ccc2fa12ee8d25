/**
 * SQL for reading executions: a job's history (keyset on fire time) and a
 * single execution.
 */
import { sql, type Kysely } from 'kysely'
import type { DB } from '../schema.ts'
import type { Execution } from '../../core/job.ts'
import { latestHost, toExecution } from './job-views.ts'

export interface ExecutionListByJobParams {
  jobId: string
  limit: number
  /** Microseconds since the epoch of the previous page's last scheduled_for. */
  beforeScheduledForUs?: string
}

/** A job's executions, latest fire time first. Each item carries its cursor. */
export async function executionListByJob(db: Kysely<DB>, params: ExecutionListByJobParams): Promise<Array<Execution & { cursor: string }>> {
  let q = db
    .selectFrom('pgsched.executions')
    .selectAll()
    .select(sql<string>`(extract(epoch from scheduled_for) * 1000000)::bigint::text`.as('cursor'))
    .select(latestHost(sql`pgsched.executions`).as('latest_host'))
    .where('job_id', '=', params.jobId)
  if (params.beforeScheduledForUs !== undefined) {
    q = q.where('scheduled_for', '<', sql<Date>`timestamptz 'epoch' + ${params.beforeScheduledForUs}::bigint * interval '1 microsecond'`)
  }
  const rows = await q.orderBy('scheduled_for', 'desc').limit(params.limit).execute()
  return rows.map((r) => ({ ...toExecution(r as unknown as Record<string, unknown>), cursor: r.cursor }))
}

export interface ExecutionGetByIdParams {
  id: string
  tenant: string
}

/** One execution of one of the tenant's jobs; undefined if absent or another tenant's. */
export async function executionGetById(db: Kysely<DB>, params: ExecutionGetByIdParams): Promise<Execution | undefined> {
  const row = await db
    .selectFrom('pgsched.executions as e')
    .innerJoin('pgsched.jobs as j', 'j.id', 'e.job_id')
    .selectAll('e')
    .select(latestHost(sql`e`).as('latest_host'))
    .where('e.id', '=', params.id)
    .where('j.tenant', '=', params.tenant)
    .executeTakeFirst()
  return row ? toExecution(row as unknown as Record<string, unknown>) : undefined
}
