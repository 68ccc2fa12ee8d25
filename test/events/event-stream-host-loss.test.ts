/**
 * An event stream whose database host vanishes without closing its connections (the host lost, a
 * partition that drops packets) ends with an error once a read is not answered within
 * ANSWERED_WITHIN_MS, so that its client reconnects (with Last-Event-ID) and a multi-host URL's search
 * finds the host that answers: it waited until TCP gave up, about 15 minutes, while the API's pings
 * kept an EventSource client from reconnecting.
 */
import { describe, expect, it } from 'vitest'
import { createClient } from '../../src/client.ts'
import { ANSWERED_WITHIN_MS, createDb } from '../../src/db/pool.ts'
import { useTestDb } from '../db.ts'
import { startTcpProxy, viaProxy } from '../worker/tcp-proxy.ts'

const t = useTestDb()

describe('an event stream whose database host vanishes', () => {
  it('ends with an error within the bound, not when TCP gives up', { timeout: ANSWERED_WITHIN_MS + 40_000 }, async () => {
    const target = new URL(t.url)
    const proxy = await startTcpProxy({ host: target.hostname, port: Number(target.port || 5432) })
    const db = createDb({ databaseUrl: viaProxy(t.url, proxy), poolSize: 2, log: t.log })
    const client = createClient({ db: db.db, tenant: 'acme' })
    try {
      const stream = await client.events({ pollIntervalMs: 100 })
      await client.submitJob({ type: 'x' })
      const first = await stream.next()
      expect(first.done).toBe(false)
      const lostAt = Date.now()
      proxy.blackhole()
      // read on until the stream gives up
      const ended = (async () => {
        for (;;) await stream.next()
      })().catch((err: unknown) => err)
      const err = await ended
      expect(err).toBeInstanceOf(Error)
      expect((err as Error).message).toMatch(/timeout/i)
      // the bound, then the stream's last renewal of its listener on a new connection, which the vanished
      // host does not accept within its 10 s
      expect(Date.now() - lostAt).toBeLessThan(ANSWERED_WITHIN_MS + 20_000)
    } finally {
      await proxy.close()
      await db.end(1_000)
    }
  })
})
