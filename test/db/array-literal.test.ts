/**
 * keyArray and timeArray: uuid, integer and time arrays sent as literals read
 * back in PostgreSQL as the same arrays, in order.
 */
import { randomUUID } from 'node:crypto'
import { sql } from 'kysely'
import { afterAll, describe, expect, it } from 'vitest'
import { keyArray, timeArray } from '../../src/db/queries/array-literal.ts'
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

describe('timeArray', () => {
  const { db } = createDb({ databaseUrl: adminUrl(), poolSize: 1 })
  afterAll(() => db.destroy())

  it('sends times, with their milliseconds and nulls, that PostgreSQL reads back as the same instants whatever its time zone', async () => {
    const times = [new Date('2026-03-29T01:59:59.999Z'), null, new Date(0), new Date('1969-12-31T23:59:59.001Z'), new Date('2099-12-31T23:59:59.123Z')]
    for (const zone of ['UTC', 'Asia/Kolkata', 'America/St_Johns']) {
      await sql`select set_config('timezone', ${zone}, false)`.execute(db)
      const { rows } = await sql<{ ms: Array<string | null> }>`
        select array(select (extract(epoch from t) * 1000)::bigint::text from unnest(${timeArray(times)}::timestamptz[]) as t) as ms`.execute(db)
      expect(rows[0]?.ms, zone).toEqual(times.map((d) => (d === null ? null : String(d.getTime()))))
    }
  })

  it('sends an empty array as an empty array', async () => {
    const { rows } = await sql<{ n: number }>`select cardinality(${timeArray([])}::timestamptz[]) as n`.execute(db)
    expect(rows[0]?.n).toBe(0)
  })
})
