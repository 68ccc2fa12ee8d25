/** SQL for the workers table (register at start, mark stopped at shutdown) and the waiting_workers sign-up. */
import { sql, type Kysely } from 'kysely'
import type { DB } from '../schema.ts'
import { PREPARE } from '../pool.ts'
import { perDbCache } from './per-db-cache.ts'
import { PRIORITY } from '../../core/names.ts'

export interface WorkerRegisterParams {
  id: string
  host: string
  pid: number
  queues: readonly string[]
  types: readonly string[]
  concurrency: number
  /** The lease length it runs with: it counts as live while seen within it (migration 0053). */
  leaseMs: number
}

/** Whether the workers row aliased `w` is live (migration 0053): not stopped, and seen within its lease length. */
export const workerLive = (w: string) => sql.raw(`pgsched.worker_live(${w}.stopped_at, ${w}.last_seen_at, ${w}.lease_ms)`)

export async function workerRegister(db: Kysely<DB>, params: WorkerRegisterParams): Promise<void> {
  await db
    .insertInto('pgsched.workers')
    .values({
      id: params.id,
      host: params.host,
      pid: params.pid,
      queues: [...params.queues],
      types: [...params.types],
      concurrency: params.concurrency,
      lease_ms: params.leaseMs,
    })
    .execute()
}

export async function workerMarkStopped(db: Kysely<DB>, params: { id: string }): Promise<void> {
  await db
    .updateTable('pgsched.workers')
    .set((eb) => ({ stopped_at: eb.fn('now'), last_seen_at: eb.fn('now'), running: 0 }))
    .where('id', '=', params.id)
    .execute()
}

/**
 * The channel a worker LISTENs on for wake-ups meant for it alone (migration 0044): a submit that
 * names it notifies there, so the other workers' processes are not woken for it.
 */
export function workerChannel(workerId: string): string {
  return `pgsched_worker_${workerId.replaceAll('-', '')}`
}

/** min_priority of a worker that found its queues empty: any due work wakes it. */
export const IDLE_MIN_PRIORITY = PRIORITY.min

/**
 * Lists the worker as wanting a wake-up for due work of its types (null: any) on its
 * queues at or above `minPriority` (see migrations 0006 and 0011). The idle sign-up (IDLE_MIN_PRIORITY) is
 * taken only while no submit is between its insert and its commit, so none can
 * miss both the sign-up and the claim that follows it; it never waits: false
 * means a submit was in flight (try again shortly). Other levels always succeed.
 * `channel`: the channel the worker listens on for wake-ups meant for it (workerChannel), where a
 * submit that names it notifies; null: pgsched_executions, named in the payload.
 */
export async function workerSignUpWaiting(
  db: Kysely<DB>,
  params: { id: string; queues: readonly string[]; types?: readonly string[] | null; minPriority?: number; channel?: string | null },
): Promise<boolean> {
  const minPriority = params.minPriority ?? IDLE_MIN_PRIORITY
  const { rows } = await sql<{ ok: boolean }>`${sql.raw(PREPARE)}
    with handshake as (
      select ${minPriority}::int > ${IDLE_MIN_PRIORITY}::int or pg_try_advisory_xact_lock(pgsched.wait_lock_key()) as ok
    )
    insert into pgsched.waiting_workers (worker_id, queues, types, min_priority, channel)
    select ${params.id}::uuid, ${[...params.queues]}::text[], ${params.types ? [...params.types] : null}::text[], ${minPriority}::int, ${params.channel ?? null}::text
      from handshake where ok
    on conflict (worker_id) do update
       set queues = excluded.queues, types = excluded.types, min_priority = excluded.min_priority, channel = excluded.channel,
           -- listed since: kept while the level stays (a listing written again is not a new one)
           since = case when waiting_workers.min_priority = excluded.min_priority then waiting_workers.since else now() end
    returning true as ok`.execute(db)
  return rows.length > 0
}

/** The worker has work and nothing buffered: submits need not wake it. */
export async function workerSignOffWaiting(db: Kysely<DB>, params: { id: string }): Promise<void> {
  await sql`${sql.raw(PREPARE)} delete from pgsched.waiting_workers where worker_id = ${params.id}::uuid`.execute(db)
}

/**
 * Passes a wake-up on (migration 0043): the worker `id` was listed idle and its claim filled its
 * room, so due work may be left that the submit announced to it alone. Names the other waiting
 * workers for what is left in its queues (of its types; null: any) until their slots hold it;
 * returns how many it named.
 */
export async function waitingWorkersWakeAfter(
  db: Kysely<DB>,
  params: { id: string; queues: readonly string[]; types?: readonly string[] | null },
): Promise<number> {
  const { rows } = await sql<{ named: number }>`${sql.raw(PREPARE)}
    select pgsched.wake_waiting_after(${params.id}::uuid, ${[...params.queues]}::text[], ${params.types ? [...params.types] : null}::text[]) as named`.execute(
    db,
  )
  return rows[0]?.named ?? 0
}

/** Removes sign-ups of workers that stopped or have not been seen for `staleMs` (they would only cost wake-ups). */
export async function waitingWorkersPrune(db: Kysely<DB>, params: { staleMs: number }): Promise<number> {
  const result = await sql`
    delete from pgsched.waiting_workers w
     where not exists (select 1 from pgsched.workers k
                        where k.id = w.worker_id and k.stopped_at is null
                          and k.last_seen_at > now() - ${params.staleMs}::int * interval '1 millisecond')`.execute(db)
  return Number(result.numAffectedRows ?? 0)
}

/**
 * Deletes up to `limit` workers last seen longer ago than `olderThanMs` (stopped, or gone without
 * stopping), none that still holds a lease: a worker that restarts registers anew, and the rows of
 * past processes would otherwise pile up. Returns how many it deleted.
 */
export async function workerPruneGone(db: Kysely<DB>, params: { olderThanMs: number; limit: number }): Promise<number> {
  const result = await sql`
    delete from pgsched.workers w
     where w.id = any(array(
             select k.id from pgsched.workers k
              where k.last_seen_at < now() - ${params.olderThanMs}::float8 * interval '1 millisecond'
                and not exists (select 1 from pgsched.runs r where r.worker_id = k.id)
              order by k.last_seen_at
              limit ${params.limit}::int))`.execute(db)
  return Number(result.numAffectedRows ?? 0)
}

/** How long the (queue, type) pairs served by live workers are used for submit replies. */
const SERVED_TTL_MS = 1_000

/** The (queue, type) pairs live workers serve. */
const servedPairs = perDbCache(SERVED_TTL_MS, async (db) => {
  const { rows } = await sql<{ queue: string; type: string }>`${sql.raw(PREPARE)}
      select distinct q as queue, t as type
        from pgsched.workers w, unnest(w.queues) q, unnest(w.types) t
       where ${workerLive('w')}`.execute(db)
  return new Set(rows.map((r) => `${r.queue}\u0000${r.type}`))
})

/** Whether a live worker (pgsched.worker_live) serves `type` in `queue`, as read in the last second through `db`. */
export async function workerServes(db: Kysely<DB>, queue: string, type: string): Promise<boolean> {
  return (await servedPairs.get(db)).has(`${queue}\u0000${type}`)
}

/** A worker as listed: what it serves and how busy it is. */
export interface WorkerView {
  id: string
  host: string
  pid: number
  queues: string[]
  types: string[]
  concurrency: number
  /** Executions it holds a lease on now: running, or claimed ahead of a free slot. */
  inFlight: number
  /** Of those, how many had their handler running at its last heartbeat (lastSeenAt); null when it did not report it. */
  running: number | null
  /** alive: seen within its lease length (pgsched.worker_live); stale: not seen since and not stopped; stopped: shut down. */
  state: 'alive' | 'stale' | 'stopped'
  startedAt: Date
  lastSeenAt: Date
  stoppedAt: Date | null
}

/** The workers seen most recently first (at most `limit`), with the executions each holds. */
export async function workerList(db: Kysely<DB>, params: { limit: number }): Promise<WorkerView[]> {
  const { rows } = await sql<Omit<WorkerView, 'inFlight'> & { in_flight: string; started_at: Date; last_seen_at: Date; stopped_at: Date | null }>`
    select w.id, w.host, w.pid, w.queues, w.types, w.concurrency, w.running, w.started_at, w.last_seen_at, w.stopped_at,
           case when w.stopped_at is not null then 'stopped'
                when ${workerLive('w')} then 'alive'
                else 'stale' end as state,
           (select count(*) from pgsched.executions x where x.state = 'running' and x.worker_id = w.id)::text as in_flight
      from pgsched.workers w
     order by w.last_seen_at desc, w.id
     limit ${params.limit}::int`.execute(db)
  return rows.map((r) => ({
    id: r.id,
    host: r.host,
    pid: r.pid,
    queues: r.queues,
    types: r.types,
    concurrency: r.concurrency,
    inFlight: Number(r.in_flight),
    running: r.running,
    state: r.state,
    startedAt: r.started_at,
    lastSeenAt: r.last_seen_at,
    stoppedAt: r.stopped_at,
  }))
}
