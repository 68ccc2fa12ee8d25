/**
 * requireSyncStandby (SCHEDULER_REQUIRE_SYNC_STANDBY=on on the API): a submit is acknowledged only by
 * a server that replicates synchronously. The test server has no standby (synchronous_standby_names
 * empty), so every such submit is refused, written or not; the acceptance side, on a primary with a
 * synchronous standby, is in test/failover/formation.system.test.ts.
 */
import { sql } from 'kysely'
import { describe, expect, it } from 'vitest'
import { createClient } from '../src/client.ts'
import { BusyError, UnreplicatedError } from '../src/errors.ts'
import { useTestApi } from './api/helpers.ts'
import { useTestDb } from './db.ts'

const t = useTestDb()
// read when the app is built, once the database exists
const api = useTestApi(t, {
  get client() {
    return createClient({ db: t.db, requireSyncStandby: true })
  },
})
const MESSAGE = /^the database has no synchronous standby now \(a primary alone, or one in a failover\), so this submit is not acknowledged/

describe('requireSyncStandby', () => {
  it('refuses submits on a server without a synchronous standby, batched or not, one or many; the job may be written', async () => {
    const { rows } = await sql<{ names: string }>`select current_setting('synchronous_standby_names') as names`.execute(t.db)
    expect(rows[0]?.names).toBe('')
    for (const batchSubmits of [true, false]) {
      const strict = createClient({ db: t.db, tenant: 'acme', requireSyncStandby: true, batchSubmits })
      const refused = strict.submitJob({ type: 'mail', idempotencyKey: `k-${batchSubmits}` })
      await expect(refused).rejects.toThrow(UnreplicatedError)
      await expect(refused).rejects.toThrow(MESSAGE)
      await expect(refused).rejects.toBeInstanceOf(BusyError)
      // written, unacknowledged: the same key replays it where acknowledgements need no standby
      const replay = await createClient({ db: t.db, tenant: 'acme' }).submitJob({ type: 'mail', idempotencyKey: `k-${batchSubmits}` })
      expect(replay.created).toBe(false)
      await expect(strict.submitJobs([{ type: 'mail' }, { type: 'mail' }])).rejects.toThrow(UnreplicatedError)
    }
    // in the caller's transaction the commit is the caller's: not checked
    const inTrx = await t.db
      .transaction()
      .execute((trx) => createClient({ db: t.db, tenant: 'acme', requireSyncStandby: true }).submitJob({ type: 'mail' }, { trx }))
    expect(inTrx.created).toBe(true)
    // without the setting nothing changes
    expect((await createClient({ db: t.db, tenant: 'acme' }).submitJob({ type: 'mail' })).created).toBe(true)
  })

  it('needs one connection of the pool: a tenant with quotas on a pool of one is refused at once, batched or not', async () => {
    await createClient({ db: t.db }).tenants.update('quota', { maxPending: 100 })
    for (const batchSubmits of [true, false]) {
      const one = createClient({ databaseUrl: t.url, poolSize: 1, tenant: 'quota', requireSyncStandby: true, batchSubmits })
      try {
        const startedAt = Date.now()
        await expect(one.submitJob({ type: 'mail' })).rejects.toThrow(UnreplicatedError)
        await expect(one.submitJobs([{ type: 'mail' }])).rejects.toThrow(UnreplicatedError)
        // not after the pool's 10 s wait for a second connection
        expect(Date.now() - startedAt).toBeLessThan(5_000)
      } finally {
        await one.close()
      }
    }
  })

  it('is a 503 with Retry-After over REST', async () => {
    const key = await api.keyFor('acme')
    const res = await api.call(key, 'POST', '/v1/jobs', { type: 'mail', idempotencyKey: 'rest' })
    expect(res.statusCode).toBe(503)
    expect(res.headers['retry-after']).toBe('1')
    expect(res.json<{ message: string }>().message).toMatch(MESSAGE)
  })
})
