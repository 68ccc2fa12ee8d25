/**
 * The claim across a worker's queues, by their settings (pgsched.queues, read again at once when a
 * notification says they changed (migration 0037), so a pause, a resume or a new limit takes effect
 * at the next claim; otherwise every 10 s, or every second while the worker cannot hear
 * notifications; the claim statement itself skips paused and limited queues whatever this cache says):
 * - queues without settings: one ordinary claim statement, in priority order across them;
 * - each fair-share queue without limits: the ordinary claim statement in the queue's fair order
 *   (executionClaimBatch with fairOnly), after giving the executions that wait for their fair key
 *   theirs when the last claim said some wait (fairKeysAssign, migrations/0031);
 * - each limited queue (fair or not): a claim of its own with the room left. While its limits
 *   should not bind for that claim (no per-key limit of concurrency or rate; the running executions
 *   as last counted, by a claim under the lock or an admitted claim that counted them (migration
 *   0036), plus the claim within its concurrency limit; the claim's start slots spanning a tenth of
 *   the rate limit's horizon at most),
 *   an admitted claim (queueClaimAdmitted: one statement, checked at its end under the settings
 *   row lock); otherwise, or when the check refuses it, a claim under the settings row lock
 *   (queueClaimLimited), and only that for the next QUEUE_SETTINGS_TTL_MS.
 * Each claim begins with the next of these steps in turn, the others following in their order: the
 * first may fill the whole room (a backlog, claimed ahead), which would leave the later ones nothing.
 * `full` says that a limit held work back: nothing announces the end of another worker's run, so
 * the caller should claim again soon rather than wait for a wake-up.
 * Each claim commits on its own: when a later one fails, what the earlier ones took is still
 * returned (those rows are leased to this worker and must be run or handed back), and the error
 * goes to `onError`; it is thrown only when nothing was claimed.
 */
import type { Kysely } from 'kysely'
import type { DB } from '../db/schema.ts'
import { executionClaimBatch, FAIR_CLOCK_EVERY_MS, queueSettingsOf, type ClaimedExecution, type QueueSetting } from '../db/queries/claim.ts'
import { queueClaimAdmitted } from '../db/queries/claim-admitted.ts'
import { queueClaimLimited, RATE_HORIZON_MS, RATE_SPACING } from '../db/queries/claim-limited.ts'
import { fairKeysAssign } from '../db/queries/queues.ts'

/**
 * How long settings read from the database are used while changes are not heard of (no
 * notification connection), and how long a limited queue is claimed under its lock after a claim
 * there found its limits binding.
 */
export const QUEUE_SETTINGS_TTL_MS = 1_000

/**
 * How long they are used while the worker hears of changes (`hearing(true)`): every change of a
 * queue's row notifies (migration 0037), so this only bounds what a change missed in some way
 * other than a lost connection (which `hearing(false)` reports) can cost.
 */
export const QUEUE_SETTINGS_HEARD_TTL_MS = 10_000

/** Whether a rate of `limit` per `periodMs` spreads the start slots of `room` runs over more than a tenth of the horizon. */
function pacesStarts(limit: number | null, periodMs: number | null, room: number): boolean {
  return limit != null && periodMs != null && (room * periodMs * RATE_SPACING) / limit > RATE_HORIZON_MS / 10
}

/**
 * A run of a rate-limited queue whose start slot is less than this many ms away starts at once
 * rather than wait for a timer (which waits a whole millisecond at least): at most 1 ms, and at
 * most 1 % of the queue's rate period (and of its per-key one). Slots are spaced 7 % wider than
 * the limit needs (migrations/0015), so a start this early keeps every window of one period within
 * the limit.
 */
export function earlyStartMs(s: Pick<QueueSetting, 'ratePeriodMs' | 'keyRatePeriodMs'>): number {
  const periods = [s.ratePeriodMs, s.keyRatePeriodMs].filter((p): p is number => p != null)
  return periods.length === 0 ? 0 : Math.min(1, 0.01 * Math.min(...periods))
}

export interface QueueClaimsParams {
  db: Kysely<DB>
  workerId: string
  queues: readonly string[]
  types: readonly string[]
  leaseMs: number
  /** A claim failed after others had succeeded (their executions are returned). */
  onError: (err: unknown) => void
}

export class QueueClaims {
  private readonly p: QueueClaimsParams
  private settings = new Map<string, QueueSetting>()
  private readAtMs = Number.NEGATIVE_INFINITY
  /** Settings changes told (settingsChanged). */
  private changes = 0
  /** Which claim step goes first next time (claim). */
  private turn = 0
  /** Changes of the settings are heard of (see hearing). */
  private heard = false
  /** Per limited queue: its running executions as the last claim of it saw them (null: unknown). */
  private readonly running = new Map<string, number | null>()
  /** Per limited queue: until when (performance.now() ms) it is claimed only under its lock. */
  private readonly lockedUntil = new Map<string, number>()
  /** Per fair queue: whether executions waiting for their fair key may be due (as the last claim there said). */
  private readonly keysWaiting = new Map<string, boolean>()
  /** Per fair queue: when (performance.now() ms) this worker's claims last asked to move its clock. */
  private readonly clockAskedAt = new Map<string, number>()

  constructor(params: QueueClaimsParams) {
    this.p = params
  }

  /** Whether `queue` has a limit or fair share (as last read): the end of one of its runs frees room. */
  isLimited(queue: string): boolean {
    const s = this.settings.get(queue)
    return s !== undefined && (s.fairShare || s.concurrencyLimit != null || s.keyConcurrencyLimit != null || s.rateLimit != null || s.keyRateLimit != null)
  }

  /** Whether a claim of `room` from limited `queue` should go without its lock (see the file header). */
  private admittable(queue: string, room: number): boolean {
    const s = this.settings.get(queue)
    if (s === undefined || s.keyConcurrencyLimit != null || s.keyRateLimit != null) return false
    if ((this.lockedUntil.get(queue) ?? Number.NEGATIVE_INFINITY) > performance.now()) return false
    if (s.concurrencyLimit != null) {
      const running = this.running.get(queue)
      if (running == null || running + room > s.concurrencyLimit) return false
    }
    // A rate that paces the starts (their slots spread over more than a tenth of the horizon) keeps
    // the claim under the lock, whose slots are read from the clock just before the commit.
    if (pacesStarts(s.rateLimit, s.ratePeriodMs, room)) return false
    return true
  }

  /** The settings changed: read them again before the next claim. */
  settingsChanged(): void {
    this.changes++
    this.readAtMs = Number.NEGATIVE_INFINITY
  }

  /**
   * Whether changes of the settings are heard of (the notification connection is up): while they
   * are, the settings are read again on each change and otherwise every QUEUE_SETTINGS_HEARD_TTL_MS;
   * while not, every QUEUE_SETTINGS_TTL_MS. Heard again: read them at once (changes were missed).
   */
  hearing(on: boolean): void {
    this.heard = on
    if (on) this.settingsChanged()
  }

  /**
   * Claims up to `room` executions; see the file header. `withTraceparent`: also read each job's
   * traceparent. `startsNow`: how many of them the worker starts at once (default all): each claim
   * statement marks begun its share of them, the first in its order (ExecutionClaimBatchParams.startsNow).
   */
  async claim(room: number, withTraceparent = false, startsNow = room): Promise<{ claimed: ClaimedExecution[]; full: boolean }> {
    if (performance.now() - this.readAtMs >= (this.heard ? QUEUE_SETTINGS_HEARD_TTL_MS : QUEUE_SETTINGS_TTL_MS)) {
      const changes = this.changes
      this.settings = new Map((await queueSettingsOf(this.p.db, this.p.queues)).map((s) => [s.name, s]))
      // a change told while they were read may not be in them
      this.readAtMs = changes === this.changes ? performance.now() : Number.NEGATIVE_INFINITY
    }
    const { db, workerId, types, leaseMs } = this.p
    const fixed = { workerId, types, leaseMs, withTraceparent }
    const open: string[] = []
    const limited: string[] = []
    for (const q of this.p.queues) {
      const s = this.settings.get(q)
      if (s?.paused) continue
      if (this.isLimited(q)) limited.push(q)
      else open.push(q)
    }
    const claimed: ClaimedExecution[] = []
    // each statement's share of the runs that start at once: what the statements before it left
    const base = () => ({ ...fixed, startsNow: Math.max(0, startsNow - claimed.length) })
    let full = false
    const steps = [
      ...(open.length > 0 ? [async () => void claimed.push(...(await executionClaimBatch(db, { ...base(), queues: open, limit: room })))] : []),
      ...limited.map((queue) => async () => {
        const s = this.settings.get(queue)
        // A queue whose rate paces the starts (its slots for this claim spread over more than a tenth
        // of the horizon, as in admittable) has its runs start at their slots, counted from the claim:
        // none is claimed ahead into the worker's buffer, where it would wait for a free slot and then
        // start late, together with others (more starts in a period than the rate), so such a claim
        // takes the free slots only. A rate that does not pace them (1,000,000 a second) leaves
        // prefetch as it is: its runs start at once.
        const paced = s !== undefined && (pacesStarts(s.rateLimit, s.ratePeriodMs, room) || pacesStarts(s.keyRateLimit, s.keyRatePeriodMs, room))
        const left = (paced ? Math.min(room, startsNow) : room) - claimed.length
        if (left <= 0) return
        const fair = s?.fairShare === true
        // A fair queue's executions that came due without their place in the fair order (a retry, a
        // fire time, a hand-back) get it first: when the last claim there said some wait, or took nothing.
        const assigned = fair && this.keysWaiting.get(queue) !== false
        if (assigned) await fairKeysAssign(db, queue)
        // the clock (the turn the claims are at) is moved by one claim in FAIR_CLOCK_EVERY_MS at most
        let fairClock = false
        if (fair && performance.now() - (this.clockAskedAt.get(queue) ?? Number.NEGATIVE_INFINITY) >= FAIR_CLOCK_EVERY_MS) {
          fairClock = true
          this.clockAskedAt.set(queue, performance.now())
        }
        const early = s === undefined ? 0 : earlyStartMs(s)
        const take = (rows: ClaimedExecution[]) => {
          if (fair) this.keysWaiting.set(queue, rows.length === 0 || rows[0]?.keysWaiting === true)
          for (const r of rows) {
            delete r.keysWaiting
            if (r.startDelayMs !== undefined && r.startDelayMs < early) r.startDelayMs = 0
            claimed.push(r)
          }
        }
        if (fair && s.concurrencyLimit == null && s.keyConcurrencyLimit == null && s.rateLimit == null && s.keyRateLimit == null) {
          // fair share alone never binds: the ordinary claim in the fair order
          const rows = await executionClaimBatch(db, { ...base(), queues: [queue], limit: left, fairOnly: true, fairClock })
          take(rows)
          // short of what it asked for, having given no keys first: what waits for a key may be all
          // that is left; give the keys and claim again rather than wait for the next poll
          if (!assigned && rows.length < left && (await fairKeysAssign(db, queue)) > 0) {
            // (it moves the clock in the first claim's place when that one took nothing)
            take(
              await executionClaimBatch(db, {
                ...base(),
                queues: [queue],
                limit: left - rows.length,
                fairOnly: true,
                fairClock: fairClock && rows.length === 0,
              }),
            )
          }
          return
        }
        if (this.admittable(queue, left)) {
          const got = await queueClaimAdmitted(db, { ...base(), queues: [queue], limit: left, fair, fairClock })
          if (got !== null) {
            take(got.claimed)
            if (got.running !== null) this.running.set(queue, got.running)
            return
          }
          this.lockedUntil.set(queue, performance.now() + QUEUE_SETTINGS_TTL_MS)
        }
        const got = await queueClaimLimited(db, { ...base(), queues: [queue], limit: left, fairClock })
        take(got.claimed)
        this.running.set(queue, got.running)
        full ||= got.full
      }),
    ]
    // Each claim starts with the next step in turn: the first one may fill the whole room (an
    // unlimited queue with a backlog, claimed ahead), and the queues after it would get nothing
    // until that backlog is gone, however high their priority.
    const first = steps.length > 1 ? this.turn++ % steps.length : 0
    for (const step of [...steps.slice(first), ...steps.slice(0, first)]) {
      try {
        await step()
      } catch (err: unknown) {
        if (claimed.length === 0) throw err
        this.p.onError(err)
        break
      }
    }
    return { claimed: stampedByClaim(claimed), full }
  }
}

/**
 * The executions of a claim, to be buffered by when they were claimed rather than by when they
 * became due: each claim statement's rows keep their claim's order (inClaimOrder: a fair queue's
 * turns) behind those of earlier claims at their priority. Otherwise a fair-share queue's work, taken
 * for a tenant by one claim, would wait behind the older work of a busy tenant (or of another queue)
 * that every later claim brings.
 */
function stampedByClaim(claimed: ClaimedExecution[]): ClaimedExecution[] {
  for (const c of claimed) c.orderMs = c.startedAtMs
  return claimed
}
