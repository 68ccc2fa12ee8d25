/**
 * The messages between a worker and its sandboxes (a worker thread or a child
 * process running sandbox-entry.ts). Structured-clone values: the same
 * messages travel through `postMessage` and through a child's IPC channel
 * (`serialization: 'advanced'`). One run at a time per sandbox; `id` names it.
 */

import type { HandlerContext } from './handlers.ts'
import { isFatal, toError } from '../errors.ts'

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

/** The plain data fields of a HandlerContext, which cross to a sandbox as they are. */
export type RunDataField = 'payload' | 'jobId' | 'executionId' | 'attempt' | 'maxAttempts' | 'type' | 'queue'

/** The data fields of a HandlerContext (the fire time as epoch ms; signal, log and output are rebuilt inside). */
export type SandboxRunContext = Pick<HandlerContext, RunDataField> & { scheduledForMs: number }

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

/** An error's data for the boundary; anything else thrown as it is recorded in-process (toError). */
export function errorData(err: unknown): SandboxErrorData {
  if (err instanceof Error) {
    return { name: err.name, message: err.message, stack: err.stack, fatal: isFatal(err) }
  }
  return { name: 'Error', message: toError(err).message, fatal: false }
}
