/**
 * Watches, from a second connection, what one session waits for: while a migration runs, every
 * `intervalMs` it reads the lock the migrating session waits for and the sessions blocking it
 * (lockWaitGet), keeping the last wait seen. Once the lock timeout cancels the statement the wait is
 * gone from pg_locks, so it must be read while it lasts. A failure to read is logged at debug and
 * the watch goes on: it only explains a timeout, it never fails the migration.
 */
import type { Kysely } from 'kysely'
import { abortableSleep } from '../lib/service.ts'
import type { Logger } from '../logger.ts'
import { lockWaitGet, type LockWait } from './queries/lock-waits.ts'

export interface LockWaitWatch {
  /** Ends the watch; the last wait it saw (undefined: none seen). */
  stop(): Promise<LockWait | undefined>
}

export interface WatchLockWaitParams {
  /** The watched session's backend pid. */
  pid: number
  intervalMs: number
  log?: Logger
}

/** Starts watching session `pid` over `db` (a connection other than the watched one's). */
export function watchLockWait(db: Kysely<unknown>, params: WatchLockWaitParams): LockWaitWatch {
  const stopping = new AbortController()
  let last: LockWait | undefined
  const loop = (async () => {
    for (;;) {
      await abortableSleep(params.intervalMs, stopping.signal)
      if (stopping.signal.aborted) return
      try {
        last = (await lockWaitGet(db, { pid: params.pid })) ?? last
      } catch (err: unknown) {
        params.log?.debug({ err }, 'could not read what the migration waits for')
      }
    }
  })()
  return {
    async stop() {
      stopping.abort()
      await loop
      return last
    },
  }
}
