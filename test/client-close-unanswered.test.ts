/**
 * close() of a client whose database stopped answering (a partition: the socket stays open, nothing
 * comes back) ends within its 30 s, ending the connection a call still waits on; the call fails.
 */
import { describe, expect, it } from 'vitest'
import { createClient } from '../src/client.ts'
import { useTestDb } from './db.ts'
import { startTcpProxy, viaProxy } from './worker/tcp-proxy.ts'

const t = useTestDb()

describe('close() of a client whose database stopped answering', () => {
  it('ends within 30 s, and the call waiting on the silent connection fails', { timeout: 60_000 }, async () => {
    const target = new URL(t.url)
    const proxy = await startTcpProxy({ host: target.hostname, port: Number(target.port || 5432) })
    const client = createClient({ databaseUrl: viaProxy(t.url, proxy), tenant: 'acme' })
    try {
      const { job } = await client.submitJob({ type: 'warm-up' })
      proxy.blackhole()
      const waiting = client.viewJob(job.id).then(
        () => 'answered',
        (err: Error) => `failed: ${err.message}`,
      )
      const startedAt = performance.now()
      await client.close()
      expect(performance.now() - startedAt).toBeLessThan(32_000)
      expect(await waiting).toMatch(/^failed: /)
    } finally {
      await proxy.close()
    }
  })
})
