/**
 * The fair share scenarios' submits (src/bench/flow.ts): burn-down-fair's jobs arrive 3 at a time
 * per tenant, the 100 tenants in turn across the calls the burn-down makes, so each claim of 300 in
 * the fair order takes the next 300 that arrived; burn-down-fair-backlogs gives each tenant its own batch per call.
 */
import { sql } from 'kysely'
import { describe, expect, it } from 'vitest'
import { FLOW_TENANTS, flowVariants } from '../../src/bench/flow.ts'
import { createClient } from '../../src/client.ts'
import { useTestDb } from '../db.ts'

const t = useTestDb()

/** The due executions of the default queue in creation order: tenant and fair turn. */
async function arrivals(): Promise<Array<{ tenant: string; fairKey: number }>> {
  const { rows } = await sql<{ tenant: string; fairKey: number }>`
    select tenant, fair_key as "fairKey" from pgsched.due where queue = 'default' order by execution_id`.execute(t.db)
  return rows
}

describe('the fair share scenarios of the flow bench', () => {
  it('submits burn-down-fair 3 jobs a tenant at a time, tenants in turn across calls, so the fair order follows arrival 300 at a time', async () => {
    const [fair] = flowVariants(['burn-down-fair'], createClient({ db: t.db }))
    if (!fair?.setup || !fair.submit) throw new Error('burn-down-fair has a setup and a submit')
    await fair.setup()
    // two calls whose sizes are not multiples of 3 or of 300, as the burn-down's chunks of 10,000 are not
    await fair.submit(Array.from({ length: 400 }, () => ({ type: 'bench.noop' })))
    await fair.submit(Array.from({ length: 500 }, () => ({ type: 'bench.noop' })))
    const rows = await arrivals()
    expect(rows).toHaveLength(900)
    expect(rows.map((r) => r.tenant)).toEqual(rows.map((_, n) => `bench-${String(Math.floor(n / 3) % FLOW_TENANTS).padStart(3, '0')}`))
    // each round of 300 arrivals (3 of each tenant) holds turns 3r to 3r + 2 of every tenant: in the
    // fair order the first 300 claimed are the first 300 that arrived, and so on
    expect(rows.map((r) => r.fairKey)).toEqual(rows.map((_, n) => 3 * Math.floor(n / 300) + (n % 3)))
  })

  it("runs burn-down-tenants beside burn-down-fair: the same submits with fair share off, the fair goal's pair", async () => {
    const client = createClient({ db: t.db })
    const named = flowVariants(['burn-down-fair'], client)
    expect(named.map((v) => v.name)).toEqual(['burn-down-fair', 'burn-down-tenants'])
    expect(named[0]?.pairedWith).toBe('burn-down-tenants')
    const [tenants] = flowVariants(['burn-down-tenants'], client)
    if (!tenants?.setup || !tenants.submit) throw new Error('burn-down-tenants has a setup and a submit')
    expect(tenants.target).toBeNull()
    await tenants.setup()
    await tenants.submit(Array.from({ length: 400 }, () => ({ type: 'bench.noop' })))
    await tenants.submit(Array.from({ length: 500 }, () => ({ type: 'bench.noop' })))
    const rows = await arrivals()
    expect(rows.map((r) => r.tenant)).toEqual(rows.map((_, n) => `bench-${String(Math.floor(n / 3) % FLOW_TENANTS).padStart(3, '0')}`))
    expect(rows).toHaveLength(900)
    // not a fair queue: no turns
    expect(rows.every((r) => r.fairKey === null)).toBe(true)
    const { rows: settings } = await sql<{ n: number }>`select count(*)::int as n from pgsched.queues where fair_share`.execute(t.db)
    expect(settings).toEqual([{ n: 0 }])
    // a new run counts from its first job again (without the reset, job 1,000 of the count would go to tenant 33)
    await tenants.submit(Array.from({ length: 100 }, () => ({ type: 'bench.noop' })))
    await sql`delete from pgsched.due`.execute(t.db)
    await tenants.setup()
    await tenants.submit(Array.from({ length: 3 }, () => ({ type: 'bench.noop' })))
    expect((await arrivals()).map((r) => r.tenant)).toEqual(['bench-000', 'bench-000', 'bench-000'])
  })

  it('submits burn-down-fair-backlogs as one batch per tenant per call, which the fair order interleaves', async () => {
    const [backlogs] = flowVariants(['burn-down-fair-backlogs'], createClient({ db: t.db }))
    if (!backlogs?.setup || !backlogs.submit) throw new Error('burn-down-fair-backlogs has a setup and a submit')
    expect(backlogs.target).toBeNull()
    await backlogs.setup()
    await backlogs.submit(Array.from({ length: 1000 }, () => ({ type: 'bench.noop' })))
    const rows = await arrivals()
    expect(rows).toHaveLength(1000)
    // arrival: tenant 0's 10 jobs, then tenant 1's, ...; turns: 0 to 9 within each tenant's batch
    rows.forEach((r, n) => {
      expect(r.tenant).toBe(`bench-${String(Math.floor(n / 10)).padStart(3, '0')}`)
      expect(r.fairKey).toBe(n % 10)
    })
  })
})
