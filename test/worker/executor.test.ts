/**
 * The executor without a database: a handler's outcome as handed to the
 * writer, its timeout and abort, and the lease check before it starts. The
 * writer, lease keeper and worker are stand-ins recording what they were told.
 */
import { describe, expect, it } from 'vitest'
import type { ClaimedExecution } from '../../src/db/queries/claim.ts'
import { FatalError } from '../../src/errors.ts'
import { createLogger } from '../../src/logger.ts'
import { endsLease, LeaseLostError, TimeoutError, type AbortReason } from '../../src/worker/abort-reasons.ts'
import { Executor, MAX_RESULT_BYTES } from '../../src/worker/executor.ts'
import { defineHandler, HandlerRegistry, type Handler } from '../../src/worker/handlers.ts'
import type { Outcome } from '../../src/worker/outcome-writer.ts'
import { createRun, type Run } from '../../src/worker/run.ts'
import { fileOutputStore } from './harness.ts'

const log = createLogger({ level: 'silent' })

function claimed(overrides: Partial<ClaimedExecution> = {}): ClaimedExecution {
  return {
    id: 'e1',
    jobId: 'j1',
    type: 't',
    queue: 'default',
    priority: 0,
    attempt: 1,
    maxAttempts: 3,
    timeoutMs: 60_000,
    scheduledForMs: 0,
    runAtMs: 0,
    startedAtMs: 0,
    payload: { n: 1 },
    ...overrides,
  }
}

function setup(handlers: Handler[], options: { sure?: boolean } = {}) {
  const recorded: Outcome[] = []
  const ended: Run[] = []
  const slotFreed = new Map<Run, () => void>()
  /** The worker's abort, reduced to what the executor relies on. */
  const abort = (run: Run, reason: AbortReason) => {
    if (run.abortReason) return
    run.abortReason = reason
    if (endsLease(reason)) run.state = 'lost'
    run.controller?.abort(reason)
    run.onAbort?.(run)
  }
  const executor = new Executor({
    handlers: new HandlerRegistry(handlers),
    log,
    outputStore: fileOutputStore(),
    leases: { isSure: () => options.sure ?? true },
    outcomes: {
      record: (_run, _ctx, outcome) => void recorded.push(outcome),
      recordComplete: (_run, _ctx, resultJson) => void recorded.push({ kind: 'complete', resultJson }),
    },
    abort,
    ended: (run) => {
      ended.push(run)
      slotFreed.get(run)?.()
    },
  })
  /** Executes a run; `done` resolves when its slot is freed. */
  const run = (c: ClaimedExecution = claimed()) => {
    const r = createRun(c, performance.now() + 60_000)
    const done = new Promise<void>((resolve) => slotFreed.set(r, resolve))
    executor.execute(r)
    return { run: r, done }
  }
  return { recorded, ended, abort, run }
}

describe('Executor', () => {
  it('hands a returned value to the writer as JSON and frees the slot', async () => {
    const s = setup([defineHandler('t', async (ctx) => ({ got: ctx.payload }))])
    const { run, done } = s.run()
    expect(run.state).toBe('running')
    await done
    expect(s.recorded).toEqual([{ kind: 'complete', resultJson: '{"got":{"n":1}}' }])
    expect(s.ended).toEqual([run])
  })

  it('starts the handler in a microtask, after the caller has started its other runs', async () => {
    let calls = 0
    const s = setup([defineHandler('t', () => void calls++)])
    const { done } = s.run()
    expect(calls).toBe(0)
    await done
    expect(calls).toBe(1)
  })

  it('records a thrown error as retriable and a FatalError as fatal', async () => {
    const s = setup([
      defineHandler('t', async () => {
        throw new Error('boom')
      }),
      defineHandler('f', async () => {
        throw new FatalError('bad input')
      }),
    ])
    await s.run().done
    await s.run(claimed({ id: 'e2', type: 'f' })).done
    expect(s.recorded).toMatchObject([
      { kind: 'fail', error: { message: 'boom' }, fatal: false, timedOut: false },
      { kind: 'fail', error: { message: 'bad input', name: 'FatalError' }, fatal: true, timedOut: false },
    ])
  })

  it('records a result over MAX_RESULT_BYTES, or one that is not JSON, as a fatal failure', async () => {
    const s = setup([defineHandler('big', () => 'x'.repeat(MAX_RESULT_BYTES)), defineHandler('odd', () => ({ n: 1n }))])
    await s.run(claimed({ type: 'big' })).done
    await s.run(claimed({ id: 'e2', type: 'odd' })).done
    expect(s.recorded).toMatchObject([
      { kind: 'fail', fatal: true, error: { message: expect.stringContaining(`${MAX_RESULT_BYTES + 2} bytes as JSON`) } },
      { kind: 'fail', fatal: true, error: { message: expect.stringContaining('cannot be stored as JSON') } },
    ])
  })

  it('records a result holding a NUL character or a lone surrogate as a fatal failure, and passes one whose backslash only looks like an escape', async () => {
    const s = setup([
      defineHandler('nul', () => ['ok', { deep: 'a\u0000' }]),
      defineHandler('lone', () => '\udfff'),
      defineHandler('path', () => ({ dir: 'C:\\u00', pair: '\ud83d\ude00' })),
    ])
    await s.run(claimed({ type: 'nul' })).done
    await s.run(claimed({ id: 'e2', type: 'lone' })).done
    await s.run(claimed({ id: 'e3', type: 'path' })).done
    expect(s.recorded).toMatchObject([
      { kind: 'fail', fatal: true, error: { message: 'result cannot be stored as JSON: result.1.deep must not contain NUL characters (\\u0000)' } },
      { kind: 'fail', fatal: true, error: { message: expect.stringMatching(/^result cannot be stored as JSON: result must be well-formed Unicode/) } },
      { kind: 'complete', resultJson: JSON.stringify({ dir: 'C:\\u00', pair: '\ud83d\ude00' }) },
    ])
  })

  it('aborts a handler past its timeout with a TimeoutError and records a retriable timed-out failure', async () => {
    let reason: unknown
    const s = setup([
      defineHandler('t', async (ctx) => {
        await new Promise<void>((resolve) => ctx.signal.addEventListener('abort', () => resolve(), { once: true }))
        reason = ctx.signal.reason
      }),
    ])
    await s.run(claimed({ timeoutMs: 20 })).done
    expect(reason).toBeInstanceOf(TimeoutError)
    expect((reason as Error).name).toBe('TimeoutError')
    expect(s.recorded).toMatchObject([{ kind: 'fail', fatal: false, timedOut: true, error: { message: 'timed out after 20 ms' } }])
  })

  it('keeps the slot until an aborted handler really returns, and writes nothing for a lost lease', async () => {
    let release: () => void = () => undefined
    const gate = new Promise<void>((resolve) => (release = resolve))
    const s = setup([
      defineHandler('t', async () => {
        await gate
        return 'late'
      }),
    ])
    const { run, done } = s.run()
    await Promise.resolve()
    s.abort(run, new LeaseLostError('lease lost'))
    expect(run.state).toBe('lost')
    expect(run.ctx?.signal.reason).toBeInstanceOf(LeaseLostError)
    expect(s.ended).toEqual([])
    release()
    await done
    expect(s.ended).toEqual([run])
    expect(s.recorded).toEqual([])
  })

  it('does not start a handler whose lease is no longer sure', async () => {
    let calls = 0
    const s = setup([defineHandler('t', () => void calls++)], { sure: false })
    const { run, done } = s.run()
    await done
    expect(calls).toBe(0)
    expect(run.abortReason).toBeInstanceOf(LeaseLostError)
    expect(s.recorded).toEqual([])
    expect(s.ended).toEqual([run])
  })

  it('fails fatally when no handler is registered for the type', async () => {
    const s = setup([])
    await s.run().done
    expect(s.recorded).toMatchObject([{ kind: 'fail', fatal: true, error: { message: 'no handler for type "t"' } }])
  })
})
