/**
 * The bench's probes of the scratch database and the machine: a free port,
 * "the queue is drained", "autovacuum has caught up", the database clock,
 * throughput by database timestamps, the server's description, the claim's
 * plan, and the history rows of the scale scenario. Callers: runBench's scenarios.
 */
import { createServer } from 'node:net'
import { cpus, platform, release, totalmem } from 'node:os'
import { performance } from 'node:perf_hooks'
import { sql, type Kysely } from 'kysely'
import { executionClaimBatch, executionClaimBatchQuery } from '../db/queries/claim.ts'
import { executionCompleteMany } from '../db/queries/lease.ts'
import { serverAutovacuumOn } from '../db/queries/ops.ts'
import type { DB } from '../db/schema.ts'
import type { BenchReport } from './report.ts'
import type { Scratch } from './scratch.ts'

/** A TCP port free on 127.0.0.1 now. */
export async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer()
    server.listen(0, '127.0.0.1', () => {
      const address = server.address()
      server.close(() => (typeof address === 'object' && address ? resolve(address.port) : reject(new Error('no port'))))
    })
  })
}

/** Resolves once nothing is pending or running on the default queue; throws after `timeoutMs`. */
export async function waitUntilDrained(s: Scratch, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs
  for (;;) {
    // Each probe reads a small table (due, runs), not the history.
    const { rows } = await sql<{ busy: boolean }>`
      select exists (select 1 from pgsched.due where queue = 'default')
          or exists (select 1 from pgsched.runs) as busy`.execute(s.db)
    if (rows[0]?.busy === false) return
    if (Date.now() > deadline) throw new Error(`executions still pending after ${timeoutMs} ms`)
    await new Promise((r) => setTimeout(r, 100))
  }
}

/**
 * Brings the executions partitions to the state autovacuum keeps them in: waits (up to 3 minutes)
 * until it has processed, since `since`, every partition over migration 0007's threshold, or, on a
 * server with autovacuum off, runs that vacuum itself (the partitions' settings apply to both).
 */
export async function afterAutovacuum(s: Scratch, since: Date | null, progress: (line: string) => void): Promise<void> {
  if (!(await serverAutovacuumOn(s.db))) {
    const t0 = performance.now()
    await sql`vacuum pgsched.execution_history, pgsched.due, pgsched.runs`.execute(s.db)
    progress(`  autovacuum is off on this server; ran the vacuum it would run (${Math.round(performance.now() - t0)} ms)`)
    return
  }
  progress('  waiting for autovacuum to process the executions partitions')
  const deadline = performance.now() + 180_000
  for (;;) {
    const { rows } = await sql<{ done: number; total: number }>`
      select count(*) filter (where greatest(last_autovacuum, last_vacuum) >= ${since}::timestamptz)::int as done, count(*)::int as total
        from pg_stat_user_tables
       where relid in (select inhrelid from pg_inherits where inhparent = 'pgsched.execution_history'::regclass)
         and (n_dead_tup >= 5000 or greatest(last_autovacuum, last_vacuum) >= ${since}::timestamptz)  -- over 0007's threshold`.execute(s.db)
    const r = rows[0]
    if (r && r.done === r.total) return
    if (performance.now() > deadline) {
      progress(`  autovacuum processed ${r?.done ?? 0} of ${r?.total ?? 0} partitions within 3 minutes; measuring anyway`)
      return
    }
    await new Promise((resolve) => setTimeout(resolve, 1000))
  }
}

/** The database's clock. */
export async function dbNow(db: Kysely<DB>): Promise<Date | null> {
  return (await sql<{ now: Date }>`select now() as now`.execute(db)).rows[0]?.now ?? null
}

/**
 * Jobs per second between the first claim and the last completion, by database timestamps.
 * `since` (database time) leaves out earlier runs and the scale scenario's history.
 */
export async function dbThroughput(s: Scratch, since: Date | null = null): Promise<number> {
  const { rows } = await sql<{ n: number; seconds: number }>`
    select count(*)::int as n, extract(epoch from max(finished_at) - min(started_at))::float8 as seconds
      from pgsched.executions
     where state = 'succeeded' and (${since}::timestamptz is null or started_at >= ${since}::timestamptz)`.execute(s.db)
  const r = rows[0] as { n: number; seconds: number }
  return r.n / r.seconds
}

/** The server's version and the settings that move the figures most, for the report. */
export async function serverDescription(db: Kysely<DB>): Promise<string> {
  const { rows } = await sql<{ version: string; settings: string }>`
    select current_setting('server_version') as version,
           string_agg(name || ' = ' || current_setting(name), ', ' order by name) as settings
      from pg_settings
     where name in ('autovacuum', 'fsync', 'max_wal_size', 'shared_buffers', 'synchronous_commit', 'work_mem')`.execute(db)
  return `PostgreSQL ${rows[0]?.version ?? '?'} (${rows[0]?.settings ?? ''})`
}

/** Writes `rows` terminal executions of history (a day old), then vacuums, analyzes and checkpoints. */
export async function writeHistory(s: Scratch, rows: number, progress: (line: string) => void): Promise<void> {
  progress(`scale: writing ${rows.toLocaleString('en-US')} terminal executions of history`)
  // Chunks of 500,000 on two connections at once; job ids time-ordered (UUIDv7), as real history's are.
  const chunk = 500_000
  let next = 0
  let written = 0
  await Promise.all(
    [0, 1].map(async () => {
      while (next < rows) {
        const n = Math.min(chunk, rows - next)
        next += n
        await sql`
        insert into pgsched.execution_history (job_id, queue, type, priority, scheduled_for, run_at, state, attempt, max_attempts,
                                               timeout_ms, started_at, finished_at, result)
        select pgsched.uuid_v7(), 'default', 'bench.noop', 0, t, t, 'succeeded', 1, 5, 300000, t, t, 'null'::jsonb
          from (select now() - interval '1 day' - g * interval '1 millisecond' as t from generate_series(1, ${n}::int) g) x`.execute(s.db)
        written += n
        progress(`  history ${written.toLocaleString('en-US')} / ${rows.toLocaleString('en-US')}`)
      }
    }),
  )
  await sql`vacuum analyze pgsched.execution_history`.execute(s.db)
  // The history stands for a steady state, not a bulk load in progress: flush it before measuring
  // (needs superuser or pg_checkpoint; without, the checkpoint of the load may overlap the runs).
  await sql`checkpoint`.execute(s.db).catch((err: unknown) => progress(`  checkpoint skipped: ${String(err)}`))
}

/** EXPLAIN (ANALYZE, BUFFERS) of one claim of 100, rolled back; the error's text when it fails. */
export async function explainClaim(db: Kysely<DB>, workerId: string): Promise<string> {
  return db
    .transaction()
    .execute(async (trx) => {
      const q = executionClaimBatchQuery({ workerId, queues: ['default'], types: ['bench.noop'], limit: 100, leaseMs: 30_000 })
      const { rows: plan } = await sql<{ 'QUERY PLAN': string }>`explain (analyze, buffers) ${q}`.execute(trx)
      await sql`rollback`.execute(trx).catch(() => undefined)
      return plan.map((p) => p['QUERY PLAN']).join('\n')
    })
    .catch((err: unknown) => `EXPLAIN failed: ${String(err)}`)
}

/** The machine the bench ran on, for the report. */
export function machineDescription(postgres: string, partitions: number): BenchReport['machine'] {
  return {
    cpu: cpus()[0]?.model ?? 'unknown',
    cores: cpus().length,
    memoryGiB: Math.round(totalmem() / 2 ** 30),
    os: `${platform()} ${release()}`,
    node: process.version,
    postgres,
    partitions,
  }
}

/** The ceiling's loop: two connections claiming `batch` jobs and completing them, until none is left. */
export async function drainWithBareLoop(db: Kysely<DB>, workerId: string, batch: number): Promise<void> {
  await Promise.all(
    [0, 1].map(async () => {
      for (;;) {
        const claimed = await executionClaimBatch(db, { workerId, queues: ['default'], types: ['bench.noop'], limit: batch, leaseMs: 60_000 })
        if (claimed.length === 0) return
        await executionCompleteMany(db, {
          workerId,
          completions: claimed.map((c) => ({ id: c.id, jobId: c.jobId, attempt: c.attempt, resultJson: 'null', outputUri: null })),
        })
      }
    }),
  )
}
