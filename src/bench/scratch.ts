/**
 * The benchmark's scratch database: created next to the one DATABASE_URL
 * names, migrated, emptied between repetitions (queue settings and tenants
 * included), dropped at the end.
 */
import { randomBytes } from 'node:crypto'
import pg from 'pg'
import { sql, type Kysely } from 'kysely'
import { migrate } from '../db/migrate.ts'
import { createDb, type Database } from '../db/pool.ts'
import type { DB } from '../db/schema.ts'

export interface Scratch extends Database {
  name: string
  url: string
  /**
   * A pool whose sessions plan as the worker's hot-path pool does (generic plans; no seq scan, hash or
   * merge join): what the bare claim + complete loop runs on, so that it measures the worker's plans.
   */
  hot: Kysely<DB>
  reset(): Promise<void>
  drop(): Promise<void>
}

async function admin(url: string, statement: string): Promise<void> {
  const client = new pg.Client({ connectionString: url })
  await client.connect()
  try {
    await client.query(statement)
  } finally {
    await client.end()
  }
}

/** The scratch databases not dropped yet, by name: the server each is on (dropScratches). */
const undropped = new Map<string, string>()

/** Drops every scratch database not dropped yet (a bench interrupted by a signal). */
export async function dropScratches(): Promise<void> {
  for (const [name, databaseUrl] of undropped) {
    await admin(databaseUrl, `drop database if exists ${name} with (force)`)
    undropped.delete(name)
  }
}

export async function createScratch(databaseUrl: string, partitions: number): Promise<Scratch> {
  const name = `pgsched_bench_${randomBytes(4).toString('hex')}`
  await admin(databaseUrl, `create database ${name}`)
  undropped.set(name, databaseUrl)
  const url = new URL(databaseUrl)
  url.pathname = `/${name}`
  const scratchUrl = url.toString()
  try {
    await migrate({ databaseUrl: scratchUrl, partitions })
  } catch (err) {
    await admin(databaseUrl, `drop database if exists ${name} with (force)`).then(
      () => undropped.delete(name),
      () => undefined,
    )
    throw err
  }
  const database = createDb({ databaseUrl: scratchUrl, poolSize: 10, applicationName: 'pgsched-bench' })
  const hot = createDb({ databaseUrl: scratchUrl, poolSize: 2, applicationName: 'pgsched-bench', genericPlans: true, indexPlans: true }).db
  return {
    ...database,
    hot,
    name,
    url: scratchUrl,
    async reset() {
      // Queue settings, tenants and event listeners too: a scenario that sets a limit, or listens to
      // events, must not leave it to the next.
      await sql`truncate pgsched.execution_history, pgsched.due, pgsched.runs, pgsched.triggers, pgsched.job_idempotency_keys, pgsched.jobs, pgsched.workers, pgsched.waiting_workers,
                         pgsched.queues, pgsched.tenants, pgsched.event_listeners, pgsched.event_batches, pgsched.fair_clocks`.execute(database.db)
    },
    async drop() {
      await hot.destroy()
      await database.db.destroy()
      await admin(databaseUrl, `drop database if exists ${name} with (force)`)
      undropped.delete(name)
    },
  }
}

/** Inserts `count` no-op jobs due now, in batches through the client's batch statement. */
export async function insertJobs(
  db: Kysely<DB>,
  submit: (jobs: Array<{ type: string; priority?: number; payload?: unknown }>) => Promise<unknown>,
  count: number,
  make: (i: number) => { type: string; priority?: number; payload?: unknown } = () => ({ type: 'bench.noop' }),
): Promise<void> {
  for (let done = 0; done < count; done += 10_000) {
    const n = Math.min(10_000, count - done)
    await submit(Array.from({ length: n }, (_, k) => make(done + k)))
  }
  await sql`analyze pgsched.execution_history, pgsched.due, pgsched.runs, pgsched.jobs`.execute(db)
}
