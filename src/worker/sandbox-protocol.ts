/**
 * The messages between a worker and its sandboxes (a worker thread or a child
 * process running sandbox-entry.ts). Structured-clone values: the same
 * messages travel through `postMessage` and through a child's IPC channel
 * (`serialization: 'advanced'`). One run at a time per sandbox; `id` names it.
 */

/** Where a sandboxed handler runs: `none` is in the worker's own thread. */
export type SandboxMode = 'none' | 'thread' | 'process'

export const SANDBOX_MODES: readonly SandboxMode[] = ['none', 'thread', 'process']

/** What a sandbox is started with. */
export interface SandboxInit {
  /** The handler module's file:// URL. */
  module: string
  logLevel: string
  mode: Exclude<SandboxMode, 'none'>
}

/** The data fields of a HandlerContext (signal, log and output are rebuilt inside). */
export interface SandboxRunContext {
  payload: unknown
  jobId: string
  executionId: string
  attempt: number
  maxAttempts: number
  type: string
  queue: string
  scheduledForMs: number
}

/** An error as it crosses the boundary. */
export interface SandboxErrorData {
  name: string
  message: string
  stack?: string
  /** The handler threw FatalError: no retry. */
  fatal: boolean
}

/** Worker → sandbox. */
export type ToSandbox = { t: 'run'; id: number; ctx: SandboxRunContext } | { t: 'abort'; id: number; name: string; message: string }

/** Sandbox → worker. */
export type FromSandbox =
  | { t: 'ready'; types: string[] }
  | { t: 'init-failed'; error: SandboxErrorData }
  | { t: 'output'; id: number; chunk: Uint8Array | string }
  | { t: 'done'; id: number; ok: true; json: string }
  | { t: 'done'; id: number; ok: false; error: SandboxErrorData }
  | { t: 'crash'; error: SandboxErrorData }

/** An error's data for the boundary. */
export function errorData(err: unknown): SandboxErrorData {
  if (err instanceof Error) {
    return { name: err.name, message: err.message, stack: err.stack, fatal: err.name === 'FatalError' }
  }
  return { name: 'Error', message: String(err), fatal: false }
}
