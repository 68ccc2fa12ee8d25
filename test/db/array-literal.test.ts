/**
 * keyArray: uuid and integer arrays sent as literals read back in PostgreSQL
 * as the same arrays, in order.
 */
import { randomUUID } from 'node:crypto'
import { sql } from 'kysely'
import { afterAll, describe, expect, it } from 'vitest'
import { keyArray } from '../../src/db/queries/array-literal.ts'
import { createDb } from '../../src/db/pool.ts'
import { adminUrl } from '../db.ts'

describe('keyArray', () => {
  const { db } = createDb({ databaseUrl: adminUrl(), poolSize: 1 })
  afterAll(() => db.destroy())

  it('sends uuids and integers that PostgreSQL reads back unchanged and in order', async () => {
    const ids = Array.from({ length: 500 }, () => randomUUID())
    const ints = [0, -1, 2_147_483_647, -2_147_483_648, 42]
    const { rows } = await sql<{ ids: string[]; ints: number[] }>`
      select ${keyArray(ids)}::uuid[]::text[] as ids, ${keyArray(ints)}::int[] as ints`.execute(db)
    expect(rows[0]).toEqual({ ids, ints })
  })

  it('sends an empty array as an empty array', async () => {
    const { rows } = await sql<{ n: number }>`select cardinality(${keyArray([])}::uuid[]) as n`.execute(db)
    expect(rows[0]?.n).toBe(0)
  })
})
