/**
 * SQL for operations endpoints: a readiness ping and the queue depth gauge
 * (how many executions wait or run, per queue, and how many wait for a worker that serves them). Both stay cheap at scale:
 * the depth counts only pending and running rows, which the small tables
 * `pgsched.due` and `pgsched.runs` hold (the view never reads the history for them).
 */
import { sql, type Kysely } from 'kysely'
import { BOUNDED_READ, WRITABLE_CHECK } from '../pool.ts'
import type { DB } from '../schema.ts'
import { servedSql } from './queues.ts'

/**
 * Asks the database whether this session could write: false on a standby (in recovery), and where
 * transactions start read-only (default_transaction_read_only, or the window of a proxy-based
 * failover that still routes to the old primary turned standby).
 */
export async function databaseWritable(db: Kysely<DB>): Promise<boolean> {
  const { rows } = await sql<{ writable: boolean }>`
    select not pg_is_in_recovery() and current_setting('transaction_read_only') = 'off' as writable ${sql.raw(WRITABLE_CHECK)}`.execute(db)
  return rows[0]?.writable ?? false
}

export interface QueueDepth {
  queue: string
  state: 'pending' | 'running'
  count: number
  /** Of the pending ones, those whose type no live worker serves in the queue (0 for running). */
  unserved: number
}

/**
 * Executions per queue in the states that make up a queue's depth. A bounded read (BOUNDED_READ):
 * rejects when the database has not answered within its bound, on a pool made by createDb; not
 * for use in a transaction.
 */
export async function executionCountByQueue(db: Kysely<DB>): Promise<QueueDepth[]> {
  const result = await sql<QueueDepth>`${sql.raw(BOUNDED_READ)}
    with g as (
      select queue, state, type, count(*)::float8 as n
        from pgsched.executions
       where state in ('pending', 'running')
       group by queue, state, type
    )
    select queue,
           state,
           sum(n)::float8 as count,   -- a gauge value; float8 cannot overflow like int4
           coalesce(sum(n) filter (where state = 'pending' and not ${servedSql('g')}), 0)::float8 as unserved
      from g
     group by queue, state
  `.execute(db)
  return result.rows
}

/** What a worker logs at start when the server runs without autovacuum. */
export const AUTOVACUUM_OFF_WARNING =
  'autovacuum is off on this server: every claim leaves a dead row and index entry in pgsched.due that only VACUUM removes, ' +
  'so claims slow down as they pile up; turn autovacuum on or run VACUUM pgsched.due, pgsched.runs regularly'

/** Whether the server runs autovacuum (the claim index depends on it; see migration 0007). */
export async function serverAutovacuumOn(db: Kysely<DB>): Promise<boolean> {
  const { rows } = await sql<{ on: boolean }>`select current_setting('autovacuum')::bool as on`.execute(db)
  return rows[0]?.on ?? true
}
