/**
 * Group commit when the answer of a submit statement is lost after it committed (a connection cut
 * by a proxy, a failover, a network fault): the submits it wrote are reported written, once, not
 * refused with a duplicate key when retried alone (a caller retrying then ran them twice).
 */
import net from 'node:net'
import { describe, expect, it } from 'vitest'
import { createClient } from '../src/client.ts'
import { useTestDb } from './db.ts'

const t = useTestDb()

/**
 * A proxy to the test database that, once armed, lets the first statement naming `marker` at least
 * `atLeast` times reach the server, drops the server's answer, and cuts the connection 300 ms later
 * (the statement has committed by then).
 */
async function answerDroppingProxy(marker: string, atLeast: number) {
  const target = new URL(t.url)
  let armed = false
  let dropped = 0
  const server = net.createServer((client) => {
    const upstream = net.connect(Number(target.port || 5432), target.hostname)
    let dropping = false
    client.on('data', (d) => {
      if (armed && d.toString('latin1').split(marker).length - 1 >= atLeast) {
        armed = false
        dropping = true
        dropped++
      }
      upstream.write(d)
    })
    upstream.on('data', (d) => {
      if (dropping) {
        setTimeout(() => {
          client.destroy()
          upstream.destroy()
        }, 300)
        return
      }
      client.write(d)
    })
    for (const s of [client, upstream]) {
      s.on('error', () => {})
      s.on('close', () => {
        client.destroy()
        upstream.destroy()
      })
    }
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  const url = new URL(t.url)
  url.host = `127.0.0.1:${(server.address() as net.AddressInfo).port}`
  return {
    url: url.toString(),
    arm: () => {
      armed = true
    },
    dropped: () => dropped,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  }
}

describe('a group of submits whose answer is lost after it committed', () => {
  it('reports each submit written, once, rather than a duplicate key', async () => {
    const proxy = await answerDroppingProxy('grouped-job', 2)
    const client = createClient({ databaseUrl: proxy.url, tenant: 'acme' })
    try {
      await client.submitJob({ type: 'warm-up' })
      proxy.arm()
      const outcomes = await Promise.all(
        Array.from({ length: 6 }, (_, i) =>
          client.submitJob({ type: 'grouped-job', payload: { i } }).then(
            (r) => ({ id: r.job.id, created: r.created }),
            (err: Error) => ({ error: err.message }),
          ),
        ),
      )
      expect(proxy.dropped()).toBe(1)
      const stored = await t.db.selectFrom('pgsched.jobs').select(['id', 'payload']).where('type', '=', 'grouped-job').execute()
      expect(stored).toHaveLength(6)
      expect(outcomes).toEqual(expect.arrayContaining(stored.map((s) => ({ id: s.id, created: true }))))
      expect(outcomes).toHaveLength(6)
    } finally {
      await client.close()
      await proxy.close()
    }
  })

  it('reports a single submit whose answer was lost written', async () => {
    const proxy = await answerDroppingProxy('single-job', 1)
    const client = createClient({ databaseUrl: proxy.url, tenant: 'acme' })
    try {
      await client.submitJob({ type: 'warm-up' })
      proxy.arm()
      const { job, created } = await client.submitJob({ type: 'single-job', schedule: { cron: '0 9 * * *', timezone: 'Europe/Berlin' } })
      expect(proxy.dropped()).toBe(1)
      expect(created).toBe(true)
      const stored = await t.db.selectFrom('pgsched.jobs').select(['id', 'created_at']).where('type', '=', 'single-job').execute()
      expect(stored.map((s) => s.id)).toEqual([job.id])
      expect(job.createdAt).toEqual(stored[0]?.created_at)
    } finally {
      await client.close()
      await proxy.close()
    }
  })
})
