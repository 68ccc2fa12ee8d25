/** Kysely over one `pg` client: the TypeScript client's calls inside a caller's own connection or transaction. */
import type pg from 'pg'
import { Kysely, PostgresDialect } from 'kysely'
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
