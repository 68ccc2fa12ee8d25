/**
 * Plain statement forms (migration 0042). The claim, the completion and the common submit each have
 * a plain form without the event capture (and, for the submit, without the fair-share numbering),
 * guarded: should anyone listen to events, or a queue of the batch have fair share, it fails with
 * SQLSTATE PS001 and writes nothing. withPlainForm runs the plain form unless this process knows of
 * a listener or of fair share on a queue of the batch, and the full form after a refusal. Which
 * form runs never changes what is written: the guard reads, in the statement and its snapshot, what
 * the full form reads.
 *
 * What a refusal taught is kept and, while it says that someone listens or that some queue has fair
 * share, read afresh (one small query) before a statement once it is RECHECK_MS old: a refusal costs
 * a statement run twice and an error in the server's log, so it happens when a listener or a fair
 * queue appears, not again while it stays. Inside a transaction (a Kysely transaction, a caller's
 * connection from kyselyOnClient, or a Kysely a caller gave as `trx`) only the full form runs: a
 * refusal would abort the transaction.
 */
import { sql, type Kysely, type RawBuilder } from 'kysely'
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

/** What this process knows: whether anyone listens, and which queues have fair share, as of checkedAtMs. */
const known = { listened: false, fairQueues: new Set<string>(), checkedAtMs: 0 }

/** Kysely instances that may be in a transaction of a caller's (kyselyOnClient, a `trx` given to the client). */
const callerConnections = new WeakSet<Kysely<DB>>()

export function markCallerConnection(db: Kysely<DB>): void {
  callerConnections.add(db)
}

/** `db` is, or may be, in a transaction, which a refusal would abort. */
function inTransaction(db: Kysely<DB>): boolean {
  return db.isTransaction || callerConnections.has(db)
}

/**
 * A plain form's guard, as the CTE `name`: a data-modifying CTE (so it runs whether or not the
 * statement reads it) that writes nothing and fails the statement through `refusal`, a call of
 * pgsched.plain_form_refused, when `when` holds.
 */
export function plainFormGuard(name: string, when: RawBuilder<unknown>, refusal: RawBuilder<unknown>): RawBuilder<unknown> {
  return sql`${sql.id(name)} as (
      insert into pgsched.event_batches (types)
      select null
       where case when ${when} then ${refusal} else false end
    )`
}

/** The form to try first for a statement on `db` that writes new executions of `queues` (submits; none otherwise). */
export function plainFormFor(db: Kysely<DB>, queues: readonly string[] = []): PlainForm {
  if (inTransaction(db)) return FULL_FORM
  return { events: !known.listened, fair: queues.length > 0 && !queues.some((q) => known.fairQueues.has(q)) }
}

/** The refusal of a plain form's guard (`events`, or `fair share` with its queues), or undefined for any other error. */
export function plainFormRefusal(err: unknown): { what: string; names: string[] } | undefined {
  const e = err as { code?: unknown; detail?: unknown; hint?: unknown }
  if (e?.code !== 'PS001' || typeof e.detail !== 'string') return undefined
  let names: string[] = []
  try {
    const parsed: unknown = typeof e.hint === 'string' && e.hint !== '' ? JSON.parse(e.hint) : []
    if (Array.isArray(parsed)) names = parsed.filter((n): n is string => typeof n === 'string')
  } catch {
    // no names: the refusal still stands
  }
  return { what: e.detail, names }
}

/** Reads again whether anyone listens and which queues have fair share. */
async function recheck(db: Kysely<DB>): Promise<void> {
  const { rows } = await sql<{ listened: boolean; fair: string[] }>`
    select exists (select 1 from pgsched.event_listeners l where l.until > now()) as listened,
           array(select name from pgsched.queues where fair_share) as fair`.execute(db)
  const row = rows[0]
  if (!row) return
  known.listened = row.listened
  known.fairQueues = new Set(row.fair)
  known.checkedAtMs = performance.now()
}

/**
 * Runs `run` with the plain form for `db` (and the queues a submit writes), and again with the full
 * form should the plain one be refused.
 */
export async function withPlainForm<T>(db: Kysely<DB>, queues: readonly string[], run: (form: PlainForm) => Promise<T>): Promise<T> {
  if (inTransaction(db)) return run(FULL_FORM)
  if ((known.listened || known.fairQueues.size > 0) && performance.now() - known.checkedAtMs >= RECHECK_MS) await recheck(db)
  const form = plainFormFor(db, queues)
  if (!form.events && !form.fair) return run(FULL_FORM)
  try {
    return await run(form)
  } catch (err) {
    const refused = plainFormRefusal(err)
    if (refused === undefined) throw err
    if (refused.what === 'events') known.listened = true
    else for (const q of refused.names.length > 0 ? refused.names : queues) known.fairQueues.add(q)
    known.checkedAtMs = performance.now()
    return run(FULL_FORM)
  }
}

/** Forgets what refusals taught (tests). */
export function resetPlainForms(): void {
  known.listened = false
  known.fairQueues = new Set()
  known.checkedAtMs = 0
}
