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
  executeQuery(query: CompiledQuery): Promise<QueryResult<unknown>>
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
 * when another copy of kysely made it, through a driver that hands each compiled statement to it.
 * A transaction cannot be begun on such a copy's instance (the caller's transaction is used).
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

/** Runs every statement through another copy of kysely's instance (see callerKysely). */
class ForwardingDriver implements Driver {
  private readonly target: CallerKysely
  constructor(target: CallerKysely) {
    this.target = target
  }
  async init(): Promise<void> {}
  async acquireConnection(): Promise<DatabaseConnection> {
    return {
      executeQuery: <R>(query: CompiledQuery) => this.target.executeQuery(query) as Promise<QueryResult<R>>,
      streamQuery: () => {
        throw new Error('pgsched cannot stream a query through a Kysely instance of another kysely copy')
      },
    }
  }
  async beginTransaction(): Promise<void> {
    throw new Error('pgsched cannot begin a transaction on a Kysely instance of another kysely copy: pass its transaction as trx')
  }
  async commitTransaction(): Promise<void> {}
  async rollbackTransaction(): Promise<void> {}
  async releaseConnection(): Promise<void> {}
  async destroy(): Promise<void> {}
}
