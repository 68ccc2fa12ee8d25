/**
 * Queue operations (client.queues): list queues with their live figures, pause and resume a
 * queue, set or clear its limits (concurrency, per concurrency key, rate, rate per concurrency key) and turn fair share between
 * tenants on or off. They act on the queue for every tenant: the REST API
 * offers them to operator keys only. Each change takes effect in every worker within a second (see
 * migrations/0012_queue_settings.sql for what pause and the limit guarantee).
 */
import type { Kysely } from 'kysely'
import { isQueueName, QUEUE_RULE } from './core/names.ts'
import type { DB } from './db/schema.ts'
import {
  queueGet,
  queueList,
  queuePause,
  queueResume,
  queueSetConcurrencyLimit,
  queueSetFairShare,
  queueSetKeyConcurrencyLimit,
  queueSetKeyRateLimit,
  queueSetRateLimit,
  type QueueView,
} from './db/queries/queues.ts'
import { ValidationError } from './errors.ts'
import { assertNoMoreArguments, RUNS_ON_CLIENT } from './core/known-fields.ts'

export type { QueueView }

/** The highest concurrency limit a queue may have. */
export const CONCURRENCY_LIMIT_MAX = 100_000
/** The highest rate limit (starts per period) and the longest period (ms, a day). */
export const RATE_LIMIT_MAX = 1_000_000
export const RATE_PERIOD_MS_MAX = 86_400_000

export interface QueueAdmin {
  /** Every queue with settings or with pending or running executions, by name. */
  list(): Promise<QueueView[]>
  view(name: string): Promise<QueueView>
  /** Once this returns, no execution of the queue is claimed; running ones finish; submits are still accepted. */
  pause(name: string): Promise<QueueView>
  /** Workers take the queue's work again (they are woken at once). */
  resume(name: string): Promise<QueueView>
  /** At most `limit` executions of the queue running at once across all workers; null removes the limit. */
  setConcurrencyLimit(name: string, limit: number | null): Promise<QueueView>
  /** At most `limit` executions of one concurrency key (SubmitJobInput.concurrencyKey) of the queue running at once; null removes it. */
  setKeyConcurrencyLimit(name: string, limit: number | null): Promise<QueueView>
  /**
   * At most `limit` starts (claims, reruns included) per `periodMs` across all workers, evenly spaced
   * at 93 % of the limit; null removes the rate limit. Without `periodMs` the queue keeps the period
   * of its rate limit, or 1000 when it has none.
   */
  setRateLimit(name: string, limit: number | null, periodMs?: number): Promise<QueueView>
  /**
   * At most `limit` starts of one concurrency key per `periodMs` across all workers, evenly spaced at
   * 93 % of the limit as the queue's rate limit is; executions without a key are not limited by it;
   * null removes it. Without `periodMs` the queue keeps the period of its rate limit per key, or 1000
   * when it has none.
   */
  setKeyRateLimit(name: string, limit: number | null, periodMs?: number): Promise<QueueView>
  /**
   * Fair share between tenants: claims take turns between the tenants with due work at each
   * priority (strict priority first; turns weighted by the tenants' weights) instead of taking the
   * oldest due work first.
   */
  setFairShare(name: string, on: boolean): Promise<QueueView>
}

function assertQueueName(name: string): void {
  if (typeof name !== 'string' || !isQueueName(name)) {
    throw new ValidationError(`queue must be ${QUEUE_RULE}`, [{ path: 'name', message: `queue must be ${QUEUE_RULE}` }])
  }
}

/** `value` is an integer from 1 to `max`, or null when `orNull` says what null means. */
function assertRange(path: string, value: number | null, max: number, orNull?: string): void {
  if (value === null && orNull !== undefined) return
  if (value === null || !Number.isInteger(value) || value < 1 || value > max) {
    const message = `${path} must be an integer from 1 to ${max}${orNull ? `, or null for ${orNull}` : ''} (got ${String(value)})`
    throw new ValidationError(message, [{ path, message }])
  }
}

/**
 * A period given with a null limit (which removes the rate limit) is refused, naming both: it would be
 * dropped without a word (pgsched.set_queue_rate_limit refuses it too).
 */
export function noPeriodWithout(limitPath: string, periodPath: string, limit: unknown, periodMs: unknown): void {
  if (limit !== null || periodMs === undefined) return
  const message = `${periodPath} goes with a ${limitPath}: a null ${limitPath} removes the limit and takes no period`
  throw new ValidationError(message, [{ path: periodPath, message }])
}

export function queueAdmin(db: Kysely<DB>): QueueAdmin {
  const view = (name: string) => {
    assertQueueName(name)
    return queueGet(db, name)
  }
  /** Checks the name, makes the change, returns the queue as it is now. */
  const change = async (name: string, write: () => Promise<void>) => {
    assertQueueName(name)
    await write()
    return view(name)
  }
  /** Refuses an argument past those `call` takes (`{ trx }` among them: these calls run on the client's connections). */
  const takesOnly = (call: string, takes: readonly string[], extra: readonly unknown[]) => assertNoMoreArguments(`queues.${call}`, takes, extra, RUNS_ON_CLIENT)
  return {
    async list(...extra: unknown[]) {
      takesOnly('list', [], extra)
      return queueList(db)
    },
    async view(name, ...extra: unknown[]) {
      takesOnly('view', ['name'], extra)
      return view(name)
    },
    async pause(name, ...extra: unknown[]) {
      takesOnly('pause', ['name'], extra)
      return change(name, () => queuePause(db, name))
    },
    async resume(name, ...extra: unknown[]) {
      takesOnly('resume', ['name'], extra)
      return change(name, () => queueResume(db, name))
    },
    async setConcurrencyLimit(name, limit, ...extra: unknown[]) {
      takesOnly('setConcurrencyLimit', ['name', 'limit'], extra)
      assertQueueName(name)
      assertRange('concurrencyLimit', limit, CONCURRENCY_LIMIT_MAX, 'no limit')
      return change(name, () => queueSetConcurrencyLimit(db, name, limit))
    },
    async setKeyConcurrencyLimit(name, limit, ...extra: unknown[]) {
      takesOnly('setKeyConcurrencyLimit', ['name', 'limit'], extra)
      assertQueueName(name)
      assertRange('keyConcurrencyLimit', limit, CONCURRENCY_LIMIT_MAX, 'no limit')
      return change(name, () => queueSetKeyConcurrencyLimit(db, name, limit))
    },
    async setRateLimit(name, limit, periodMs?: number, ...extra: unknown[]) {
      takesOnly('setRateLimit', ['name', 'limit', 'periodMs'], extra)
      assertQueueName(name)
      assertRange('rateLimit', limit, RATE_LIMIT_MAX, 'no rate limit')
      noPeriodWithout('rateLimit', 'ratePeriodMs', limit, periodMs)
      if (periodMs !== undefined) assertRange('ratePeriodMs', periodMs, RATE_PERIOD_MS_MAX)
      return change(name, () => queueSetRateLimit(db, name, limit, periodMs ?? null))
    },
    async setKeyRateLimit(name, limit, periodMs?: number, ...extra: unknown[]) {
      takesOnly('setKeyRateLimit', ['name', 'limit', 'periodMs'], extra)
      assertQueueName(name)
      assertRange('keyRateLimit', limit, RATE_LIMIT_MAX, 'no rate limit per key')
      noPeriodWithout('keyRateLimit', 'keyRatePeriodMs', limit, periodMs)
      if (periodMs !== undefined) assertRange('keyRatePeriodMs', periodMs, RATE_PERIOD_MS_MAX)
      return change(name, () => queueSetKeyRateLimit(db, name, limit, periodMs ?? null))
    },
    async setFairShare(name, on, ...extra: unknown[]) {
      takesOnly('setFairShare', ['name', 'on'], extra)
      if (typeof on !== 'boolean') {
        const message = `fairShare must be true or false (got ${String(on)})`
        throw new ValidationError(message, [{ path: 'fairShare', message }])
      }
      return change(name, () => queueSetFairShare(db, name, on))
    },
  }
}
