/**
 * GET /v1/executions/{id}/output over the Postgres store: what is stored so
 * far, and follow mode over real HTTP with an in-process worker: lines arrive
 * while the handler still runs (also when the follow began before the run
 * started), and the response ends with the whole output once the attempt ends.
 */
import type { AddressInfo } from 'node:net'
import { setTimeout as sleep } from 'node:timers/promises'
import { Kysely, PostgresDialect } from 'kysely'
import pg from 'pg'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { buildApp } from '../../src/api/app.ts'
import type { DB } from '../../src/db/schema.ts'
import { createClient } from '../../src/client.ts'
import { createApiKey } from '../../src/api/auth.ts'
import { apiKeyRevoke } from '../../src/db/queries/api-keys.ts'
import { executionOutputAppendMany, executionOutputUriSet } from '../../src/db/queries/output.ts'
import { defineHandler } from '../../src/worker/handlers.ts'
import { useTestDb } from '../db.ts'
import { insertExecution } from '../factories.ts'
import { waitFor } from '../wait-for.ts'
import { useWorkers } from '../worker/harness.ts'
import { useTestApi } from './helpers.ts'

const t = useTestDb()
const api = useTestApi(t, { outputFollowPollMs: 50 })
const startWorker = useWorkers(t)
let base = ''

beforeAll(async () => {
  await api.app.listen({ port: 0, host: '127.0.0.1' })
  base = `http://127.0.0.1:${(api.app.server.address() as AddressInfo).port}`
})
afterAll(async () => {
  await api.app.close()
})

/** A gate a handler waits at until the test opens it. */
function gate() {
  let open!: () => void
  const opened = new Promise<void>((resolve) => (open = resolve))
  return { open, opened }
}

/** An HTTP response body read as it arrives. */
async function streamed(url: string, key: string) {
  const res = await fetch(url, { headers: { authorization: `Bearer ${key}` } })
  const reader = (res.body as ReadableStream<Uint8Array>).getReader()
  const decoder = new TextDecoder()
  const state = { text: '', ended: false }
  const pumping = (async () => {
    for (;;) {
      const { value, done } = await reader.read()
      if (done) break
      state.text += decoder.decode(value, { stream: true })
    }
    state.ended = true
  })()
  return { res, state, ended: pumping }
}

describe('GET /v1/executions/{id}/output', () => {
  it('returns the Postgres output stored so far, and 404s when there is none', async () => {
    const key = await api.keyFor('acme')
    const e = await insertExecution(t.db, { state: 'running', job: { tenant: 'acme' } })
    const none = await api.call(key, 'GET', `/v1/executions/${e.id}/output`)
    expect(none.statusCode).toBe(404)
    await executionOutputAppendMany(t.db, { chunks: ['one\n', 'two\n'].map((s) => ({ executionId: e.id, attempt: 1, data: Buffer.from(s) })) })
    expect(await executionOutputUriSet(t.db, { id: e.id, jobId: e.jobId, attempt: 1, uri: `pgsched:output/${e.id}/1` })).toBe(true)
    const out = await api.call(key, 'GET', `/v1/executions/${e.id}/output`)
    expect(out.statusCode).toBe(200)
    expect(out.headers['content-type']).toBe('text/plain; charset=utf-8')
    expect(out.body).toBe('one\ntwo\n')
    const other = await api.call(await api.keyFor('globex'), 'GET', `/v1/executions/${e.id}/output?follow=true`)
    expect(other.statusCode).toBe(404)
    // an operator key reads any tenant's output, as it views any tenant's job
    const operator = (await createApiKey(t.db, { tenant: 'ops', operator: true })).key
    const read = await api.call(operator, 'GET', `/v1/executions/${e.id}/output`)
    expect(read.statusCode).toBe(200)
    expect(read.body).toBe('one\ntwo\n')
  })

  it('refuses a follow value that is not a boolean', async () => {
    const key = await api.keyFor('acme')
    const e = await insertExecution(t.db, { job: { tenant: 'acme' } })
    const bad = await api.call(key, 'GET', `/v1/executions/${e.id}/output?follow=maybe`)
    expect(bad.statusCode).toBe(400)
    expect(bad.json().message).toContain('follow')
  })

  it('follows a run from before it starts: lines arrive while it writes, and the response ends with all of it', async () => {
    const key = await api.keyFor('acme')
    const { job } = await createClient({ db: t.db, tenant: 'acme' }).submitJob({ type: 'lines' })
    const executionId = job.lastExecution?.id as string
    // Pending: no worker yet. The follow waits for the attempt to start.
    const follow = await streamed(`${base}/v1/executions/${executionId}/output?follow=true`, key)
    expect(follow.res.status).toBe(200)
    expect(follow.res.headers.get('content-type')).toBe('text/plain; charset=utf-8')
    const go = gate()
    await startWorker([
      defineHandler('lines', async (ctx) => {
        ctx.output.write('line 1\n')
        await go.opened
        ctx.output.write('line 2\n')
        return null
      }),
    ])
    await waitFor(() => follow.state.text === 'line 1\n', { what: 'the first line while the handler runs' })
    expect(follow.state.ended).toBe(false)
    go.open()
    await follow.ended
    expect(follow.state.text).toBe('line 1\nline 2\n')
    const after = await api.call(key, 'GET', `/v1/executions/${executionId}/output?follow=true`)
    expect(after.body).toBe('line 1\nline 2\n')
  })

  it('ends a follow once its API key is revoked', async () => {
    const app = buildApp({ db: t.db, log: t.log, outputFollowPollMs: 50, apiKeyCacheMs: 1_000 })
    try {
      await app.listen({ port: 0, host: '127.0.0.1' })
      const created = await createApiKey(t.db, { tenant: 'acme' })
      const { job } = await createClient({ db: t.db, tenant: 'acme' }).submitJob({ type: 'never-served' })
      const url = `http://127.0.0.1:${(app.server.address() as AddressInfo).port}/v1/executions/${job.lastExecution?.id}/output?follow=true`
      const follow = await streamed(url, created.key)
      expect(follow.res.status).toBe(200)
      await apiKeyRevoke(t.db, { id: created.id })
      // the execution stays pending (no worker serves it): only the revocation can end the follow
      await waitFor(() => follow.state.ended, { timeoutMs: 10_000, what: 'the follow to end after the revocation' })
    } finally {
      app.server.closeAllConnections()
      await app.close()
    }
  })

  it('stops following when the client hangs up', async () => {
    const key = await api.keyFor('acme')
    const { job } = await createClient({ db: t.db, tenant: 'acme' }).submitJob({ type: 'never-served' })
    const executionId = job.lastExecution?.id as string
    // An app whose every statement naming the execution is counted: each poll of the follow reads it.
    let reads = 0
    const pool = new pg.Pool({ connectionString: t.url, max: 2 })
    const db = new Kysely<DB>({
      dialect: new PostgresDialect({ pool }),
      log: (e) => {
        if (e.level === 'query' && e.query.parameters.includes(executionId)) reads++
      },
    })
    const app = buildApp({ db, log: t.log, outputFollowPollMs: 20 })
    try {
      await app.listen({ port: 0, host: '127.0.0.1' })
      const url = `http://127.0.0.1:${(app.server.address() as AddressInfo).port}/v1/executions/${executionId}/output?follow=true`
      const hangUp = new AbortController()
      const res = await fetch(url, { headers: { authorization: `Bearer ${key}` }, signal: hangUp.signal })
      expect(res.status).toBe(200)
      await waitFor(() => reads >= 5, { what: 'the follow to poll the pending execution' })
      hangUp.abort()
      await res.body?.cancel().catch(() => undefined)
      // Within a few polls of the hang-up the follow has ended; then nothing reads the execution any more.
      await waitFor(
        async () => {
          // 15 poll intervals: a poll's statement may take a while on a busy machine
          const before = reads
          await sleep(300)
          return reads === before
        },
        { what: 'the follow to stop polling' },
      )
      const settled = reads
      await sleep(500) // 25 poll intervals: a follow still running would read the execution again
      expect(reads).toBe(settled)
    } finally {
      // The aborted fetch's socket stays open on the server's side (the close would wait for it).
      app.server.closeAllConnections()
      await app.close()
      await db.destroy()
    }
  })
})
