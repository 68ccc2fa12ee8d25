/** Kysely over one `pg` client: the TypeScript client's calls inside a caller's own connection or transaction. */
import type pg from 'pg'
import {
  type CompiledQuery,
  type DatabaseConnection,
  type Driver,
  Kysely,
  PostgresAdapter,
  PostgresDialect,
  PostgresIntrospector,
  PostgresQueryCompiler,
  type QueryResult,
} from 'kysely'
import type { DB } from './schema.ts'
import { markCallerConnection } from './queries/plain-forms.ts'

/** A Kysely instance running every query on one pg client (the caller's connection). */
export function kyselyOnClient(client: pg.ClientBase): Kysely<DB> {
  const connection = {
    query: (...args: unknown[]) => (client.query as (...a: unknown[]) => unknown)(...args),
    release: () => {},
  }
  const db = new Kysely<DB>({
    dialect: new PostgresDialect({ pool: { connect: async () => connection, end: async () => {} } as never }),
  })
  // the caller's connection may be in a transaction, which a refused plain form would abort
  markCallerConnection(db)
  return db
}

/**
 * What pgsched needs of a caller's Kysely instance or transaction, whatever copy or version of
 * kysely made it (an application's own may differ from pgsched's, and `instanceof` then fails).
 */
export interface CallerKysely {
  readonly isTransaction: boolean
  withoutPlugins(): CallerKysely
  /**
   * Runs a statement compiled by pgsched's copy of kysely. Typed `never`: any version's
   * executeQuery takes it (another version's CompiledQuery, 0.27's say, is not assignable to this
   * copy's, nor this copy's to it, though each runs the other's).
   */
  executeQuery(query: never): Promise<{ readonly rows: unknown[] }>
  transaction(): { execute<T>(fn: (trx: CallerKysely) => Promise<T>): Promise<T> }
}

/** Whether `value` is a Kysely instance or transaction (of any kysely copy), not a pg client. */
export function isCallerKysely(value: unknown): value is CallerKysely {
  if (value instanceof Kysely) return true
  const v = value as Partial<CallerKysely> | null
  return (
    typeof v === 'object' &&
    v !== null &&
    typeof v.executeQuery === 'function' &&
    typeof v.withoutPlugins === 'function' &&
    typeof v.isTransaction === 'boolean'
  )
}

/**
 * A caller's Kysely as pgsched runs its statements on it: without the caller's plugins (a
 * CamelCasePlugin would rename the columns pgsched reads, and a job would read as finished), and,
 * when another copy of kysely made it, through a driver that hands each compiled statement to it
 * (and a transaction begun on it to that instance's transaction()).
 * `callerConnection`: it may be a connection in a transaction of the caller's, on which only full
 * statement forms run (a plain form's refusal would abort it).
 */
export function callerKysely(value: CallerKysely, options: { callerConnection: boolean }): Kysely<DB> {
  // an instance without plugins is used as it is: the per-instance caches (plain forms, quotas) stay its own
  if (value instanceof Kysely && value.getExecutor().plugins.length === 0) {
    if (options.callerConnection) markCallerConnection(value)
    return value as unknown as Kysely<DB>
  }
  const bare = value.withoutPlugins()
  const db =
    bare instanceof Kysely
      ? (bare as unknown as Kysely<DB>)
      : new Kysely<DB>({
          dialect: {
            createAdapter: () => new PostgresAdapter(),
            createDriver: () => new ForwardingDriver(bare),
            createIntrospector: (k) => new PostgresIntrospector(k),
            createQueryCompiler: () => new PostgresQueryCompiler(),
          },
        })
  if (options.callerConnection) markCallerConnection(db)
  return db
}

/** A connection of ForwardingDriver: its statements go to the caller's instance, or to the transaction it began there. */
interface ForwardedConnection extends DatabaseConnection {
  transaction?: { on: CallerKysely; end: (how: 'commit' | 'rollback') => Promise<void> }
}

/** Thrown inside the caller's transaction to roll it back (and caught: the rollback asked for is no error). */
const ROLL_BACK = Symbol('roll back')

/**
 * Runs every statement through another copy of kysely's instance (see callerKysely). A transaction
 * is that instance's own (`transaction().execute`), held open from begin until commit or rollback,
 * its statements run on it.
 */
class ForwardingDriver implements Driver {
  private readonly target: CallerKysely
  constructor(target: CallerKysely) {
    this.target = target
  }
  async init(): Promise<void> {}
  async acquireConnection(): Promise<DatabaseConnection> {
    const connection: ForwardedConnection = {
      executeQuery: <R>(query: CompiledQuery) => (connection.transaction?.on ?? this.target).executeQuery(query as never) as Promise<QueryResult<R>>,
      streamQuery: () => {
        throw new Error('pgsched cannot stream a query through a Kysely instance of another kysely copy')
      },
    }
    return connection
  }
  async beginTransaction(connection: DatabaseConnection): Promise<void> {
    const c = connection as ForwardedConnection
    let began: (trx: CallerKysely) => void = () => {}
    let ending: (how: 'commit' | 'rollback') => void = () => {}
    const on = new Promise<CallerKysely>((resolve) => {
      began = resolve
    })
    const how = new Promise<'commit' | 'rollback'>((resolve) => {
      ending = resolve
    })
    const ended = this.target
      .transaction()
      .execute(async (trx) => {
        began(trx)
        if ((await how) === 'rollback') throw ROLL_BACK
      })
      .catch((err: unknown) => {
        if (err !== ROLL_BACK) throw err
      })
    // a begin that failed ends the transaction before it hands one out
    const trx = await Promise.race([on, ended.then(() => Promise.reject(new Error('the transaction ended before it began')))])
    c.transaction = {
      on: trx,
      end: async (asked) => {
        ending(asked)
        try {
          await ended
        } finally {
          c.transaction = undefined
        }
      },
    }
  }
  async commitTransaction(connection: DatabaseConnection): Promise<void> {
    await (connection as ForwardedConnection).transaction?.end('commit')
  }
  async rollbackTransaction(connection: DatabaseConnection): Promise<void> {
    await (connection as ForwardedConnection).transaction?.end('rollback')
  }
  async releaseConnection(): Promise<void> {}
  async destroy(): Promise<void> {}
}
