/**
 * One sandbox: a worker thread or a child process running sandbox-entry.ts
 * with one handler module loaded, running one handler at a time. `run` sends
 * the run's context, writes what the handler sends to the run's output, and
 * settles with the handler's result or error. When the run's signal aborts,
 * the handler is told, and if it has not ended after `graceMs` the sandbox is
 * ended for real (thread terminated, process SIGKILLed) and the run settles
 * with the abort reason. A sandbox that exits, crashes, runs out of memory or
 * is ended during a run fails that run with a SandboxError saying which, and
 * is not used again. Caller: SandboxPool.
 */
import { type ChildProcess, fork } from 'node:child_process'
import { fileURLToPath } from 'node:url'
import { Worker as Thread } from 'node:worker_threads'
import type { Writable } from 'node:stream'
import { FatalError } from '../errors.ts'
import type { FromSandbox, SandboxErrorData, SandboxInit, SandboxRunContext, ToSandbox } from './sandbox-protocol.ts'

/** A sandboxed attempt ended because its sandbox did (exit, crash, out of memory): retried like any failure. */
export class SandboxError extends Error {
  constructor(message: string) {
    super(message)
    this.name = 'SandboxError'
  }
}

/** A handler's result as JSON text, serialised inside the sandbox. */
export class SandboxResult {
  readonly json: string
  constructor(json: string) {
    this.json = json
  }
}

/** Why `value` is not the JSON text of one value (undefined: it is). */
function jsonProblem(value: unknown): string | undefined {
  if (typeof value !== 'string') return `a ${typeof value}, not a string`
  try {
    JSON.parse(value)
    return undefined
  } catch (err) {
    return (err as Error).message
  }
}

/** The compiled entry (from the sources, as under a test runner, the one in dist/). */
function entryUrl(): URL {
  const here = import.meta.url
  return here.endsWith('.ts') ? new URL('../../dist/src/worker/sandbox-entry.js', here) : new URL('./sandbox-entry.js', here)
}

/** Most of a sandbox process's stderr kept to explain its death. */
const STDERR_TAIL_CHARS = 4096

/** What the handler inside sees of the run. */
export interface SandboxRun {
  ctx: SandboxRunContext
  signal: AbortSignal
  /** Opened on the handler's first write. */
  output: () => Writable
}

interface Current {
  id: number
  resolve: (value: SandboxResult) => void
  reject: (error: Error) => void
  output: () => Writable
}

/** Rebuilds an error from inside: a FatalError (or a subclass) stays fatal; each keeps its name and stack. */
function toLocalError(e: SandboxErrorData): Error {
  const error = e.fatal ? new FatalError(e.message) : new Error(e.message)
  error.name = e.name
  if (e.stack) error.stack = e.stack
  return error
}

export class Sandbox {
  readonly init: SandboxInit
  private readonly memoryLimitMb: number | undefined
  private readonly thread: Thread | undefined
  private readonly child: ChildProcess | undefined
  private current: Current | undefined
  private nextId = 0
  /** Why it is dying, when known before it exits. */
  private cause: string | undefined
  private stderrTail = ''
  private exited = false
  /** Ended (or being ended) on purpose: never handed another run. */
  private killed = false
  private readyWaiter: { resolve: () => void; reject: (e: Error) => void } | undefined
  /** Resolves once it loaded its module; rejects if it could not. */
  readonly ready: Promise<void>
  /** Called once when it has exited, whatever the reason. */
  onExit: () => void = () => undefined
  private readonly exitWaiters: Array<() => void> = []

  constructor(init: SandboxInit, memoryLimitMb: number | undefined) {
    this.init = init
    this.memoryLimitMb = memoryLimitMb
    this.ready = new Promise<void>((resolve, reject) => (this.readyWaiter = { resolve, reject }))
    this.ready.catch(() => undefined)
    if (init.mode === 'thread') {
      const thread = new Thread(entryUrl(), {
        workerData: init,
        execArgv: [],
        ...(memoryLimitMb && { resourceLimits: { maxOldGenerationSizeMb: memoryLimitMb } }),
      })
      thread.on('message', this.onMessage)
      thread.on('error', (err: Error & { code?: string }) => {
        this.cause ??=
          err.code === 'ERR_WORKER_OUT_OF_MEMORY'
            ? `sandbox thread ran out of memory (limit ${this.limitText()})`
            : `uncaught error in sandbox thread: ${err.name}: ${err.message}`
      })
      thread.on('exit', (code) => this.ended(`sandbox thread exited with code ${code}`))
      this.thread = thread
    } else {
      const child = fork(fileURLToPath(entryUrl()), [JSON.stringify(init)], {
        execArgv: memoryLimitMb ? [`--max-old-space-size=${memoryLimitMb}`] : [],
        serialization: 'advanced',
        stdio: ['ignore', 'inherit', 'pipe', 'ipc'],
      })
      child.on('message', this.onMessage)
      child.stderr?.on('data', (chunk: Buffer) => {
        process.stderr.write(chunk)
        this.stderrTail = (this.stderrTail + chunk.toString()).slice(-STDERR_TAIL_CHARS)
      })
      child.on('error', (err: Error) => (this.cause ??= `sandbox process failed: ${err.message}`))
      child.on('exit', (code, signal) => this.ended(this.processExitText(code, signal)))
      this.child = child
    }
  }

  /** True while it can take another run. */
  get usable(): boolean {
    return !this.exited && !this.killed && this.cause === undefined && this.current === undefined
  }

  /** Runs one handler; see the file header. Never called while another run is on. */
  run(run: SandboxRun, graceMs: number): Promise<SandboxResult> {
    const id = ++this.nextId
    return new Promise<SandboxResult>((resolve, reject) => {
      let killTimer: NodeJS.Timeout | undefined
      const onAbort = () => {
        const reason = run.signal.reason as Error
        this.post({ t: 'abort', id, name: reason?.name ?? 'AbortError', message: reason?.message ?? 'aborted' })
        killTimer = setTimeout(() => {
          this.cause ??= `sandbox ${this.init.mode} ended: the handler did not stop within ${graceMs} ms of its abort (${reason?.message})`
          this.kill()
        }, graceMs)
      }
      const settle = () => {
        this.hold(false)
        clearTimeout(killTimer)
        run.signal.removeEventListener('abort', onAbort)
        this.current = undefined
      }
      this.current = {
        id,
        output: run.output,
        resolve: (value) => {
          settle()
          resolve(value)
        },
        reject: (error) => {
          settle()
          // A run ended for its abort settles with the abort's reason.
          reject(run.signal.aborted ? (run.signal.reason as Error) : error)
        },
      }
      if (this.exited) return this.current.reject(new SandboxError(this.cause ?? `sandbox ${this.init.mode} is gone`))
      this.hold(true)
      run.signal.addEventListener('abort', onAbort, { once: true })
      this.post({ t: 'run', id, ctx: run.ctx })
      if (run.signal.aborted) onAbort()
    })
  }

  /** A sandbox keeps the worker's process alive only while it runs a handler (or loads its module). */
  private hold(on: boolean): void {
    if (on) {
      this.thread?.ref()
      this.child?.ref()
      this.child?.channel?.ref()
    } else {
      this.thread?.unref()
      this.child?.unref()
      this.child?.channel?.unref()
    }
  }

  /** Ends it at once; resolves when it has exited. */
  end(): Promise<void> {
    if (this.exited) return Promise.resolve()
    const exited = new Promise<void>((resolve) => this.exitWaiters.push(resolve))
    this.kill()
    return exited
  }

  /** Ends it at once (terminate or SIGKILL). */
  kill(): void {
    this.killed = true
    if (this.exited) return
    if (this.thread) void this.thread.terminate()
    else this.child?.kill('SIGKILL')
  }

  private post(message: ToSandbox): void {
    try {
      if (this.thread) this.thread.postMessage(message)
      else this.child?.send(message)
    } catch (err: unknown) {
      // The run's payload crossed before the worker claimed it as JSON: only a closed channel lands here.
      this.cause ??= `sandbox ${this.init.mode} unreachable: ${(err as Error).message}`
      this.kill()
    }
  }

  private readonly onMessage = (message: FromSandbox): void => {
    switch (message.t) {
      case 'ready':
        if (!this.current) this.hold(false)
        this.readyWaiter?.resolve()
        return
      case 'init-failed':
        this.cause ??= `sandbox could not load ${this.init.module}: ${message.error.name}: ${message.error.message}`
        this.readyWaiter?.reject(new SandboxError(this.cause))
        this.kill()
        return
      case 'crash':
        this.cause ??= `uncaught error in sandbox process: ${message.error.name}: ${message.error.message}`
        return
      case 'output':
        if (this.current?.id === message.id) this.current.output().write(message.chunk)
        return
      case 'done':
        if (this.current?.id !== message.id) return
        if (message.ok) {
          // the result goes into the outcome statement as JSON text (leaseMap): it must be one JSON value
          const problem = jsonProblem(message.json)
          if (problem === undefined) this.current.resolve(new SandboxResult(message.json as string))
          else this.current.reject(new SandboxError(`the sandbox returned a result that is not JSON text: ${problem}`))
        } else this.current.reject(toLocalError(message.error))
        return
    }
  }

  private ended(text: string): void {
    if (this.exited) return
    this.exited = true
    const cause = this.cause ?? text
    this.readyWaiter?.reject(new SandboxError(cause))
    this.current?.reject(new SandboxError(`${cause} during the run`))
    this.onExit()
    for (const resolve of this.exitWaiters.splice(0)) resolve()
  }

  private limitText(): string {
    return this.memoryLimitMb ? `${this.memoryLimitMb} MB` : "Node's default heap"
  }

  private processExitText(code: number | null, signal: NodeJS.Signals | null): string {
    if (/heap out of memory|Reached heap limit/.test(this.stderrTail)) return `sandbox process ran out of memory (limit ${this.limitText()})`
    return signal ? `sandbox process was killed by ${signal}` : `sandbox process exited with code ${code}`
  }
}
