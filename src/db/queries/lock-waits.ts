/** SQL reading what a session waits for (pg_locks, pg_stat_activity): how `migrate` names the transactions it queued behind. */
import { sql, type Kysely } from 'kysely'

/** A session holding a lock another waits for. */
export interface LockHolder {
  /** 0 for a prepared transaction (pg_prepared_xacts), which holds its locks with no session. */
  pid: number
  applicationName: string | null
  /** `active`, `idle in transaction`…; null where the role may not read other roles' sessions. */
  state: string | null
  /** When its transaction began (null as for `state`). */
  xactStartedAt: Date | null
  /** When its current or last statement began (null as for `state`). */
  queryStartedAt: Date | null
}

/** A lock a session waits for, and the sessions it waits behind. */
export interface LockWait {
  /** `relation`, `transactionid`, `advisory`… (pg_locks.locktype). */
  lockType: string
  /** The table or index, schema-qualified; null for a lock on no relation. */
  relation: string | null
  /** The lock mode asked for, such as AccessExclusiveLock. */
  mode: string
  holders: LockHolder[]
}

export interface LockWaitGetParams {
  /** The waiting session's backend pid. */
  pid: number
}

interface LockWaitRow {
  lock_type: string
  relation: string | null
  mode: string
  holders: Array<{ pid: number; applicationName: string | null; state: string | null; xactStartedAt: string | null; queryStartedAt: string | null }>
}

/** The lock session `pid` waits for now, with the sessions blocking it; undefined when it waits for none (or its wait ended while this read it). */
export async function lockWaitGet(db: Kysely<unknown>, p: LockWaitGetParams): Promise<LockWait | undefined> {
  const { rows } = await sql<LockWaitRow>`
    select l.locktype as lock_type, l.relation::regclass::text as relation, l.mode,
           coalesce((
             select json_agg(h order by h.pid)
               from (select a.pid, a.application_name as "applicationName", a.state,
                            a.xact_start as "xactStartedAt", a.query_start as "queryStartedAt"
                       from pg_stat_activity a
                      where a.pid = any(b.pids)  -- holders, and waiters ahead of it in the queue
                      union all
                     -- a prepared transaction holds its locks with no session: pid 0
                     select 0, null, 'prepared transaction', null, null
                      where 0 = any(b.pids)) h
           ), '[]') as holders
    from pg_locks l
    -- Read once: a wait that ends between reading pg_locks and this (its lock timeout fired, or
    -- it was granted) has no blockers left, and is no wait to report.
    cross join lateral (select pg_blocking_pids(l.pid) as pids) b
    where l.pid = ${p.pid}::int
      and not l.granted
      and cardinality(b.pids) > 0
    limit 1`.execute(db)
  const row = rows[0]
  // a blocker that ended between pg_blocking_pids and pg_stat_activity: the wait is ending too
  if (!row || row.holders.length === 0) return undefined
  return {
    lockType: row.lock_type,
    relation: row.relation,
    mode: row.mode,
    holders: row.holders.map((h) => ({
      pid: h.pid,
      applicationName: h.applicationName,
      state: h.state,
      xactStartedAt: h.xactStartedAt === null ? null : new Date(h.xactStartedAt),
      queryStartedAt: h.queryStartedAt === null ? null : new Date(h.queryStartedAt),
    })),
  }
}
