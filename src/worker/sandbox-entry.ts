/**
 * The code a sandbox runs: a worker thread (workerData) or a child process
 * (its first argument). It loads one handler module, says
 * `ready`, then runs one handler at a time as the worker asks, rebuilding the
 * handler's context: `signal` (aborted when the worker says so), `log` (a pino
 * logger to the same stdout, with the run's fields), and `output` (each chunk
 * sent to the worker, which stores it as it stores an in-process handler's).
 * A result crosses as JSON text, so it is stored exactly as in-process.
 */
import { Writable } from 'node:stream'
import { parentPort, Worker, workerData } from 'node:worker_threads'
import { createLogger, type Logger } from '../logger.ts'
import { handlersIn, type Handler, type HandlerContext } from './handlers.ts'
import { errorData, type FromSandbox, type SandboxInit, type SandboxRunContext, type ToSandbox } from './sandbox-protocol.ts'

const port = parentPort
const init: SandboxInit = port ? (workerData as SandboxInit) : (JSON.parse(process.argv[2] ?? '{}') as SandboxInit)

function send(message: FromSandbox): void {
  if (port) port.postMessage(message)
  else process.send?.(message)
}

/**
 * A child process's guard against outliving its worker: a thread of its own that ends the process
 * (SIGKILL) once its parent is gone (it has another parent then). 'disconnect' is not enough: it is
 * heard only when the handler yields, and a CPU-bound handler, the kind a process sandbox is for,
 * would run on after its worker was killed, beside the attempt another worker starts once the lease
 * expires.
 */
const ORPHAN_WATCH = `
const { workerData } = require('node:worker_threads')
setInterval(() => {
  if (process.ppid !== workerData.parent) process.kill(workerData.self, 'SIGKILL')
}, workerData.everyMs)
`

/** How often the guard looks at the parent (ms): well within any lease. */
const ORPHAN_WATCH_MS = 100

if (!port) {
  // A child process: report an uncaught error before dying, and die with the worker.
  process.on('uncaughtException', (err: unknown) => {
    process.send?.({ t: 'crash', error: errorData(err) } satisfies FromSandbox, () => process.exit(70))
  })
  process.on('disconnect', () => process.exit(0))
  new Worker(ORPHAN_WATCH, { eval: true, workerData: { parent: process.ppid, self: process.pid, everyMs: ORPHAN_WATCH_MS } }).unref()
}

const root = createLogger({ level: init.logLevel }).child({ sandbox: init.mode })
const byType = new Map<string, Handler>()
const running = new Map<number, AbortController>()

/** A named error for `signal.reason`, as the worker's abort reasons are. */
function abortReason(name: string, message: string): Error {
  const error = new Error(message)
  error.name = name
  return error
}

function contextFor(id: number, c: SandboxRunContext, controller: AbortController): HandlerContext & { ended(): void } {
  let log: Logger | undefined
  let output: Writable | undefined
  return {
    payload: c.payload,
    jobId: c.jobId,
    executionId: c.executionId,
    attempt: c.attempt,
    maxAttempts: c.maxAttempts,
    type: c.type,
    queue: c.queue,
    scheduledFor: new Date(c.scheduledForMs),
    signal: controller.signal,
    get log(): Logger {
      log ??= root.child({ jobId: c.jobId, executionId: c.executionId, kind: c.type, attempt: c.attempt })
      return log
    },
    get output(): Writable {
      output ??= new Writable({
        write(chunk: Uint8Array | string, _encoding, callback) {
          send({ t: 'output', id, chunk })
          callback()
        },
      })
      // as in-process (output-sink.ts): a write after end() is dropped, not an uncaught error that ends the sandbox
      output.on('error', () => {})
      return output
    },
    ended(): void {
      output?.end()
    },
  }
}

async function run(id: number, c: SandboxRunContext): Promise<void> {
  const controller = new AbortController()
  running.set(id, controller)
  const ctx = contextFor(id, c, controller)
  try {
    const handler = byType.get(c.type)
    if (!handler) throw Object.assign(new Error(`module ${init.module} has no handler for type "${c.type}"`), { name: 'FatalError' })
    const value = await handler.run(ctx)
    let json: string
    try {
      json = JSON.stringify(value ?? null) ?? 'null'
    } catch (err: unknown) {
      const error = errorData(err)
      send({ t: 'done', id, ok: false, error: { ...error, name: 'FatalError', message: `result cannot be stored as JSON: ${error.message}`, fatal: true } })
      return
    }
    send({ t: 'done', id, ok: true, json })
  } catch (err: unknown) {
    send({ t: 'done', id, ok: false, error: errorData(err) })
  } finally {
    ctx.ended()
    running.delete(id)
  }
}

function onMessage(message: ToSandbox): void {
  if (message.t === 'run') void run(message.id, message.ctx)
  else running.get(message.id)?.abort(abortReason(message.name, message.message))
}

try {
  const mod = (await import(init.module)) as Record<string, unknown>
  for (const h of handlersIn(mod)) byType.set(h.type, h)
  if (port) port.on('message', onMessage)
  else process.on('message', onMessage)
  send({ t: 'ready', types: [...byType.keys()] })
} catch (err: unknown) {
  send({ t: 'init-failed', error: errorData(err) })
}
