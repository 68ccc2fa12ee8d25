/**
 * Plain statement forms (migration 0042). The claim, the completion and the common submit each have
 * a plain form without the event capture (and, for the submit, without the fair-share numbering),
 * guarded: should anyone listen to events, or a queue of the batch have fair share, it fails with
 * SQLSTATE PS001 and writes nothing. withPlainForm runs the plain form while this process has seen
 * no such refusal lately, and the full form otherwise or after a refusal. Which form runs never
 * changes what is written: the guard reads, in the statement, what the full form reads.
 *
 * What was refused is remembered for RECHECK_MS, then the plain form is tried again: with a live
 * listener (a webhook subscription is one for as long as it exists), one statement in RECHECK_MS
 * is run twice. Inside a transaction (a caller's, or the caller's own connection, which may be in
 * one) only the full form runs: a refusal would abort the transaction.
 */
import type { Kysely } from 'kysely'
import type { DB } from '../schema.ts'

const RECHECK_MS = 10_000

/** What a plain form leaves out. */
export interface PlainForm {
  /** No event capture. */
  events: boolean
  /** No fair-share numbering of new executions (submits). */
  fair: boolean
}

export const FULL_FORM: PlainForm = Object.freeze({ events: false, fair: false })

let eventsRefusedAtMs = Number.NEGATIVE_INFINITY
/** Queues (of submits) whose plain form was refused for fair share, with when. */
const fairRefusedAtMs = new Map<string, number>()

/** Kysely instances over a caller's own connection (kyselyOnClient): maybe in a transaction. */
const callerConnections = new WeakSet<Kysely<DB>>()

export function markCallerConnection(db: Kysely<DB>): void {
  callerConnections.add(db)
}

function recent(atMs: number | undefined, nowMs: number): boolean {
  return atMs !== undefined && nowMs - atMs < RECHECK_MS
}

/** The form to try first for a statement on `db` that writes new executions of `queues` (submits; none otherwise). */
export function plainFormFor(db: Kysely<DB>, queues: readonly string[] = []): PlainForm {
  if (db.isTransaction || callerConnections.has(db)) return FULL_FORM
  const now = performance.now()
  const fairRefused = queues.some((q) => recent(fairRefusedAtMs.get(q), now))
  return { events: !recent(eventsRefusedAtMs, now), fair: queues.length > 0 && !fairRefused }
}

/** The refusal of a plain form's guard: what it refused for (`events`, `fair share`), or undefined for any other error. */
export function plainFormRefusal(err: unknown): string | undefined {
  const e = err as { code?: unknown; detail?: unknown }
  return e?.code === 'PS001' && typeof e.detail === 'string' ? e.detail : undefined
}

/**
 * Runs `run` with the plain form for `db` (and the queues a submit writes), and again with the full
 * form should the plain one be refused; remembers the refusal for RECHECK_MS.
 */
export async function withPlainForm<T>(db: Kysely<DB>, queues: readonly string[], run: (form: PlainForm) => Promise<T>): Promise<T> {
  const form = plainFormFor(db, queues)
  if (!form.events && !form.fair) return run(FULL_FORM)
  try {
    return await run(form)
  } catch (err) {
    const refused = plainFormRefusal(err)
    if (refused === undefined) throw err
    const now = performance.now()
    if (refused === 'events') eventsRefusedAtMs = now
    else for (const q of queues) fairRefusedAtMs.set(q, now)
    return run(FULL_FORM)
  }
}

/** Forgets every refusal (tests). */
export function resetPlainForms(): void {
  eventsRefusedAtMs = Number.NEGATIVE_INFINITY
  fairRefusedAtMs.clear()
}
