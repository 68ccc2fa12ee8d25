/**
 * createClient({ db }) with the application's Kysely made by another copy of kysely (another
 * version): the calls that need a transaction of their own run it as that instance's transaction,
 * committed or rolled back with the call; and the published types take such an instance, whose
 * CompiledQuery type is not pgsched's copy's.
 */
import { sql, type CompiledQuery, type Kysely } from 'kysely'
import { describe, expect, it } from 'vitest'
import { createClient } from '../../src/client.ts'
import type { DB } from '../../src/db/schema.ts'
import { useTestDb } from '../db.ts'

const t = useTestDb()

/** A Kysely instance as another copy of kysely makes it: not pgsched's class; transaction() gives that copy's transaction. */
function foreignInstance(db: Kysely<DB>, began: { count: number }) {
  const wrap = (k: { executeQuery: (q: CompiledQuery) => Promise<unknown> }, isTransaction: boolean): OtherCopyKysely => {
    const copy = {
      isTransaction,
      withoutPlugins: () => copy,
      executeQuery: (q: OtherCompiledQuery) => k.executeQuery(q as unknown as CompiledQuery) as Promise<{ rows: unknown[] }>,
      transaction: () => ({
        execute: <T>(fn: (trx: OtherCopyKysely) => Promise<T>) => {
          began.count++
          return db.transaction().execute((trx) => fn(wrap(trx, true)))
        },
      }),
    }
    return copy as unknown as OtherCopyKysely
  }
  return wrap(db, false)
}

/** Another kysely version's compiled query: a node kind pgsched's copy does not know. */
interface OtherCompiledQuery {
  readonly query: { readonly kind: 'SomeOtherVersionsNode' }
  readonly sql: string
  readonly parameters: ReadonlyArray<unknown>
}
/** Another kysely version's instance, as its types describe it (executeQuery takes its own CompiledQuery). */
interface OtherCopyKysely {
  readonly isTransaction: boolean
  withoutPlugins(): OtherCopyKysely
  executeQuery<R>(query: OtherCompiledQuery | { compile(): OtherCompiledQuery }): Promise<{ rows: R[] }>
  transaction(): { execute<T>(fn: (trx: OtherCopyKysely) => Promise<T>): Promise<T> }
}

describe("createClient({ db }) with the application's Kysely of another kysely copy", () => {
  it("runs the calls that need a transaction of their own in that instance's transaction (submitJobs, cancelJob, retryJob)", async () => {
    const began = { count: 0 }
    // typed as the other copy's instance: the published types take it
    const client = createClient({ db: foreignInstance(t.db, began), tenant: 'acme' })
    const { job } = await client.submitJob({ type: 'a' })
    await expect(client.submitJobs([{ type: 'b' }, { type: 'c' }])).resolves.toHaveLength(2)
    await expect(client.cancelJob(job.id)).resolves.toMatchObject({ status: 'CANCELLED' })
    await expect(client.retryJob(job.id)).resolves.toMatchObject({ status: 'SCHEDULED' })
    expect(began.count).toBeGreaterThanOrEqual(3)
    const { rows } = await sql<{ n: number }>`select count(*)::int as n from pgsched.jobs where tenant = 'acme'`.execute(t.db)
    expect(rows).toEqual([{ n: 3 }])
  })

  it('rolls that transaction back when the call fails, leaving nothing of it', async () => {
    const client = createClient({ db: foreignInstance(t.db, { count: 0 }), tenant: 'acme' })
    // the second job's idempotency key was taken by another request: the batch fails whole
    await client.submitJob({ type: 'x', idempotencyKey: 'taken', payload: { n: 1 } })
    await expect(
      client.submitJobs([
        { type: 'y', payload: { n: 2 } },
        { type: 'x', idempotencyKey: 'taken', payload: { n: 3 } },
      ]),
    ).rejects.toThrow()
    const { rows } = await sql<{ type: string }>`select type from pgsched.jobs where tenant = 'acme' order by type`.execute(t.db)
    expect(rows).toEqual([{ type: 'x' }])
  })
})
