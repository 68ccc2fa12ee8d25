/**
 * What a Worker is given: its database, queues, capacity, lease timing and
 * handlers (cut from Config by system.ts), and the events it reports. Plain
 * types; the parts it wires take their own slices of these.
 */
import type { Kysely } from 'kysely'
import type { ClaimedExecution } from '../db/queries/claim.ts'
import type { DB } from '../db/schema.ts'
import type { Logger } from '../logger.ts'
import type { HandlerRegistry } from './handlers.ts'
import type { SandboxMode } from './sandbox-protocol.ts'
import type { OutputStore } from './output-store.ts'

/** How an outcome written ended: succeeded, failed for good (fatal or out of attempts), or failed with a retry scheduled. */
export type WrittenOutcome = 'succeeded' | 'failed' | 'retried'

/**
 * What a worker reports as it goes (for metrics and tests); each is optional and called
 * synchronously, with objects the worker holds anyway (no allocation per call).
 */
export interface WorkerEvents {
  /**
   * A claim returned `count` executions (`executions`, none when it found nothing); `waiting` of those
   * held wait for a slot once free slots took theirs. `tookMs`: the claim's round trip (its
   * statements, monotonic clock).
   */
  claimed?(count: number, waiting: number, executions: readonly ClaimedExecution[], tookMs: number): void
  /** A run took a slot (its handler starts in a microtask). */
  runStarted?(execution: ClaimedExecution): void
  /** A run's slot is free again: its handler returned, or it never started. `ranMs` on the monotonic clock. */
  runEnded?(execution: ClaimedExecution, ranMs: number): void
  /** The database accepted a run's outcome. */
  outcomeWritten?(execution: ClaimedExecution, outcome: WrittenOutcome): void
  /**
   * This worker lost an execution's lease: the heartbeat found it reaped or taken over, the guard gave
   * it up unconfirmed, or the fence refused its outcome. A cancel is not counted.
   */
  leaseLost?(execution: ClaimedExecution): void
  /** Buffered executions handed back unstarted: the handlers had grown slower, and they would have waited over 1 s for a slot. */
  handedBack?(executions: readonly ClaimedExecution[]): void
  /** A heartbeat renewed `leases` leases in one statement that took `tookMs` (monotonic clock). */
  heartbeat?(tookMs: number, leases: number): void
}

/** A Worker's dependencies and settings; durations in ms. */
export interface WorkerOptions {
  /** The worker process gives it a pool with generic plans forced (see createDb's genericPlans). */
  db: Kysely<DB>
  /** For the LISTEN connection. */
  databaseUrl: string
  log: Logger
  handlers: HandlerRegistry
  queues: readonly string[]
  /** Handlers running at once. */
  concurrency: number
  /** Lease length of a claim or renewal; more than 3 heartbeats. */
  leaseMs: number
  heartbeatMs: number
  /** Longest sleep of the claim loop when nothing wakes it. */
  pollIntervalMs: number
  /** How long stop() lets running handlers finish before aborting them. */
  shutdownGraceMs: number
  /** How long a stop waits for the database at each step after the grace (default STOP_DATABASE_WAIT_MS; tests). */
  stopDatabaseWaitMs?: number
  /** Where handlers' ctx.output goes (output-stores.ts); started and stopped by the caller. */
  outputStore: OutputStore
  /** Runs every handler loaded from a module in this sandbox, whatever the handler asks. Default: each handler's own. */
  sandbox?: SandboxMode
  /** A sandbox's JavaScript heap limit in MB, for handlers that set none. Default: Node's. */
  sandboxMemoryMb?: number
  /** How long an aborted sandboxed handler gets to end by itself before its sandbox is ended. Default 500. */
  sandboxGraceMs?: number
  /** Most executions claimed ahead of free slots (0 = claim only for free slots). Default 0. */
  prefetch?: number
  /** Default: a new UUIDv7. */
  id?: string
  events?: WorkerEvents
}

/**
 * The events with each callback guarded: one that throws is logged and the worker carries on (a
 * throw inside the claim loop or a slot's start would otherwise leak the slot or fail the claim).
 */
export function guardedEvents(events: WorkerEvents, log: Logger): WorkerEvents {
  const guard =
    <A extends unknown[]>(name: string, fn: ((...args: A) => void) | undefined) =>
    (...args: A): void => {
      try {
        fn?.(...args)
      } catch (err: unknown) {
        log.error({ err, event: name }, 'worker event listener threw')
      }
    }
  return {
    claimed: events.claimed && guard('claimed', events.claimed.bind(events)),
    runStarted: events.runStarted && guard('runStarted', events.runStarted.bind(events)),
    runEnded: events.runEnded && guard('runEnded', events.runEnded.bind(events)),
    outcomeWritten: events.outcomeWritten && guard('outcomeWritten', events.outcomeWritten.bind(events)),
    leaseLost: events.leaseLost && guard('leaseLost', events.leaseLost.bind(events)),
    handedBack: events.handedBack && guard('handedBack', events.handedBack.bind(events)),
    heartbeat: events.heartbeat && guard('heartbeat', events.heartbeat.bind(events)),
  }
}
