/**
 * The admitted claim of a limited queue (migrations/0027): when its limits should not bind, one
 * statement takes the rows without the queue's settings row lock (as the ordinary claim does, or in
 * the fair order) and pgsched.queue_claim_admit checks them against the limits under that lock at
 * its end: one round trip, and the lock held for microseconds instead of a transaction of several
 * statements. When the check fails the statement is undone (SQLSTATE PGS01) and this returns null:
 * the caller claims under the lock instead (queueClaimLimited).
 */
import type { Kysely } from 'kysely'
import type { DB } from '../schema.ts'
import { executionClaimBatchQuery, inClaimOrder, type ClaimedExecution, type ExecutionClaimBatchParams } from './claim.ts'
import { RATE_HORIZON_MS, RATE_SPACING } from './claim-limited.ts'

/** The SQLSTATE pgsched.queue_claim_admit raises when a claim must be undone. */
export const CLAIM_NOT_ADMITTED = 'PGS01'

export interface QueueClaimAdmittedParams extends Omit<ExecutionClaimBatchParams, 'limited' | 'admit'> {
  /** The queue is claimed in the fair order (fair share on, as last read). */
  fair: boolean
}

export interface AdmittedClaim {
  claimed: ClaimedExecution[]
  /**
   * The queue's running executions once this claim was admitted, when the claim counted them (null: no
   * concurrency limit, nothing claimed, or the bound kept of them said the claim fits, uncounted: migration 0036).
   */
  running: number | null
}

/** PostgreSQL's SQLSTATE for a deadlock it broke by failing this statement. */
const DEADLOCK_DETECTED = '40P01'

/**
 * Not admitted: refused by the check, or failed as one side of a deadlock with a claim under the
 * settings row lock (that claim holds the lock and waits for rows this one took): either way the
 * claim was undone whole, and the caller claims under the lock.
 */
const isNotAdmitted = (err: unknown): boolean => {
  const code = typeof err === 'object' && err !== null ? (err as { code?: unknown }).code : undefined
  return code === CLAIM_NOT_ADMITTED || code === DEADLOCK_DETECTED
}

/** Claims from one limited queue (`queues` holds just it) as the file header says; null when not admitted. */
export async function queueClaimAdmitted(db: Kysely<DB>, params: QueueClaimAdmittedParams): Promise<AdmittedClaim | null> {
  const { fair, ...rest } = params
  const admit = { fair, horizonMs: RATE_HORIZON_MS, rateSpacing: RATE_SPACING }
  const query = executionClaimBatchQuery({ ...rest, admit })
  let rows: ClaimedExecution[]
  try {
    rows = inClaimOrder((await query.execute(db)).rows)
  } catch (err: unknown) {
    if (!isNotAdmitted(err)) throw err
    return null
  }
  const first = rows.find((r) => r.admitted != null)?.admitted
  rows.forEach((r, i) => {
    delete r.admitted
    // each start at its slot (the slots were taken from the clock read just before the commit)
    if (first?.spacingMs != null) r.startDelayMs = Math.max(0, first.firstSlotMs + i * first.spacingMs)
  })
  return { claimed: rows, running: first ? first.running : null }
}
