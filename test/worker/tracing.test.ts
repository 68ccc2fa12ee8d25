import { SpanKind, SpanStatusCode, trace } from '@opentelemetry/api'
import { BasicTracerProvider, InMemorySpanExporter, SimpleSpanProcessor, type ReadableSpan } from '@opentelemetry/sdk-trace-base'
import { sql } from 'kysely'
import { afterAll, beforeEach, describe, expect, it } from 'vitest'
import { createClient } from '../../src/client.ts'
import { FatalError } from '../../src/errors.ts'
import { defineHandler } from '../../src/worker/handlers.ts'
import { useTestApi } from '../api/helpers.ts'
import { useTestDb } from '../db.ts'
import { waitFor } from '../wait-for.ts'
import { useWorkers } from './harness.ts'

const t = useTestDb()
const api = useTestApi(t)
const startWorker = useWorkers(t)
const exporter = new InMemorySpanExporter()
const provider = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] })

beforeEach(() => {
  trace.disable()
  exporter.reset()
})
afterAll(() => trace.disable())

const handlers = [
  defineHandler<{ fail?: boolean }>('trace.job', async (ctx) => {
    if (ctx.payload.fail) throw new FatalError('asked to fail')
    return { ok: true }
  }),
]

async function traceparentOf(jobId: string): Promise<string | null> {
  const { rows } = await sql<{ traceparent: string | null }>`select traceparent from pgsched.jobs where id = ${jobId}::uuid`.execute(t.db)
  return rows[0]?.traceparent ?? null
}

const named = (spans: ReadableSpan[], name: string) => spans.filter((s) => s.name === name)

describe('traces', () => {
  it('puts a REST submit and its run in one trace: the run span is a child of the submit span and linked to it', async () => {
    trace.setGlobalTracerProvider(provider)
    const key = await api.keyFor('acme')
    const res = await api.call(key, 'POST', '/v1/jobs', { type: 'trace.job', queue: 'default' })
    expect(res.statusCode).toBe(202)
    const jobId = (res.json() as { id: string }).id
    await startWorker(handlers)
    await waitFor(() => named(exporter.getFinishedSpans(), 'run default').length === 1, { what: 'the run span to end' })
    const spans = exporter.getFinishedSpans()

    const [submit] = named(spans, 'submit default')
    const [run] = named(spans, 'run default')
    expect(submit?.kind).toBe(SpanKind.PRODUCER)
    expect(run?.kind).toBe(SpanKind.CONSUMER)
    const submitCtx = submit?.spanContext()
    expect(run?.spanContext().traceId).toBe(submitCtx?.traceId)
    expect(run?.parentSpanContext?.spanId).toBe(submitCtx?.spanId)
    expect(run?.links.map((l) => l.context.spanId)).toEqual([submitCtx?.spanId])
    expect(await traceparentOf(jobId)).toBe(`00-${submitCtx?.traceId}-${submitCtx?.spanId}-01`)

    expect(submit?.attributes).toMatchObject({
      'messaging.system': 'pgsched',
      'messaging.destination.name': 'default',
      'messaging.operation.type': 'send',
      'messaging.operation.name': 'submit',
      'messaging.message.id': jobId,
    })
    expect(run?.attributes).toMatchObject({
      'messaging.system': 'pgsched',
      'messaging.destination.name': 'default',
      'messaging.operation.type': 'process',
      'messaging.operation.name': 'run',
      'messaging.message.id': jobId,
      'pgsched.job.type': 'trace.job',
      'pgsched.execution.attempt': 1,
      'pgsched.outcome': 'succeeded',
    })
    // The claim and the outcome write, children of the run.
    for (const [name, type] of [
      ['claim default', 'receive'],
      ['complete default', 'settle'],
    ] as const) {
      const [child] = named(spans, name)
      expect(child?.kind).toBe(SpanKind.CLIENT)
      expect(child?.parentSpanContext?.spanId).toBe(run?.spanContext().spanId)
      expect(child?.spanContext().traceId).toBe(submitCtx?.traceId)
      expect(child?.attributes['messaging.operation.type']).toBe(type)
    }
  })

  it('names every span {messaging.operation.name} {queue}, as the messaging conventions name spans', async () => {
    trace.setGlobalTracerProvider(provider)
    const key = await api.keyFor('acme')
    for (const payload of [{}, { fail: true }]) {
      const res = await api.call(key, 'POST', '/v1/jobs', { type: 'trace.job', payload })
      expect(res.statusCode).toBe(202)
    }
    await startWorker(handlers)
    await waitFor(() => named(exporter.getFinishedSpans(), 'run default').length === 2, { what: 'both run spans to end' })
    const spans = exporter.getFinishedSpans().filter((s) => s.attributes['messaging.system'] === 'pgsched')
    expect(spans.map((s) => s.name).sort()).toEqual([
      'claim default',
      'claim default',
      'complete default',
      'fail default',
      'run default',
      'run default',
      'submit default',
      'submit default',
    ])
    for (const span of spans) {
      expect(span.name).toBe(`${span.attributes['messaging.operation.name']} ${span.attributes['messaging.destination.name']}`)
    }
    const [fail] = named(spans, 'fail default')
    expect(fail?.attributes).toMatchObject({ 'messaging.operation.type': 'settle', 'messaging.operation.name': 'fail' })
  })

  it('names a batch submit after its queue, and one into several queues `submit`, without a destination', async () => {
    trace.setGlobalTracerProvider(provider)
    const client = createClient({ db: t.db })
    await client.submitJobs([
      { type: 'trace.job', queue: 'mail' },
      { type: 'trace.job', queue: 'mail' },
    ])
    await client.submitJobs([
      { type: 'trace.job', queue: 'mail' },
      { type: 'trace.job', queue: 'sms' },
    ])
    const submits = exporter.getFinishedSpans().filter((s) => s.attributes['messaging.operation.name'] === 'submit')
    expect(submits.map((s) => [s.name, s.attributes['messaging.destination.name'], s.attributes['messaging.batch.message_count']])).toEqual([
      ['submit mail', 'mail', 2],
      ['submit', undefined, 2],
    ])
  })

  it("continues a REST caller's trace from its traceparent header, and marks a failed run as an error", async () => {
    trace.setGlobalTracerProvider(provider)
    const key = await api.keyFor('acme')
    const caller = '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01'
    const res = await api.call(key, 'POST', '/v1/jobs', { type: 'trace.job', payload: { fail: true } }, { traceparent: caller })
    expect(res.statusCode).toBe(202)
    await startWorker(handlers)
    await waitFor(() => named(exporter.getFinishedSpans(), 'run default').length === 1, { what: 'the run span to end' })
    const spans = exporter.getFinishedSpans()
    const [submit] = named(spans, 'submit default')
    const [run] = named(spans, 'run default')
    expect(submit?.spanContext().traceId).toBe('0af7651916cd43dd8448eb211c80319c')
    expect(submit?.parentSpanContext?.spanId).toBe('b7ad6b7169203331')
    expect(run?.spanContext().traceId).toBe('0af7651916cd43dd8448eb211c80319c')
    expect(run?.status.code).toBe(SpanStatusCode.ERROR)
    expect(run?.attributes['pgsched.outcome']).toBe('failed')
    expect(run?.attributes['error.type']).toBe('FatalError')
  })

  it("follows a REST caller's decision not to sample: the job keeps the caller's trace, unsampled, and its run exports no span", async () => {
    trace.setGlobalTracerProvider(provider) // the SDK's default sampler: ParentBased(AlwaysOn)
    const key = await api.keyFor('acme')
    const caller = '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-00'
    const res = await api.call(key, 'POST', '/v1/jobs', { type: 'trace.job' }, { traceparent: caller })
    expect(res.statusCode).toBe(202)
    const jobId = (res.json() as { id: string }).id
    expect(await traceparentOf(jobId)).toMatch(/^00-0af7651916cd43dd8448eb211c80319c-[0-9a-f]{16}-00$/)
    await startWorker(handlers)
    await waitFor(
      async () => {
        const { rows } = await sql<{ state: string }>`select state from pgsched.executions where job_id = ${jobId}::uuid`.execute(t.db)
        return rows[0]?.state === 'succeeded'
      },
      { what: 'the job to run' },
    )
    // the run's span ends before its outcome is written: none was made
    expect(exporter.getFinishedSpans().map((s) => s.name)).toEqual([])
    // and a sampled caller's submit still makes its run's span, in its trace
    const sampled = '00-1af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01'
    await api.call(key, 'POST', '/v1/jobs', { type: 'trace.job' }, { traceparent: sampled })
    await waitFor(() => named(exporter.getFinishedSpans(), 'run default').length === 1, { what: 'the sampled run span' })
    expect(named(exporter.getFinishedSpans(), 'run default')[0]?.spanContext().traceId).toBe('1af7651916cd43dd8448eb211c80319c')
  })

  it('stores no traceparent and makes no span while no SDK is registered', async () => {
    const key = await api.keyFor('acme')
    const res = await api.call(key, 'POST', '/v1/jobs', { type: 'trace.job' })
    const jobId = (res.json() as { id: string }).id
    await startWorker(handlers)
    await waitFor(async () => {
      const { rows } = await sql<{ n: number }>`select count(*)::int as n from pgsched.executions where state = 'succeeded'`.execute(t.db)
      return rows[0]?.n === 1
    })
    expect(await traceparentOf(jobId)).toBeNull()
    expect(exporter.getFinishedSpans()).toEqual([])
  })

  it('marks an outcome write the fence refused as an error, on the settle span and the run span', async () => {
    trace.setGlobalTracerProvider(provider)
    let release: () => void = () => {}
    const held = new Promise<void>((resolve) => (release = resolve))
    const started = { id: '' }
    const key = await api.keyFor('acme')
    expect((await api.call(key, 'POST', '/v1/jobs', { type: 'trace.held' })).statusCode).toBe(202)
    await startWorker([
      defineHandler('trace.held', async (ctx) => {
        started.id = ctx.executionId
        await held
        return { ok: true }
      }),
    ])
    await waitFor(() => started.id !== '', { what: 'the handler to start' })
    // The lease is gone before the handler returns (as a reaper's or a cancel's delete would leave it).
    await sql`delete from pgsched.runs where execution_id = ${started.id}::uuid`.execute(t.db)
    release()
    await waitFor(() => named(exporter.getFinishedSpans(), 'run default').length === 1, { what: 'the run span to end' })
    const spans = exporter.getFinishedSpans()
    const [settle] = named(spans, 'complete default')
    const [run] = named(spans, 'run default')
    expect(settle?.attributes['pgsched.outcome']).toBe('refused')
    expect(settle?.status.code).toBe(SpanStatusCode.ERROR)
    expect(settle?.attributes['error.type']).toBe('LeaseLostError')
    expect(run?.attributes['pgsched.outcome']).toBe('lease lost')
    expect(run?.status.code).toBe(SpanStatusCode.ERROR)
    expect(run?.attributes['error.type']).toBe('LeaseLostError')
  })

  it("marks an outcome write that failed as an error with the SQLSTATE as error.type, and the retried write's span as not", async () => {
    trace.setGlobalTracerProvider(provider)
    // Every completion fails while public.block_outcomes has a row.
    await sql`create table public.block_outcomes (x int)`.execute(t.db)
    await sql`insert into public.block_outcomes values (1)`.execute(t.db)
    await sql`create function public.block_outcome() returns trigger language plpgsql as $$
      begin
        if exists (select 1 from public.block_outcomes) then
          raise exception 'outcome blocked' using errcode = 'P0001';
        end if;
        return old;
      end $$`.execute(t.db)
    await sql`create trigger block_outcome before delete on pgsched.runs for each row execute function public.block_outcome()`.execute(t.db)
    try {
      const key = await api.keyFor('acme')
      expect((await api.call(key, 'POST', '/v1/jobs', { type: 'trace.job' })).statusCode).toBe(202)
      await startWorker(handlers)
      await waitFor(() => named(exporter.getFinishedSpans(), 'complete default').length >= 1, { what: 'a failed outcome write' })
      await sql`delete from public.block_outcomes`.execute(t.db)
      await waitFor(() => named(exporter.getFinishedSpans(), 'run default').length === 1, { what: 'the run span to end', timeoutMs: 15_000 })
      const settles = named(exporter.getFinishedSpans(), 'complete default')
      const failed = settles.slice(0, -1)
      const last = settles.at(-1)
      expect(failed.length).toBeGreaterThanOrEqual(1)
      for (const span of failed) {
        expect(span.status.code).toBe(SpanStatusCode.ERROR)
        expect(span.attributes['error.type']).toBe('P0001')
        expect(span.events.map((e) => e.name)).toContain('exception')
      }
      expect(last?.status.code).toBe(SpanStatusCode.UNSET)
      expect(last?.attributes['pgsched.outcome']).toBe('succeeded')
      const [run] = named(exporter.getFinishedSpans(), 'run default')
      expect(run?.attributes['pgsched.outcome']).toBe('succeeded')
      expect(run?.status.code).toBe(SpanStatusCode.UNSET)
    } finally {
      await sql`drop trigger if exists block_outcome on pgsched.runs`.execute(t.db)
      await sql`drop function if exists public.block_outcome()`.execute(t.db)
      await sql`drop table if exists public.block_outcomes`.execute(t.db)
    }
  })
})
