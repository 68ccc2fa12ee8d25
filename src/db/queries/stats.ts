/**
 * Per-minute figures of the last N minutes, per queue: executions started, succeeded and failed
 * in each minute, and the schedule lag of those started (start time minus due time) at the 50th
 * and 95th percentiles. It reads the executions finished in the window (the finished-at index) and
 * those running now; a start counts its execution's latest attempt.
 */
import { sql, type Kysely } from 'kysely'
import type { DB } from '../schema.ts'

export interface MinuteStats {
  minute: Date
  queue: string
  started: number
  succeeded: number
  failed: number
  lagP50Ms: number | null
  lagP95Ms: number | null
}

export interface StatsPerMinuteParams {
  /** null: every tenant. */
  tenant: string | null
  minutes: number
  queue?: string
}

export async function statsPerMinute(db: Kysely<DB>, params: StatsPerMinuteParams): Promise<MinuteStats[]> {
  const { rows } = await sql<{
    minute: Date
    queue: string
    started: string
    succeeded: string
    failed: string
    lag_p50_ms: number | null
    lag_p95_ms: number | null
  }>`
    with bounds as (select date_trunc('minute', now()) - (${params.minutes}::int - 1) * interval '1 minute' as since),
    recent as (
      select x.queue, x.state, x.started_at, x.finished_at, x.run_at
        from pgsched.executions x, bounds b
       where (x.finished_at >= b.since or x.state = 'running')
         and (${params.tenant}::text is null or x.tenant = ${params.tenant}::text)
         and (${params.queue ?? null}::text is null or x.queue = ${params.queue ?? null}::text)
    ),
    events as (
      select date_trunc('minute', started_at) as minute, queue, 1 as started, 0 as succeeded, 0 as failed,
             greatest(0, extract(epoch from started_at - run_at) * 1000) as lag_ms
        from recent, bounds b where started_at >= b.since
      union all
      select date_trunc('minute', finished_at), queue, 0, (state = 'succeeded')::int, (state = 'failed')::int, null
        from recent, bounds b where finished_at >= b.since and state in ('succeeded', 'failed')
    )
    select minute, queue, sum(started)::text as started, sum(succeeded)::text as succeeded, sum(failed)::text as failed,
           floor(percentile_cont(0.5) within group (order by lag_ms))::float8 as lag_p50_ms,
           floor(percentile_cont(0.95) within group (order by lag_ms))::float8 as lag_p95_ms
      from events
     group by minute, queue
     order by minute, queue`.execute(db)
  return rows.map((r) => ({
    minute: r.minute,
    queue: r.queue,
    started: Number(r.started),
    succeeded: Number(r.succeeded),
    failed: Number(r.failed),
    lagP50Ms: r.lag_p50_ms,
    lagP95Ms: r.lag_p95_ms,
  }))
}
