/**
 * A request Fastify refuses before any route or hook runs (an undecodable percent-escape in its path)
 * is answered as any other: with its X-Request-Id, one log line and a count in
 * pgsched_http_requests_total.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { buildApp, type App } from '../../src/api/app.ts'
import { capturingLogger } from '../log-capture.ts'
import { useTestDb } from '../db.ts'

const t = useTestDb()
const logged = capturingLogger<Record<string, unknown>>('info')
let app: App

beforeAll(async () => {
  app = buildApp({ db: t.db, log: logged.log })
  await app.ready()
})
afterAll(async () => {
  await app?.close()
})

describe('a malformed URL', () => {
  it('gets a 400 with its X-Request-Id, a log line and a count, as every response', async () => {
    const res = await app.inject({ method: 'GET', url: '/v1/jobs/%zz', headers: { 'x-request-id': 'probe-1' } })
    expect(res.statusCode).toBe(400)
    expect(res.json().message).toBe('URL is malformed: /v1/jobs/%zz')
    expect(res.headers['x-request-id']).toBe('probe-1')
    const lines = logged.lines.filter((l) => l.requestId === 'probe-1' && l.msg === 'request completed')
    expect(lines).toEqual([expect.objectContaining({ statusCode: 400, method: 'GET', route: 'unmatched' })])
    const metrics = (await app.inject({ method: 'GET', url: '/metrics' })).body
    expect(metrics).toMatch(/pgsched_http_requests_total\{method="GET",route="unmatched",status_code="400"\} 1\n/)
    const fresh = await app.inject({ method: 'GET', url: '/%zz' })
    expect(fresh.headers['x-request-id']).toMatch(/^[0-9a-f-]{36}$/)
  })
})
