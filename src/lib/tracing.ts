/**
 * OpenTelemetry through @opentelemetry/api only: pgsched never registers an SDK. With none
 * registered every tracer is a no-op, and the code that traces asks `tracingOn()` (or a span's
 * isRecording()) before it builds attributes, reads a traceparent or stores one, so tracing costs
 * nothing then. The W3C traceparent is formatted and parsed here (version 00) rather than through
 * the global propagator, which is a no-op until an SDK sets one.
 * Callers: the client's submit (a PRODUCER span), the API's submit route, the worker's run spans.
 */
import {
  context,
  isSpanContextValid,
  ProxyTracerProvider,
  SpanKind,
  SpanStatusCode,
  trace,
  TraceFlags,
  type Attributes,
  type Context,
  type Span,
  type SpanContext,
  type Tracer,
} from '@opentelemetry/api'

/** The instrumentation scope of every pgsched span. */
export const TRACER_NAME = 'pgsched'

/** messaging.system of every pgsched span (the OpenTelemetry messaging semantic conventions). */
export const MESSAGING_SYSTEM = 'pgsched'

/**
 * pgsched's tracer from the provider registered now (a tracer kept from before `trace.disable()`
 * would stay a no-op). Ask only once tracingOn(): without an SDK each call makes a proxy.
 */
export function tracer(): Tracer {
  return trace.getTracer(TRACER_NAME)
}

/**
 * True when an SDK registered a tracer provider. Without one, callers skip spans altogether (a
 * no-op span would cost little, but what they would compute for it — a traceparent, attributes — is
 * skipped too). A provider set through `trace.setGlobalTracerProvider` counts at once.
 */
export function tracingOn(): boolean {
  const provider = trace.getTracerProvider()
  return !(provider instanceof ProxyTracerProvider) || provider.getDelegateTracer(TRACER_NAME) !== undefined
}

const TRACEPARENT = /^00-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})$/

/** The W3C traceparent header value (version 00) of a span context. */
export function traceparentOf(ctx: SpanContext): string {
  return `00-${ctx.traceId}-${ctx.spanId}-${(ctx.traceFlags & 0xff).toString(16).padStart(2, '0')}`
}

/** The remote span context a traceparent names; undefined if it is not a valid version-00 traceparent. */
export function parseTraceparent(value: string | null | undefined): SpanContext | undefined {
  if (!value) return undefined
  const m = TRACEPARENT.exec(value)
  if (!m) return undefined
  const [, traceId, spanId, flags] = m as unknown as [string, string, string, string]
  if (/^0+$/.test(traceId) || /^0+$/.test(spanId)) return undefined
  return { traceId, spanId, traceFlags: Number.parseInt(flags, 16) & TraceFlags.SAMPLED, isRemote: true }
}

/**
 * pgsched's messaging operations (`messaging.operation.name`), each with its operation type
 * (`messaging.operation.type`) from the OpenTelemetry messaging semantic conventions. A span is
 * named `{messaging.operation.name} {queue}` (messagingSpanName), as the conventions name spans.
 */
export const MESSAGING_OPERATIONS = {
  submit: 'send',
  claim: 'receive',
  run: 'process',
  complete: 'settle',
  fail: 'settle',
} as const

/** A pgsched messaging operation: `submit`, `claim`, `run`, `complete` or `fail`. */
export type MessagingOperation = keyof typeof MESSAGING_OPERATIONS

/**
 * The name of a span of `operation` on `queue`: `{messaging.operation.name} {messaging.destination.name}`,
 * or the operation alone for a batch into several queues (null: no one destination).
 */
export function messagingSpanName(operation: MessagingOperation, queue: string | null): string {
  return queue === null ? operation : `${operation} ${queue}`
}

/** The messaging attributes every pgsched span carries: system, queue (unless null), operation name and type. */
export function messagingAttributes(queue: string | null, operation: MessagingOperation): Attributes {
  return {
    'messaging.system': MESSAGING_SYSTEM,
    ...(queue === null ? {} : { 'messaging.destination.name': queue }),
    'messaging.operation.type': MESSAGING_OPERATIONS[operation],
    'messaging.operation.name': operation,
  }
}

/**
 * Marks `span` as failed with `error`, as the conventions ask of an operation that failed: the
 * exception recorded, the status an error, and `error.type` low in cardinality: a PostgreSQL
 * error's SQLSTATE (the driver names every one of them `error`), otherwise the error's class name.
 */
export function spanFailed(span: Span, error: Error): void {
  span.recordException(error)
  span.setStatus({ code: SpanStatusCode.ERROR, message: error.message })
  const code = (error as { code?: unknown }).code
  span.setAttribute('error.type', typeof code === 'string' && /^[0-9A-Z]{5}$/.test(code) ? code : error.name)
}

/**
 * Runs a submit of `count` jobs to `queue` in a PRODUCER span ("submit {queue}", or "submit" when the
 * jobs go to several queues, null; a child of `parent`,
 * default the active context) and hands `submit` the span's traceparent to store with the jobs.
 * With no SDK `submit` gets null and no span is built; with a span not sampled, its traceparent
 * (flags 00), so the job's runs are not sampled either. The span ends when
 * the insert has committed or failed; `messageId` names the job of a single submit.
 */
export async function tracedSubmit<T>(
  queue: string | null,
  count: number,
  parent: Context | undefined,
  submit: (traceparent: string | null) => Promise<T>,
  messageId?: (result: T) => string,
): Promise<T> {
  if (!tracingOn()) return submit(null)
  const span = tracer().startSpan(messagingSpanName('submit', queue), { kind: SpanKind.PRODUCER }, parent ?? context.active())
  if (!span.isRecording()) {
    // not sampled: the job keeps its trace, unsampled, so that its runs follow that decision (a
    // parent-based sampler drops them too) instead of each starting a trace of its own
    const unsampled = span.spanContext()
    span.end()
    return submit(isSpanContextValid(unsampled) ? traceparentOf(unsampled) : null)
  }
  span.setAttributes(messagingAttributes(queue, 'submit'))
  if (count !== 1) span.setAttribute('messaging.batch.message_count', count)
  try {
    const result = await submit(traceparentOf(span.spanContext()))
    if (messageId) span.setAttribute('messaging.message.id', messageId(result))
    return result
  } catch (err: unknown) {
    spanFailed(span, err instanceof Error ? err : new Error(String(err)))
    throw err
  } finally {
    span.end()
  }
}
