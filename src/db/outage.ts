/**
 * Database outages: which errors mean "the database cannot be used right now" (unreachable,
 * shutting down, starting up, read-only, no host of a multi-host URL accepting writes), and a
 * logger for background processes that reports an outage in two lines instead of one per retry.
 *
 * `quietDuringOutages(log)` wraps a logger (and every child made from it): the first warning or
 * error whose `err` is such an error is logged, with "database unavailable" and the retry promise;
 * later ones are counted, not written, until `answered(mark)` is called (a connection or a write begun
 * after the outage was seen succeeded), which logs one line with the outage's length and the number
 * of lines held back. A statement sent before the outage was seen proves nothing when it succeeds:
 * its answer may have left the server before the connections broke, and read in the instant after
 * the first broken connection was reported it would end the outage 20 ms after it began.
 * Every other line goes through unchanged, and lines about a job's run are written with
 * `loudLogger(log)`, unfiltered. A worker process retries its claims, heartbeats,
 * outcome writes, LISTEN connection and maintenance loops every second or so; without this, a
 * 10-second outage wrote dozens of lines with stacks.
 */
import type { Logger } from '../logger.ts'

/** Network errors and SQLSTATEs meaning "the database is not reachable right now". */
const UNAVAILABLE_CODES = new Set(['ECONNREFUSED', 'ECONNRESET', 'ETIMEDOUT', 'ENOTFOUND', 'EAI_AGAIN', 'EPIPE', '57P01', '57P02', '57P03', '53300'])

/** SQLSTATE read_only_sql_transaction: a write reached a standby or a read-only session. */
export const READ_ONLY_CODE = '25006'

function codeOf(err: unknown): string | undefined {
  const code = (err as { code?: unknown } | null)?.code
  return typeof code === 'string' ? code : undefined
}

/** The database is unreachable, shutting down, starting up or out of connections (not read-only). */
export function isDatabaseUnreachable(err: unknown): boolean {
  if (!(err instanceof Error)) return false
  const code = codeOf(err)
  if (code && (UNAVAILABLE_CODES.has(code) || code.startsWith('08'))) return true
  // "timeout expired": a pg Client's connectionTimeoutMillis passed (a host that drops packets)
  return /timeout exceeded when trying to connect|^timeout expired$|Connection terminated|connection timeout|not queryable|Connection ended/i.test(err.message)
}

/** The database cannot be used now: unreachable (see above) or read-only. Retrying later may succeed. */
export function isDatabaseUnavailable(err: unknown): boolean {
  return isDatabaseUnreachable(err) || codeOf(err) === READ_ONLY_CODE
}

/** SQLSTATEs of a statement naming a table, column, function or schema the database lacks. */
const SCHEMA_MISSING_CODES = new Set(['42P01', '42703', '42883', '3F000'])

/** What is said of an error isSchemaMissing finds. */
export const SCHEMA_MISSING_MESSAGE = 'the database\'s pgsched schema is missing or older than this version: run "scheduler migrate"'

/**
 * A statement of pgsched's met a database without its schema, or with an older one (a table,
 * column, function or the schema itself missing): `scheduler migrate` has not been run there.
 */
export function isSchemaMissing(err: unknown): boolean {
  return err instanceof Error && SCHEMA_MISSING_CODES.has(codeOf(err) ?? '')
}

/** What a pool tells of its database's answers; see quietDuringOutages. */
export interface AnswerWatch {
  /** Taken when a connection or a statement is begun; given to answered() if it succeeds. */
  mark(): number
  /** A connection or a write begun at `mark` succeeded: ends the outage under way if it was already seen then. */
  answered(mark: number): void
}

export interface QuietLogger extends AnswerWatch {
  log: Logger
}

/** Where a quiet logger keeps the logger it wraps. */
const LOUD = Symbol('pgsched.loudLogger')

/**
 * The logger `log` wraps, if it is a quiet one (or a child of one): for lines about a job's run
 * (the handler's own `ctx.log`, its failures), whose errors are the handler's, not the database's.
 */
export function loudLogger(log: Logger): Logger {
  return (log as unknown as { [LOUD]?: Logger })[LOUD] ?? log
}

interface OutageState {
  sinceMs: number | undefined
  heldBack: number
  /** Outages seen so far: a mark taken during the one under way equals it. */
  seen: number
}

/** Wraps `log`; see the file header. */
export function quietDuringOutages(log: Logger): QuietLogger {
  const state: OutageState = { sinceMs: undefined, heldBack: 0, seen: 0 }
  return {
    log: quiet(log, state),
    mark: () => state.seen,
    answered(mark) {
      // Begun before this outage was seen (mark < seen): no proof the database answers again.
      if (state.sinceMs === undefined || mark !== state.seen) return
      log.warn({ outageMs: Date.now() - state.sinceMs, linesHeldBack: state.heldBack }, 'database available again')
      state.sinceMs = undefined
      state.heldBack = 0
    },
  }
}

function quiet(log: Logger, state: OutageState): Logger {
  const gate =
    (level: 'warn' | 'error') =>
    (...args: unknown[]): void => {
      const first = args[0] as { err?: unknown } | undefined
      const err = first !== null && typeof first === 'object' ? first.err : undefined
      if (!isDatabaseUnavailable(err)) {
        ;(log[level] as (...a: unknown[]) => void)(...args)
        return
      }
      if (state.sinceMs !== undefined) {
        state.heldBack++
        return
      }
      state.sinceMs = Date.now()
      state.seen++
      const what = typeof args[1] === 'string' ? args[1] : 'database call failed'
      log.warn({ err }, `database unavailable (${what}); retrying quietly until it answers again`)
    }
  return new Proxy(log, {
    get(target, prop, receiver) {
      if (prop === LOUD) return target
      if (prop === 'warn') return gate('warn')
      if (prop === 'error') return gate('error')
      if (prop === 'child') return (...a: Parameters<Logger['child']>) => quiet(target.child(...a) as unknown as Logger, state)
      const value = Reflect.get(target, prop, receiver)
      return typeof value === 'function' ? value.bind(target) : value
    },
  })
}
