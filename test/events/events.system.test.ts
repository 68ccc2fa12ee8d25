/**
 * Events produced by real `scheduler worker` processes (three, beside this process's API) and read
 * by an SSE client over HTTP: every job's events arrive once and in the order they happened, ids
 * increase along the stream, and a reconnect with Last-Event-ID in the middle of the run (most
 * likely in the middle of a batch: one statement's changes) neither repeats nor skips one.
 */
import { setTimeout as sleep } from 'node:timers/promises'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { buildApp, type App } from '../../src/api/app.ts'
import { createApiKey } from '../../src/api/auth.ts'
import { createClient } from '../../src/client.ts'
import { compareEventIds } from '../../src/core/events.ts'
import { useTestDb } from '../db.ts'
import { useWorkerProcesses, waitFor } from '../worker/processes.ts'

const t = useTestDb()
const { spawnWorker } = useWorkerProcesses(t)
let app: App
let base: string

beforeAll(async () => {
  app = buildApp({ db: t.db, log: t.log })
  await app.listen({ host: '127.0.0.1', port: 0 })
  const address = app.server.address()
  base = `http://127.0.0.1:${typeof address === 'object' && address ? address.port : 0}`
})
afterAll(async () => {
  await app?.close()
})

interface Received {
  id: string
  type: string
  jobId: string
  tenant: string
  attempt: number | null
}

/** An SSE client of GET /v1/events: collects events until closed; `opened` resolves on `: open`. */
function connect(key: string, lastEventId?: string) {
  const controller = new AbortController()
  const events: Received[] = []
  let markOpen: () => void = () => {}
  const opened = new Promise<void>((resolve) => (markOpen = resolve))
  const done = (async () => {
    try {
      const res = await fetch(`${base}/v1/events`, {
        headers: { authorization: `Bearer ${key}`, ...(lastEventId ? { 'last-event-id': lastEventId } : {}) },
        signal: controller.signal,
      })
      expect(res.status).toBe(200)
      const decoder = new TextDecoder()
      let buffer = ''
      for await (const chunk of res.body as unknown as AsyncIterable<Uint8Array>) {
        buffer += decoder.decode(chunk, { stream: true })
        for (let end = buffer.indexOf('\n\n'); end >= 0; end = buffer.indexOf('\n\n')) {
          const message = buffer.slice(0, end)
          buffer = buffer.slice(end + 2)
          if (message === ': open') markOpen()
          const id = /^id: (.*)$/m.exec(message)?.[1]
          const data = /^data: (.*)$/m.exec(message)?.[1]
          if (id === undefined || data === undefined) continue
          const event = JSON.parse(data) as Received
          expect(event.id).toBe(id)
          events.push(event)
        }
      }
    } catch (err: unknown) {
      if (!(controller.signal.aborted && err instanceof Error && err.name === 'AbortError')) throw err
    }
  })()
  return {
    events,
    opened: Promise.race([opened, done]),
    async close() {
      controller.abort()
      await done
    },
  }
}

const EXPECTED: Record<string, string[]> = {
  'ledger.sleep': ['submitted:0', 'started:1', 'succeeded:1'],
  'ledger.flaky': ['submitted:0', 'started:1', 'retrying:1', 'started:2', 'succeeded:2'],
  'ledger.fatal': ['submitted:0', 'started:1', 'failed:1'],
}

describe('events from worker processes', () => {
  it('reach an SSE client once each, in order per job, across a reconnect with Last-Event-ID', { timeout: 240_000 }, async () => {
    const key = (await createApiKey(t.db, { tenant: 'acme' })).key
    const first = connect(key)
    await first.opened
    const workers = [spawnWorker(), spawnWorker(), spawnWorker()]
    await Promise.all(workers.map((w) => w.ready))

    const client = createClient({ db: t.db, tenant: 'acme' })
    const typeOf = new Map<string, string>()
    // interleaved: in each group of 13, 9 plain jobs, 3 that fail once then succeed, 1 that fails fatally
    const jobs = Array.from({ length: 1_300 }, (_, i) =>
      i % 13 < 9
        ? { type: 'ledger.sleep', payload: { ms: 1 } }
        : i % 13 < 12
          ? { type: 'ledger.flaky', payload: { failures: 1 }, maxAttempts: 3, backoffBaseMs: 0, backoffMaxMs: 0 }
          : { type: 'ledger.fatal', maxAttempts: 3 },
    )
    const submitting = (async () => {
      for (let i = 0; i < jobs.length; i += 100) {
        for (const [k, job] of (await client.submitJobs(jobs.slice(i, i + 100))).entries()) typeOf.set(job.id, (jobs[i + k] as { type: string }).type)
        await sleep(50)
      }
    })()
    await waitFor(() => first.events.length >= 1_500, { timeoutMs: 120_000, what: 'the first 1,500 events' })
    await first.close()
    const last = first.events.at(-1) as Received
    await sleep(2_000) // the disconnect itself, while the workers go on
    const second = connect(key, last.id)
    await submitting
    const total = jobs.length
    const all = () => [...first.events, ...second.events]
    const ended = () => all().filter((e) => e.type === 'succeeded' || e.type === 'failed').length
    await waitFor(() => ended() >= total, { timeoutMs: 180_000, intervalMs: 100, what: 'every job to end on the stream' })
    await sleep(500) // anything after the last end would be a repeat
    await second.close()

    const events = all()
    expect(new Set(events.map((e) => e.id)).size).toBe(events.length)
    for (let i = 1; i < events.length; i++) expect(compareEventIds((events[i] as Received).id, (events[i - 1] as Received).id)).toBeGreaterThan(0)
    expect(events.every((e) => e.tenant === 'acme')).toBe(true)
    const byJob = new Map<string, string[]>()
    for (const e of events) byJob.set(e.jobId, [...(byJob.get(e.jobId) ?? []), `${e.type}:${e.attempt}`])
    expect(byJob.size).toBe(total)
    for (const [jobId, type] of typeOf) expect(byJob.get(jobId), `${type} ${jobId}`).toEqual(EXPECTED[type])
    // more than one worker process produced them
    const { rows } = await t.pool.query<{ n: number }>('select count(distinct pid)::int as n from public.test_ledger')
    expect(rows[0]?.n).toBeGreaterThan(1)
  })
})
