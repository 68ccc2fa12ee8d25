import { describe, expect, it } from 'vitest'
import pg from 'pg'
import { CamelCasePlugin, type CompiledQuery, Kysely, PostgresDialect, sql, type Transaction } from 'kysely'
import { waitFor } from './wait-for.ts'
import { createClient } from '../src/client.ts'
import { BusyError, ConflictError, InvalidStateError, NotFoundError, ValidationError } from '../src/errors.ts'
import { lockWaiters, useTestDb } from './db.ts'
import { executionClaimBatch, executionClaimBatchQuery } from '../src/db/queries/claim.ts'

const CLAIMER = '01900000-0000-7000-8000-00000000c1a1'

const t = useTestDb()
const client = () => createClient({ db: t.db, tenant: 'acme' })

async function executionsOf(jobId: string) {
  return t.db.selectFrom('pgsched.executions').selectAll().where('job_id', '=', jobId).execute()
}

describe('client.submitJob', () => {
  it('stores a job due now with one pending execution', async () => {
    const { job, created } = await client().submitJob({ type: 'email.send', payload: { to: 'a@b.c' }, priority: 5 })
    expect(created).toBe(true)
    expect(job).toMatchObject({ type: 'email.send', queue: 'default', priority: 5, status: 'SCHEDULED', payload: { to: 'a@b.c' } })
    const rows = await executionsOf(job.id)
    expect(rows).toHaveLength(1)
    expect(rows[0]).toMatchObject({ state: 'pending', attempt: 0, priority: 5, id: job.lastExecution?.id })
    expect(await client().viewJob(job.id)).toMatchObject({ id: job.id, status: 'SCHEDULED', nextRunAt: rows[0]?.run_at })
  })

  it('stores a delayed job with its execution at the given instant', async () => {
    const { job } = await client().submitJob({ type: 'report', schedule: { at: '2031-05-01T09:00:00Z' } })
    const rows = await executionsOf(job.id)
    expect(rows[0]?.run_at.toISOString()).toBe('2031-05-01T09:00:00.000Z')
    expect((await client().viewJob(job.id)).nextRunAt?.toISOString()).toBe('2031-05-01T09:00:00.000Z')
  })

  it('stores a cron job as a trigger with its next fire time in the time zone', async () => {
    const c = createClient({ db: t.db, tenant: 'acme' })
    const { job } = await c.submitJob({ type: 'digest', schedule: { cron: '0 9 * * *', timezone: 'Europe/Berlin' }, startAt: '2030-01-01T12:00:00Z' })
    expect(await executionsOf(job.id)).toHaveLength(0)
    const view = await c.viewJob(job.id)
    expect(view.schedule).toMatchObject({ kind: 'cron', cron: '0 9 * * *', timezone: 'Europe/Berlin', misfirePolicy: 'fire_once' })
    expect(view.nextRunAt?.toISOString()).toBe('2030-01-02T08:00:00.000Z')
  })

  it('returns the same job for a repeated idempotency key and body, and rejects a different body', async () => {
    const first = await client().submitJob({ type: 'charge', payload: { cents: 100 }, idempotencyKey: 'k1' })
    const again = await client().submitJob({ type: 'charge', payload: { cents: 100 }, idempotencyKey: 'k1' })
    expect(again).toMatchObject({ created: false, job: { id: first.job.id } })
    await expect(client().submitJob({ type: 'charge', payload: { cents: 200 }, idempotencyKey: 'k1' })).rejects.toBeInstanceOf(ConflictError)
    const other = await createClient({ db: t.db, tenant: 'globex' }).submitJob({ type: 'charge', payload: { cents: 100 }, idempotencyKey: 'k1' })
    expect(other.created).toBe(true)
    expect(other.job.id).not.toBe(first.job.id)
  })

  it('creates one job when the same key is submitted concurrently', async () => {
    const results = await Promise.all(Array.from({ length: 8 }, () => client().submitJob({ type: 'charge', payload: { n: 1 }, idempotencyKey: 'race' })))
    expect(new Set(results.map((r) => r.job.id)).size).toBe(1)
    expect(results.filter((r) => r.created)).toHaveLength(1)
  })

  it('names every invalid field', async () => {
    const err = await client()
      .submitJob({ type: 'bad type', priority: 5000, schedule: { cron: '* * *', timezone: 'Mars/Olympus' } } as never)
      .catch((e: unknown) => e)
    expect(err).toBeInstanceOf(ValidationError)
    const paths = (err as ValidationError).details?.map((d) => d.path)
    expect(paths).toEqual(['type', 'priority', 'schedule.cron', 'schedule.timezone'])
    expect((err as Error).message).toContain('Mars/Olympus')
  })

  it('refuses a payload JSON.stringify would throw on or lose without a word (a BigInt, a bare function or symbol, a Map, a Set, a circular structure), naming where', async () => {
    const circular = () => {
      const order: Record<string, unknown> = { id: 1, customer: { name: 'a' } }
      ;(order.customer as Record<string, unknown>).lastOrder = order
      return { order }
    }
    const cases: Array<[unknown, string, string]> = [
      [{ amount: 1n }, 'payload.amount', 'payload.amount must be a JSON value, not a BigInt (give it as a number within ±2^53 or as a string)'],
      [() => 1, 'payload', 'payload must be a JSON value, not a function'],
      [Symbol('s'), 'payload', 'payload must be a JSON value, not a symbol'],
      [{ m: new Map([['a', 1]]) }, 'payload.m', 'payload.m must be a JSON value, not a Map (give an object)'],
      [{ list: [new Set([1])] }, 'payload.list.0', 'payload.list.0 must be a JSON value, not a Set (give an array)'],
      [circular(), 'payload.order.customer.lastOrder', 'payload.order.customer.lastOrder must not contain itself (a circular structure has no JSON form)'],
    ]
    for (const [payload, path, message] of cases) {
      const err = await client()
        .submitJob({ type: 'json', payload })
        .catch((e: unknown) => e)
      expect(err, path).toBeInstanceOf(ValidationError)
      expect((err as ValidationError).details, path).toEqual([{ path, message }])
    }
  })

  it('refuses a pool size that is not an integer from 1 to 1000, or one given with a pool of the caller’s, naming it', () => {
    for (const poolSize of [0, -1, 1.5, '3', 1001, Number.NaN]) {
      let err: unknown
      try {
        createClient({ databaseUrl: t.url, poolSize: poolSize as number })
      } catch (e: unknown) {
        err = e
      }
      expect(err, String(poolSize)).toBeInstanceOf(ValidationError)
      expect((err as Error).message).toBe(
        `poolSize must be an integer from 1 to 1000 (got ${typeof poolSize === 'number' ? String(poolSize) : JSON.stringify(poolSize)})`,
      )
    }
    expect(() => createClient({ db: t.db, poolSize: 4 })).toThrow(ValidationError)
  })

  it('refuses a batch whose payloads together are over 64 MiB of JSON, before building its statement', async () => {
    const big = 'x'.repeat(1_000_000)
    const err = await client()
      .submitJobs(Array.from({ length: 70 }, (_, i) => ({ type: 'big', payload: { i, big } })))
      .catch((e: unknown) => e)
    expect(err).toBeInstanceOf(ValidationError)
    expect((err as Error).message).toBe(
      'the payloads of a batch are at most 64 MiB of JSON together; these 70 jobs have 67 MiB: submit them in smaller batches',
    )
    expect(await t.db.selectFrom('pgsched.jobs').select('id').where('type', '=', 'big').execute()).toEqual([])
  })

  it('takes a payload holding one object in several places, which is not circular', async () => {
    const shared = { n: 1 }
    const { job } = await client().submitJob({ type: 'json', payload: { twice: [shared, shared], again: { shared } } })
    expect((await client().viewJob(job.id)).payload).toEqual({ twice: [{ n: 1 }, { n: 1 }], again: { shared: { n: 1 } } })
  })

  it('keeps a payload as JSON.stringify writes it: toJSON results, methods left out, functions in arrays as null', async () => {
    class Money {
      readonly cents: number
      format = () => `$${this.cents / 100}`
      constructor(cents: number) {
        this.cents = cents
      }
      toJSON() {
        return { cents: this.cents }
      }
    }
    const proto = BigInt.prototype as unknown as { toJSON?: () => string }
    proto.toJSON = function (this: bigint) {
      return this.toString()
    }
    try {
      const payload = { at: new Date('2030-01-01T00:00:00Z'), price: new Money(500), big: 2n ** 70n, gone: undefined, run: () => 1, list: [1, () => 2] }
      const { job } = await client().submitJob({ type: 'json', payload })
      expect(job.payload).toEqual(JSON.parse(JSON.stringify(payload)))
      expect(job.payload).toEqual({ at: '2030-01-01T00:00:00.000Z', price: { cents: 500 }, big: '1180591620717411303424', list: [1, null] })
    } finally {
      delete proto.toJSON
    }
  })

  it('commits with the caller transaction and disappears when it rolls back (Kysely and pg)', async () => {
    const kept = await t.db.transaction().execute((trx) => client().submitJob({ type: 'a' }, { trx }))
    await expect(
      t.db.transaction().execute(async (trx) => {
        await client().submitJob({ type: 'b' }, { trx })
        throw new Error('caller fails')
      }),
    ).rejects.toThrow('caller fails')
    const conn = new pg.Client({ connectionString: t.url })
    await conn.connect()
    await conn.query('begin')
    const rolled = await client().submitJob({ type: 'c' }, { trx: conn })
    await conn.query('rollback')
    await conn.end()
    const types = (await t.db.selectFrom('pgsched.jobs').select('type').execute()).map((r) => r.type)
    expect(types).toEqual(['a'])
    expect(kept.job.type).toBe('a')
    await expect(client().viewJob(rolled.job.id)).rejects.toBeInstanceOf(NotFoundError)
  })
})

describe("an application's own Kysely", () => {
  /** The application's tables: none of pgsched's. */
  interface AppDB {
    app_users: { id: number; name: string }
  }

  it('takes a transaction typed with its own tables, and reads jobs right through a CamelCasePlugin', async () => {
    const app = new Kysely<AppDB>({
      dialect: new PostgresDialect({ pool: new pg.Pool({ connectionString: t.url, max: 2 }) }),
      plugins: [new CamelCasePlugin()],
    })
    try {
      const submitted = await app.transaction().execute((trx) => client().submitJob({ type: 'camel', maxAttempts: 4, schedule: { every: '1h' } }, { trx }))
      const viaPool = await client().viewJob(submitted.job.id)
      const viaTrx = await app.transaction().execute((trx) => client().viewJob(submitted.job.id, { trx }))
      // the plugin would rename max_attempts, created_at, next_fire_at...: a pending job read as finished
      expect(viaTrx).toEqual(viaPool)
      expect(viaTrx).toMatchObject({ status: 'SCHEDULED', maxAttempts: 4 })
      const own = createClient({ db: app, tenant: 'acme' })
      expect((await own.viewJob(submitted.job.id)).status).toBe('SCHEDULED')
      expect((await own.listJobs()).items.find((j) => j.id === submitted.job.id)?.maxAttempts).toBe(4)
    } finally {
      await app.destroy()
    }
  })

  it("runs on a transaction of another copy of kysely (not pgsched's), and commits or rolls back with it", async () => {
    /** What another copy's Transaction offers: not an instance of pgsched's Kysely class. */
    const foreign = (trx: Transaction<unknown>) => {
      const copy = {
        isTransaction: true,
        withoutPlugins: () => copy,
        executeQuery: (query: CompiledQuery) => trx.executeQuery(query),
        transaction: () => {
          throw new Error('not on a transaction')
        },
      }
      return copy
    }
    const kept = await t.db.transaction().execute((trx) => client().submitJob({ type: 'foreign-kept' }, { trx: foreign(trx as Transaction<unknown>) }))
    await expect(
      t.db.transaction().execute(async (trx) => {
        await client().submitJob({ type: 'foreign-rolled' }, { trx: foreign(trx as Transaction<unknown>) })
        throw new Error('caller fails')
      }),
    ).rejects.toThrow('caller fails')
    expect((await client().viewJob(kept.job.id)).type).toBe('foreign-kept')
    const types = (await t.db.selectFrom('pgsched.jobs').select('type').where('type', 'like', 'foreign-%').execute()).map((r) => r.type)
    expect(types).toEqual(['foreign-kept'])
    // neither a Kysely nor a pg client: named
    await expect(client().submitJob({ type: 'x' }, { trx: {} as pg.ClientBase })).rejects.toThrow(
      'trx must be a Kysely instance or transaction, or a pg client',
    )
  })
})

describe('a client on a pool of one connection', () => {
  it('submits (one, several at once, a batch, a schedule), with and without admission quotas, and reads, none waiting for a second connection', async () => {
    await sql`insert into pgsched.tenants (name, max_pending) values ('one-conn-quota', 1000)`.execute(t.db)
    for (const tenant of ['one-conn', 'one-conn-quota']) {
      for (const batchSubmits of [true, false]) {
        const own = createClient({ databaseUrl: t.url, tenant, poolSize: 1, batchSubmits })
        try {
          // a call that waited for a second connection would hold its transaction open until the
          // server's idle-in-transaction timeout ended it (10 s): each must end well before
          const quick = async <T>(what: string, call: Promise<T>): Promise<T> => {
            const started = performance.now()
            const result = await call
            expect(performance.now() - started, what).toBeLessThan(5_000)
            return result
          }
          // first: nothing read yet (whether the tenant has quotas is kept for a second)
          const batch = await quick('submitJobs', own.submitJobs([{ type: 'batch' }, { type: 'batch', idempotencyKey: `k-${tenant}-${batchSubmits}` }]))
          expect(batch).toHaveLength(2)
          const { job } = await quick('submitJob', own.submitJob({ type: 'one' }))
          await quick('submitJob ×5', Promise.all(Array.from({ length: 5 }, () => own.submitJob({ type: 'five' }))))
          await quick('a schedule', own.submitJob({ type: 'cron', schedule: { cron: '*/5 * * * *' } }))
          expect((await quick('viewJob', own.viewJob(job.id))).id).toBe(job.id)
          await quick('cancelJob', own.cancelJob(job.id))
        } finally {
          await own.close()
        }
      }
      const { rows } = await sql<{ n: number }>`select count(*)::int as n from pgsched.jobs where tenant = ${tenant}`.execute(t.db)
      expect(rows[0]?.n).toBe(2 * 9)
    }
  })
})

describe('client.close', () => {
  it('lets the calls in flight end before it closes its pool, and refuses submits made after', async () => {
    for (const batchSubmits of [true, false]) {
      const own = createClient({ databaseUrl: t.url, tenant: 'acme', poolSize: 2, batchSubmits })
      await own.submitJob({ type: 'warm' })
      const calls = Array.from({ length: 20 }, (_, i) => own.submitJob({ type: 'closing', payload: { i, batchSubmits } }))
      const closed = own.close()
      const settled = await Promise.allSettled(calls)
      await closed
      // every submit made before close() began is written (none left waiting for ever, none cut off)
      expect(settled.map((s) => (s.status === 'rejected' ? String(s.reason) : s.status))).toEqual(Array(20).fill('fulfilled'))
      await expect(own.submitJob({ type: 'late' })).rejects.toThrow()
    }
    const { rows } = await sql<{ n: number }>`select count(*)::int as n from pgsched.jobs where type = 'closing'`.execute(t.db)
    expect(rows[0]?.n).toBe(40)
  })
})

describe('client.close with an event stream open', () => {
  it('ends the stream: a loop over it ends without an error, whether it waits for events or a page is being read', async () => {
    for (const busy of [false, true]) {
      const own = createClient({ databaseUrl: t.url, tenant: 'streaming', poolSize: 2 })
      const stream = await own.events({ pollIntervalMs: busy ? 1 : 60_000 })
      await own.submitJob({ type: 'before-close' })
      const seen: string[] = []
      const loop = (async () => {
        for await (const event of stream) seen.push(event.type)
      })()
      await waitFor(() => seen.includes('submitted'), { what: 'the submitted event' })
      await own.close()
      // the loop ends, and with no error (the pool closed under a statement threw "driver has already been destroyed")
      await expect(loop).resolves.toBeUndefined()
      expect(seen).toEqual(['submitted'])
    }
  })

  it('holds more than ten streams waiting for events at once without a warning of an abort listener leak', async () => {
    const warnings: string[] = []
    const onWarning = (w: Error) => warnings.push(`${w.name}: ${w.message}`)
    process.on('warning', onWarning)
    try {
      const own = createClient({ databaseUrl: t.url, tenant: 'many-streams', poolSize: 2 })
      const streams = await Promise.all(Array.from({ length: 12 }, () => own.events({ pollIntervalMs: 60_000 })))
      await own.submitJob({ type: 'many-streams' })
      const seen = streams.map(() => [] as string[])
      const loops = streams.map(async (stream, i) => {
        for await (const event of stream) seen[i]?.push(event.type)
      })
      await waitFor(() => seen.every((s) => s.includes('submitted')), { what: 'the submitted event on every stream' })
      // each stream goes on to wait for its next poll, with no statement in between
      await new Promise((resolve) => setImmediate(resolve))
      await own.close()
      await Promise.all(loops)
      await new Promise((resolve) => setImmediate(resolve))
      expect(warnings.filter((w) => w.startsWith('MaxListenersExceededWarning'))).toEqual([])
    } finally {
      process.off('warning', onWarning)
    }
  })
})

describe('createClient({ pool })', () => {
  it("runs on the application's pg Pool and leaves it open on close()", async () => {
    const pool = new pg.Pool({ connectionString: t.url, max: 2 })
    try {
      const client = createClient({ pool, tenant: 'pooled' })
      const { job } = await client.submitJob({ type: 'pooled', payload: { n: 1 } })
      expect((await client.viewJob(job.id)).payload).toEqual({ n: 1 })
      await client.submitJobs([{ type: 'pooled' }, { type: 'pooled' }])
      await client.close()
      expect((await pool.query<{ n: number }>("select count(*)::int as n from pgsched.jobs where tenant = 'pooled'")).rows[0]?.n).toBe(3)
    } finally {
      await pool.end()
    }
    expect(() => createClient({})).toThrow('createClient needs databaseUrl, db or pool')
  })

  it('refuses a pg Pool given as trx, whose statements would each commit on their own', async () => {
    const pool = new pg.Pool({ connectionString: t.url, max: 2 })
    try {
      const c = client()
      await c.submitJobs([{ type: 'charge', payload: { cents: 1 }, idempotencyKey: 'k1' }])
      const message =
        'trx must be a transaction or a connection in one, not a pg Pool: on a pool each statement runs on any of its connections and commits on its own; pass a client from pool.connect() inside your begin … commit, or give the pool to createClient({ pool })'
      const err = await c
        .submitJobs([{ type: 'refund' }, { type: 'charge', payload: { cents: 2 }, idempotencyKey: 'k1' }], { trx: pool as never })
        .catch((e: unknown) => e)
      expect(err).toBeInstanceOf(ValidationError)
      expect(err).toMatchObject({ message, details: [{ path: 'trx', message }] })
      for (const call of [() => c.submitJob({ type: 'refund' }, { trx: pool as never }), () => c.listJobs({}, { trx: pool as never })]) {
        await expect(call()).rejects.toThrow(message)
      }
      // all or none: nothing of the refused batch was written
      expect((await t.db.selectFrom('pgsched.jobs').select('type').execute()).map((r) => r.type)).toEqual(['charge'])
    } finally {
      await pool.end()
    }
  })
})

describe('client.submitJob group commit', () => {
  it('writes concurrent submits in fewer transactions, each with its own job', async () => {
    const c = client()
    const results = await Promise.all(Array.from({ length: 60 }, (_, i) => c.submitJob({ type: 'batched', payload: { i } })))
    expect(new Set(results.map((r) => r.job.id)).size).toBe(60)
    for (const r of results) expect(r.job).toMatchObject({ type: 'batched', status: 'SCHEDULED' })
    const { rows } = await sql<{ i: number }>`select (payload->>'i')::int as i from pgsched.jobs where type = 'batched' order by 1`.execute(t.db)
    expect(rows.map((r) => r.i)).toEqual(Array.from({ length: 60 }, (_, i) => i))
    const { rows: e } = await sql<{
      n: number
    }>`select count(*)::int as n from pgsched.executions where job_id = any(${results.map((r) => r.job.id)}::uuid[])`.execute(t.db)
    expect(e[0]?.n).toBe(60)
    // Each row's xmin names the transaction that inserted it.
    const { rows: tx } = await sql<{ n: number }>`select count(distinct xmin::text)::int as n from pgsched.jobs where type = 'batched'`.execute(t.db)
    expect(tx[0]?.n).toBeLessThan(30)
  })

  it('holds submits made while an insert is in flight for the next one, rather than starting a second beside it', async () => {
    const c = client()
    const results = await Promise.all(Array.from({ length: 31 }, (_, i) => c.submitJob({ type: 'grouped', payload: { i } })))
    expect(new Set(results.map((r) => r.job.id)).size).toBe(31)
    // the first alone (nothing was in flight), the other 30 together after it: two transactions
    // (a second insert beside the first would have taken the second submit alone, and made three)
    const { rows } = await sql<{ n: number }>`select count(distinct xmin::text)::int as n from pgsched.jobs where type = 'grouped'`.execute(t.db)
    expect(rows[0]?.n).toBe(2)
  })

  it("starts a second insert beside one held up, so that one tenant's submit waiting for a lock does not hold up another's", async () => {
    await sql`insert into pgsched.tenants (name, max_pending) values ('held-up', 1000)`.execute(t.db)
    const holder = await t.pool.connect()
    let own: ReturnType<typeof createClient> | undefined
    try {
      // a long transaction holds the tenant's admission row: its submits wait for it
      await holder.query('begin')
      await holder.query(`select 1 from pgsched.tenants where name = 'held-up' for update`)
      // its own pool: it reads afresh which tenants have quotas
      own = createClient({ databaseUrl: t.url, tenant: 'acme', poolSize: 4 })
      const c = own
      const waiting = c
        .withTenant('held-up')
        .submitJob({ type: 'waits' })
        .catch((err: unknown) => err)
      await waitFor(async () => (await lockWaiters(t.db)) === 1, { what: 'the held-up submit to wait for the lock' })
      const started = performance.now()
      const { job } = await c.submitJob({ type: 'goes-on' })
      // well before the held-up one gives up (ADMISSION_LOCK_WAIT_MS, 2 s)
      expect(performance.now() - started).toBeLessThan(1_000)
      expect(job.status).toBe('SCHEDULED')
      expect(await waiting).toBeInstanceOf(BusyError)
    } finally {
      await holder.query('rollback')
      holder.release()
      await own?.close()
    }
  })

  it('keeps a submit the database refuses from failing the others written with it', async () => {
    await sql`create function pg_temp_explode() returns trigger language plpgsql as $$
              begin if new.payload->>'explode' = 'yes' then raise exception 'exploded on purpose'; end if; return new; end $$`.execute(t.db)
    await sql`create trigger explode before insert on pgsched.jobs for each row execute function pg_temp_explode()`.execute(t.db)
    try {
      const c = client()
      const results = await Promise.allSettled(
        Array.from({ length: 60 }, (_, i) => c.submitJob({ type: 'batched', payload: i === 30 ? { explode: 'yes' } : { i } })),
      )
      expect(results.map((r, i) => (r.status === 'rejected' ? i : -1)).filter((i) => i >= 0)).toEqual([30])
      expect(String((results[30] as PromiseRejectedResult).reason)).toContain('exploded on purpose')
      const { rows } = await sql<{ n: number }>`select count(*)::int as n from pgsched.jobs where type = 'batched'`.execute(t.db)
      expect(rows[0]?.n).toBe(59)
    } finally {
      await sql`drop trigger explode on pgsched.jobs`.execute(t.db)
      await sql`drop function pg_temp_explode()`.execute(t.db)
    }
  })

  it('returns the existing job to concurrent submits with the same idempotency key and body', async () => {
    const c = client()
    const results = await Promise.all(Array.from({ length: 10 }, () => c.submitJob({ type: 'once', idempotencyKey: 'k-1', payload: { a: 1 } })))
    expect(new Set(results.map((r) => r.job.id)).size).toBe(1)
    expect(results.filter((r) => r.created)).toHaveLength(1)
  })
})

describe('client.submitJobs', () => {
  it('inserts thousands of jobs with their executions', async () => {
    const inputs = Array.from({ length: 5000 }, (_, i) => ({ type: 'noop', payload: { i }, priority: i % 3 }))
    const ids = await client().submitJobs(inputs)
    expect(ids).toHaveLength(5000)
    const count = await t.db
      .selectFrom('pgsched.executions')
      .select((eb) => eb.fn.countAll<string>().as('n'))
      .executeTakeFirst()
    expect(count?.n).toBe('5000')
  })

  it('rejects the whole batch, naming the index, when one job is invalid', async () => {
    await expect(client().submitJobs([{ type: 'ok' }, { type: 'ok', priority: 2.5 }])).rejects.toThrow('jobs[1]: priority must be an integer')
    expect(await t.db.selectFrom('pgsched.jobs').selectAll().execute()).toEqual([])
  })

  it('refuses jobs given other than as an array (from JavaScript), naming what it takes', async () => {
    for (const inputs of [{ type: 'one' }, 'one', null, undefined]) {
      const err = await client()
        .submitJobs(inputs as never)
        .catch((e: unknown) => e)
      expect(err).toBeInstanceOf(ValidationError)
      expect((err as ValidationError).message).toMatch(
        /^submitJobs takes an array of jobs, got (an object|a string|null|undefined)( \(for one job, use submitJob\))?$/,
      )
    }
    expect(await t.db.selectFrom('pgsched.jobs').selectAll().execute()).toEqual([])
  })
})

describe('client.listJobs', () => {
  it('pages newest first with a cursor and filters by status, type and queue', async () => {
    const ids = (await client().submitJobs(Array.from({ length: 7 }, (_, i) => ({ type: i % 2 ? 'odd' : 'even', queue: 'q' })))).map((r) => r.id)
    const first = await client().listJobs({ limit: 3 })
    const second = await client().listJobs({ limit: 3, cursor: first.nextCursor ?? undefined })
    const third = await client().listJobs({ limit: 3, cursor: second.nextCursor ?? undefined })
    expect([...first.items, ...second.items, ...third.items].map((j) => j.id)).toEqual([...ids].reverse())
    expect(third.nextCursor).toBeNull()
    expect((await client().listJobs({ type: 'odd' })).items).toHaveLength(3)
    expect((await client().listJobs({ status: 'SCHEDULED', queue: 'q' })).items).toHaveLength(7)
    expect((await client().listJobs({ status: 'COMPLETED' })).items).toHaveLength(0)
    expect((await createClient({ db: t.db, tenant: 'other' }).listJobs()).items).toHaveLength(0)
  })

  it('rejects a forged cursor', async () => {
    await expect(client().listJobs({ cursor: 'bm90LWEtdXVpZA' })).rejects.toThrow('cursor is invalid')
  })
})

/** The ValidationError a call refuses with, or a failure naming what it did instead. */
async function refused(call: () => unknown): Promise<ValidationError> {
  const outcome = await (async () => call())().then(
    (value) => ({ value }),
    (err: unknown) => ({ err }),
  )
  if (!('err' in outcome)) throw new Error(`not refused; answered ${JSON.stringify(outcome.value)?.slice(0, 200)}`)
  expect(outcome.err).toBeInstanceOf(ValidationError)
  return outcome.err as ValidationError
}
/** The details of the ValidationError a call refuses with. */
const refusal = async (call: () => unknown): Promise<unknown> => (await refused(call)).details
const unknown = (path: string) => [{ path, message: `unknown field "${path}"` }]

describe('list calls from plain JavaScript', () => {
  it('refuses a filter key listJobs does not know, naming it, rather than listing every job', async () => {
    const c = client()
    await c.submitJob({ type: 'x' })
    expect(await refusal(() => c.listJobs({ statuss: 'FAILED' } as never))).toEqual(unknown('statuss'))
    expect(await refusal(() => c.allTenants().listJobs({ statuss: 'FAILED' } as never))).toEqual(unknown('statuss'))
    expect(await refusal(() => c.listJobs('FAILED' as never))).toEqual([{ path: '', message: 'listJobs params must be an object' }])
    // a key left undefined is no filter, as with a submit's fields
    expect((await c.listJobs({ status: 'SCHEDULED', statuss: undefined } as never)).items).toHaveLength(1)
  })

  it('refuses a bulk filter key it does not know instead of acting on every job', async () => {
    const c = client()
    const { job } = await c.submitJob({ type: 'x' })
    expect(await refusal(() => c.bulkJobs({ action: 'cancel', filter: { statuss: 'FAILED' } as never }))).toEqual(unknown('filter.statuss'))
    expect(await refusal(() => c.bulkJobs({ action: 'cancel', filter: { all: true }, limt: 1 } as never))).toEqual(unknown('limt'))
    expect((await c.viewJob(job.id)).status).toBe('SCHEDULED')
  })

  it('refuses unknown keys in every other list call with a filter or page object', async () => {
    const c = client()
    const { job } = await c.submitJob({ type: 'x' })
    const hook = await c.webhooks.create({ url: 'https://example.com/hook' })
    expect(await refusal(() => c.exportJobs({ queu: 'q' } as never).next())).toEqual(unknown('queu'))
    expect(await refusal(() => c.listExecutions(job.id, { limt: 5 } as never))).toEqual(unknown('limt'))
    expect(await refusal(() => c.listFailures({ queu: 'q' } as never))).toEqual(unknown('queu'))
    expect(await refusal(() => c.listSchedules({ limt: 5 } as never))).toEqual(unknown('limt'))
    expect(await refusal(() => c.stats({ minuts: 5 } as never))).toEqual(unknown('minuts'))
    expect(await refusal(() => c.listQueues({ tenat: 'acme' } as never))).toEqual(unknown('tenat'))
    expect(await refusal(() => c.webhooks.deliveries(hook.id, { limt: 5 } as never))).toEqual(unknown('limt'))
    expect(await refusal(() => c.events({ queu: 'q' } as never))).toEqual(unknown('queu'))
  })
})

describe('option objects from plain JavaScript', () => {
  const jobTypes = async () => (await t.db.selectFrom('pgsched.jobs').select('type').orderBy('type').execute()).map((r) => r.type)

  it("refuses a call option it does not know rather than running outside the caller's transaction", async () => {
    const c = client()
    await expect(
      t.db.transaction().execute(async (trx) => {
        const err = await refused(() => c.submitJob({ type: 'misspelt' }, { tx: trx } as never))
        expect(err.details).toEqual(unknown('options.tx'))
        expect(err.message).toBe('unknown field "options.tx" (known: trx, traceContext)')
        // the transaction itself in place of { trx } would be run outside it just the same
        expect(await refusal(() => c.submitJob({ type: 'bare' }, trx as never))).toEqual([
          { path: 'options', message: 'options must be an object such as { trx }, not the transaction or client itself' },
        ])
        expect(await refusal(() => c.submitJobs([{ type: 'many' }], { tx: trx } as never))).toEqual(unknown('options.tx'))
        // a key left undefined is no option, as with a list call's filter
        await c.submitJob({ type: 'inside' }, { trx, tx: undefined } as never)
        throw new Error('caller rolls back')
      }),
    ).rejects.toThrow('caller rolls back')
    expect(await jobTypes()).toEqual([])
  })

  it('refuses an unknown option on every call that takes call options', async () => {
    const c = client()
    const { job } = await c.submitJob({ type: 'x', schedule: { every: '1h' } })
    const { job: once } = await c.submitJob({ type: 'once' })
    const executionId = once.lastExecution?.id as string
    const calls: Array<[string, (o: never) => Promise<unknown>]> = [
      ['viewJob', (o) => c.viewJob(job.id, o)],
      ['listJobs', (o) => c.listJobs({}, o)],
      ['listExecutions', (o) => c.listExecutions(once.id, {}, o)],
      ['viewExecution', (o) => c.viewExecution(executionId, o)],
      ['pauseJob', (o) => c.pauseJob(job.id, o)],
      ['resumeJob', (o) => c.resumeJob(job.id, o)],
      ['cancelJob', (o) => c.cancelJob(job.id, o)],
    ]
    for (const [name, call] of calls) expect([name, await refusal(() => call({ tx: t.db } as never))]).toEqual([name, unknown('options.tx')])
    // a pg client in place of { trx }: named as such, not by its own keys
    expect(await refusal(() => c.cancelJob(job.id, new pg.Client() as never))).toEqual([
      { path: 'options', message: 'options must be an object such as { trx }, not the transaction or client itself' },
    ])
    expect((await c.viewJob(job.id)).status).toBe('SCHEDULED')
    // none given: undefined, or null from JavaScript
    expect((await c.viewJob(job.id, null as never)).status).toBe('SCHEDULED')
  })

  it("refuses a second argument to retryJob, rerunJob, deleteJob and bulkJobs, which take no options, rather than acting outside the caller's transaction", async () => {
    const c = client()
    const { job } = await c.submitJob({ type: 'x' })
    await c.cancelJob(job.id)
    /** A call of `scope` with the arguments JavaScript may give it. */
    const call =
      (scope: object, name: 'retryJob' | 'rerunJob' | 'deleteJob' | 'bulkJobs', ...args: unknown[]) =>
      () =>
        (Reflect.get(scope, name) as (...a: unknown[]) => Promise<unknown>).apply(scope, args)
    const noOptions = (name: string) => {
      const message = `${name} takes no options: it runs in a transaction of its own, never in the caller's (it has no trx)`
      return { message, details: [{ path: 'options', message }] }
    }
    const bulk = { action: 'delete', filter: { ids: [job.id] } }
    await expect(
      t.db.transaction().execute(async (trx) => {
        for (const [name, refusedCall] of [
          ['retryJob', call(c, 'retryJob', job.id, { trx })],
          ['rerunJob', call(c, 'rerunJob', job.id, { trx })],
          ['deleteJob', call(c, 'deleteJob', job.id, { trx })],
          ['bulkJobs', call(c, 'bulkJobs', bulk, { trx })],
        ] as const) {
          const err = await refused(refusedCall)
          expect({ message: err.message, details: err.details }).toEqual(noOptions(name))
        }
        throw new Error('caller rolls back')
      }),
    ).rejects.toThrow('caller rolls back')
    // nothing was retried, rerun or deleted, in the transaction or outside it
    expect((await c.viewJob(job.id)).status).toBe('CANCELLED')
    // every tenant's scope alike, and any value but undefined (null, a pg client)
    expect(await refusal(call(c.allTenants(), 'rerunJob', job.id, null))).toEqual(noOptions('rerunJob').details)
    expect(await refusal(call(c, 'deleteJob', job.id, new pg.Client()))).toEqual(noOptions('deleteJob').details)
    // undefined is none
    expect(((await call(c, 'retryJob', job.id, undefined)()) as { status: string }).status).toBe('SCHEDULED')
  })

  it("refuses an argument past those every other method takes, reads and writes alike, rather than ignoring it (a { trx } would not be the caller's transaction)", async () => {
    const c = client()
    const { job } = await c.submitJob({ type: 'x' })
    const executionId = job.lastExecution?.id as string
    const hook = await c.webhooks.create({ url: 'https://example.com/hook' })
    /** Calls `name` of `scope` with the arguments JavaScript may give it; its refusal as { message, path }. */
    const refusalOf = async (scope: object, name: string, ...args: unknown[]) => {
      const err = await refused(async () => {
        const result = (Reflect.get(scope, name) as (...a: unknown[]) => unknown).apply(scope, args)
        // an async generator acts (and refuses) on its first next()
        return typeof (result as { next?: unknown })?.next === 'function' ? (result as AsyncGenerator).next() : result
      })
      expect(err.details).toHaveLength(1)
      expect(err.details?.[0]?.message).toBe(err.message)
      return { message: err.message, path: err.details?.[0]?.path }
    }
    const onClient = "it runs on the client's own connections, never in the caller's transaction (it has no trx)"
    const noOptions = (name: string) => ({ message: `${name} takes no options: ${onClient}`, path: 'options' })
    const noArguments = (name: string) => ({ message: `${name} takes no arguments: ${onClient}`, path: 'arguments.0' })
    await expect(
      t.db.transaction().execute(async (trx) => {
        const options = { trx }
        // calls that take no call options: a second (or further) argument, named `options` in its place
        for (const [scope, name, ...args] of [
          [c, 'stats', {}],
          [c, 'listSchedules', {}],
          [c, 'listFailures', {}],
          [c, 'listQueues', {}],
          [c, 'listWebhooks', {}],
          [c, 'tenantOfWebhook', hook.id],
          [c, 'exportJobs', {}],
          [c, 'tenantOfJob', job.id],
          [c, 'tenantOfExecution', executionId],
          [c, 'events', {}],
          [c.allTenants(), 'listJobs', {}],
          [c.allTenants(), 'stats', undefined],
        ] as Array<[object, string, ...unknown[]]>) {
          expect([name, await refusalOf(scope, name, ...args, options)]).toEqual([name, noOptions(name)])
        }
        for (const [name, ...args] of [
          ['create', { url: 'https://example.com/other' }],
          ['view', hook.id],
          ['update', hook.id, { url: 'https://example.com/moved' }],
          ['delete', hook.id],
        ] as Array<[string, ...unknown[]]>) {
          expect(await refusalOf(c.webhooks, name, ...args, options)).toEqual(noOptions(`webhooks.${name}`))
        }
        for (const [name, ...args] of [
          ['view', 'q'],
          ['pause', 'q'],
          ['resume', 'q'],
        ] as Array<[string, ...unknown[]]>) {
          expect(await refusalOf(c.queues, name, ...args, options)).toEqual(noOptions(`queues.${name}`))
        }
        for (const [name, ...args] of [
          ['view', 'acme'],
          ['names', 10],
        ] as Array<[string, ...unknown[]]>) {
          expect(await refusalOf(c.tenants, name, ...args, options)).toEqual(noOptions(`tenants.${name}`))
        }
        // writes with more arguments: the one after their last
        expect(await refusalOf(c.queues, 'setConcurrencyLimit', 'q', 5, options)).toEqual(noOptions('queues.setConcurrencyLimit'))
        expect(await refusalOf(c.queues, 'setKeyConcurrencyLimit', 'q', 5, options)).toEqual(noOptions('queues.setKeyConcurrencyLimit'))
        expect(await refusalOf(c.queues, 'setRateLimit', 'q', 5, 1000, options)).toEqual(noOptions('queues.setRateLimit'))
        expect(await refusalOf(c.queues, 'setKeyRateLimit', 'q', 5, 1000, options)).toEqual(noOptions('queues.setKeyRateLimit'))
        expect(await refusalOf(c.queues, 'setFairShare', 'q', true, options)).toEqual(noOptions('queues.setFairShare'))
        expect(await refusalOf(c.tenants, 'update', 'acme', { weight: 2 }, options)).toEqual(noOptions('tenants.update'))
        expect(await refusalOf(c.webhooks, 'deliveries', hook.id, {}, options)).toEqual(noOptions('webhooks.deliveries'))
        // calls that take no argument at all
        expect(await refusalOf(c, 'listWorkers', options)).toEqual(noArguments('listWorkers'))
        expect(await refusalOf(c, 'listWorkers', { limit: 5 })).toEqual(noArguments('listWorkers'))
        expect(await refusalOf(c.queues, 'list', options)).toEqual(noArguments('queues.list'))
        expect(await refusalOf(c.tenants, 'list', options)).toEqual(noArguments('tenants.list'))
        expect(await refusalOf(c.webhooks, 'list', options)).toEqual(noArguments('webhooks.list'))
        throw new Error('caller rolls back')
      }),
    ).rejects.toThrow('caller rolls back')
    // nothing was changed, in the transaction or outside it
    expect(await c.queues.view('q')).toMatchObject({
      paused: false,
      concurrencyLimit: null,
      keyConcurrencyLimit: null,
      rateLimit: null,
      keyRateLimit: null,
      fairShare: false,
    })
    expect(await c.tenants.view('acme')).toMatchObject({ weight: 1 })
    expect((await c.webhooks.list()).map((w) => w.id)).toEqual([hook.id])
    expect((await c.webhooks.view(hook.id)).url).toBe('https://example.com/hook')
    // calls that take call options: an argument after them, by its place
    const tooMany = (name: string, takes: string) => ({
      message: `${name} takes at most ${takes.split(', ').length} arguments (${takes}), got one more`,
      path: `arguments.${takes.split(', ').length}`,
    })
    for (const [name, takes, ...args] of [
      ['submitJob', 'input, options', { type: 'x' }, {}],
      ['submitJobs', 'inputs, options', [{ type: 'x' }], {}],
      ['viewJob', 'id, options', job.id, {}],
      ['listJobs', 'params, options', {}, {}],
      ['listExecutions', 'jobId, params, options', job.id, {}, {}],
      ['viewExecution', 'id, options', executionId, {}],
      ['cancelJob', 'id, options', job.id, {}],
      ['pauseJob', 'id, options', job.id, {}],
      ['resumeJob', 'id, options', job.id, {}],
    ] as Array<[string, string, ...unknown[]]>) {
      expect([name, await refusalOf(c, name, ...args, 'extra')]).toEqual([name, tooMany(name, takes)])
    }
    // and the client's own
    expect(await refusalOf(c, 'allTenants', 'other')).toEqual({ message: 'allTenants takes no arguments', path: 'arguments.0' })
    expect(await refusalOf(c, 'withTenant', 'other', 'me', 'extra')).toEqual({
      message: 'withTenant takes at most 2 arguments (tenant, createdBy), got one more',
      path: 'arguments.2',
    })
    // but close, handed to callbacks as it is (process.once('SIGTERM', client.close)), ignores what they pass
    const own = createClient({ databaseUrl: t.url, tenant: 'acme' })
    const closeOf = own.close
    await expect((closeOf as (signal: string) => Promise<void>)('SIGTERM')).resolves.toBeUndefined()
    // a call after close is refused as any refusal of the client is: a SchedulerError with its code
    await expect(own.submitJob({ type: 'after-close' })).rejects.toThrow(InvalidStateError)
    await expect(own.submitJob({ type: 'after-close' })).rejects.toMatchObject({
      code: 'invalid_state',
      message: 'the pgsched client is closed: submitJob was called after close()',
    })
    expect(await refusalOf(c, 'retryJob', job.id, undefined, 'extra')).toMatchObject({ path: 'arguments.2' })
    // undefined is no argument
    expect(await c.listWorkers(...([undefined] as unknown as []))).toEqual([])
    expect((await c.viewJob(job.id, undefined, ...([undefined] as unknown as []))).status).toBe('SCHEDULED')
    expect(await c.queues.setFairShare('q', true, ...([undefined] as unknown as []))).toMatchObject({ name: 'q', fairShare: true })
  })

  it('refuses a createClient option it does not know, listing the known ones', async () => {
    const err = await refused(() => createClient({ db: t.db, tenant: 'acme', batchSubmit: false } as never))
    expect(err.details).toEqual(unknown('batchSubmit'))
    expect(err.message).toBe(
      'unknown field "batchSubmit" (known: databaseUrl, poolSize, db, pool, tenant, createdBy, clock, batchSubmits, httpAllow, webhookMaxPerTenant, requireSyncStandby)',
    )
    // a misspelt tenant would act for the default tenant
    expect(await refusal(() => createClient({ db: t.db, tennant: 'acme' } as never))).toEqual(unknown('tennant'))
    expect(await refusal(() => createClient(undefined as never))).toEqual([{ path: '', message: 'createClient options must be an object' }])
    expect(createClient({ db: t.db, tenant: 'acme', batchSubmits: undefined }).tenant).toBe('acme')
  })

  it('refuses a webhook field it does not know rather than subscribing to every event', async () => {
    const c = client()
    const err = await refused(() => c.webhooks.create({ url: 'https://example.com/hook', event: ['failed'] } as never))
    expect(err.details).toEqual(unknown('event'))
    expect(err.message).toBe('unknown field "event" (known: url, events, secret, queue)')
    expect(await refusal(() => c.webhooks.create('https://example.com/hook' as never))).toEqual([{ path: '', message: 'webhook must be an object' }])
    expect(await c.webhooks.list()).toEqual([])
    // an update too: a misspelt `event` would otherwise leave the types as they are, silently
    const hook = await c.webhooks.create({ url: 'https://example.com/hook', events: ['failed'] })
    const update = await refused(() => c.webhooks.update(hook.id, { event: ['succeeded'] } as never))
    expect(update.details).toEqual(unknown('event'))
    expect(update.message).toBe('unknown field "event" (known: url, events, secret, enabled)')
    expect((await refused(() => c.webhooks.update(hook.id, { queue: 'other' } as never))).details).toEqual(unknown('queue'))
    expect(await c.webhooks.view(hook.id)).toMatchObject({ events: ['failed'], queue: 'default' })
  })

  it('refuses a tenant setting it does not know rather than changing the others alone', async () => {
    const c = client()
    const err = await refused(() => c.tenants.update('acme', { weigth: 2, maxPending: 10 } as never))
    expect(err.details).toEqual(unknown('weigth'))
    expect(err.message).toBe('unknown field "weigth" (known: weight, maxPending, maxSubmitsPerSecond)')
    // alone, it is named too, not taken for an empty change
    expect(await refusal(() => c.tenants.update('acme', { weigth: 2 } as never))).toEqual(unknown('weigth'))
    expect(await c.tenants.view('acme')).toMatchObject({ weight: 1, maxPending: null })
    expect(await c.tenants.update('acme', { weight: 2, maxPending: undefined })).toMatchObject({ weight: 2, maxPending: null })
  })
})

describe('client.cancelJob / pauseJob', () => {
  it('cancels a pending job and its execution', async () => {
    const { job } = await client().submitJob({ type: 'x' })
    const cancelled = await client().cancelJob(job.id)
    expect(cancelled).toMatchObject({ status: 'CANCELLED', state: 'cancelled', nextRunAt: null })
    expect((await executionsOf(job.id))[0]).toMatchObject({ state: 'cancelled' })
  })

  it('also cancels the execution a dispatcher is creating at the same moment', async () => {
    const { job } = await client().submitJob({ type: 'x', schedule: { every: 'PT1M' } })
    const dispatcher = await t.pool.connect()
    await dispatcher.query('begin')
    await dispatcher.query('select job_id from pgsched.triggers where job_id = $1 for update', [job.id])
    await dispatcher.query(
      `insert into pgsched.due (job_id, tenant, queue, type, priority, scheduled_for, run_at, max_attempts, timeout_ms)
       values ($1, 'acme', 'default', 'x', 0, now(), now(), 5, 1000)`,
      [job.id],
    )
    const cancelling = client().cancelJob(job.id)
    await waitFor(async () => (await lockWaiters(t.db)) === 1, { what: 'cancel to wait for the dispatcher' })
    await dispatcher.query('commit')
    dispatcher.release()
    expect((await cancelling).status).toBe('CANCELLED')
    expect((await executionsOf(job.id)).map((e) => e.state)).toEqual(['cancelled'])
  })

  it('also cancels the execution a claim is taking at the same moment', async () => {
    const { job } = await client().submitJob({ type: 'x' })
    const claimer = await t.pool.connect()
    await claimer.query('begin')
    // the claim runs but has not committed: it holds the due row it moves to pgsched.runs
    const claim = executionClaimBatchQuery({ workerId: CLAIMER, queues: ['default'], types: ['x'], limit: 10, leaseMs: 60_000 }).compile(t.db)
    expect((await claimer.query(claim.sql, [...claim.parameters])).rows).toHaveLength(1)
    const cancelling = client().cancelJob(job.id)
    await waitFor(async () => (await lockWaiters(t.db)) === 1, { what: 'cancel to wait for the claim' })
    await claimer.query('commit')
    claimer.release()
    expect((await cancelling).status).toBe('CANCELLED')
    expect((await executionsOf(job.id)).map((e) => e.state)).toEqual(['cancelled'])
    const { rows } = await sql<{ n: number }>`select count(*)::int as n from pgsched.runs where job_id = ${job.id}::uuid`.execute(t.db)
    expect(rows[0]?.n).toBe(0)
  })

  it('lets no claim start an execution of a cancelled job, cancelling it instead', async () => {
    const { job } = await client().submitJob({ type: 'x', maxAttempts: 3 })
    await client().cancelJob(job.id)
    // a retry that a failing attempt queued while the cancel ran, where the cancel could not see it
    await sql`insert into pgsched.due (job_id, tenant, queue, type, priority, scheduled_for, run_at, attempt, max_attempts, timeout_ms)
              values (${job.id}::uuid, 'acme', 'default', 'x', 0, now(), now(), 1, 3, 1000)`.execute(t.db)
    expect(await executionClaimBatch(t.db, { workerId: CLAIMER, queues: ['default'], types: ['x'], limit: 10, leaseMs: 60_000 })).toEqual([])
    expect((await executionsOf(job.id)).map((e) => e.state)).toEqual(['cancelled', 'cancelled'])
  })

  it('pauses and resumes a recurring job, and refuses to pause a one-time job', async () => {
    const { job } = await client().submitJob({ type: 'x', schedule: { every: 'PT1M' } })
    expect(await client().pauseJob(job.id)).toMatchObject({ status: 'PAUSED', schedule: { paused: true }, nextRunAt: null })
    const resumed = await client().resumeJob(job.id)
    expect(resumed).toMatchObject({ status: 'SCHEDULED', schedule: { paused: false } })
    expect(resumed.nextRunAt).not.toBeNull()
    const once = await client().submitJob({ type: 'x' })
    await expect(client().pauseJob(once.job.id)).rejects.toBeInstanceOf(InvalidStateError)
    // a cancelled one is named by its status, as every other refusal names it
    await client().cancelJob(job.id)
    await expect(client().pauseJob(job.id)).rejects.toThrow(`job ${job.id} is CANCELLED: a cancelled job is neither paused nor resumed`)
  })

  it('takes a schedule whose window ended before its first fire time as COMPLETED, with no next run, and refuses to pause it', async () => {
    const past = new Date(Date.now() - 86_400_000).toISOString()
    const soon = new Date(Date.now() + 3_600_000)
    const endsSoon = new Date(soon.getTime() + 60_000).toISOString()
    for (const input of [
      { type: 'x', schedule: { cron: '0 9 * * *' }, endAt: past },
      { type: 'x', schedule: { every: '1h' }, endAt: past },
      // the window opens and closes before the first 09:00 after it
      { type: 'x', schedule: { cron: '0 9 1 1 *' }, startAt: soon.toISOString(), endAt: endsSoon },
    ]) {
      const { job } = await client().submitJob(input)
      expect(job, JSON.stringify(input)).toMatchObject({ status: 'COMPLETED', nextRunAt: null })
      expect(await client().viewJob(job.id)).toMatchObject({ status: 'COMPLETED', nextRunAt: null })
      await expect(client().pauseJob(job.id)).rejects.toThrow(/is COMPLETED: its schedule has no fire time to come/)
    }
  })

  it('refuses a tenant name no API key can have', () => {
    expect(() => createClient({ db: t.db, tenant: 'bad tenant!' })).toThrow(/tenant must be 1-128 characters/)
    expect(() => client().withTenant('')).toThrow(ValidationError)
  })

  it("does not let one tenant see or cancel another tenant's job", async () => {
    const { job } = await client().submitJob({ type: 'x' })
    const other = createClient({ db: t.db, tenant: 'globex' })
    await expect(other.viewJob(job.id)).rejects.toBeInstanceOf(NotFoundError)
    await expect(other.cancelJob(job.id)).rejects.toBeInstanceOf(NotFoundError)
    expect((await client().viewJob(job.id)).status).toBe('SCHEDULED')
  })
})

describe('client job operations', () => {
  it('retries, reruns, deletes and bulk-cancels jobs of its tenant, and exports them', async () => {
    const c = createClient({ db: t.db, tenant: 'ops-client' })
    const { job } = await c.submitJob({ type: 'k', queue: 'ops-client' })
    await expect(c.retryJob(job.id)).rejects.toThrow(InvalidStateError)
    await expect(c.rerunJob(job.id)).rejects.toThrow(`job ${job.id} is SCHEDULED`)
    expect(await c.bulkJobs({ action: 'cancel', filter: { queue: 'ops-client' } })).toEqual({
      action: 'cancel',
      matched: 1,
      changed: 1,
      remaining: 0,
      lastId: expect.any(String),
    })
    expect((await c.retryJob(job.id)).status).toBe('SCHEDULED')
    await c.cancelJob(job.id)
    expect((await c.rerunJob(job.id)).lastRun?.status).toBe('PENDING')
    await c.cancelJob(job.id)
    const exported = []
    for await (const j of c.exportJobs({ queue: 'ops-client' })) exported.push(j.id)
    expect(exported).toEqual([job.id])
    await c.deleteJob(job.id)
    await expect(c.viewJob(job.id)).rejects.toThrow(NotFoundError)
    await expect(c.deleteJob(job.id)).rejects.toThrow(NotFoundError)
    // another tenant's client does not find it, and every tenant's finds what is left
    await expect(client().retryJob(job.id)).rejects.toThrow(NotFoundError)
    expect(await c.allTenants().tenantOfJob(job.id)).toBeUndefined()
  })

  it('refuses bad bulk requests with the field named', async () => {
    const c = client()
    await expect(c.bulkJobs({ action: 'cancel', filter: {} })).rejects.toMatchObject({ details: [{ path: 'filter' }] })
    await expect(c.bulkJobs({ action: 'cancel', filter: { all: true }, limit: 0 })).rejects.toMatchObject({ details: [{ path: 'limit' }] })
    await expect(c.bulkJobs({ action: 'cancel', filter: { ids: ['nope'] } })).rejects.toMatchObject({ details: [{ path: 'filter.ids' }] })
    await expect(c.listJobs({ tenant: 'globex' })).rejects.toThrow('only an operator key may name another tenant')
    await expect(c.stats({ minutes: 0 })).rejects.toThrow(ValidationError)
  })
})
