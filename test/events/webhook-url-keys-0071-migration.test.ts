/**
 * Migration 0071 on a database holding subscriptions whose URLs differ only in a fragment, dot
 * segments or a port written with leading zeros (distinct receivers before it): it does not fail,
 * keeps each as it was and marks the later ones as repeating the first. And the cancels of a
 * disabling take no subtransaction per delivery job: pgsched.cancel_job_unless_ended says what it did
 * rather than raising, and pgsched.cancel_job keeps its answers and refusals.
 */
import { sql } from 'kysely'
import { describe, expect, it } from 'vitest'
import { createClient } from '../../src/client.ts'
import { migrate } from '../../src/db/migrate.ts'
import { createDb } from '../../src/db/pool.ts'
import { useDatabaseBefore, useTestDb } from '../db.ts'

const before = useDatabaseBefore('0071')
const t = useTestDb()

describe('migration 0071 (webhook URLs: fragments, dot segments, ports with leading zeros)', () => {
  it('marks the subscriptions repeating an earlier one under the new comparison, keeping their URLs', async () => {
    const url = before.url
    const { db } = createDb({ databaseUrl: url, poolSize: 2 })
    try {
      // as webhookSubscriptionInsert writes them: a subscription and its listener
      const subscribe = async (tenant: string, target: string) => {
        const { rows } = await sql<{ id: string }>`
          with sub as (
            insert into pgsched.webhook_subscriptions (tenant, url, events, queue, secret)
            values (${tenant}, ${target}, '{}', 'default', 'sixteen-chars-ok!') returning id, tenant
          ), listener as (
            insert into pgsched.event_listeners (id, tenant, kind, until) select id, tenant, 'webhook', 'infinity' from sub
          )
          select id from sub`.execute(db)
        return rows[0]?.id as string
      }
      const first = await subscribe('a', 'https://example.com/hook')
      const fragment = await subscribe('a', 'https://example.com/hook#part')
      const dots = await subscribe('a', 'https://example.com/x/../hook')
      const port = await subscribe('a', 'https://example.com:0000443/hook')
      const other = await subscribe('a', 'https://example.com/x/hook')
      const otherTenant = await subscribe('b', 'https://example.com/hook#part')

      await migrate({ databaseUrl: url })
      const { rows } = await sql<{ id: string; url: string; duplicate_of: string | null }>`
        select id, url, duplicate_of from pgsched.webhook_subscriptions order by id`.execute(db)
      expect(rows).toEqual([
        { id: first, url: 'https://example.com/hook', duplicate_of: null },
        { id: fragment, url: 'https://example.com/hook#part', duplicate_of: first },
        { id: dots, url: 'https://example.com/x/../hook', duplicate_of: first },
        { id: port, url: 'https://example.com:0000443/hook', duplicate_of: first },
        { id: other, url: 'https://example.com/x/hook', duplicate_of: null },
        { id: otherTenant, url: 'https://example.com/hook#part', duplicate_of: null },
      ])
      const a = createClient({ db, tenant: 'a' }).webhooks
      await expect(a.create({ url: 'https://example.com/./hook#again' })).rejects.toMatchObject({ name: 'WebhookExistsError', existingId: first })
    } finally {
      await db.destroy()
    }
  })

  it('keys URLs as a URL parser reads them', async () => {
    const key = async (u: string) => (await sql<{ k: string }>`select pgsched.webhook_url_key(${u}) as k`.execute(t.db)).rows[0]?.k
    const cases: Array<[string, string]> = [
      ['HTTPS://Example.COM', 'https://example.com/'],
      ['https://example.com:443', 'https://example.com/'],
      ['https://example.com:00443/a', 'https://example.com/a'],
      ['https://example.com:8443/a', 'https://example.com:8443/a'],
      ['https://example.com:08443/a', 'https://example.com:8443/a'],
      ['http://example.com:0080/a', 'http://example.com/a'],
      ['http://example.com:0/a', 'http://example.com:0/a'],
      ['https://example.com/a/./b/../c?x=/../y#frag', 'https://example.com/a/c?x=/../y'],
      ['https://example.com/a/..', 'https://example.com/'],
      ['https://example.com/a/b/.', 'https://example.com/a/b/'],
      ['https://example.com/../../a', 'https://example.com/a'],
      ['https://example.com/a/%2E%2e/b', 'https://example.com/b'],
      ['https://example.com/a//b', 'https://example.com/a//b'],
      ['https://u:P@Example.com/A', 'https://u:P@example.com/A'],
      ['https://[::1]:443/a', 'https://[::1]/a'],
      ['https://example.com?q', 'https://example.com/?q'],
      ['https://example.com#only', 'https://example.com/'],
    ]
    // the same keys as the WHATWG parser's href without the fragment (what the worker sends)
    for (const [given, expected] of cases) {
      const parsed = new URL(given)
      parsed.hash = ''
      expect(parsed.href.replace(/#$/, ''), given).toBe(expected)
      expect(await key(given), given).toBe(expected)
    }
  })

  it('cancels the deliveries of a disabled subscription with no exception block (a subtransaction per job), leaving the others', async () => {
    const client = createClient({ db: t.db, tenant: 'c' })
    const sub = '01900000-0000-7000-8000-000000000001'
    const submit = (subscriptionId: string, n: number) =>
      client.submitJobs(
        Array.from({ length: n }, (_, i) => ({
          type: 'hook.stand-in',
          queue: 'hooks',
          payload: { subscriptionId, event: { id: `1-${i}`, type: 'succeeded' } },
        })),
      )
    const ids = (await submit(sub, 10)).map((j) => j.id)
    const others = (await submit('01900000-0000-7000-8000-000000000002', 2)).map((j) => j.id)
    // delivery jobs, as the webhook dispatcher writes them (a type the client refuses to submit)
    await sql`update pgsched.jobs set type = 'pgsched.webhook' where id = any(${[...ids, ...others]}::uuid[])`.execute(t.db)
    await sql`update pgsched.due set type = 'pgsched.webhook' where job_id = any(${[...ids, ...others]}::uuid[])`.execute(t.db)
    await client.cancelJob(ids[0] as string)
    const { rows } = await sql<{ n: number }>`select pgsched.webhook_deliveries_cancel('c', 'hooks', ${sub}::uuid, ${ids[1]}::uuid, 1000) as n`.execute(t.db)
    expect(rows[0]?.n).toBe(8)
    const states = await sql<{ id: string; state: string }>`select id, state from pgsched.jobs where id = any(${[...ids, ...others]}::uuid[])`.execute(t.db)
    const stateOf = new Map(states.rows.map((r) => [r.id, r.state]))
    expect(ids.map((id) => stateOf.get(id))).toEqual(['cancelled', 'active', ...Array(8).fill('cancelled')])
    expect(others.map((id) => stateOf.get(id))).toEqual(['active', 'active'])
    // a job that ended between the look-up and its cancel is passed over by an outcome, not an
    // exception caught in a block of its own (each such block a subtransaction that writes: past 64,
    // every other session's snapshots take the slow path until the statement's transaction ends)
    const { rows: source } = await sql<{ src: string }>`
      select prosrc as src from pg_proc where oid = 'pgsched.webhook_deliveries_cancel(text, text, uuid, uuid, integer)'::regprocedure`.execute(t.db)
    expect(source[0]?.src).not.toMatch(/\bexception\b/i)
    // (directly, or since migration 0081 through pgsched.cancel_jobs, which calls it for each job)
    expect(source[0]?.src).toMatch(/pgsched\.cancel_job_unless_ended\(|pgsched\.cancel_jobs\(/)
  })

  it('says what pgsched.cancel_job_unless_ended did instead of raising: cancelled, already cancelled, finished, not found', async () => {
    const client = createClient({ db: t.db, tenant: 'c' })
    const quiet = async (id: string) =>
      (await sql<{ outcome: string; status: string | null }>`select * from pgsched.cancel_job_unless_ended(${id}::uuid)`.execute(t.db)).rows[0]
    const { job } = await client.submitJob({ type: 'mail.send' })
    expect(await quiet(job.id)).toEqual({ outcome: 'cancelled', status: 'SCHEDULED' })
    expect(await quiet(job.id)).toEqual({ outcome: 'already cancelled', status: 'CANCELLED' })
    expect(await quiet('01900000-0000-7000-8000-00000000ffff')).toEqual({ outcome: 'not found', status: null })
    const { job: done } = await client.submitJob({ type: 'mail.send' })
    await finish(done.id)
    expect(await quiet(done.id)).toEqual({ outcome: 'finished', status: 'COMPLETED' })
    expect((await client.viewJob(done.id)).status).toBe('COMPLETED')
  })

  it('keeps pgsched.cancel_job as it was: true, false when cancelled already, refusals for a finished or missing job', async () => {
    const client = createClient({ db: t.db, tenant: 'c' })
    const { job } = await client.submitJob({ type: 'mail.send' })
    const cancel = (id: string) => sql<{ ok: boolean }>`select pgsched.cancel_job(${id}::uuid) as ok`.execute(t.db)
    expect((await cancel(job.id)).rows[0]?.ok).toBe(true)
    expect((await cancel(job.id)).rows[0]?.ok).toBe(false)
    await expect(cancel('01900000-0000-7000-8000-00000000ffff')).rejects.toMatchObject({
      code: 'P0002',
      message: 'job 01900000-0000-7000-8000-00000000ffff not found',
    })
    await expect(sql`select pgsched.cancel_job(null)`.execute(t.db)).rejects.toMatchObject({ code: '22023' })
    const { job: done } = await client.submitJob({ type: 'mail.send' })
    await finish(done.id)
    await expect(cancel(done.id)).rejects.toMatchObject({ code: '55000', message: `job ${done.id} has already finished (COMPLETED); nothing to cancel` })
  })
})

/** Ends a one-time job's execution as a success (its due row moved to the history). */
async function finish(jobId: string): Promise<void> {
  await sql`
    with d as (delete from pgsched.due where job_id = ${jobId}::uuid returning *)
    insert into pgsched.execution_history (id, job_id, queue, type, priority, scheduled_for, run_at, state, attempt, max_attempts, timeout_ms, tenant, finished_at, started_at)
    select execution_id, job_id, queue, type, priority, scheduled_for, run_at, 'succeeded', 1, max_attempts, timeout_ms, tenant, now(), now() from d`.execute(
    t.db,
  )
}
