/**
 * How the claim loop waits and is woken, and its listing in
 * pgsched.waiting_workers (migration 0006), which decides whether a submit
 * notifies this worker. Listed idle (IDLE_MIN_PRIORITY: any due work) when the
 * last claim found its queues drained; listed at the best waiting priority + 1
 * while it holds prefetched work; not listed while it has a backlog only. The
 * idle sign-up is refused while a submit is in flight: the loop retries it
 * shortly, and claims once more after signing up, so no submit is missed.
 * Callers: the Worker's claim loop, notifications, freed slots and retries.
 */
import type { Kysely } from 'kysely'
import type { DB } from '../db/schema.ts'
import { PRIORITY } from '../core/names.ts'
import { IDLE_MIN_PRIORITY, waitingWorkersWakeAfter, workerSignOffWaiting, workerSignUpWaiting } from '../db/queries/workers.ts'

/** Retry interval of a wait sign-up refused because a submit was in flight. */
export const SIGN_UP_RETRY_MS = 20

/** Most planned wake-ups for later work kept (the earliest); work further out has the poll interval. */
export const MAX_PLANNED_WAKES = 256

/** The longest delay a Node.js timer takes (2^31 − 1 ms, about 24.8 days). */
const MAX_TIMER_MS = 2 ** 31 - 1

/** Quiet poll intervals (no wake-up) after which the listing is written again (see poll). */
export const RELIST_AFTER_QUIET_POLLS = 5

/** A planned wake-up this little after a new one serves it too (the new one is not added). */
const WAKE_MERGE_MS = 10

/** What a listing update did; 'refused': the idle sign-up was refused because a submit was in flight. */
export type ListingChange = 'unchanged' | 'changed' | 'refused'

/** What WakeUp needs: the database and identity for the listing, and the loop's poll interval. */
export interface WakeUpParams {
  db: Kysely<DB>
  workerId: string
  queues: readonly string[]
  /** Job types it claims: a submit names it only for work of these types. */
  types: readonly string[]
  /** How long the loop sleeps when nothing wakes it. */
  pollIntervalMs: number
  /** The channel it listens on for wake-ups meant for it alone (workerChannel); none: pgsched_executions. */
  channel?: string
}

/** The claim loop's sleep, its wake-ups, and its waiting-workers listing. */
export class WakeUp {
  private readonly p: WakeUpParams
  /**
   * This worker's min_priority in pgsched.waiting_workers (undefined: not listed): submits of due
   * work at or above it notify this worker.
   */
  private listedMin: number | undefined
  /**
   * False when the table may not hold listedMin: the unlogged table is empty after a crash and on a
   * promoted standby, and a worker that looked stale may have been pruned. The next update writes
   * the listing whatever it is.
   */
  private listingKnown = true
  /** The LISTEN connection is down: a listing would name a worker that cannot hear (not listed meanwhile). */
  private deaf = false
  /** The sign-off `deafened` started. */
  private leaving: Promise<void> = Promise.resolve()
  /** Counts deafened/listening calls: a stale listening() or listing write sees it moved on. */
  private generation = 0
  private closed = false
  private wakeResolve: (() => void) | undefined
  /** A wake that arrived while the loop was busy: the next sleep returns at once. */
  private wakePending = false
  private wakeTimer: NodeJS.Timeout | undefined
  /** When wakeTimer fires (Date.now() ms; Infinity: no timer). */
  private wakeAt = Infinity
  /** Planned wake-ups for later work (Date.now() ms), earliest first; the timer is set for the first. */
  private planned: number[] = []
  /** Poll intervals in a row that passed without a wake-up. */
  private quietPolls = 0

  constructor(params: WakeUpParams) {
    this.p = params
  }

  /**
   * Waits until woken or `ms` passes; at once if a wake came meanwhile or after `close()`. Resolves
   * true when woken, false when the time ran out.
   */
  sleep(ms: number): Promise<boolean> {
    if (this.wakePending || this.closed) {
      this.wakePending = false
      return Promise.resolve(true)
    }
    return new Promise((resolve) => {
      const timer = setTimeout(() => {
        this.wakeResolve = undefined
        resolve(false)
      }, ms)
      this.wakeResolve = () => {
        clearTimeout(timer)
        this.wakeResolve = undefined
        resolve(true)
      }
    })
  }

  /**
   * The LISTEN connection is lost: leaves the listing (best effort; the database may be the thing
   * that is gone) and lists nothing until `listening()`, so no submit names a worker that cannot hear.
   */
  deafened(): Promise<void> {
    this.generation++
    this.deaf = true
    this.listingKnown = false
    this.listedMin = undefined // not idle: a freed slot claims (no wake-up can come)
    this.leaving = this.leaveListing()
    return this.leaving
  }

  /**
   * The LISTEN connection is back: once the sign-off of `deafened` has ended, the listing is
   * written again (the loop is woken for it), unless the connection was lost again meanwhile.
   */
  listening(): Promise<void> {
    const generation = ++this.generation
    return this.leaving.then(() => {
      if (generation !== this.generation) return
      this.deaf = false
      this.listingKnown = false
      this.wake()
    })
  }

  /** Ends the current sleep, or the next one if the loop is busy. */
  wake(): void {
    if (this.wakeResolve) this.wakeResolve()
    else this.wakePending = true
  }

  /** Deletes the listing, best effort (the database may be the thing that is gone). */
  private leaveListing(): Promise<void> {
    return workerSignOffWaiting(this.p.db, { id: this.p.workerId }).catch(() => undefined)
  }

  /**
   * A slot came free: wakes the loop unless it is listed idle. Listed idle, its last claim drained
   * its queues, and new due work notifies it; a claim now would find nothing (at a trickle it was
   * one empty claim per execution).
   */
  roomFreed(): void {
    if (this.listedMin !== IDLE_MIN_PRIORITY) this.wake()
  }

  /** Listed idle: due work of any priority on its queues names it (a submit may name it alone). */
  get listedIdle(): boolean {
    return this.listedMin === IDLE_MIN_PRIORITY
  }

  /**
   * Passes a wake-up on (migration 0043): called when a claim made while listed idle filled the
   * room. A submit names waiting workers by their concurrency, not their free slots, so it may have
   * named this one alone for more than it could take; the other waiting workers are named for what
   * is left, so it does not wait for their poll. Resolves to how many were named; throws on a
   * database error (the others' polls still claim it).
   */
  passOn(): Promise<number> {
    return waitingWorkersWakeAfter(this.p.db, { id: this.p.workerId, queues: this.p.queues, types: this.p.types })
  }

  /** Wakes the loop in `delayMs`. */
  wakeIn(delayMs: number): void {
    this.wakeInEach([delayMs])
  }

  /**
   * Wakes the loop in each of `delaysMs` (ms from now: the moments later work comes due). Each is
   * kept until it passes, the earliest MAX_PLANNED_WAKES of them; one planned up to WAKE_MERGE_MS
   * after a new one serves both.
   */
  wakeInEach(delaysMs: readonly number[]): void {
    if (this.closed) return
    const now = Date.now()
    let changed = false
    for (const delayMs of delaysMs) {
      const at = now + Math.max(0, delayMs)
      // the first planned wake-up at or after `at`
      let i = 0
      while (i < this.planned.length && (this.planned[i] as number) < at) i++
      if (i < this.planned.length && (this.planned[i] as number) <= at + WAKE_MERGE_MS) continue
      if (i >= MAX_PLANNED_WAKES) continue
      this.planned.splice(i, 0, at)
      if (this.planned.length > MAX_PLANNED_WAKES) this.planned.pop()
      changed = true
    }
    if (changed) this.armTimer()
  }

  /** Sets the timer for the earliest planned wake-up (if it is not set for it already). */
  private armTimer(): void {
    const first = this.planned[0]
    if (first === undefined || first === this.wakeAt) return
    clearTimeout(this.wakeTimer)
    this.wakeAt = first
    this.wakeTimer = setTimeout(
      () => {
        this.wakeAt = Infinity
        this.wakeTimer = undefined
        const now = Date.now()
        let due = false
        while (this.planned.length > 0 && (this.planned[0] as number) <= now) {
          this.planned.shift()
          due = true
        }
        if (due) this.wake()
        this.armTimer()
      },
      // at most MAX_TIMER_MS ahead (Node runs a longer timer at once): one further out is set again then
      Math.min(MAX_TIMER_MS, Math.max(0, first - Date.now()) + 1),
    )
  }

  /**
   * Brings the listing up to date: idle (any due work) when the last claim found the queues drained
   * (`backlog` false), `bestWaiting` + 1 while prefetched work waits, else not listed. After
   * `close()` it writes nothing.
   */
  async updateListing(backlog: boolean, bestWaiting: number | undefined, slotsFull = false): Promise<ListingChange> {
    // Idle only with a slot free: a submit names one worker, and one whose slots are all running
    // would only buffer the work while another stands idle. A worker holding work of the highest
    // priority wants no wake-up: nothing can overtake it.
    const wanted = !backlog && !slotsFull ? IDLE_MIN_PRIORITY : bestWaiting !== undefined && bestWaiting < PRIORITY.max ? bestWaiting + 1 : undefined
    const desired = this.deaf ? undefined : wanted
    if (desired === this.listedMin && this.listingKnown) return 'unchanged'
    if (this.closed) return 'changed'
    const generation = this.generation
    if (desired === undefined) {
      await workerSignOffWaiting(this.p.db, { id: this.p.workerId })
    } else if (
      !(await workerSignUpWaiting(this.p.db, {
        id: this.p.workerId,
        queues: this.p.queues,
        types: this.p.types,
        minPriority: desired,
        channel: this.p.channel,
      }))
    ) {
      return 'refused'
    }
    if (generation !== this.generation) {
      // Deafened (or heard again) meanwhile: this write may have landed after the sign-off of
      // `deafened`. Leave the listing again while deaf; it is written anew once the worker hears.
      this.listedMin = undefined
      this.listingKnown = false
      if (this.deaf) await this.leaveListing()
      return 'changed'
    }
    this.listedMin = desired
    this.listingKnown = true
    return 'changed'
  }

  /**
   * After a claim: lists as it found (`backlog`: it filled its room; `slotsFull`: every slot runs), then waits as the protocol
   * needs. A refused idle sign-up is retried after SIGN_UP_RETRY_MS; having just signed up idle,
   * it returns at once to claim again (a submit that committed before the sign-up did not notify);
   * with a backlog it returns at once; else it sleeps the poll interval or until woken.
   */
  async afterClaim(backlog: boolean, bestWaiting: number | undefined, slotsFull = false): Promise<void> {
    const listing = await this.updateListing(backlog, bestWaiting, slotsFull)
    if (listing === 'refused') {
      await this.sleep(SIGN_UP_RETRY_MS)
      return
    }
    if (backlog || listing === 'changed') return
    await this.poll()
  }

  /** With no room to claim: listed as holding `bestWaiting`, sleeps the poll interval or until woken. */
  async whileFull(bestWaiting: number | undefined): Promise<void> {
    await this.updateListing(true, bestWaiting)
    await this.poll()
  }

  /**
   * Sleeps the poll interval or until woken. RELIST_AFTER_QUIET_POLLS poll intervals in a row without
   * a wake-up write the listing again at the next update: a listing lost without the LISTEN
   * connection noticing (a pruned sign-up, an emptied table) costs at most that many poll intervals
   * of wake-ups (the polls still claim), and an idle worker does not rewrite it at every poll (a
   * sign-up and the claim after it, every second).
   */
  private async poll(): Promise<void> {
    if (await this.sleep(this.p.pollIntervalMs)) this.quietPolls = 0
    else if (++this.quietPolls >= RELIST_AFTER_QUIET_POLLS) {
      this.quietPolls = 0
      this.listingKnown = false
    }
  }

  /** No more sleeping: ends the current sleep, and later ones return at once. */
  close(): void {
    this.closed = true
    this.wake()
  }

  /** Drops the pending wake timer and leaves the listing (errors ignored: the listing is pruned anyway). */
  async signOff(): Promise<void> {
    clearTimeout(this.wakeTimer)
    this.planned = []
    this.wakeAt = Infinity
    if (this.listedMin === undefined) return
    this.listedMin = undefined
    await this.leaveListing()
  }
}
