/**
 * GET /v1/jobs/export streams its download after the headers went out with 200: a job that cannot
 * be written on the way (here a row from before instants were bounded, whose fire time JavaScript
 * cannot read) must break the transfer off, so that no client takes a cut-short file for a whole
 * one, and must be logged. Real HTTP: the break is what a client sees on the socket.
 */
import type { AddressInfo } from 'node:net'
import { sql } from 'kysely'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { apiHandlersSettled, buildApp, type App } from '../../src/api/app.ts'
import { createApiKey } from '../../src/api/auth.ts'
import { createClient } from '../../src/client.ts'
import { useTestDb } from '../db.ts'
import { insertExecutions } from '../factories.ts'
import { capturingLogger } from '../log-capture.ts'

const t = useTestDb()
const lines: Array<{ level: number; msg: string; route?: string }> = []
let app: App
let base: string

beforeAll(async () => {
  const { log } = capturingLogger('info', lines)
  app = buildApp({ db: t.db, log })
  await app.listen({ host: '127.0.0.1', port: 0 })
  base = `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`
})
afterAll(async () => {
  await app?.close()
})

describe('GET /v1/jobs/export when a job cannot be written', () => {
  it.each(['json', 'csv'])('breaks the %s download off and logs why, rather than ending it as if complete', async (format) => {
    const tenant = `broken-${format}`
    const { key } = await createApiKey(t.db, { tenant })
    // the oldest job, so the export (newest first) has sent two pages of 500 when it comes to it
    const { job } = await createClient({ db: t.db, tenant }).submitJob({ type: 'x', queue: 'exp', schedule: { cron: '0 0 1 1 *' } })
    await sql`update pgsched.triggers set next_fire_at = '10000-01-01 00:00:00+00' where job_id = ${job.id}::uuid`.execute(t.db)
    await insertExecutions(t.db, 1200, { state: 'succeeded', job: { tenant, queue: 'exp' } })
    const before = lines.length

    const res = await fetch(`${base}/v1/jobs/export?format=${format}&queue=exp`, { headers: { authorization: `Bearer ${key}` } })
    expect(res.status).toBe(200)
    await expect(res.text()).rejects.toThrow()

    const logged = lines.slice(before).filter((l) => l.level >= 50)
    expect(logged.map((l) => l.msg)).toEqual(['the export failed after its download began: the download is broken off'])
    // and the request no longer counts as in flight (a graceful close would wait for it)
    expect(await apiHandlersSettled(app, 2_000)).toBe(true)
  })
})
