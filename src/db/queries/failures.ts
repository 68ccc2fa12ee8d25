/**
 * Failed jobs grouped by error: the jobs whose status is FAILED or EXPIRED, by their latest
 * execution's error type and message (or the schedule's error, when the dispatcher stopped a
 * recurring job), largest groups first. Read from candidates (job-candidates.ts): the failed
 * executions and the stopped schedules, which small partial indexes enumerate, so the report reads
 * the failures, not every job.
 */
import { sql, type Kysely } from 'kysely'
import type { DB } from '../schema.ts'
import { candidateJobIds } from './job-candidates.ts'
import { errorMessageSql, errorTypeSql, jobFilterSql, jobJoins, statusCondition } from './job-filter.ts'

export interface FailureGroup {
  errorType: string
  message: string
  count: number
  firstSeenAt: Date
  lastSeenAt: Date
  types: string[]
  queues: string[]
  /** The newest job of the group, and its payload. */
  sampleJobId: string
  samplePayload: unknown
}

export interface FailureGroupListParams {
  /** null: every tenant. */
  tenant: string | null
  queue?: string
  type?: string
  /** Only failures at or after this time. */
  since?: Date
  /** Most groups returned. */
  limit: number
}

export async function failureGroupList(db: Kysely<DB>, params: FailureGroupListParams): Promise<FailureGroup[]> {
  const since = params.since ?? null
  const candidates = candidateJobIds(['FAILED', 'EXPIRED'], params.tenant)
  const { rows } = await sql<{
    error_type: string
    message: string
    count: string
    first_seen_at: Date
    last_seen_at: Date
    types: string[]
    queues: string[]
    sample_job_id: string
    sample_payload: unknown
  }>`
    with failed as (
      select f.* from (${candidates}) d
       cross join lateral (
        -- as text: an array of a domain's values (jobs.type and queue are domains, migration 0038)
        -- comes back with the domain's array type, which the driver does not parse
        select j.id, j.type::text as type, j.queue::text as queue, j.payload,
               coalesce(${errorTypeSql}, 'Error') as error_type,
               coalesce(${errorMessageSql}, '') as message,
               coalesce(e.finished_at, t.updated_at, j.updated_at) as seen_at
          from ${jobJoins}
         where j.id = d.job_id
           and ${jobFilterSql({ tenant: params.tenant, queue: params.queue, type: params.type })}
           and (${statusCondition('FAILED')} or ${statusCondition('EXPIRED')})
        offset 0  -- kept apart: each candidate looks its job up by id, whatever the tables' sizes
       ) f
    )
    select error_type, message, count(*)::text as count, min(seen_at) as first_seen_at, max(seen_at) as last_seen_at,
           array_agg(distinct type order by type) as types, array_agg(distinct queue order by queue) as queues,
           (array_agg(id order by id desc))[1] as sample_job_id,
           (array_agg(payload order by id desc))[1] as sample_payload
      from failed
     where ${since}::timestamptz is null or seen_at >= ${since}::timestamptz
     group by error_type, message
     order by count(*) desc, max(seen_at) desc
     limit ${params.limit}::int`.execute(db)
  return rows.map((r) => ({
    errorType: r.error_type,
    message: r.message,
    count: Number(r.count),
    firstSeenAt: r.first_seen_at,
    lastSeenAt: r.last_seen_at,
    types: r.types,
    queues: r.queues,
    sampleJobId: r.sample_job_id,
    samplePayload: r.sample_payload,
  }))
}
