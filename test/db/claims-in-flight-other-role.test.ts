/**
 * pgsched.claims_in_flight_since(t) counts the write transactions on pgsched.runs (claims, outcome
 * writes) that began before t. The pause of the REST API, the client and `scheduler queues pause`, every
 * limit and fair-share setter and the client's cancel sweep wait on it; the README tells an operator in
 * psql to wait on it after `pgsched.pause_queue`. It must count those transactions whichever role asks:
 * the workers run as the service role of docs/roles.md, an operator's psql or CLI may connect as the
 * migrating role or a role of their own. PostgreSQL shows another role's `xact_start` in
 * pg_stat_activity only to superusers and members of pg_read_all_stats, so a count filtered on it
 * answers 0 to everyone else, and the pause returns while a claim is still taking rows of the queue.
 */
import { randomBytes } from 'node:crypto'
import pg from 'pg'
import { sql } from 'kysely'
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest'
import { createDb } from '../../src/db/pool.ts'
import { claimsInFlightEnded } from '../../src/db/queries/queues.ts'
import { adminQuery, createFromTemplate, urlFor, useTestDb } from '../db.ts'
import { waitFor } from '../wait-for.ts'

const t = useTestDb({ truncate: false })
const suffix = randomBytes(4).toString('hex')
const roles = { worker: `pgsched_service_${suffix}`, operator: `pgsched_operator_${suffix}` }
const password = randomBytes(12).toString('hex')

function urlAs(role: string): string {
  const url = new URL(t.url)
  url.username = role
  url.password = password
  return url.toString()
}

beforeAll(async () => {
  for (const role of Object.values(roles)) {
    // the service role's grants of docs/roles.md, for both
    await sql
      .raw(
        `create role ${role} login password '${password}';
         grant usage on schema pgsched to ${role};
         grant select, insert, update, delete on all tables in schema pgsched to ${role};
         grant usage, select on all sequences in schema pgsched to ${role};`,
      )
      .execute(t.db)
  }
})

afterAll(async () => {
  for (const role of Object.values(roles)) {
    await sql
      .raw(`drop owned by ${role} cascade; drop role if exists ${role}`)
      .execute(t.db)
      .catch(() => undefined)
  }
})

describe('pgsched.claims_in_flight_since', () => {
  it("counts a worker's open write transaction on pgsched.runs when another role asks", async () => {
    const worker = new pg.Client({ connectionString: urlAs(roles.worker) })
    const operator = new pg.Client({ connectionString: urlAs(roles.operator) })
    await worker.connect()
    await operator.connect()
    try {
      // a claim in flight: a transaction of the worker's role holding its write lock on runs
      await worker.query('begin')
      await worker.query('update pgsched.runs set lease_expires_at = lease_expires_at where false')
      const asWorkerRole = await worker.query('select 1') // keep it open
      expect(asWorkerRole.rowCount).toBe(1)

      const { rows: bySuperuser } = await sql<{ n: number }>`select pgsched.claims_in_flight_since(clock_timestamp()) as n`.execute(t.db)
      expect(bySuperuser[0]?.n).toBe(1)
      const { rows: byOperator } = await operator.query('select pgsched.claims_in_flight_since(clock_timestamp()) as n')
      expect(byOperator[0]?.n).toBe(1)
    } finally {
      await worker.query('rollback').catch(() => undefined)
      await worker.end()
      await operator.end()
    }
  })

  it("counts no write transaction on another database's pgsched.runs, whose OID is the same (made from one template)", async () => {
    const other = `t_other_${suffix}`
    await createFromTemplate(other, inject('templateDb'))
    const elsewhere = new pg.Client({ connectionString: urlFor(other) })
    await elsewhere.connect()
    try {
      await elsewhere.query('begin')
      await elsewhere.query('update pgsched.runs set lease_expires_at = lease_expires_at where false')
      const { rows: same } = await elsewhere.query(`select 'pgsched.runs'::regclass::oid::int as oid`)
      const { rows: here } = await sql<{ oid: number }>`select 'pgsched.runs'::regclass::oid::int as oid`.execute(t.db)
      expect(same[0]?.oid).toBe(here[0]?.oid)
      const { rows } = await sql<{ n: number }>`
        select pgsched.claims_in_flight_since(clock_timestamp()) as n`.execute(t.db)
      expect(rows[0]?.n).toBe(0)
    } finally {
      await elsewhere.query('rollback').catch(() => undefined)
      await elsewhere.end()
      await adminQuery(`drop database if exists ${other} with (force)`)
    }
  })

  it("makes a pause by another role than the workers' wait for a claim in flight", async () => {
    const worker = new pg.Client({ connectionString: urlAs(roles.worker) })
    await worker.connect()
    const operator = createDb({ databaseUrl: urlAs(roles.operator), poolSize: 2, log: t.log })
    try {
      await worker.query('begin')
      await worker.query('update pgsched.runs set lease_expires_at = lease_expires_at where false')
      let ended = false
      const waiting = claimsInFlightEnded(operator.db).then(() => {
        ended = true
      })
      // still waiting while the claim's transaction is open: the operator polls pg_locks meanwhile
      await waitFor(
        async () => {
          const { rows } = await sql<{ n: number }>`select count(*)::int as n from pg_stat_activity
             where usename = ${roles.operator} and query like '%virtualtransaction = any%'`.execute(t.db)
          return (rows[0]?.n ?? 0) > 0
        },
        { what: 'the operator polling for the claim to end' },
      )
      expect(ended).toBe(false)
      await worker.query('commit')
      await waiting
      expect(ended).toBe(true)
    } finally {
      await worker.query('rollback').catch(() => undefined)
      await worker.end()
      await operator.end(5_000)
    }
  })
})
