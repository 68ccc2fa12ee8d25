/**
 * The bench's probes of the scratch database and the machine: a free port,
 * "the queue is drained", "autovacuum has caught up", the database clock and
 * throughput by database timestamps. Callers: runBench's scenarios.
 */
import { createServer } from 'node:net'
import { performance } from 'node:perf_hooks'
import { sql, type Kysely } from 'kysely'
import { serverAutovacuumOn } from '../db/queries/ops.ts'
import type { DB } from '../db/schema.ts'
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
    // Each probe is served by a small partial index (claim, lease), not a scan of the history.
    const { rows } = await sql<{ busy: boolean }>`
      select exists (select 1 from pgsched.executions where state = 'pending' and queue = 'default'
                      order by queue, priority desc, run_at, id limit 1)
          or exists (select 1 from pgsched.executions where state = 'running' order by lease_expires_at limit 1) as busy`.execute(s.db)
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
    await sql`vacuum pgsched.executions`.execute(s.db)
    progress(`  autovacuum is off on this server; ran the vacuum it would run (${Math.round(performance.now() - t0)} ms)`)
    return
  }
  progress('  waiting for autovacuum to process the executions partitions')
  const deadline = performance.now() + 180_000
  for (;;) {
    const { rows } = await sql<{ done: number; total: number }>`
      select count(*) filter (where greatest(last_autovacuum, last_vacuum) >= ${since}::timestamptz)::int as done, count(*)::int as total
        from pg_stat_user_tables
       where relid in (select inhrelid from pg_inherits where inhparent = 'pgsched.executions'::regclass)
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
