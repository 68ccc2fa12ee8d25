/**
 * Migration 0080: pgsched.submit_job defaults backoff_max_ms as the client does (at least the base);
 * pgsched.resume_queue refuses a null queue name and names an unknown queue, as pause_queue does;
 * pgsched.tenants refuses a name no tenant can have; and a cancel of hundreds of running executions
 * notifies their workers in several notifications (a payload is limited to 8000 bytes), through the
 * client's bulk cancel and through pgsched.cancel_job. Applied to a database in use, the migration
 * leaves a tenant row named before it working and the idempotency keys stored before it matching.
 */
import { sql } from 'kysely'
import pg from 'pg'
import { describe, expect, it } from 'vitest'
import { createClient } from '../../src/client.ts'
import { migrate } from '../../src/db/migrate.ts'
import { executionClaimBatch } from '../../src/db/queries/claim.ts'
import { Notifier } from '../../src/worker/notifier.ts'
import { useDatabaseBefore, useTestDb } from '../db.ts'
import { waitFor } from '../wait-for.ts'

const t = useTestDb()
const before = useDatabaseBefore('0080')
const TENANT = 'acme'
const WORKER = '00000000-0000-7000-8000-00000000080a'

async function submit(args: string): Promise<string> {
  const { rows } = await sql<{ id: string }>`select pgsched.submit_job(${sql.raw(args)}) as id`.execute(t.db)
  return (rows[0] as { id: string }).id
}

const backoffOf = async (id: string) =>
  (
    await sql<{ backoff_base_ms: number; backoff_max_ms: number }>`
      select backoff_base_ms, backoff_max_ms from pgsched.jobs where id = ${id}::uuid`.execute(t.db)
  ).rows[0]

/** Runs `statement` on a connection of its own; returns the notices it raised. */
async function notices(statement: string, params: unknown[]): Promise<string[]> {
  const c = new pg.Client({ connectionString: t.url })
  await c.connect()
  const got: string[] = []
  c.on('notice', (n) => got.push(n.message ?? ''))
  try {
    await c.query(statement, params)
  } finally {
    await c.end()
  }
  return got
}

/** Runs `statement` on a connection of its own to `url`; its rows. */
async function onDatabase<R>(url: string, statement: string): Promise<R[]> {
  const c = new pg.Client({ connectionString: url })
  await c.connect()
  try {
    return (await c.query(statement)).rows as R[]
  } finally {
    await c.end()
  }
}

/** A worker's notifier, hearing the execution ids of every pgsched_cancel notification. */
async function cancelListener(): Promise<{ heard: string[]; payloads: () => number; stop: () => Promise<void> }> {
  const heard: string[] = []
  let payloads = 0
  const notifier = new Notifier({
    databaseUrl: t.url,
    log: t.log,
    handlers: {
      onWork: () => undefined,
      onSettings: () => undefined,
      onCancel: (ids) => {
        payloads++
        heard.push(...ids)
      },
      onLost: () => undefined,
      onReconnect: () => undefined,
    },
  })
  await notifier.start()
  return { heard, payloads: () => payloads, stop: () => notifier.stop() }
}

describe('pgsched.submit_job: the default backoff_max_ms', () => {
  it('is the longer of an hour and backoff_base_ms, as the client and the API make it', async () => {
    const client = createClient({ db: t.db, tenant: TENANT })
    const viaClient = (await client.submitJob({ type: 'slow.retry', backoffBaseMs: 4_000_000 })).job.id
    const viaSql = await submit(`'slow.retry', tenant => '${TENANT}', backoff_base_ms => 4000000`)
    expect(await backoffOf(viaClient)).toEqual({ backoff_base_ms: 4_000_000, backoff_max_ms: 4_000_000 })
    expect(await backoffOf(viaSql)).toEqual(await backoffOf(viaClient))
    // a null max given is the default too
    expect(await backoffOf(await submit(`'slow.retry', backoff_base_ms => 4000000, backoff_max_ms => null`))).toEqual({
      backoff_base_ms: 4_000_000,
      backoff_max_ms: 4_000_000,
    })
    expect(await backoffOf(await submit(`'x', backoff_max_ms => null`))).toEqual({ backoff_base_ms: 1000, backoff_max_ms: 3_600_000 })
    expect(await backoffOf(await submit(`'x'`))).toEqual({ backoff_base_ms: 1000, backoff_max_ms: 3_600_000 })
    // a max given below the base is still refused, naming both
    await expect(submit(`'x', backoff_base_ms => 4000000, backoff_max_ms => 3600000`)).rejects.toThrow(
      'backoff_max_ms must be an integer from backoff_base_ms (4000000) to 604800000, got 3600000',
    )
  })

  it('hashes a repeat as before: a submit that left the max to the default of an hour, or gave it, is the same request', async () => {
    const a = await submit(`'charge', idempotency_key => 'k-default'`)
    expect(await submit(`'charge', idempotency_key => 'k-default', backoff_max_ms => 3600000`)).toBe(a)
    expect(await submit(`'charge', idempotency_key => 'k-default', backoff_max_ms => null`)).toBe(a)
    const b = await submit(`'charge', idempotency_key => 'k-given', backoff_max_ms => 3600000`)
    expect(await submit(`'charge', idempotency_key => 'k-given'`)).toBe(b)
    // the hash stored for such a submit by migration 0076's function, which had 3600000 as its default
    const { rows } = await sql<{ request_hash: string }>`
      select request_hash from pgsched.job_idempotency_keys where idempotency_key = 'k-default'`.execute(t.db)
    const { rows: expected } = await sql<{ h: string }>`
      select 'sql3:' || encode(sha256(convert_to(jsonb_build_object(
        'type', 'charge', 'payload', '{}'::jsonb, 'queue', 'default', 'priority', 0, 'run_at', null::text, 'cron', null::text,
        'timezone', 'UTC', 'every_ms', null::bigint, 'max_attempts', 5, 'timeout_ms', 300000,
        'concurrency_key', null::text, 'start_deadline_ms', null::int, 'backoff_base_ms', 1000, 'backoff_max_ms', 3600000,
        'misfire_policy', 'fire_once', 'overlap_policy', 'allow', 'start_at', null::text, 'end_at', null::text)::text, 'UTF8')), 'hex') as h`.execute(t.db)
    expect(rows[0]?.request_hash).toBe(expected[0]?.h)
    // another max is another request
    await expect(submit(`'charge', idempotency_key => 'k-default', backoff_max_ms => 7200000`)).rejects.toThrow(
      `idempotency key 'k-default' was already used for a different job request`,
    )
  })
})

describe('pgsched.resume_queue', () => {
  it('refuses a null or malformed queue name with 22023, as pause_queue does', async () => {
    for (const fn of ['pause_queue', 'resume_queue']) {
      await expect(notices(`select pgsched.${fn}($1)`, [null]), fn).rejects.toMatchObject({
        code: '22023',
        message: 'queue must be 1-64 characters: letters, digits and _ . : / - (not first), got null',
      })
      await expect(notices(`select pgsched.${fn}($1)`, ['bad name']), fn).rejects.toMatchObject({
        code: '22023',
        message: "queue must be 1-64 characters: letters, digits and _ . : / - (not first), got 'bad name'",
      })
    }
  })

  it('names a queue nothing knows in a notice, as pause_queue does, and none it knows', async () => {
    expect(await notices('select pgsched.resume_queue($1)', ['misspelt'])).toEqual([
      "queue 'misspelt' has no settings, no pending or running work and no worker serving it: resumed anyway (check the name if you meant an existing queue)",
    ])
    await sql`select pgsched.pause_queue('held')`.execute(t.db)
    expect(await notices('select pgsched.resume_queue($1)', ['held'])).toEqual([])
    expect((await createClient({ db: t.db }).queues.view('held')).paused).toBe(false)
    // a queue with work and no settings: known, nothing to say
    await submit(`'x', queue => 'busy'`)
    expect(await notices('select pgsched.resume_queue($1)', ['busy'])).toEqual([])
  })
})

describe('pgsched.tenants', () => {
  it('refuses a name no tenant can have with 22023 and the rule, on insert and on a change of name', async () => {
    const bad = ['bad name', '-first', 'a/b', '', 'x'.repeat(129)]
    for (const name of bad) {
      await expect(notices('insert into pgsched.tenants (name, max_pending) values ($1, 10)', [name]), name).rejects.toMatchObject({
        code: '22023',
        message: `tenant must be 1-128 characters: letters, digits and _ . : @ - (not first), got '${name}'`,
      })
    }
    await expect(notices('insert into pgsched.tenants (name, max_pending) values ($1, 10)', [null])).rejects.toMatchObject({ code: '22023' })
    // the names the client and the API take
    for (const name of ['acme', 'a.b:c@d-e_f', '7', 'x'.repeat(128)]) {
      await sql`insert into pgsched.tenants (name, max_pending) values (${name}, 10)`.execute(t.db)
    }
    await expect(notices(`update pgsched.tenants set name = $1 where name = 'acme'`, ['bad name'])).rejects.toMatchObject({ code: '22023' })
    const { rows } = await sql<{ name: string }>`select name from pgsched.tenants where name = 'acme'`.execute(t.db)
    expect(rows).toHaveLength(1)
  })
})

describe('a cancel of hundreds of running executions', () => {
  it('cancels 300 running jobs in one bulk call and tells their worker of every execution', async () => {
    const client = createClient({ db: t.db, tenant: TENANT })
    await client.submitJobs(Array.from({ length: 300 }, () => ({ type: 'long.run', queue: 'many' })))
    const claimed = await executionClaimBatch(t.db, { workerId: WORKER, queues: ['many'], types: ['long.run'], limit: 300, leaseMs: 60_000 })
    expect(claimed).toHaveLength(300)
    const listener = await cancelListener()
    try {
      const result = await client.bulkJobs({ action: 'cancel', filter: { all: true } })
      expect(result).toMatchObject({ matched: 300, changed: 300, remaining: 0 })
      await waitFor(() => listener.heard.length >= 300, { what: 'the pgsched_cancel notifications' })
      expect(new Set(listener.heard)).toEqual(new Set(claimed.map((c) => c.id)))
      expect(listener.heard).toHaveLength(300)
      expect(listener.payloads()).toBe(3)
    } finally {
      await listener.stop()
    }
    const { rows } = await sql<{ n: number }>`select count(*)::int as n from pgsched.runs`.execute(t.db)
    expect(rows[0]?.n).toBe(0)
    expect((await client.listJobs({ status: 'CANCELLED', limit: 500 })).items).toHaveLength(300)
  })

  it('cancels a job with 300 running executions through pgsched.cancel_job and tells their worker of every one', async () => {
    const id = await submit(`'long.run', queue => 'many', every => interval '1 minute', tenant => '${TENANT}'`)
    const { rows: held } = await sql<{ id: string }>`
      insert into pgsched.runs (execution_id, job_id, worker_id, attempt, lease_expires_at, started_at, queue, type, priority, run_at,
                                scheduled_for, max_attempts, timeout_ms, tenant, created_at)
      select pgsched.uuid_v7(), j.id, ${WORKER}::uuid, 1, now() + interval '1 minute', now(), j.queue, j.type, j.priority,
             now() - i * interval '1 minute', now() - i * interval '1 minute', j.max_attempts, j.timeout_ms, j.tenant, now()
        from pgsched.jobs j, generate_series(1, 300) i
       where j.id = ${id}::uuid
      returning execution_id as id`.execute(t.db)
    expect(held).toHaveLength(300)
    const listener = await cancelListener()
    try {
      const { rows } = await sql<{ cancelled: boolean }>`select pgsched.cancel_job(${id}::uuid) as cancelled`.execute(t.db)
      expect(rows[0]?.cancelled).toBe(true)
      await waitFor(() => listener.heard.length >= 300, { what: 'the pgsched_cancel notifications' })
      expect(new Set(listener.heard)).toEqual(new Set(held.map((h) => h.id)))
      expect(listener.heard).toHaveLength(300)
    } finally {
      await listener.stop()
    }
    expect(await createClient({ db: t.db, tenant: TENANT }).viewJob(id)).toMatchObject({ status: 'CANCELLED' })
    const { rows } = await sql<{ n: number }>`select count(*)::int as n from pgsched.runs`.execute(t.db)
    expect(rows[0]?.n).toBe(0)
  })
})

describe('migration 0080 on a database in use', () => {
  it('applies over a tenant named as no tenant can be, whose row keeps working, and keeps the idempotency keys stored before matching', async () => {
    await onDatabase(before.url, `insert into pgsched.tenants (name, max_pending, max_submits_per_second) values ('old name', 10, 5)`)
    const submits = {
      defaulted: `select pgsched.submit_job('charge', idempotency_key => 'defaulted') as id`,
      given: `select pgsched.submit_job('charge', idempotency_key => 'given', backoff_max_ms => 3600000) as id`,
      longer: `select pgsched.submit_job('charge', idempotency_key => 'longer', backoff_base_ms => 5000, backoff_max_ms => 7200000) as id`,
    }
    const ids: Record<string, string> = {}
    for (const [key, statement] of Object.entries(submits)) ids[key] = (await onDatabase<{ id: string }>(before.url, statement))[0]?.id as string
    await migrate({ databaseUrl: before.url })
    // repeats of the submits made before return their jobs
    for (const [key, statement] of Object.entries(submits)) expect((await onDatabase<{ id: string }>(before.url, statement))[0]?.id, key).toBe(ids[key])
    expect((await onDatabase<{ id: string }>(before.url, `select pgsched.submit_job('charge', idempotency_key => 'given') as id`))[0]?.id).toBe(ids.given)
    // the tenant's other columns still change (a submit's token bucket, its weight); a new such name is refused
    await onDatabase(before.url, `update pgsched.tenants set weight = 2, submit_tokens = 1, submit_tokens_at = now() where name = 'old name'`)
    expect(await onDatabase(before.url, `select name, weight from pgsched.tenants`)).toEqual([{ name: 'old name', weight: 2 }])
    await expect(onDatabase(before.url, `insert into pgsched.tenants (name, max_pending) values ('new name', 10)`)).rejects.toMatchObject({ code: '22023' })
  })
})
