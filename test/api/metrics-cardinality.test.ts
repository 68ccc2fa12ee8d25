/**
 * The API's /metrics, scraped over a real HTTP connection, stays bounded whatever queue names
 * tenants submit to: past QUEUE_LABELS_MAX distinct queues, submits and queue depths are counted
 * under queue="_other", no count lost, and the limit is logged once.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { buildApp, type App } from '../../src/api/app.ts'
import { createApiKey } from '../../src/api/auth.ts'
import { OTHER_QUEUE_LABEL, QUEUE_LABELS_MAX } from '../../src/api/metrics.ts'
import { useTestDb } from '../db.ts'
import { capturingLogger } from '../log-capture.ts'
import { parsePrometheusText } from '../prometheus-text.ts'

const t = useTestDb()
const { log, lines } = capturingLogger<{ level: number; msg: string; limit?: number; queue?: string }>('warn')
let app: App
let base: string

beforeAll(async () => {
  app = buildApp({ db: t.db, log, queueDepthCacheMs: 0 })
  await app.listen({ host: '127.0.0.1', port: 0 })
  const address = app.server.address()
  if (address === null || typeof address === 'string') throw new Error('the API is not listening on a TCP port')
  base = `http://127.0.0.1:${address.port}`
})
afterAll(async () => {
  await app?.close()
})

/** The distinct `queue` label values of the samples named `name`. */
function queueLabels(samples: ReturnType<typeof parsePrometheusText>['samples'], name: string): Set<string> {
  return new Set(samples.filter((s) => s.name === name).map((s) => s.labels.queue as string))
}

describe('API metrics label cardinality', () => {
  it('labels at most QUEUE_LABELS_MAX queues, counting submits and depths of the others under queue="_other", and logs the limit once', async () => {
    const key = (await createApiKey(t.db, { tenant: 'acme' })).key
    const submit = async (queue: string) => {
      const res = await fetch(`${base}/v1/jobs`, {
        method: 'POST',
        headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
        body: JSON.stringify({ type: 'x', queue, payload: {} }),
      })
      expect(res.status, queue).toBe(202)
    }
    await submit('mail')
    await submit('mail')
    // A tenant submitting to queue names of its own making: one job each, far past the limit.
    const flood = Array.from({ length: QUEUE_LABELS_MAX + 20 }, (_, i) => `flood-${i}`)
    for (let i = 0; i < flood.length; i += 25) await Promise.all(flood.slice(i, i + 25).map(submit))
    const submitted = flood.length + 2

    const res = await fetch(`${base}/metrics`)
    expect(res.status).toBe(200)
    const { samples, sum } = parsePrometheusText(await res.text())
    for (const name of ['pgsched_jobs_submitted_total', 'pgsched_submit_durable_seconds_count', 'pgsched_queue_depth', 'pgsched_queue_unserved']) {
      const queues = queueLabels(samples, name)
      expect(queues.size, name).toBeLessThanOrEqual(QUEUE_LABELS_MAX + 1)
      expect(queues, name).toContain(OTHER_QUEUE_LABEL)
      expect(queues, name).toContain('mail')
    }
    // Every queue label of the process, all metrics together, is one of the labelled queues or _other.
    const all = new Set(samples.filter((s) => s.labels.queue !== undefined).map((s) => s.labels.queue as string))
    expect(all.size).toBeLessThanOrEqual(QUEUE_LABELS_MAX + 1)
    // No count is lost: the queues past the limit add up under _other.
    expect(sum('pgsched_jobs_submitted_total')).toBe(submitted)
    expect(sum('pgsched_jobs_submitted_total', { queue: 'mail' })).toBe(2)
    expect(sum('pgsched_submit_durable_seconds_count')).toBe(submitted)
    expect(sum('pgsched_queue_depth', { state: 'pending' })).toBe(submitted)
    expect(sum('pgsched_queue_depth', { queue: 'mail', state: 'pending' })).toBe(2)
    expect(sum('pgsched_queue_unserved')).toBe(submitted)

    const limitLines = lines.filter((l) => l.msg.startsWith('queue label limit reached'))
    expect(limitLines).toHaveLength(1)
    expect(limitLines[0]).toMatchObject({ level: 40, limit: QUEUE_LABELS_MAX })
    // A second scrape adds no series and logs nothing more.
    const again = parsePrometheusText(await (await fetch(`${base}/metrics`)).text())
    expect(new Set(again.samples.filter((s) => s.labels.queue !== undefined).map((s) => s.labels.queue)).size).toBe(all.size)
    expect(lines.filter((l) => l.msg.startsWith('queue label limit reached'))).toHaveLength(1)
  })
})
