/**
 * How `migrate` waits for table locks on a database in use: each migration's statements wait at
 * most a lock timeout for a lock (while a migration waits for a table lock, every statement on that
 * table queues behind it), and a migration that timed out is rolled back and tried again after a
 * doubling delay, a bounded number of times. The defaults here are the settings' defaults
 * (config.ts) and `migrate()`'s. Pure: no I/O.
 */

/** Longest wait of one migration statement for a lock: how long submits and claims may queue behind it. */
export const MIGRATE_LOCK_TIMEOUT_MS_DEFAULT = 5_000

/** Tries of one migration that timed out waiting for a lock, the first included. */
export const MIGRATE_ATTEMPTS_DEFAULT = 5

/** Delay before the second try; it doubles for each one after, up to MIGRATE_RETRY_DELAY_MAX_MS. */
export const MIGRATE_RETRY_DELAY_MS_DEFAULT = 1_000

/**
 * Longest delay between two tries. With the defaults, the five tries of one migration take at most
 * 5 × 5 s of lock waits plus 1 + 2 + 4 + 8 s of delays: under a minute, which a long transaction
 * (a report, a backup's) often outlasts, and a deploy's migrate step can bear.
 */
export const MIGRATE_RETRY_DELAY_MAX_MS = 30_000

/** The delay before try `attempt + 1` after try `attempt` (1-based) timed out. */
export function migrateRetryDelayMs(attempt: number, firstDelayMs: number = MIGRATE_RETRY_DELAY_MS_DEFAULT): number {
  return Math.min(firstDelayMs * 2 ** (attempt - 1), MIGRATE_RETRY_DELAY_MAX_MS)
}
