/**
 * createDb: a pool with `genericPlans` plans each parameterised statement once
 * per connection (the worker's hot path); other pools keep PostgreSQL's choice.
 */
import { sql } from 'kysely'
import { afterAll, describe, expect, it } from 'vitest'
import { createDb, type Database } from '../../src/db/pool.ts'
import { adminUrl } from '../db.ts'

describe('createDb', () => {
  const opened: Database[] = []
  afterAll(async () => {
    await Promise.all(opened.map((d) => d.db.destroy()))
  })
  const planCacheMode = async (genericPlans: boolean | undefined) => {
    const d = createDb({ databaseUrl: adminUrl(), poolSize: 1, genericPlans })
    opened.push(d)
    const { rows } = await sql<{ mode: string }>`select current_setting('plan_cache_mode') as mode`.execute(d.db)
    return rows[0]?.mode
  }

  it('forces generic plans on every connection of a genericPlans pool', async () => {
    expect(await planCacheMode(true)).toBe('force_generic_plan')
  })

  it("leaves the server's plan choice to other pools", async () => {
    expect(await planCacheMode(undefined)).toBe('auto')
  })
})
