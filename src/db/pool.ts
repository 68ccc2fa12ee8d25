/**
 * Connection pools. `createDb` returns a Kysely instance over a pg Pool; the
 * caller owns both and must `destroy()` the Kysely instance. A pool error on an
 * idle client (server restart, pg_terminate_backend) is logged, not thrown:
 * pg discards the client and the next query opens a new connection. Statements
 * marked PREPARE run as named prepared statements, and those marked BOUNDED_READ
 * within a bounded time (a connection that does not answer one is replaced).
 */
import { createHash } from 'node:crypto'
import pg from 'pg'
import { Kysely, PostgresDialect } from 'kysely'
import type { DB } from './schema.ts'
import type { Logger } from '../logger.ts'
import { ConfigError } from '../errors.ts'
import { databaseUrlProblem } from './database-url.ts'
import { pgConnection } from './hosts.ts'
import { type AnswerWatch, isDatabaseUnavailable } from './outage.ts'
import { settlesWithin } from '../lib/service.ts'

export interface CreateDbParams {
  databaseUrl: string
  poolSize: number
  applicationName?: string
  log?: Logger
  /**
   * Sessions run with `plan_cache_mode = force_generic_plan`: every parameterised statement
   * is planned once per connection. For the worker's hot-path pool, whose statements are
   * written (and tested) for their generic plans; see PREPARE.
   */
  genericPlans?: boolean
  /**
   * With genericPlans: sessions also run with seq scans, hash joins and merge joins off, so a
   * generic plan made while the tables are empty (or small) still probes the indexes. For pools
   * whose every statement is an index lookup. (Every pool runs with JIT off: sessionSettings.)
   */
  indexPlans?: boolean
  /** Told each time the database answers: a new connection is ready, or a write (insert, update, delete) succeeded. */
  answers?: AnswerWatch
  /**
   * Sessions run with `idle_in_transaction_session_timeout` set to this (ms); default
   * IDLE_TRANSACTION_TIMEOUT_MS, 0 for none.
   */
  idleInTransactionTimeoutMs?: number
  /**
   * Every statement of the pool runs with this `statement_timeout` (ms): the server cancels one still
   * running then (a lock wait included), and it takes no effect. The client gives one up that no
   * answer came for within it and STATEMENT_BOUND_SLACK_MS more (a server that no longer answers),
   * and destroys its connection (the next statement opens a new one, searching the URL's hosts
   * again). None when absent, except for statements that carry ANSWERED_WITHIN. See ANSWERED_WITHIN.
   */
  statementBoundMs?: number
}

/**
 * How long the server lets a session of the product's pools sit idle inside a transaction before it
 * ends the session. The product's transactions run their statements back to back, so a transaction
 * idle that long belongs to a process that froze (SIGSTOP, a paused VM, a long stall) or a host that
 * vanished without closing its connections. Its row locks would hold up every other process that
 * needs them (a limited queue's claims, a tenant's admission, a dispatch pass) until the server
 * noticed the lost connection, which TCP keepalive does after about two hours by default. The
 * transaction rolls back: a claim in it is undone, its work stays due.
 */
export const IDLE_TRANSACTION_TIMEOUT_MS = 10_000

export interface Database {
  db: Kysely<DB>
  pool: pg.Pool
  /**
   * Closes the pool once its connections are back, waiting at most `withinMs`; then ends those still
   * out at once (a statement waiting for a server that no longer answers would hold them for as
   * long as TCP takes to give up, up to a quarter of an hour).
   */
  end(withinMs: number): Promise<void>
}

export function createDb(params: CreateDbParams): Database {
  const problem = databaseUrlProblem(params.databaseUrl)
  if (problem) throw new ConfigError(`database URL ${problem}`, [{ path: 'databaseUrl', message: `database URL ${problem}` }])
  const settings = sessionSettings(params)
  const connectionLost = connectionLostLogger(params.log, params.answers !== undefined)
  const { Client, config } = pgConnection(params.databaseUrl, { application_name: params.applicationName ?? 'pgsched', connectionTimeoutMillis: 10_000 })
  const pool = new pg.Pool({
    ...config,
    Client,
    max: params.poolSize,
    idleTimeoutMillis: 30_000,
    // a server that stops answering (a host gone, a network partition) is noticed by the socket
    keepAlive: true,
    keepAliveInitialDelayMillis: 10_000,
    // Runs before the pool hands a new connection out.
    onConnect: async (client) => {
      const mark = params.answers?.mark()
      // pg-pool listens for errors only on idle clients. A connection terminated in the instant
      // between a query's end and its release would emit an unhandled 'error' and crash the
      // process; this listener keeps it alive, and the pool discards the broken client on release.
      client.on('error', connectionLost)
      // Set after connecting, not as a startup option: that would replace PGOPTIONS or the URL's
      // `options`. One at a time: a setting the server refuses is logged, the others still apply.
      let applied = true
      for (const setting of settings) {
        await client.query(setting).catch((err: unknown) => {
          // A connection lost while it was being set up: the pool discards it, nothing to report.
          if (isDatabaseUnavailable(err)) throw err
          applied = false
          params.log?.warn({ err, setting }, 'could not apply a session setting')
        })
      }
      if (applied && mark !== undefined) params.answers?.answered(mark)
    },
  })
  pool.on('error', connectionLost)
  const clients = new Set<pg.Client>()
  pool.on('connect', (client) => clients.add(client))
  pool.on('remove', (client) => clients.delete(client))
  const db = new Kysely<DB>({ dialect: new PostgresDialect({ pool: preparingPool(pool, params.answers, params.statementBoundMs) }) })
  const end = async (withinMs: number) => {
    const ending = db.destroy()
    if (await settlesWithin(ending, withinMs)) return
    // (pg has no public call that ends a client whose socket the server does not answer on)
    for (const client of clients) (client as unknown as { connection?: { stream?: { destroy(): void } } }).connection?.stream?.destroy()
    await ending
  }
  return { db, pool, end }
}

/** How long (ms) after a lost connection is logged at warn the others lost are only counted (logged at debug). */
export const CONNECTION_LOST_LOG_MS = 10_000

/**
 * Logs a pool's lost connections: a database restart ends every one of them at once, each reported
 * by its own listener and, idle, by the pool's too; each error object is logged once.
 * - With a quiet logger (`quiet`: the pool reports its answers, as the workers' pools do), each is a
 *   warn line with its error: the first begins the outage the quiet logger reports once, and it holds
 *   back the others.
 * - Otherwise the first is a warn line (its reason, no stack: the API reports the outage on its own,
 *   once), and the others within CONNECTION_LOST_LOG_MS are debug lines, counted in the next warn line.
 */
function connectionLostLogger(log: Logger | undefined, quiet: boolean): (err: Error) => void {
  const seen = new WeakSet<Error>()
  let loggedAtMs = Number.NEGATIVE_INFINITY
  let since = 0
  return (err) => {
    if (seen.has(err)) return
    seen.add(err)
    if (quiet) {
      log?.warn({ err }, 'database connection lost')
      return
    }
    const now = performance.now()
    if (now - loggedAtMs < CONNECTION_LOST_LOG_MS) {
      since++
      log?.debug({ reason: err.message }, 'database connection lost')
      return
    }
    log?.warn({ reason: err.message, ...(since > 0 ? { lostSinceLastWarn: since } : {}) }, 'database connection lost')
    loggedAtMs = now
    since = 0
  }
}

/** The `set` statements a new session of the pool runs. */
function sessionSettings(params: CreateDbParams): string[] {
  // No JIT compilation: PostgreSQL compiles a statement whose estimated cost passes
  // jit_above_cost at every execution, and the product's statements over the partitioned tables
  // and the executions view pass it easily once they hold some history. Compiling one took seconds
  // (a failures report over 100,000 jobs: 4.2 s of JIT in a 5 s statement, 1.1 s without), for
  // statements that run in milliseconds to a second.
  const sets: string[] = ['set jit = off']
  sets.push(`set idle_in_transaction_session_timeout = ${Math.floor(params.idleInTransactionTimeoutMs ?? IDLE_TRANSACTION_TIMEOUT_MS)}`)
  if (params.statementBoundMs !== undefined) sets.push(`set statement_timeout = ${Math.floor(params.statementBoundMs)}`)
  if (params.genericPlans) {
    // A generic plan is made once per connection, often when the tables are still empty (a new
    // database, a worker started before the first jobs). With `indexPlans`, no seq scan is on
    // offer: the plan is the index plan the statements are written for, not a scan that reads
    // every row of a partition once the tables have filled. Nor is a hash or merge join: input
    // arrays joined to a table probe its index row by row (a generic plan made after an ANALYZE
    // of small tables hashed a one-row array against a full index scan of jobs: 10 ms). A seq
    // scan that remains (a table with no usable index, e.g. waiting_workers in the insert
    // trigger) then costs more than jit_above_cost, which matters nothing with JIT off (above).
    sets.push('set plan_cache_mode = force_generic_plan')
    if (params.indexPlans) sets.push('set enable_seqscan = off', 'set enable_hashjoin = off', 'set enable_mergejoin = off')
  }
  return sets
}

/**
 * Statements whose text contains this marker run as named prepared statements:
 * parsed once per connection instead of on every call. Used for the fixed-text
 * hot statements (claim, heartbeat, complete, submit), where planning over the
 * partitions costs more than executing. Planned once too only on a connection
 * with generic plans forced (`genericPlans`): otherwise PostgreSQL plans each
 * execution anew whenever it estimates a custom plan cheaper than the generic
 * one, as it does for the heartbeat and complete once `executions` holds a
 * large history (about 1 ms of planning per statement).
 */
export const PREPARE = '/* prepare */'

/**
 * Statements whose text contains this marker are bounded reads: the server cancels one still
 * running after BOUNDED_READ_STATEMENT_TIMEOUT_MS (`statement_timeout`, set for it alone), and the
 * client gives one up when no answer came within BOUNDED_READ_CLIENT_TIMEOUT_MS. A connection on
 * which a bounded read failed in any way is destroyed rather than returned to the pool, so the next
 * statement gets a new one. For reads that are asked again later, such as the API's queue depth for
 * /metrics: without the bound, a connection whose server vanished (a partition, a failover that did
 * not close its connections) waits for its answer until TCP gives up, about 15 minutes on Linux.
 * Not for statements in a transaction: the statement_timeout is set and reset on the session.
 */
export const BOUNDED_READ = '/* bounded read */'

/**
 * The server-side bound of a bounded read. The API's queue depth reads count the pending and
 * running executions, which takes well under a second at a million of them, so 5 s means the server
 * is struggling: better to report the last reading than to add to its load.
 */
export const BOUNDED_READ_STATEMENT_TIMEOUT_MS = 5_000

/**
 * Statements whose text contains this marker, and every statement of a pool made with
 * `statementBoundMs`, are given up when no answer came within ANSWERED_WITHIN_MS (the pool's bound
 * and STATEMENT_BOUND_SLACK_MS more), and their connection destroyed at once rather than returned to
 * the pool: the next statement opens a new one, and a multi-host URL's search finds the host that
 * takes writes now. Without it, a statement sent to a host that vanished without closing its
 * connections (a host lost, a network partition, a failover that left the old primary's sockets
 * open) waits for its answer until TCP gives up, about 15 minutes on Linux: a worker's claims, its
 * dispatcher and its reaper, or an event stream's reads, stopped meanwhile. Giving up is the
 * client's: a server that is alive but cut off may still finish such a statement (as one whose
 * answer was lost), unless its own bound ends it first; a pool's statements have that bound
 * (`statement_timeout`), so on a server that answers, one that runs too long is cancelled there and
 * takes no effect. The marked statements (an event stream's) have none: each may take effect again.
 */
export const ANSWERED_WITHIN = '/* answered within bound */'

/**
 * The bound of ANSWERED_WITHIN statements and of the workers' pools (system.ts): far above what any of
 * their statements takes (milliseconds; a bounded batch of the pruner or the reaper, seconds on a
 * struggling server), so it ends only a wait for a server that no longer answers, or one stuck
 * behind another transaction's lock for that long.
 */
export const ANSWERED_WITHIN_MS = 30_000

/** How much longer than a pool's `statement_timeout` the client waits, so that the server's cancel acts first whenever it can. */
export const STATEMENT_BOUND_SLACK_MS = 5_000

/** pg's error for a statement given up by its `query_timeout`. */
const QUERY_READ_TIMEOUT = 'Query read timeout'

/**
 * A statement whose text contains this marker answers one row with a `writable` column: a connection
 * it finds not writable is not given back to the pool (see READ_ONLY below).
 */
export const WRITABLE_CHECK = '/* writable check */'

/**
 * A read-only transaction refused the statement. A session stays as it began: one opened while the
 * database was read-only (`default_transaction_read_only`, a server that was a standby or not yet
 * promoted) would refuse every write, and fail the readiness check, until the pool dropped it as idle.
 * Such a connection is closed, and the next statement gets a new one.
 */
const READ_ONLY = '25006'

/**
 * The client-side bound of a bounded read, for all three of its statements (set, read, reset): the
 * statement_timeout plus time for the server's cancel to arrive, so the server's bound acts first
 * whenever the server can still answer.
 */
export const BOUNDED_READ_CLIENT_TIMEOUT_MS = BOUNDED_READ_STATEMENT_TIMEOUT_MS + 2_000

/** Runs a BOUNDED_READ statement on `client`; on any error the caller must destroy the connection. */
async function boundedRead(client: pg.PoolClient, text: string, values: unknown[] | undefined): Promise<unknown> {
  // pg's per-statement client-side timeout (Query read timeout), which its types do not declare.
  const bounded = (q: pg.QueryConfig<unknown[]>) => client.query({ ...q, query_timeout: BOUNDED_READ_CLIENT_TIMEOUT_MS } as pg.QueryConfig<unknown[]>)
  // A constant, not input: `set` takes no parameters.
  await bounded({ text: `set statement_timeout = ${BOUNDED_READ_STATEMENT_TIMEOUT_MS}` })
  const result = await bounded({ text, values })
  await bounded({ text: 'reset statement_timeout' })
  return result
}

const names = new Map<string, string>()

function statementName(text: string): string {
  let name = names.get(text)
  if (!name) {
    name = `pgsched_${createHash('sha1').update(text).digest('hex').slice(0, 24)}`
    names.set(text, name)
  }
  return name
}

/**
 * A pool for Kysely whose clients prepare PREPARE statements, bound BOUNDED_READ ones, and give up
 * ANSWERED_WITHIN ones (every one with `boundMs`) that no answer came for.
 */
function preparingPool(pool: pg.Pool, answers?: AnswerWatch, boundMs?: number) {
  /** Connections that must not go back to the pool, with why: a bounded read failed on them. */
  const broken = new WeakMap<pg.PoolClient, Error>()
  const readOnly = (client: pg.PoolClient) => (err: unknown) => {
    const e = err as { code?: unknown; message?: unknown } | null
    if (e?.code === READ_ONLY) broken.set(client, err as Error)
    if (e?.message === QUERY_READ_TIMEOUT) {
      broken.set(client, err as Error)
      // at once: a statement queued behind the one given up (a transaction's rollback) fails now
      // rather than waiting for its own bound ("pg has no public call that ends such a client")
      ;(client as unknown as { connection?: { stream?: { destroy(): void } } }).connection?.stream?.destroy()
    }
    throw err
  }
  const run = (client: pg.PoolClient, text: unknown, values?: unknown[]): Promise<unknown> => send(client, text, values).catch(readOnly(client))
  const send = (client: pg.PoolClient, text: unknown, values?: unknown[]): Promise<unknown> => {
    if (typeof text !== 'string') return (client.query as (t: unknown, v?: unknown[]) => Promise<unknown>)(text, values)
    if (text.includes(BOUNDED_READ)) {
      return boundedRead(client, text, values).catch((err: unknown) => {
        broken.set(client, err instanceof Error ? err : new Error(String(err)))
        throw err
      })
    }
    // pg's per-statement client-side bound (Query read timeout), which its types do not declare
    const bound = boundMs !== undefined ? boundMs + STATEMENT_BOUND_SLACK_MS : text.includes(ANSWERED_WITHIN) ? ANSWERED_WITHIN_MS : undefined
    const timeout = bound === undefined ? {} : { query_timeout: bound }
    if (text.includes(WRITABLE_CHECK)) {
      return client.query({ text, values, ...timeout } as pg.QueryConfig<unknown[]>).then((r) => {
        if (r.rows[0]?.writable === false) broken.set(client, new Error('the connection is read-only'))
        return r
      })
    }
    if (text.includes(PREPARE)) return client.query({ name: statementName(text), text, values, ...timeout } as pg.QueryConfig<unknown[]>)
    if (bound !== undefined) return client.query({ text, values, ...timeout } as pg.QueryConfig<unknown[]>)
    return (client.query as (t: unknown, v?: unknown[]) => Promise<unknown>)(text, values)
  }
  return {
    async connect() {
      const client = await pool.connect()
      return {
        query(text: unknown, values?: unknown[]) {
          if (!answers) return run(client, text, values)
          const mark = answers.mark()
          // A write that succeeded (not a read, which a read-only server still answers).
          return run(client, text, values).then((r) => {
            const command = (r as { command?: string } | undefined)?.command
            if (command === 'UPDATE' || command === 'INSERT' || command === 'DELETE') answers.answered(mark)
            return r
          })
        },
        release(err?: Error | boolean) {
          // pg-pool destroys a client released with an error (a statement given up may still be
          // waiting on it) and opens a new connection for the next statement.
          const cause = broken.get(client)
          broken.delete(client)
          client.release(cause ?? err)
        },
      }
    },
    end: () => pool.end(),
  } as unknown as pg.Pool
}
