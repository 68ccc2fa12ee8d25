/**
 * Pooled sandboxes: per (mode, heap limit, module), sandboxes that ended a run
 * cleanly wait idle for the next, so short jobs do not pay a start each (a
 * thread takes tens of milliseconds to start, a process about a hundred). An
 * idle sandbox is ended after `idleMs`; at most `maxIdle` wait per kind. A
 * sandbox that exited, crashed, or was ended for an abort is never reused.
 * Caller: the Executor, for handlers whose effective mode is not `none`.
 */
import type { Logger } from '../logger.ts'
import { ConfigError } from '../errors.ts'
import type { Handler, HandlerContext, HandlerRegistry } from './handlers.ts'
import type { RunDataField, SandboxInit, SandboxMode } from './sandbox-protocol.ts'
import { Sandbox, type SandboxResult } from './sandbox.ts'

export interface SandboxPoolParams {
  log: Logger
  /** The log level sandboxes' loggers use. */
  logLevel: string
  /** How long an aborted handler gets to end by itself before its sandbox is ended. */
  graceMs: number
  /** How long an idle sandbox is kept. */
  idleMs: number
  /** Most idle sandboxes kept per kind (the worker's concurrency). */
  maxIdle: number
}

/** What a run needs from the worker: its data, its abort signal, its output stream. */
export interface PooledRun extends Placement {
  handler: Handler
  ctx: Pick<HandlerContext, RunDataField | 'scheduledFor' | 'signal' | 'output'>
}

/** Where one handler type runs when it is sandboxed. */
export interface Placement {
  mode: SandboxInit['mode']
  memoryLimitMb: number | undefined
}

/**
 * Which handlers run in a sandbox: the worker's mode if it has one, else each handler's own. A
 * handler that asks for a sandbox but whose module is unknown is an error; one the worker's mode
 * would sandbox but whose module is unknown (a built-in handler) runs in-process.
 */
export function sandboxPlacements(handlers: HandlerRegistry, settings: { mode?: SandboxMode; memoryLimitMb?: number }, log: Logger): Map<string, Placement> {
  const placements = new Map<string, Placement>()
  for (const type of handlers.types()) {
    const h = handlers.get(type) as Handler
    const mode = settings.mode ?? h.sandbox ?? 'none'
    if (mode === 'none') continue
    if (!h.module) {
      if (settings.mode) {
        log.info({ type, sandbox: mode }, 'handler runs in-process: its module is not known to load in a sandbox')
        continue
      }
      throw new ConfigError(
        `handler "${type}" asks for a ${mode} sandbox but its module is not known: load it with --handlers, or pass { module: import.meta.url } to defineHandler`,
      )
    }
    placements.set(type, { mode, memoryLimitMb: h.memoryLimitMb ?? settings.memoryLimitMb })
  }
  return placements
}

/** Waits for a new sandbox to load its module; an abort meanwhile ends the wait (and the sandbox). */
function untilReady(sandbox: Sandbox, signal: AbortSignal): Promise<void> {
  if (signal.aborted) return Promise.reject(signal.reason)
  return new Promise<void>((resolve, reject) => {
    const onAbort = () => {
      sandbox.kill()
      reject(signal.reason)
    }
    signal.addEventListener('abort', onAbort, { once: true })
    sandbox.ready.then(resolve, reject).finally(() => signal.removeEventListener('abort', onAbort))
  })
}

export class SandboxPool {
  private readonly p: SandboxPoolParams
  private readonly idle = new Map<string, Sandbox[]>()
  private readonly idleTimers = new Map<Sandbox, NodeJS.Timeout>()
  private readonly live = new Set<Sandbox>()
  private closed = false

  constructor(params: SandboxPoolParams) {
    this.p = params
  }

  /** Sandboxes alive now: running a handler, or idle. */
  get size(): number {
    return this.live.size
  }

  /** Sandboxes alive and idle, kept for the next run. */
  get idleSize(): number {
    let n = 0
    for (const list of this.idle.values()) n += list.length
    return n
  }

  /** Runs the handler in a pooled sandbox; settles with its result or error. */
  async run(r: PooledRun): Promise<SandboxResult> {
    const key = `${r.mode}\u0000${r.memoryLimitMb ?? ''}\u0000${r.handler.module}`
    const sandbox = this.takeIdle(key) ?? this.spawn(r)
    const { ctx } = r
    try {
      await untilReady(sandbox, ctx.signal)
      const { payload, jobId, executionId, attempt, maxAttempts, type, queue } = ctx
      const runCtx = { payload, jobId, executionId, attempt, maxAttempts, type, queue, scheduledForMs: ctx.scheduledFor.getTime() }
      return await sandbox.run({ ctx: runCtx, signal: ctx.signal, output: () => ctx.output }, this.p.graceMs)
    } finally {
      if (sandbox.usable && !this.closed) this.putIdle(key, sandbox)
      else sandbox.kill()
    }
  }

  /**
   * Ends every sandbox (at worker stop, after runs were handed back); resolves once all have exited
   * and the runs they held have settled.
   */
  async close(): Promise<void> {
    this.closed = true
    for (const timer of this.idleTimers.values()) clearTimeout(timer)
    this.idleTimers.clear()
    this.idle.clear()
    await Promise.all([...this.live].map((sandbox) => sandbox.end()))
    // A run settles in microtasks after its sandbox's exit: one turn of the event loop lets them.
    await new Promise((resolve) => setImmediate(resolve))
  }

  private spawn(r: PooledRun): Sandbox {
    const init: SandboxInit = { module: r.handler.module as string, logLevel: this.p.logLevel, mode: r.mode }
    const sandbox = new Sandbox(init, r.memoryLimitMb)
    this.live.add(sandbox)
    sandbox.onExit = () => {
      this.live.delete(sandbox)
      this.dropIdle(sandbox)
    }
    this.p.log.debug({ mode: r.mode, module: r.handler.module, memoryLimitMb: r.memoryLimitMb }, 'sandbox started')
    return sandbox
  }

  private takeIdle(key: string): Sandbox | undefined {
    const list = this.idle.get(key)
    let sandbox = list?.pop()
    while (sandbox && !sandbox.usable) sandbox = list?.pop()
    if (sandbox) {
      clearTimeout(this.idleTimers.get(sandbox))
      this.idleTimers.delete(sandbox)
    }
    return sandbox
  }

  private putIdle(key: string, sandbox: Sandbox): void {
    const list = this.idle.get(key) ?? []
    this.idle.set(key, list)
    if (list.length >= this.p.maxIdle) {
      sandbox.kill()
      return
    }
    list.push(sandbox)
    const timer = setTimeout(() => sandbox.kill(), this.p.idleMs)
    timer.unref()
    this.idleTimers.set(sandbox, timer)
  }

  private dropIdle(sandbox: Sandbox): void {
    clearTimeout(this.idleTimers.get(sandbox))
    this.idleTimers.delete(sandbox)
    for (const list of this.idle.values()) {
      const i = list.indexOf(sandbox)
      if (i >= 0) list.splice(i, 1)
    }
  }
}
