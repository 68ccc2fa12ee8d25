/**
 * Handlers: `defineHandler(type, fn)` names the code that runs jobs of one
 * type. A handler returns a JSON-serialisable result (at most 64 KiB; write
 * bulk output to `ctx.output`), throws `FatalError` to fail without retry, or
 * throws anything else to be retried with backoff. It must watch `ctx.signal`:
 * it is aborted on timeout, cancellation, lost lease and shutdown.
 *
 * A handler may run in a sandbox (`{ sandbox: 'thread' | 'process' }`, or a
 * worker's setting for every handler it loads from a module): a worker thread
 * or a child process that loads the handler's module itself, so a handler that
 * ignores its signal, blocks the CPU, exits or runs out of memory ends only
 * its own attempt. See sandbox-pool.ts.
 */
import type { Writable } from 'node:stream'
import { spawnSync } from 'node:child_process'
import { fileURLToPath, pathToFileURL } from 'node:url'
import { resolve } from 'node:path'
import type { Logger } from '../logger.ts'
import { ValidationError } from '../errors.ts'
import { TYPE_PATTERN } from '../core/names.ts'
import { assertKnownFields, type FieldSet } from '../core/known-fields.ts'
import { SANDBOX_MODES, type SandboxMode } from './sandbox-protocol.ts'

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

/** Where and how a handler runs. */
export interface HandlerOptions {
  /** `none` (default): in the worker's thread, fastest; `thread` or `process`: in a pooled sandbox. */
  sandbox?: SandboxMode
  /** The sandbox's JavaScript heap limit in MB (default: the worker's setting, else Node's). */
  memoryLimitMb?: number
  /**
   * The module a sandbox loads to find this handler (a path or file:// URL; `import.meta.url` in the
   * module that defines it). Set for every handler loaded with `--handlers` / loadHandlerModule.
   */
  module?: string
}

export interface Handler {
  readonly kind: 'pgsched.handler'
  readonly type: string
  readonly run: HandlerFn
  readonly sandbox?: SandboxMode
  readonly memoryLimitMb?: number
  /** The handler's module as a file:// URL, when known. */
  readonly module?: string
}

const TYPE = new RegExp(TYPE_PATTERN)

/** A module path or URL as a file:// URL. */
function moduleUrl(module: string): string {
  return /^file:/.test(module) ? module : pathToFileURL(resolve(module)).href
}

/** The options of defineHandler; any other is refused: a misspelt `sandBox` would run the handler with no sandbox. */
const HANDLER_OPTIONS_FIELDS: FieldSet<HandlerOptions> = { sandbox: true, memoryLimitMb: true, module: true }

/**
 * Declares the handler for jobs of `type`.
 * @throws ValidationError for a bad type or option, or an option it does not know (from JavaScript), naming the handler.
 */
export function defineHandler<P = unknown>(type: string, run: HandlerFn<P>, options: HandlerOptions = {}): Handler {
  if (!TYPE.test(type)) throw new ValidationError(`handler type "${type}" must be 1-128 characters: letters, digits and _ . : / -`)
  // from JavaScript: a handler that is not a function would fail every attempt of its jobs, each retried
  if (typeof run !== 'function') {
    const got = run === null || run === undefined ? String(run) : typeof run === 'object' ? 'an object' : `a ${typeof run}`
    throw new ValidationError(`handler "${type}": the handler must be a function (ctx) => result, got ${got}`)
  }
  try {
    assertKnownFields(options, HANDLER_OPTIONS_FIELDS, 'options')
  } catch (err: unknown) {
    // a module defines many handlers: the refusal names the one it is about
    if (err instanceof ValidationError) throw new ValidationError(`handler "${type}": ${err.message}`, err.details)
    throw err
  }
  const { sandbox, memoryLimitMb, module } = options
  if (sandbox !== undefined && !SANDBOX_MODES.includes(sandbox)) {
    throw new ValidationError(`handler "${type}": sandbox must be one of ${SANDBOX_MODES.join(', ')}, not "${String(sandbox)}"`)
  }
  if (memoryLimitMb !== undefined && !(Number.isInteger(memoryLimitMb) && memoryLimitMb >= 16)) {
    throw new ValidationError(`handler "${type}": memoryLimitMb must be an integer of at least 16, not ${String(memoryLimitMb)}`)
  }
  return {
    kind: 'pgsched.handler',
    type,
    run: run as HandlerFn,
    ...(sandbox && { sandbox }),
    ...(memoryLimitMb && { memoryLimitMb }),
    ...(module && { module: moduleUrl(module) }),
  }
}

/** The worker's built-in handlers, with what a refusal of a second handler of their type says of them. */
const BUILT_IN = new WeakMap<Handler, string>()

/**
 * Marks `handler` as one of the worker's own (`what` says which and how to do without it), so that an
 * application's handler of the same type is refused naming it. Returns the handler.
 */
export function builtInHandler(handler: Handler, what: string): Handler {
  BUILT_IN.set(handler, what)
  return handler
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

  /** @throws ValidationError when a handler of its type is there already. */
  add(handler: Handler): void {
    const existing = this.byType.get(handler.type)
    if (existing) {
      const builtIn = BUILT_IN.get(existing) ?? BUILT_IN.get(handler)
      const message = `two handlers for type "${handler.type}": a worker runs each type with one handler`
      throw new ValidationError(builtIn ? `${message}, and "${handler.type}" is ${builtIn}` : message)
    }
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
 * handlers (e.g. `export default [defineHandler(…), …]`), and the handlers of a default export
 * that is an object of them (`export default { sendEmail }`, a CommonJS `module.exports`).
 */
export async function loadHandlerModule(path: string): Promise<Handler[]> {
  const href = moduleUrl(path)
  let mod: Record<string, unknown>
  // A module whose top-level await never settles, with nothing else left to run, would end the
  // process with code 13 and nothing said: the loop's emptying (beforeExit) is taken as its error.
  let unsettled: (() => void) | undefined
  try {
    mod = (await Promise.race([
      import(href),
      new Promise<never>((_resolve, reject) => {
        unsettled = () => reject(new Error('its top-level await never settles (nothing it waits for is left to happen)'))
        process.once('beforeExit', unsettled)
      }),
    ])) as Record<string, unknown>
  } catch (err: unknown) {
    // the module's own error (a syntax error, a throw while it loads) says neither which module nor where
    const message = err instanceof Error ? err.message : String(err)
    // a syntax error of the module's text is found by node --check; any other error (a SyntaxError
    // of JSON.parse at load time too) by the module's place in its stack, as a URL (ES modules) or a
    // path (CommonJS)
    const stack = err instanceof Error ? (err.stack ?? '') : ''
    const file = href.startsWith('file:') ? fileURLToPath(href) : href
    const line = (err instanceof SyntaxError ? syntaxErrorLine(href) : undefined) ?? lineIn(stack, href) ?? lineIn(stack, file)
    throw new Error(`could not load the handlers module ${path}${line === undefined ? '' : ` (line ${line})`}: ${message}`, { cause: err })
  } finally {
    if (unsettled) process.off('beforeExit', unsettled)
  }
  // Each knows its module, so a sandbox can load it.
  const found = handlersIn(mod).map((h) => (h.module ? h : { ...h, module: href }))
  if (found.length === 0) {
    throw new Error(`${path} exports no handlers; export values made with defineHandler(type, fn)`)
  }
  return found
}

/**
 * The line of a module's syntax error: Node.js keeps it out of the error it throws (it prints it only
 * for an uncaught one), so `node --check` reads the file again and says. Only on this failure path.
 */
function syntaxErrorLine(href: string): number | undefined {
  if (!href.startsWith('file:')) return undefined
  const file = fileURLToPath(href)
  const checked = spawnSync(process.execPath, ['--check', file], { encoding: 'utf8', timeout: 10_000 })
  const first = (checked.stderr ?? '').split('\n', 1)[0] ?? ''
  const digits = first.startsWith(`${file}:`) ? /^\d+$/.exec(first.slice(file.length + 1)) : null
  return digits ? Number(digits[0]) : undefined
}

/** The first line of `href` a stack names (`file:///…/h.mjs:3` or `file:///…/h.mjs:3:7`), if any. */
function lineIn(stack: string, href: string): number | undefined {
  const at = stack.indexOf(`${href}:`)
  if (at === -1) return undefined
  const digits = /^\d+/.exec(stack.slice(at + href.length + 1))
  return digits ? Number(digits[0]) : undefined
}

/** The handlers a module exports, alone or in arrays. */
export function handlersIn(mod: Record<string, unknown>): Handler[] {
  // each handler once: a CommonJS module's exports are both its named exports and its default
  const found = new Set<Handler>()
  const take = (value: unknown) => {
    if (isHandler(value)) found.add(value)
    else if (Array.isArray(value)) for (const v of value) if (isHandler(v)) found.add(v)
  }
  for (const [name, value] of Object.entries(mod)) {
    take(value)
    // a default export that is an object of handlers (`export default { sendEmail }`, `module.exports = { sendEmail }`)
    if (name === 'default' && typeof value === 'object' && value !== null && !Array.isArray(value) && !isHandler(value)) {
      for (const v of Object.values(value)) take(v)
    }
  }
  return [...found]
}
