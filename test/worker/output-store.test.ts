/**
 * Handler output in the Postgres store, through in-process workers: chunks
 * stored while the handler writes and named on the running execution, the
 * per-attempt cap and its marker, writes that neither block nor fail while the
 * store is down (a stand-in backend over the real one refuses while "down"),
 * nothing at all for a handler that writes nothing, and pruning.
 */
import { describe, expect, it } from 'vitest'
import { createClient } from '../../src/client.ts'
import { loadConfig } from '../../src/config.ts'
import { ValidationError } from '../../src/errors.ts'
import { createWorkerSystem } from '../../src/system.ts'
import { droppedMarker, handedBackMarker, truncationMarker } from '../../src/core/output-uri.ts'
import { executionOutputAppendMany, executionOutputRead } from '../../src/db/queries/output.ts'
import { executionPruneFinished } from '../../src/db/queries/prune.ts'
import { defineHandler } from '../../src/worker/handlers.ts'
import { createPostgresOutputBackend } from '../../src/worker/output-postgres.ts'
import { BufferedOutputStore, type OutputBackend, type OutputStore } from '../../src/worker/output-store.ts'
import { createOutputStore } from '../../src/worker/output-stores.ts'
import { useTestDb } from '../db.ts'
import { insertExecution, msAgo } from '../factories.ts'
import { waitFor } from '../wait-for.ts'
import { outputSettings, useWorkers } from './harness.ts'

const t = useTestDb()
const startWorker = useWorkers(t)
const client = () => createClient({ db: t.db, tenant: 'acme' })

const execution = (jobId: string) => t.db.selectFrom('pgsched.executions').selectAll().where('job_id', '=', jobId).executeTakeFirstOrThrow()

async function chunks(executionId: string, attempt = 1): Promise<Buffer[]> {
  return (await executionOutputRead(t.db, { executionId, attempt, afterSeq: null, limit: 1000 })).map((r) => r.data)
}
const output = async (executionId: string) => Buffer.concat(await chunks(executionId)).toString()

/** A gate a handler waits at until the test opens it. */
function gate() {
  let open!: () => void
  const opened = new Promise<void>((resolve) => (open = resolve))
  return { open, opened }
}

describe('the Postgres output store', () => {
  it('stores output in chunks while the handler writes, and names it on the running execution', async () => {
    const go = gate()
    await startWorker([
      defineHandler('talk', async (ctx) => {
        ctx.output.write('first\n')
        await go.opened
        ctx.output.write('second\n')
        return null
      }),
    ])
    const { job } = await client().submitJob({ type: 'talk' })
    const running = await waitFor(async () => {
      const row = await execution(job.id)
      return row.state === 'running' && row.output_uri !== null ? row : null
    })
    expect(running.output_uri).toBe(`pgsched:output/${running.id}/1`)
    expect(await output(running.id)).toBe('first\n')
    go.open()
    await waitFor(async () => (await execution(job.id)).state === 'succeeded')
    expect(await output(running.id)).toBe('first\nsecond\n')
    expect((await chunks(running.id)).length).toBe(2)
    expect((await execution(job.id)).output_uri).toBe(`pgsched:output/${running.id}/1`)
  })

  it('keeps at most maxBytes per attempt, then writes the truncation marker once and discards the rest', async () => {
    const outputStore = createOutputStore({ settings: outputSettings({ maxBytes: 1024 }), db: t.db, log: t.log })
    const results: boolean[] = []
    await startWorker(
      [
        defineHandler('flood', async (ctx) => {
          for (let i = 0; i < 10; i++) results.push(ctx.output.write('x'.repeat(300)))
          return null
        }),
      ],
      { outputStore },
    )
    const { job } = await client().submitJob({ type: 'flood' })
    await waitFor(async () => (await execution(job.id)).state === 'succeeded')
    expect(await output((await execution(job.id)).id)).toBe(`${'x'.repeat(1024)}${truncationMarker(1024)}`)
    expect(results.every((r) => r)).toBe(true)
  })

  it('never blocks or fails a handler while the store is down, and drops past the backlog bound with a marker', async () => {
    const real = createPostgresOutputBackend(t.db)
    let down = true
    let refused = 0
    const flaky: OutputBackend = {
      ...real,
      uri: real.uri,
      write: (parts) => {
        if (!down) return real.write(parts)
        refused++
        return Promise.reject(new Error('store down'))
      },
    }
    const outputStore = new BufferedOutputStore({ backend: flaky, db: t.db, log: t.log, maxBytes: 1_048_576, backlogMaxBytes: 1000 })
    const wrote = gate()
    const go = gate()
    await startWorker(
      [
        defineHandler('chatty', async (ctx) => {
          ctx.output.write('a'.repeat(800))
          ctx.output.write('b'.repeat(500)) // past the bound: dropped
          ctx.output.write('c'.repeat(100))
          wrote.open()
          await go.opened
          ctx.output.write('after\n')
          return 'done'
        }),
      ],
      { outputStore },
    )
    const { job } = await client().submitJob({ type: 'chatty' })
    await wrote.opened
    await waitFor(() => refused >= 2, { what: 'flushes to be refused' })
    expect((await execution(job.id)).state).toBe('running')
    down = false
    go.open()
    await waitFor(async () => (await execution(job.id)).state === 'succeeded')
    const row = await execution(job.id)
    expect(row.result).toBe('done')
    expect(await output(row.id)).toBe(`${'a'.repeat(800)}${droppedMarker(500)}${'c'.repeat(100)}after\n`)
  })

  it('opens, stores and updates nothing for a handler that writes nothing', async () => {
    const inner = createOutputStore({ settings: outputSettings(), db: t.db, log: t.log })
    let opened = 0
    const outputStore: OutputStore = {
      start: () => inner.start(),
      stop: () => inner.stop(),
      open: (target) => {
        opened++
        return inner.open(target)
      },
    }
    await startWorker([defineHandler('quiet', async (ctx) => ctx.payload)], { outputStore })
    const { job } = await client().submitJob({ type: 'quiet', payload: 1 })
    await waitFor(async () => (await execution(job.id)).state === 'succeeded')
    const row = await execution(job.id)
    expect(opened).toBe(0)
    expect(row.output_uri).toBeNull()
    expect(await chunks(row.id)).toEqual([])
  })

  it('reads an attempt back in seq order, a page at a time, past the ninth chunk', async () => {
    const e = await insertExecution(t.db, { state: 'running' })
    const lines = Array.from({ length: 12 }, (_, i) => `line ${i + 1}\n`)
    for (const line of lines) await executionOutputAppendMany(t.db, { chunks: [{ executionId: e.id, attempt: 1, data: Buffer.from(line) }] })
    const first = await executionOutputRead(t.db, { executionId: e.id, attempt: 1, afterSeq: null, limit: 10 })
    const rest = await executionOutputRead(t.db, { executionId: e.id, attempt: 1, afterSeq: first[first.length - 1]?.seq ?? null, limit: 10 })
    expect([...first, ...rest].map((r) => r.data.toString())).toEqual(lines)
  })

  it('is pruned with its execution', async () => {
    const old = await insertExecution(t.db, { state: 'succeeded', finishedAt: msAgo(2 * 86_400_000) })
    const recent = await insertExecution(t.db, { state: 'succeeded', finishedAt: msAgo(1000) })
    await executionOutputAppendMany(t.db, {
      chunks: [old, recent].flatMap((e) => [1, 2].map((n) => ({ executionId: e.id, attempt: 1, data: Buffer.from(`chunk ${n}\n`) }))),
    })
    expect(await executionPruneFinished(t.db, { olderThanMs: 86_400_000, limit: 100 })).toMatchObject({ executions: 1 })
    expect(await chunks(old.id)).toEqual([])
    expect(await output(recent.id)).toBe('chunk 1\nchunk 2\n')
  })
})

describe('a run handed back at shutdown', () => {
  it('has its output stored before the hand-back, and nothing it writes afterwards', async () => {
    const wrote = gate()
    const finished = gate()
    const store = createOutputStore({ settings: outputSettings(), db: t.db, log: t.log })
    const worker = await startWorker(
      [
        defineHandler('stubborn', async (ctx) => {
          ctx.output.write('before\n')
          wrote.open()
          // ignores its signal: writes once more when aborted, and again a little later
          await new Promise<void>((resolve) => ctx.signal.addEventListener('abort', () => resolve(), { once: true }))
          ctx.output.write('after the abort\n')
          await new Promise((resolve) => setTimeout(resolve, 100))
          ctx.output.write('later still\n')
          finished.open()
          return null
        }),
      ],
      { shutdownGraceMs: 50, outputStore: store },
    )
    const { job } = await client().submitJob({ type: 'stubborn' })
    await wrote.opened
    await worker.stop()
    const handedBack = await execution(job.id)
    expect(handedBack.state).toBe('pending')
    await finished.opened
    // stores whatever the store still holds: a write accepted after the hand-back would land now
    await store.stop()
    expect(await output(handedBack.id)).toBe(`before\n${handedBackMarker()}`)
    const rows = await t.db.selectFrom('pgsched.execution_output').select(['created_at']).where('execution_id', '=', handedBack.id).execute()
    expect(rows.length).toBeGreaterThan(0)
    for (const row of rows) expect(row.created_at.getTime()).toBeLessThanOrEqual(handedBack.run_at.getTime())
  })
})

/** The ValidationError `call` throws, as its message and details. */
function refusal(call: () => unknown): { message: string; details: unknown } {
  try {
    call()
  } catch (err: unknown) {
    expect(err).toBeInstanceOf(ValidationError)
    return { message: (err as ValidationError).message, details: (err as ValidationError).details }
  }
  throw new Error('not refused')
}

describe('createOutputStore from plain JavaScript', () => {
  it('refuses a parameter or setting it does not know, naming it and the known ones', () => {
    // a misspelt db: the file store would name no running execution's output
    expect(refusal(() => createOutputStore({ settings: outputSettings({ store: 'file' }), log: t.log, dB: t.db } as never))).toEqual({
      message: 'unknown field "dB" (known: settings, db, log)',
      details: [{ path: 'dB', message: 'unknown field "dB"' }],
    })
    // a misspelt setting: the S3 store would go to the default region
    expect(
      refusal(() => createOutputStore({ settings: { ...outputSettings({ store: 's3://bucket/out' }), s3Regoin: 'eu-west-1' }, log: t.log } as never)),
    ).toEqual({
      message: 'unknown field "settings.s3Regoin" (known: store, dir, maxBytes, s3Endpoint, s3Region, s3Credentials)',
      details: [{ path: 'settings.s3Regoin', message: 'unknown field "settings.s3Regoin"' }],
    })
    expect(refusal(() => createOutputStore(undefined as never)).message).toBe('createOutputStore params must be an object')
    expect(refusal(() => createOutputStore({ log: t.log } as never)).message).toBe('createOutputStore settings must be an object')
    // keys left undefined are none; config.output, as loadConfig returns it, is taken whole
    createOutputStore({ settings: { ...outputSettings(), s3Region: undefined }, db: t.db, log: t.log, dB: undefined } as never)
    createOutputStore({ settings: loadConfig({ DATABASE_URL: t.url }).output, db: t.db, log: t.log })
  })

  it('refuses a credential it does not know, naming its full path, rather than signing without it', () => {
    const s3 = (s3Credentials: unknown) => outputSettings({ store: 's3://bucket/out', s3Region: 'eu-west-1', s3Credentials: s3Credentials as never })
    const keys = { accessKeyId: 'AKIDEXAMPLE', secretAccessKey: 'secret' }
    // a misspelt sessionToken: temporary credentials without their token, refused by S3 at the first write
    expect(refusal(() => createOutputStore({ settings: s3({ ...keys, sessionTokn: 'token' }), log: t.log }))).toEqual({
      message: 'unknown field "settings.s3Credentials.sessionTokn" (known: accessKeyId, secretAccessKey, sessionToken)',
      details: [{ path: 'settings.s3Credentials.sessionTokn', message: 'unknown field "settings.s3Credentials.sessionTokn"' }],
    })
    expect(refusal(() => createOutputStore({ settings: s3('AKIDEXAMPLE:secret'), log: t.log })).message).toBe(
      'createOutputStore settings.s3Credentials must be an object',
    )
    // the known ones, a key left undefined, and none at all (null or absent) are taken
    createOutputStore({ settings: s3({ ...keys, sessionToken: 'token', sessionTokn: undefined }), log: t.log })
    createOutputStore({ settings: s3(null), log: t.log })
    createOutputStore({ settings: s3(undefined), log: t.log })
  })
})

describe('createWorkerSystem from plain JavaScript', () => {
  it('refuses a parameter it does not know, naming it and the known ones, rather than using the default output store', async () => {
    const config = loadConfig({ DATABASE_URL: t.url, SCHEDULER_WORKER_METRICS_PORT: 'off' }) as Parameters<typeof createWorkerSystem>[0]['config']
    const outputStore = createOutputStore({ settings: outputSettings({ store: 'file' }), log: t.log })
    // a misspelt outputStore: handlers' output would go to the Postgres store
    expect(refusal(() => createWorkerSystem({ config, log: t.log, handlers: [], outputstore: outputStore } as never))).toEqual({
      message: 'unknown field "outputstore" (known: config, log, handlers, outputStore)',
      details: [{ path: 'outputstore', message: 'unknown field "outputstore"' }],
    })
    expect(refusal(() => createWorkerSystem(undefined as never)).message).toBe('createWorkerSystem params must be an object')
    // a key left undefined is no parameter
    const system = createWorkerSystem({ config, log: t.log, handlers: [], outputStore, outputstore: undefined } as never)
    await system.stop()
  })

  it('refuses a key of its config or of a section of it that names no setting, naming its full path, rather than running with the default', async () => {
    const config = loadConfig({ DATABASE_URL: t.url, SCHEDULER_WORKER_METRICS_PORT: 'off' }) as Parameters<typeof createWorkerSystem>[0]['config']
    const outputStore = createOutputStore({ settings: outputSettings({ store: 'file' }), log: t.log })
    const withConfig = (changed: unknown) => () => createWorkerSystem({ config: changed as typeof config, log: t.log, handlers: [], outputStore })
    // a misspelt concurrency: the worker would run 10 handlers at once
    expect(refusal(withConfig({ ...config, worker: { ...config.worker, concurency: 5 } }))).toEqual({
      message: 'unknown field "config.worker.concurency"',
      details: [{ path: 'config.worker.concurency', message: 'unknown field "config.worker.concurency"' }],
    })
    expect(refusal(withConfig({ ...config, output: { ...config.output, s3Regoin: 'eu-west-1' } })).details).toEqual([
      { path: 'config.output.s3Regoin', message: 'unknown field "config.output.s3Regoin"' },
    ])
    expect(refusal(withConfig({ ...config, wroker: { concurrency: 5 } })).details).toEqual([
      { path: 'config.wroker', message: 'unknown field "config.wroker"' },
    ])
    expect(refusal(withConfig({ ...config, api: 8080 })).message).toBe('createWorkerSystem config.api must be an object')
    expect(refusal(withConfig(undefined)).message).toBe('createWorkerSystem config must be an object')
    // the output store's S3 credentials, which only JavaScript gives (createOutputStore's settings), are taken there
    const withCredentials = createWorkerSystem({
      config: { ...config, output: { ...config.output, s3Credentials: { accessKeyId: 'a', secretAccessKey: 'b' } } } as typeof config,
      log: t.log,
      handlers: [],
      outputStore,
    })
    await withCredentials.stop()
    // a setting changed by hand, and a key left undefined, are taken
    const system = createWorkerSystem({
      config: { ...config, worker: { ...config.worker, concurrency: 5, concurency: undefined } as typeof config.worker },
      log: t.log,
      handlers: [],
      outputStore,
    })
    await system.stop()
  })
})
