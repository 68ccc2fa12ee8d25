/**
 * The history of the list scenario: `rows` executions with their jobs, as a deployment with that
 * much history holds them, written with set-based SQL (generate_series) in chunks of about
 * CHUNK_ROWS executions. Each chunk is one transaction that also records itself in
 * `public.bench_list_seed`, so a seeding interrupted (a crash, Ctrl-C) resumes where it stopped
 * when the same database is seeded again, and a finished one is not written twice.
 *
 * The layout, over HISTORY_DAYS days ending when the seeding began (within the pruner's default
 * retention of 7 days, so a worker would keep it):
 * - a tenth of the rows belong to recurring jobs (one per 10,000 rows, at least 10, each with an
 *   equal share of runs at an even interval; one in ten paused), the rest to one-time jobs, one
 *   execution each;
 * - tenants acme 55 %, globex 30 %, initech 10 %, umbrella 5 %; eight types over four queues;
 * - one-time outcomes: 90 % succeeded, 5 % failed (four distinct errors, unevenly), 1 % expired
 *   (missed their start deadline), 1 % cancelled, the rest succeeded; the newest 0.2 % (at least
 *   200) are a backlog: 60 % of them pending, 5 % running, the rest as above. A fifth carry an idempotency key.
 * Outcomes, tenants and types come from hashes of the row number, so they are independent.
 */
import { performance } from 'node:perf_hooks'
import { sql, type Kysely } from 'kysely'
import type { DB } from '../db/schema.ts'

/** Executions per chunk: a chunk commits within a few seconds, so little is lost to an interruption. */
const CHUNK_ROWS = 250_000
const HISTORY_DAYS = 6
/** The (stopped) worker that ran the history. */
const HISTORY_WORKER_ID = '00000000-0000-7000-8000-0000000be001'

export const LIST_TENANTS = ['acme', 'globex', 'initech', 'umbrella'] as const
export const LIST_TYPES = [
  'email.send',
  'report.build',
  'image.resize',
  'invoice.sync',
  'webhook.deliver',
  'search.index',
  'export.csv',
  'cleanup.tmp',
] as const
export const LIST_QUEUES = ['default', 'critical', 'bulk', 'emails'] as const

/** The shape of the history for `rows` executions. */
export interface HistoryLayout {
  rows: number
  recurringJobs: number
  runsPerRecurringJob: number
  oneTimeJobs: number
}

export function historyLayout(rows: number): HistoryLayout {
  const recurringJobs = Math.max(10, Math.floor(rows / 10_000))
  const runsPerRecurringJob = Math.max(1, Math.floor(rows / 10 / recurringJobs))
  return { rows, recurringJobs, runsPerRecurringJob, oneTimeJobs: Math.max(0, rows - recurringJobs * runsPerRecurringJob) }
}

/** A chunk: one-time jobs [lo, hi), or recurring jobs [lo, hi). */
interface Chunk {
  name: string
  kind: 'one-time' | 'recurring'
  lo: number
  hi: number
  executions: number
}

function chunksOf(l: HistoryLayout): Chunk[] {
  const chunks: Chunk[] = []
  const perRecurring = Math.max(1, Math.floor(CHUNK_ROWS / l.runsPerRecurringJob))
  for (let lo = 0; lo < l.recurringJobs; lo += perRecurring) {
    const hi = Math.min(l.recurringJobs, lo + perRecurring)
    chunks.push({ name: `recurring ${lo}`, kind: 'recurring', lo, hi, executions: (hi - lo) * l.runsPerRecurringJob })
  }
  for (let lo = 0; lo < l.oneTimeJobs; lo += CHUNK_ROWS) {
    const hi = Math.min(l.oneTimeJobs, lo + CHUNK_ROWS)
    chunks.push({ name: `one-time ${lo}`, kind: 'one-time', lo, hi, executions: hi - lo })
  }
  return chunks
}

/** A UUIDv7 for the time `at` whose other bits come from `seed` (so each chunk's ids can be written again identically). */
const uuidAt = (at: ReturnType<typeof sql>, seed: ReturnType<typeof sql>) =>
  sql`(lpad(to_hex((extract(epoch from ${at}) * 1000)::bigint), 12, '0') || '7' || substr(md5(${seed}), 1, 3) || '8' || substr(md5(${seed}), 4, 15))::uuid`

const tenantOf = (h: ReturnType<typeof sql>) =>
  sql`(case when ${h} < 55 then 'acme' when ${h} < 85 then 'globex' when ${h} < 95 then 'initech' else 'umbrella' end)`
const typeOf = (h: ReturnType<typeof sql>) => sql`((${sql.val([...LIST_TYPES])}::text[])[${h} + 1])`
/** Types map to queues (two types per queue), as a deployment routes them. */
const queueOf = (h: ReturnType<typeof sql>) => sql`((${sql.val([...LIST_QUEUES])}::text[])[${h} % 4 + 1])`
/** Four errors, the first far more frequent than the last. */
const errorOf = (h: ReturnType<typeof sql>, at: ReturnType<typeof sql>, attempt: ReturnType<typeof sql>) => sql`jsonb_build_object(
  'name', (array['TimeoutError', 'TimeoutError', 'TimeoutError', 'TimeoutError', 'Error', 'Error', 'Error', 'TypeError', 'TypeError', 'HttpError'])[${h} + 1],
  'message', (array['handler timed out after 300000 ms', 'handler timed out after 300000 ms', 'handler timed out after 300000 ms',
                    'handler timed out after 300000 ms', 'connect ECONNREFUSED 10.0.0.7:5432', 'connect ECONNREFUSED 10.0.0.7:5432',
                    'connect ECONNREFUSED 10.0.0.7:5432', 'Cannot read properties of undefined (reading ''id'')',
                    'Cannot read properties of undefined (reading ''id'')', 'upstream answered 503'])[${h} + 1],
  'fatal', false, 'attempt', ${attempt}, 'at', ${at})`

async function writeOneTime(db: Kysely<DB>, l: HistoryLayout, c: Chunk, start: Date, end: Date): Promise<void> {
  const stepMs = (end.getTime() - start.getTime()) / Math.max(1, l.oneTimeJobs)
  const backlogFrom = l.oneTimeJobs - Math.max(200, Math.floor(l.oneTimeJobs * 0.002))
  // fate: s succeeded, f failed, x expired, c cancelled, p pending, r running
  const g = sql`
    select k, at, ${tenantOf(sql`th`)} as tenant, ${typeOf(sql`ty`)} as type, ${queueOf(sql`ty`)} as queue, er, u,
           ${uuidAt(sql`at`, sql`'j' || k`)} as job_id,
           case when k >= ${backlogFrom}::bigint and u < 50 then 'r'
                when k >= ${backlogFrom}::bigint and u < 600 then 'p'
                when u >= 900 and u < 950 then 'f'
                when u >= 950 and u < 960 then 'x'
                when u >= 960 and u < 970 then 'c'
                else 's' end as fate
      from (select k, ${start}::timestamptz + k * ${stepMs}::float8 * interval '1 millisecond' as at,
                   abs(hashint8extended(k, 1) % 1000)::int as u, abs(hashint8extended(k, 2) % 100)::int as th,
                   abs(hashint8extended(k, 3) % 8)::int as ty, abs(hashint8extended(k, 4) % 10)::int as er
              from generate_series(${c.lo}::bigint, ${c.hi - 1}::bigint) k) x`
  await sql`
    insert into pgsched.jobs (id, tenant, type, queue, payload, max_attempts, idempotency_key, state, created_by, created_at, updated_at)
    select job_id, tenant, type, queue, jsonb_build_object('orderId', k, 'note', 'bench history'), 3,
           case when u % 5 = 0 then 'order-' || k end, case when fate = 'c' then 'cancelled' else 'active' end, 'bench', at, at
      from (${g}) g`.execute(db)
  await sql`
    insert into pgsched.job_idempotency_keys (tenant, idempotency_key, job_id, request_hash, created_at)
    select tenant, 'order-' || k, job_id, 'bench', at from (${g}) g where u % 5 = 0`.execute(db)
  // finished ones in the history, pending ones in due, running ones in runs (migration 0028)
  await sql`
    insert into pgsched.execution_history (id, job_id, queue, type, priority, scheduled_for, run_at, state, attempt, max_attempts, timeout_ms,
                                           started_at, finished_at, result, error, tenant, last_worker_id, created_at)
    select ${uuidAt(sql`at`, sql`'e' || k`)}, job_id, queue, type, 0, at, at,
           case fate when 's' then 'succeeded' when 'f' then 'failed' when 'x' then 'failed' else 'cancelled' end,
           case fate when 's' then 1 when 'f' then 3 else 0 end, 3, 300000,
           case when fate in ('s', 'f') then at + interval '1 second' end,
           at + interval '2 seconds',
           case when fate = 's' then '{"ok": true}'::jsonb end,
           case fate when 'f' then ${errorOf(sql`er`, sql`at + interval '2 seconds'`, sql`3`)}
                     when 'x' then jsonb_build_object('name', 'StartDeadlineError', 'message', 'not started by its start deadline',
                                                      'fatal', true, 'attempt', 0, 'at', at + interval '2 seconds') end,
           tenant,
           case when fate in ('s', 'f') then ${HISTORY_WORKER_ID}::uuid end,
           at
      from (${g}) g
     where fate in ('s', 'f', 'x', 'c')`.execute(db)
  await sql`
    insert into pgsched.due (execution_id, job_id, queue, type, priority, scheduled_for, run_at, attempt, max_attempts, timeout_ms, tenant, created_at)
    select ${uuidAt(sql`at`, sql`'e' || k`)}, job_id, queue, type, 0, at, at, 0, 3, 300000, tenant, at
      from (${g}) g
     where fate = 'p'`.execute(db)
  await sql`
    insert into pgsched.runs (execution_id, job_id, worker_id, attempt, lease_expires_at, started_at, queue, type, priority, run_at, scheduled_for,
                              max_attempts, timeout_ms, tenant, created_at)
    select ${uuidAt(sql`at`, sql`'e' || k`)}, job_id, ${HISTORY_WORKER_ID}::uuid, 1, now() + interval '1 day', at + interval '1 second',
           queue, type, 0, at, at, 3, 300000, tenant, at
      from (${g}) g
     where fate not in ('s', 'f', 'x', 'c', 'p')`.execute(db)
}

async function writeRecurring(db: Kysely<DB>, l: HistoryLayout, c: Chunk, start: Date, end: Date): Promise<void> {
  const intervalMs = Math.max(1000, Math.floor((end.getTime() - start.getTime()) / l.runsPerRecurringJob))
  const r = sql`
    select r, ${tenantOf(sql`abs(hashint8extended(r, 5) % 100)::int`)} as tenant, ${typeOf(sql`abs(hashint8extended(r, 6) % 8)::int`)} as type,
           ${queueOf(sql`abs(hashint8extended(r, 6) % 8)::int`)} as queue, r % 10 = 9 as paused,
           ${uuidAt(sql`${start}::timestamptz - r * interval '1 millisecond'`, sql`'r' || r`)} as job_id
      from generate_series(${c.lo}::bigint, ${c.hi - 1}::bigint) r`
  await sql`
    insert into pgsched.jobs (id, tenant, type, queue, payload, max_attempts, state, created_by, created_at, updated_at)
    select job_id, tenant, type, queue, jsonb_build_object('report', r), 3, case when paused then 'paused' else 'active' end, 'bench',
           ${start}::timestamptz - r * interval '1 millisecond', ${start}::timestamptz
      from (${r}) r`.execute(db)
  await sql`
    insert into pgsched.triggers (job_id, kind, interval_ms, next_fire_at, last_fire_at, paused, created_at)
    select job_id, 'interval', ${intervalMs}::bigint,
           ${start}::timestamptz + ${l.runsPerRecurringJob}::int * ${intervalMs}::bigint * interval '1 millisecond',
           ${start}::timestamptz + (${l.runsPerRecurringJob}::int - 1) * ${intervalMs}::bigint * interval '1 millisecond', paused, ${start}::timestamptz
      from (${r}) r`.execute(db)
  await sql`
    insert into pgsched.execution_history (id, job_id, queue, type, priority, scheduled_for, run_at, state, attempt, max_attempts, timeout_ms,
                                           started_at, finished_at, result, error, tenant, last_worker_id, created_at)
    select ${uuidAt(sql`at`, sql`'r' || r || '-' || p`)}, job_id, queue, type, 0, at, at, case when failed then 'failed' else 'succeeded' end,
           case when failed then 3 else 1 end, 3, 300000, at + interval '1 second', at + interval '2 seconds',
           case when failed then null else '{"ok": true}'::jsonb end,
           case when failed then ${errorOf(sql`abs(hashint8extended(r * 100000 + p, 8) % 10)::int`, sql`at + interval '2 seconds'`, sql`3`)} end,
           tenant, ${HISTORY_WORKER_ID}::uuid, at
      from (select r.*, p, ${start}::timestamptz + p * ${intervalMs}::bigint * interval '1 millisecond' as at,
                   abs(hashint8extended(r * 100000 + p, 7) % 100) < 3 as failed
              from (${r}) r cross join generate_series(0, ${l.runsPerRecurringJob - 1}::int) p) x`.execute(db)
}

/**
 * Writes the history (or what an interrupted seeding left unwritten) on two connections at once,
 * then vacuums and analyzes the tables (the visibility map lets index-only scans skip the heap, as
 * autovacuum would have let them) and checkpoints.
 */
export async function writeListHistory(db: Kysely<DB>, rows: number, progress: (line: string) => void): Promise<void> {
  await sql`create table if not exists public.bench_list_seed (chunk text primary key, executions bigint not null, at timestamptz not null default now())`.execute(
    db,
  )
  await sql`insert into public.bench_list_seed (chunk, executions) values ('layout', ${rows}::bigint) on conflict (chunk) do nothing`.execute(db)
  const { rows: seeded } = await sql<{ chunk: string; executions: string; at: Date }>`select chunk, executions::text, at from public.bench_list_seed`.execute(
    db,
  )
  const layoutRow = seeded.find((r) => r.chunk === 'layout')
  if (!layoutRow || Number(layoutRow.executions) !== rows)
    throw new Error(`the list history database was seeded for ${layoutRow?.executions} rows, not ${rows}`)
  const done = new Set(seeded.map((r) => r.chunk))
  if (done.has('vacuumed')) {
    progress(`list: ${rows.toLocaleString('en-US')} executions of history already written`)
    return
  }
  const l = historyLayout(rows)
  // The history ends when the seeding first began, so a resumed seeding writes the same rows.
  const end = layoutRow.at
  const start = new Date(end.getTime() - HISTORY_DAYS * 86_400_000)
  const todo = chunksOf(l).filter((c) => !done.has(c.name))
  let written = rows - todo.reduce((a, c) => a + c.executions, 0)
  progress(`list: writing ${rows.toLocaleString('en-US')} executions of history (${written.toLocaleString('en-US')} already written)`)
  await sql`insert into pgsched.workers (id, host, pid, queues, types, concurrency, started_at, last_seen_at, stopped_at)
            values (${HISTORY_WORKER_ID}::uuid, 'bench-history', 1, ${sql.val([...LIST_QUEUES])}::text[], ${sql.val([...LIST_TYPES])}::text[], 100,
                    ${start}::timestamptz, ${end}::timestamptz, ${end}::timestamptz)
            on conflict (id) do nothing`.execute(db)
  const t0 = performance.now()
  let next = 0
  await Promise.all(
    [0, 1].map(async () => {
      for (let c = todo[next++]; c; c = todo[next++]) {
        const chunk = c
        await db.transaction().execute(async (trx) => {
          if (chunk.kind === 'one-time') await writeOneTime(trx, l, chunk, start, end)
          else await writeRecurring(trx, l, chunk, start, end)
          await sql`insert into public.bench_list_seed (chunk, executions) values (${chunk.name}, ${chunk.executions}::bigint)`.execute(trx)
        })
        written += chunk.executions
        const s = (performance.now() - t0) / 1000
        progress(`  history ${written.toLocaleString('en-US')} / ${rows.toLocaleString('en-US')} (${Math.round(s)} s)`)
      }
    }),
  )
  progress('  vacuum analyze of the history')
  await sql`vacuum analyze pgsched.jobs, pgsched.execution_history, pgsched.due, pgsched.runs, pgsched.triggers, pgsched.job_idempotency_keys`.execute(db)
  await sql`insert into public.bench_list_seed (chunk, executions) values ('vacuumed', 0)`.execute(db)
  await sql`checkpoint`.execute(db).catch((err: unknown) => progress(`  checkpoint skipped: ${String(err)}`))
}
