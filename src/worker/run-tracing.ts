/**
 * The spans of a run, while an OpenTelemetry SDK is registered (lib/tracing.ts; none without one):
 *
 *   run {queue}       CONSUMER (process), one per attempt: from the claim being sent until its
 *   │                 outcome is written or its lease is gone. A child of the submit's span (the
 *   │                 job's stored traceparent), and linked to it, as the messaging conventions advise.
 *   ├─ claim {queue}  CLIENT (receive): the claim statement that took it (shared by the claim's batch)
 *   └─ complete {queue} | fail {queue}  CLIENT (settle): the statement that wrote its outcome
 *
 * Each span is named `{messaging.operation.name} {queue}`, as the messaging conventions name spans;
 * `messaging.operation.type` (in brackets) is the conventions' kind of operation.
 * Times are the monotonic clock's (performance.now()), which the SDK converts. The handler runs in
 * the run span's context, so spans it makes are the run's children. Callers: the Worker (claim,
 * lost, handed back) and the OutcomeWriter (settle, end).
 */
import { context, ROOT_CONTEXT, SpanKind, trace, type Link, type Span } from '@opentelemetry/api'
import { messagingAttributes, messagingSpanName, parseTraceparent, spanFailed, tracer } from '../lib/tracing.ts'
import type { Run } from './run.ts'

/**
 * Starts the run span of each run a claim returned, with its claim child (the claim sent at
 * `sentAtMs`, answered at `returnedAtMs`, monotonic ms). Call only while tracing is on.
 */
export function startRunSpans(runs: readonly Run[], workerId: string, sentAtMs: number, returnedAtMs: number): void {
  const t = tracer()
  for (const run of runs) {
    const c = run.claimed
    const submit = parseTraceparent(c.traceparent)
    const parent = submit ? trace.setSpanContext(ROOT_CONTEXT, submit) : ROOT_CONTEXT
    const links: Link[] | undefined = submit ? [{ context: submit }] : undefined
    const span = t.startSpan(messagingSpanName('run', c.queue), { kind: SpanKind.CONSUMER, startTime: sentAtMs, links }, parent)
    if (!span.isRecording()) continue
    span.setAttributes({
      ...messagingAttributes(c.queue, 'run'),
      'messaging.message.id': c.jobId,
      'messaging.client.id': workerId,
      'pgsched.job.type': c.type,
      'pgsched.execution.id': c.id,
      'pgsched.execution.attempt': c.attempt,
      'pgsched.execution.lag_ms': c.startedAtMs - c.runAtMs,
    })
    run.span = span
    const claim = t.startSpan(messagingSpanName('claim', c.queue), { kind: SpanKind.CLIENT, startTime: sentAtMs }, trace.setSpan(ROOT_CONTEXT, span))
    claim.setAttributes({ ...messagingAttributes(c.queue, 'claim'), 'messaging.batch.message_count': runs.length })
    claim.end(returnedAtMs)
  }
}

/** Runs `fn` (the handler) in the run span's context, when the run has one. */
export function inRunSpan<T>(run: Run, fn: () => T): T {
  return run.span ? context.with(trace.setSpan(context.active(), run.span), fn) : fn()
}

/**
 * Starts the settle span (`complete {queue}` or `fail {queue}`) of a run's outcome write; undefined
 * when the run has no span.
 */
export function startSettleSpan(run: Run, outcome: 'complete' | 'fail'): Span | undefined {
  if (!run.span) return undefined
  const span = tracer().startSpan(messagingSpanName(outcome, run.claimed.queue), { kind: SpanKind.CLIENT }, trace.setSpan(ROOT_CONTEXT, run.span))
  span.setAttributes({ ...messagingAttributes(run.claimed.queue, outcome), 'messaging.message.id': run.claimed.jobId })
  return span
}

/**
 * Ends a run's span (once; later calls do nothing): `outcome` as an attribute, and an error
 * status with `error` when the attempt failed, was refused or lost.
 */
export function endRunSpan(run: Run, outcome: string, error?: Error): void {
  const span = run.span
  if (!span) return
  run.span = undefined
  span.setAttribute('pgsched.outcome', outcome)
  if (error) spanFailed(span, error)
  span.end(performance.now())
}
