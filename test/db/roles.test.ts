/**
 * The database roles of docs/roles.md, made as written there and used as they say: a service role
 * (the API and the workers) with the grants listed runs a worker system that claims, runs and
 * records jobs and a client that submits; a read-only role reads every view and writes nothing; an
 * application role that may only call a SECURITY DEFINER function of its own submits through it,
 * for the tenant the function names, and can neither call pgsched.submit_job nor write the tables.
 */
import { randomBytes } from 'node:crypto'
import { readFileSync } from 'node:fs'
import pg from 'pg'
import { sql } from 'kysely'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { createClient } from '../../src/client.ts'
import { loadConfig } from '../../src/config.ts'
import { createWorkerSystem } from '../../src/system.ts'
import { defineHandler } from '../../src/worker/handlers.ts'
import { useTestDb } from '../db.ts'
import { waitFor } from '../wait-for.ts'

const t = useTestDb({ truncate: false })
const suffix = randomBytes(4).toString('hex')
const roles = { service: `pgsched_service_${suffix}`, reader: `pgsched_reader_${suffix}`, app: `billing_app_${suffix}` }
/** The roles' password (the server may ask for one on TCP connections). */
const password = randomBytes(12).toString('hex')

/** The SQL blocks of docs/roles.md, in order, with the roles' names made unique to this run. */
function docBlocks(): string[] {
  const doc = readFileSync('docs/roles.md', 'utf8')
  return [...doc.matchAll(/```sql\n([\s\S]*?)```/g)].map((m) =>
    (m[1] as string)
      .replaceAll('pgsched_service', roles.service)
      .replaceAll('pgsched_reader', roles.reader)
      .replaceAll('billing_app', roles.app)
      .replaceAll("password 'change me'", `password '${password}'`),
  )
}

function urlAs(role: string): string {
  const url = new URL(t.url)
  url.username = role
  url.password = password
  return url.toString()
}

/** Runs `text` as `role`; resolves with the rows, or with the error's message. */
async function as(role: string, text: string): Promise<{ rows?: Record<string, unknown>[]; error?: string }> {
  const client = new pg.Client({ connectionString: urlAs(role) })
  await client.connect()
  try {
    return { rows: (await client.query(text)).rows }
  } catch (err: unknown) {
    return { error: (err as Error).message }
  } finally {
    await client.end()
  }
}

beforeAll(async () => {
  for (const block of docBlocks()) await sql.raw(block).execute(t.db)
})

afterAll(async () => {
  for (const role of Object.values(roles)) {
    await sql
      .raw(`drop owned by ${role} cascade; drop role if exists ${role}`)
      .execute(t.db)
      .catch(() => undefined)
  }
  await sql.raw('drop schema if exists billing cascade').execute(t.db)
})

describe('the roles of docs/roles.md', () => {
  it('gives the service role what the API and the workers need: submit, claim, run and record', { timeout: 60_000 }, async () => {
    const client = createClient({ databaseUrl: urlAs(roles.service), tenant: 'acme' })
    const config = loadConfig({
      DATABASE_URL: urlAs(roles.service),
      SCHEDULER_WORKER_METRICS_PORT: 'off',
      SCHEDULER_REAPER_INTERVAL_MS: '200',
      SCHEDULER_PRUNE_INTERVAL_MS: '1000',
    })
    const system = createWorkerSystem({ config, log: t.log, handlers: [defineHandler('roles.job', async (ctx) => ({ got: ctx.payload }))] })
    await system.start()
    try {
      const { job } = await client.submitJob({ type: 'roles.job', payload: { n: 1 } })
      const recurring = await client.submitJob({ type: 'roles.job', schedule: { every: '1s' } })
      await waitFor(async () => (await client.viewJob(job.id)).status === 'COMPLETED', { what: 'the job to complete as the service role' })
      expect((await client.viewJob(job.id)).lastExecution?.result).toEqual({ got: { n: 1 } })
      await waitFor(async () => (await client.viewJob(recurring.job.id)).lastRun?.status === 'SUCCEEDED', { what: 'a fire time to run' })
      await client.cancelJob(recurring.job.id)
    } finally {
      await system.stop()
      await client.close()
    }
  })

  it('lets the read-only role read every view and table, and write nothing', async () => {
    const read = await as(roles.reader, 'select count(*)::int as n from pgsched.executions')
    expect(read.error).toBeUndefined()
    expect((await as(roles.reader, 'select count(*) from pgsched.jobs')).error).toBeUndefined()
    expect((await as(roles.reader, "insert into pgsched.queues (name, paused) values ('x', true)")).error).toMatch(/permission denied for table queues/)
    expect((await as(roles.reader, "select pgsched.submit_job('x')")).error).toMatch(/permission denied/)
    // the job operations of SQL write, the status reads
    const { id } = await t.db.selectFrom('pgsched.jobs').select('id').executeTakeFirstOrThrow()
    for (const op of ['cancel_job', 'retry_job', 'rerun_job', 'delete_job']) {
      expect({ op, error: (await as(roles.reader, `select pgsched.${op}('${id}')`)).error }).toMatchObject({
        op,
        error: expect.stringMatching(/permission denied/),
      })
    }
    expect((await as(roles.reader, `select pgsched.job_status('${id}') as status`)).rows).toEqual([{ status: expect.any(String) }])
  })

  it("keeps the webhook subscriptions' signing secrets from the read-only role, and every other column readable", async () => {
    await sql`insert into pgsched.webhook_subscriptions (tenant, url, secret) values ('acme', 'https://example.com/hook', 'a-secret-of-enough-length')`.execute(
      t.db,
    )
    expect((await as(roles.reader, 'select secret from pgsched.webhook_subscriptions')).error).toMatch(/permission denied for table webhook_subscriptions/)
    expect((await as(roles.reader, 'select * from pgsched.webhook_subscriptions')).error).toMatch(/permission denied/)
    // the grant names every column but the secret (a column a later migration adds must join it)
    const { rows: columns } = await sql<{ name: string }>`
      select column_name as name from information_schema.columns
       where table_schema = 'pgsched' and table_name = 'webhook_subscriptions' and column_name <> 'secret' order by column_name`.execute(t.db)
    const list = columns.map((c) => c.name).join(', ')
    const read = await as(roles.reader, `select ${list} from pgsched.webhook_subscriptions where tenant = 'acme'`)
    expect(read.error).toBeUndefined()
    expect(read.rows).toEqual([expect.objectContaining({ tenant: 'acme', url: 'https://example.com/hook' })])
  })

  it("lets the application role submit only through its function, for the function's tenant", async () => {
    const submitted = await as(roles.app, `select billing.submit_invoice('{"invoice": 7}') as id`)
    expect(submitted.error).toBeUndefined()
    const id = submitted.rows?.[0]?.id as string
    const job = await createClient({ db: t.db, tenant: 'billing' }).viewJob(id)
    expect(job).toMatchObject({ tenant: 'billing', type: 'invoice.send', payload: { invoice: 7 } })
    expect((await as(roles.app, "select pgsched.submit_job('x', tenant => 'acme')")).error).toMatch(/permission denied for schema pgsched/)
    expect((await as(roles.app, "insert into pgsched.jobs (tenant, type) values ('acme', 'x')")).error).toMatch(/permission denied for schema pgsched/)
    // the function holds its input to submit_job's rules, and names what it refuses
    expect((await as(roles.app, `select billing.submit_invoice('[${'['.repeat(70)}${']'.repeat(70)}]')`)).error).toContain(
      'payload must nest at most 64 levels deep',
    )
  })
})
