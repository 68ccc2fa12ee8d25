/**
 * The shape of `pgsched.executions.error`: why the latest attempt of an
 * execution did not succeed. Written by the worker (a handler threw, timed out
 * or returned too much), by the reaper (a lease expired) and by a cancel; read
 * by people in SQL and returned whole by the API. Every writer builds it from
 * the field names here, so the three cannot drift apart.
 */

import { storableText } from './names.ts'
import { thrownText } from '../errors.ts'

/** One attempt's failure, as stored and as the API returns it. */
export interface ExecutionError {
  /** What went wrong, for people. */
  message: string
  /** The error's class name: the handler's own, or FatalError, TimeoutError, LeaseExpiredError, CancelledError. */
  name: string
  /** No retry follows (FatalError, result too large, attempts exhausted by a fatal error). */
  fatal?: boolean
  /** The attempt ran out of its `timeoutMs`. Absent when false. */
  timedOut?: boolean
  /** The attempt this error ended. */
  attempt: number
  /** The worker that ran the attempt, when one did. */
  workerId?: string
  /** When the failure was recorded (ISO 8601). */
  at?: string
}

/** The field names of `ExecutionError`, in the order they are written. */
export const EXECUTION_ERROR_FIELDS = ['message', 'name', 'fatal', 'timedOut', 'attempt', 'workerId', 'at'] as const satisfies readonly (keyof ExecutionError)[]

/**
 * The stored JSON text of an error; `timedOut` is left out when false. The message and name are made
 * storable (an error's message may hold any text, or be no text at all; jsonb refuses NUL and lone
 * surrogates, and the failure's statement would fail at every retry).
 */
export function executionErrorJson(error: ExecutionError): string {
  const e: ExecutionError = {
    // a handler's error may carry a message or name that is not text (an object some libraries set): its JSON
    message: storableText(thrownText(error.message)),
    name: storableText(thrownText(error.name)),
    fatal: error.fatal,
    timedOut: error.timedOut || undefined,
    attempt: error.attempt,
    workerId: error.workerId,
    at: error.at,
  }
  return JSON.stringify(e)
}
