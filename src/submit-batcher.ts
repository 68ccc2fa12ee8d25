/**
 * Group commit for single submits: submitJob calls made outside a caller's
 * transaction while an insert is in flight join the next insert, one statement
 * and one commit for the group. With no insert in flight a submit is written at
 * once (no added latency). A second insert starts beside the first only once the
 * first has taken SECOND_WRITE_AFTER_MS (a statement held up, say by a tenant's
 * admission lock, does not hold up everyone's submits); before that, the submits
 * wait for it and go together. A group that fails is retried one submit at a
 * time, so one submit's error never becomes another's; one whose answer was lost (the
 * connection dropped) first looks up which of its submits were written after all.
 */
import { sql, type Kysely } from 'kysely'
import { BusyError, UnreplicatedError } from './errors.ts'
import type { NormalizedSubmit } from './core/job.ts'
import type { DB } from './db/schema.ts'
import { admitSubmits, tenantHasQuota } from './db/queries/admission.ts'
import { jobInsertMany, type JobInsertOutcome } from './db/queries/jobs.ts'
import { ceilMs } from './db/queries/fragments.ts'

/** A normalised submit given its ids (client.ts withIds). */
export type SubmitRow = NormalizedSubmit

export interface InsertedRows {
  outcomes: JobInsertOutcome[]
  now: Date
}

/** How a group of submits is admitted (see db/queries/admission.ts). */
export interface AdmissionOptions {
  /** The database handle whose cache of tenants with quotas to use (the client's, not a transaction). */
  quotaDb: Kysely<DB>
  /** Admit as many as fit (single submits grouped together) rather than all or none (a batch). */
  partial: boolean
  /** `ex` is a transaction already (the caller's): the admission and the inserts run in it. */
  inTransaction: boolean
  /**
   * Whether the tenant has quotas, when the caller knows (tenantHasQuota): a caller holding a
   * connection of quotaDb's pool looks it up before taking it, so as not to need a second one.
   */
  hasQuota?: boolean
}

/**
 * Inserts rows for one tenant, within its admission quotas: refused rows get `rejected` and are
 * not written. An idempotency key taken by a transaction that committed after the statement's
 * snapshot is neither inserted nor visible: those few rows are retried with a fresh snapshot.
 */
export async function insertRows(
  ex: Kysely<DB>,
  tenant: string,
  createdBy: string | null,
  rows: readonly SubmitRow[],
  admission: AdmissionOptions,
): Promise<InsertedRows> {
  if (!(admission.hasQuota ?? (await tenantHasQuota(admission.quotaDb, tenant)))) return insertAdmitted(ex, tenant, createdBy, rows)
  const admitThenInsert = async (trx: Kysely<DB>): Promise<InsertedRows> => {
    const { admitted, rejection } = await admitSubmits(trx, tenant, rows.length, admission.partial)
    const inserted = admitted > 0 ? await insertAdmitted(trx, tenant, createdBy, rows.slice(0, admitted)) : { outcomes: [], now: new Date() }
    const refused = rows
      .slice(admitted)
      .map((r): JobInsertOutcome => ({ id: r.id, created: false, existingJobId: null, existingRequestHash: null, rejected: rejection ?? undefined }))
    return { outcomes: [...inserted.outcomes, ...refused], now: inserted.now }
  }
  if (admission.inTransaction) return admitThenInsert(ex)
  try {
    return await ex.transaction().execute(async (trx) => {
      // A transaction that admitted this tenant's submits and has not ended (a pgsched.submit_job in
      // a long application transaction) holds its row: wait for it only so long.
      await sql`set local lock_timeout = ${sql.lit(`${ADMISSION_LOCK_WAIT_MS}ms`)}`.execute(trx)
      return admitThenInsert(trx)
    })
  } catch (err: unknown) {
    if ((err as { code?: unknown } | null)?.code !== LOCK_NOT_AVAILABLE) throw err
    throw new BusyError(
      `tenant ${tenant}'s admission quotas are held by another transaction that has not ended (a submit of that tenant in a long transaction); retry`,
    )
  }
}

/** Why a submit is refused with requireSyncStandby on a server that replicates asynchronously now. */
export const UNREPLICATED_MESSAGE =
  'the database has no synchronous standby now (a primary alone, or one in a failover), so this submit is not acknowledged (SCHEDULER_REQUIRE_SYNC_STANDBY); it may have been written: retry it with its idempotency key'

/**
 * Runs `fn` on one connection (given whether `tenant` has quotas, for insertRows), then a statement on it that takes a transaction id (so that its
 * commit writes a record and, while the server replicates synchronously, waits until a standby has
 * it, and with it everything written before: a submit answered from a row an earlier attempt wrote
 * included) and reads whether the server replicates synchronously (synchronous_standby_names set,
 * this session's synchronous_commit at least remote_write). A server whose setting was emptied (a
 * primary whose standby is gone, or one pg_auto_failover sent to wait_primary) acknowledges commits
 * it alone has, which a failover loses: then UnreplicatedError (HTTP 503). A reload that empties the
 * setting has been signalled to this session by the time the statement starts (the postmaster
 * signals the backends before the checkpointer that lifts the waits), and a session applies a reload
 * before its next statement. Not covered: the moment a standby is taken back, when a session can see
 * the setting before the checkpointer has made commits wait; and a commit whose wait is cancelled
 * (statement_timeout, pg_cancel_backend), which PostgreSQL acknowledges with a warning.
 */
export async function withSyncStandby<T>(db: Kysely<DB>, tenant: string, fn: (conn: Kysely<DB>, hasQuota: boolean) => Promise<T>): Promise<T> {
  // looked up before the connection is held: the lookup would want a second one of the pool
  const hasQuota = await tenantHasQuota(db, tenant)
  return db.connection().execute(async (conn) => {
    const result = await fn(conn, hasQuota)
    const { rows } = await sql<{ replicated: boolean }>`select pg_current_xact_id() is not null
        and current_setting('synchronous_standby_names') <> ''
        and current_setting('synchronous_commit') in ('on', 'remote_write', 'remote_apply') as replicated`.execute(conn)
    if (rows[0]?.replicated !== true) throw new UnreplicatedError(UNREPLICATED_MESSAGE)
    return result
  })
}

/** How long a submit waits for another transaction's admission of the same tenant. */
export const ADMISSION_LOCK_WAIT_MS = 2_000
const LOCK_NOT_AVAILABLE = '55P03'

async function insertAdmitted(ex: Kysely<DB>, tenant: string, createdBy: string | null, rows: readonly SubmitRow[]): Promise<InsertedRows> {
  const outcomes: JobInsertOutcome[] = new Array(rows.length)
  let pending = rows.map((_, i) => i)
  let now = new Date()
  for (let round = 0; pending.length > 0; round++) {
    const res = await jobInsertMany(ex, { tenant, createdBy, jobs: pending.map((i) => rows[i] as SubmitRow) })
    now = res.now
    const retry: number[] = []
    res.outcomes.forEach((o, k) => {
      const index = pending[k] as number
      if (!o.created && o.existingJobId === null && round < 5) retry.push(index)
      else outcomes[index] = o
    })
    pending = retry
  }
  return { outcomes, now }
}

/**
 * How long the insert in flight runs before a second one may start beside it. Inserts take a
 * millisecond or two; two in flight at once halved the groups and doubled the statements and
 * commits per submit (`scheduler bench --only steady`: PostgreSQL's CPU per execution for the API's
 * statements 101–131 µs with two, 67–82 µs with one; REST submits 7,500–7,900 jobs/s against
 * 9,400–9,800 with 32 connections).
 */
export const SECOND_WRITE_AFTER_MS = 10

interface Entry {
  tenant: string
  createdBy: string | null
  row: SubmitRow
  resolve: (value: { outcome: JobInsertOutcome; now: Date }) => void
  reject: (err: unknown) => void
}

export class SubmitBatcher {
  private queue: Entry[] = []
  private inFlight = 0
  /** When the oldest insert in flight started (performance.now()); the start times in flight. */
  private readonly startedAt: number[] = []
  private secondWriteTimer: ReturnType<typeof setTimeout> | undefined
  private closed = false
  private idleWaiters: Array<() => void> = []
  private readonly db: Kysely<DB>
  private readonly maxBatch: number
  private readonly maxInFlight: number
  private readonly requireSyncStandby: boolean

  /** `requireSyncStandby`: each group is written on one connection and checked by withSyncStandby. */
  constructor(db: Kysely<DB>, options: { maxBatch?: number; maxInFlight?: number; requireSyncStandby?: boolean } = {}) {
    this.db = db
    this.maxBatch = options.maxBatch ?? 1000
    this.maxInFlight = options.maxInFlight ?? 2
    this.requireSyncStandby = options.requireSyncStandby === true
  }

  /** Refuses every insert from now on (the client is closing); those queued or in flight go on. */
  close(): void {
    this.closed = true
  }

  /** Resolves once nothing is queued or in flight. */
  drained(): Promise<void> {
    if (this.queue.length === 0 && this.inFlight === 0) return Promise.resolve()
    return new Promise((resolve) => this.idleWaiters.push(resolve))
  }

  insert(tenant: string, createdBy: string | null, row: SubmitRow): Promise<{ outcome: JobInsertOutcome; now: Date }> {
    if (this.closed) return Promise.reject(new Error('the pgsched client is closed: it takes no more submits'))
    return new Promise((resolve, reject) => {
      this.queue.push({ tenant, createdBy, row, resolve, reject })
      this.kick()
    })
  }

  private kick(): void {
    while (this.inFlight < this.maxInFlight && this.queue.length > 0) {
      const now = performance.now()
      const oldest = this.startedAt[0]
      if (oldest !== undefined && now - oldest < SECOND_WRITE_AFTER_MS) {
        // the insert in flight is young: the queued submits wait for it (or for it to be held up)
        this.secondWriteTimer ??= setTimeout(
          () => {
            this.secondWriteTimer = undefined
            this.kick()
          },
          SECOND_WRITE_AFTER_MS - (now - oldest),
        )
        break
      }
      const batch = this.queue.splice(0, this.maxBatch)
      this.inFlight++
      this.startedAt.push(now)
      void this.write(batch).finally(() => {
        this.inFlight--
        this.startedAt.splice(this.startedAt.indexOf(now), 1)
        this.kick()
      })
    }
    if (this.queue.length === 0 && this.secondWriteTimer !== undefined) {
      clearTimeout(this.secondWriteTimer)
      this.secondWriteTimer = undefined
    }
    if (this.queue.length === 0 && this.inFlight === 0) for (const resolve of this.idleWaiters.splice(0)) resolve()
  }

  private async write(batch: Entry[]): Promise<void> {
    const groups = new Map<string, Entry[]>()
    for (const e of batch) {
      const key = `${e.tenant}\u0000${e.createdBy ?? ''}`
      const group = groups.get(key)
      if (group) group.push(e)
      else groups.set(key, [e])
    }
    await Promise.all([...groups.values()].map((group) => this.writeGroup(group)))
  }

  private async writeGroup(group: Entry[]): Promise<void> {
    const first = group[0] as Entry
    try {
      const write = (ex: Kysely<DB>, hasQuota?: boolean) =>
        insertRows(
          ex,
          first.tenant,
          first.createdBy,
          group.map((e) => e.row),
          { quotaDb: this.db, partial: true, inTransaction: false, hasQuota },
        )
      let inserted: InsertedRows
      if (this.requireSyncStandby) {
        inserted = await withSyncStandby(this.db, first.tenant, write)
      } else inserted = await write(this.db)
      const { outcomes, now } = inserted
      for (const [i, e] of group.entries()) e.resolve({ outcome: outcomes[i] as JobInsertOutcome, now })
    } catch (err: unknown) {
      // the same for every submit of the group (one tenant, or the server's replication): retrying them one by one would wait again
      if (err instanceof BusyError) {
        for (const e of group) e.reject(err)
        return
      }
      // A statement whose answer was lost (the connection dropped) may have committed: the submits it
      // wrote are done, and written again with the same ids they would fail (a duplicate key), or, with
      // new ones, run twice. Their ids say which they are.
      const left = await this.unwritten(group, err)
      if (left.length === 0) return
      if (left.length === 1) return (left[0] as Entry).reject(err)
      // Alone, each submit gets its own outcome or its own error.
      await Promise.all(left.map((e) => this.writeGroup([e])))
    }
  }

  /**
   * After `err`: resolves the submits of `group` that are in the database after all (their statement
   * committed, its answer lost) and returns the others. When that cannot be told, returns them all.
   * A group written for requireSyncStandby is not confirmed so: its replication is not known.
   */
  private async unwritten(group: Entry[], err: unknown): Promise<Entry[]> {
    // an error the server sent for the statement: it wrote nothing, but a duplicate of its own ids
    // (the statement of an earlier attempt, still running when its answer was lost, committed since)
    const code = (err as { code?: unknown } | null)?.code
    if (typeof code === 'string' && SQLSTATE.test(code) && code !== UNIQUE_VIOLATION) return group
    let written: Map<string, { at: Date; fireTimesFrom: Date }>
    try {
      const { rows } = await sql<{ id: string; created_at: Date; fire_times_from: Date }>`
        select id, created_at, ${ceilMs(sql`created_at`)} as fire_times_from from pgsched.jobs where id = any(${group.map((e) => e.row.id)}::uuid[])`.execute(
        this.db,
      )
      written = new Map(rows.map((r) => [r.id, { at: r.created_at, fireTimesFrom: r.fire_times_from }]))
    } catch {
      return group
    }
    if (written.size === 0) return group
    const left: Entry[] = []
    for (const e of group) {
      const found = written.get(e.row.id)
      if (found === undefined) left.push(e)
      else if (this.requireSyncStandby) e.reject(new UnreplicatedError(UNREPLICATED_MESSAGE))
      else {
        const outcome: JobInsertOutcome = { id: e.row.id, created: true, existingJobId: null, existingRequestHash: null }
        if (e.row.kind === 'cron' || e.row.kind === 'interval') {
          outcome.submittedAt = found.at
          outcome.fireTimesFrom = found.fireTimesFrom
        }
        e.resolve({ outcome, now: found.at })
      }
    }
    return left
  }
}

/** An SQLSTATE: an error the server reported (the connection's own errors have none). */
const SQLSTATE = /^[0-9A-Z]{5}$/
const UNIQUE_VIOLATION = '23505'
