/**
 * The S3 output store against a local S3-compatible server (s3rver): a run's
 * output lands as numbered part objects under <prefix>/<execution>/<attempt>/
 * while the handler writes, output_uri names that prefix on the running
 * execution, and the API streams it back (following, and after the end).
 */
import type { AddressInfo } from 'node:net'
import { beforeAll, describe, expect, it } from 'vitest'
import { createClient } from '../../src/client.ts'
import { ConfigError } from '../../src/errors.ts'
import { createS3Objects, type S3Settings } from '../../src/lib/s3.ts'
import { defineHandler } from '../../src/worker/handlers.ts'
import { createOutputStore } from '../../src/worker/output-stores.ts'
import { useTestApi } from '../api/helpers.ts'
import { useTestDb } from '../db.ts'
import { S3_CREDENTIALS, useTestS3 } from '../s3-server.ts'
import { waitFor } from '../wait-for.ts'
import { outputSettings, useWorkers } from './harness.ts'

const t = useTestDb()
const s3 = useTestS3()
const startWorker = useWorkers(t)
/** The API's S3 settings: read at its first s3:// read, once the server's port is known. */
const settings: S3Settings = { region: 'us-east-1', credentials: S3_CREDENTIALS }
beforeAll(() => {
  settings.endpoint = s3.endpoint
})
const api = useTestApi(t, { outputS3: settings, outputFollowPollMs: 50 })
let base = ''

beforeAll(async () => {
  await api.app.listen({ port: 0, host: '127.0.0.1' })
  base = `http://127.0.0.1:${(api.app.server.address() as AddressInfo).port}`
})

const execution = (jobId: string) => t.db.selectFrom('pgsched.executions').selectAll().where('job_id', '=', jobId).executeTakeFirstOrThrow()

describe('the S3 output store', () => {
  it('stores part objects while the handler writes, and the API streams them while it runs and after', async () => {
    let release!: () => void
    const released = new Promise<void>((resolve) => (release = resolve))
    const outputStore = createOutputStore({
      settings: outputSettings({ store: `s3://${s3.bucket}/runs`, s3Endpoint: s3.endpoint, s3Region: 'us-east-1', s3Credentials: S3_CREDENTIALS }),
      db: t.db,
      log: t.log,
    })
    await startWorker(
      [
        defineHandler('s3.lines', async (ctx) => {
          ctx.output.write('line 1\n')
          await released
          ctx.output.write('line 2\n')
          return null
        }),
      ],
      { outputStore },
    )
    const key = await api.keyFor('acme')
    const { job } = await createClient({ db: t.db, tenant: 'acme' }).submitJob({ type: 's3.lines' })
    const running = await waitFor(async () => {
      const row = await execution(job.id)
      return row.state === 'running' && row.output_uri ? row : null
    })
    expect(running.output_uri).toBe(`s3://${s3.bucket}/runs/${running.id}/1/`)

    const res = await fetch(`${base}/v1/executions/${running.id}/output?follow=true`, { headers: { authorization: `Bearer ${key}` } })
    expect(res.status).toBe(200)
    const reader = (res.body as ReadableStream<Uint8Array>).getReader()
    let text = ''
    const decoder = new TextDecoder()
    const first = await reader.read()
    text += decoder.decode(first.value)
    expect(text).toBe('line 1\n')
    release()
    for (;;) {
      const { value, done } = await reader.read()
      if (done) break
      text += decoder.decode(value, { stream: true })
    }
    expect(text).toBe('line 1\nline 2\n')
    expect((await execution(job.id)).state).toBe('succeeded')

    const objects = await createS3Objects(settings)
    const keys = await objects.list(s3.bucket, `runs/${running.id}/1/`, undefined, 100)
    expect(keys).toHaveLength(2)
    for (const [i, k] of keys.entries()) expect(k).toMatch(new RegExp(`^runs/${running.id}/1/\\d{13}-00000${i + 1}$`))
    const after = await api.call(key, 'GET', `/v1/executions/${running.id}/output`)
    expect(after.statusCode).toBe(200)
    expect(after.body).toBe('line 1\nline 2\n')
  })

  it('refuses to start without a region, naming the settings', async () => {
    const region = process.env.AWS_REGION
    const defaultRegion = process.env.AWS_DEFAULT_REGION
    delete process.env.AWS_REGION
    delete process.env.AWS_DEFAULT_REGION
    try {
      const failure = await createS3Objects({ endpoint: s3.endpoint, credentials: S3_CREDENTIALS }).catch((err: unknown) => err)
      expect(failure).toBeInstanceOf(ConfigError)
      expect((failure as Error).message).toContain('SCHEDULER_OUTPUT_S3_REGION')
    } finally {
      if (region !== undefined) process.env.AWS_REGION = region
      if (defaultRegion !== undefined) process.env.AWS_DEFAULT_REGION = defaultRegion
    }
  })
})
