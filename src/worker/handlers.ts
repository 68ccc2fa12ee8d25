/**
 * Handlers: `defineHandler(type, fn)` names the code that runs jobs of one
 * type. A handler returns a JSON-serialisable result (at most 64 KiB; write
 * bulk output to `ctx.output`), throws `FatalError` to fail without retry, or
 * throws anything else to be retried with backoff. It must watch `ctx.signal`:
 * it is aborted on timeout, cancellation, lost lease and shutdown.
 */
import type { Writable } from 'node:stream'
import { pathToFileURL } from 'node:url'
import { resolve } from 'node:path'
import type { Logger } from '../logger.ts'
import { TYPE_PATTERN } from '../core/names.ts'

/**
 * What a handler gets for one run. `signal`, `log` and `output` are made on first use (accessors):
 * `{ ...ctx }` does not copy them; to hand a changed context on, use `Object.create(ctx)` or name them.
 */
export interface HandlerContext<P = unknown> {
  payload: P
  jobId: string
  executionId: string
  /** 1 for the first attempt. */
  attempt: number
  maxAttempts: number
  type: string
  queue: string
  /** The fire time this run belongs to. */
  scheduledFor: Date
  /** Aborted on timeout, cancellation, lost lease or forced shutdown; `signal.reason` says which. */
  signal: AbortSignal
  log: Logger
  /**
   * Output kept in the worker's output store (Postgres by default; `executions.output_uri` names it),
   * readable through the API while the run goes on; opened on first use. Writes never block or fail:
   * past the per-attempt cap (SCHEDULER_OUTPUT_MAX_BYTES) they are discarded after a truncation marker.
   */
  readonly output: Writable
}

export type HandlerFn<P = unknown> = (ctx: HandlerContext<P>) => Promise<unknown> | unknown

export interface Handler {
  readonly kind: 'pgsched.handler'
  readonly type: string
  readonly run: HandlerFn
}

const TYPE = new RegExp(TYPE_PATTERN)

/** Declares the handler for jobs of `type`. */
export function defineHandler<P = unknown>(type: string, run: HandlerFn<P>): Handler {
  if (!TYPE.test(type)) throw new Error(`handler type "${type}" must be 1-128 characters: letters, digits and _ . : / -`)
  return { kind: 'pgsched.handler', type, run: run as HandlerFn }
}

function isHandler(value: unknown): value is Handler {
  return typeof value === 'object' && value !== null && (value as Handler).kind === 'pgsched.handler'
}

/** Handlers by type. */
export class HandlerRegistry {
  private readonly byType = new Map<string, Handler>()

  constructor(handlers: Iterable<Handler> = []) {
    for (const h of handlers) this.add(h)
  }

  add(handler: Handler): void {
    if (this.byType.has(handler.type)) throw new Error(`two handlers for type "${handler.type}"`)
    this.byType.set(handler.type, handler)
  }

  get(type: string): Handler | undefined {
    return this.byType.get(type)
  }

  types(): string[] {
    return [...this.byType.keys()].sort()
  }
}

/**
 * Loads handlers from a module: every export that is a handler, or an array of
 * handlers (e.g. `export default [defineHandler(…), …]`).
 */
export async function loadHandlerModule(path: string): Promise<Handler[]> {
  const mod = (await import(pathToFileURL(resolve(path)).href)) as Record<string, unknown>
  const found: Handler[] = []
  for (const value of Object.values(mod)) {
    if (isHandler(value)) found.push(value)
    else if (Array.isArray(value)) found.push(...value.filter(isHandler))
  }
  if (found.length === 0) {
    throw new Error(`${path} exports no handlers; export values made with defineHandler(type, fn)`)
  }
  return found
}
