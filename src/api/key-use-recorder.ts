/**
 * Records when each API key was last used (api_keys.last_used_at) without a write per request:
 * a key's first use in a process writes, and further uses within `intervalMs` of that write do
 * not, so each process writes a key's row at most once per interval. The write runs after the
 * request, never holds it up, and a failure only loses that record (logged at warn with the key's
 * id, never the key). Used by the authenticator (auth.ts); `settled()` lets the API's close wait
 * for writes still running before its pool is closed.
 */
import type { Kysely } from 'kysely'
import { systemClock, type Clock } from '../clock.ts'
import { apiKeyMarkUsed } from '../db/queries/api-keys.ts'
import type { DB } from '../db/schema.ts'
import type { Logger } from '../logger.ts'

/**
 * How often a process writes one key's use: a minute, the precision README promises. Enough to tell
 * a key still in use from one whose clients have moved on, at one small write per key and minute
 * rather than one per request.
 */
export const KEY_USE_WRITE_INTERVAL_MS = 60_000
/** Keys remembered at most; past it the memory is dropped, which costs one more write per key. */
const REMEMBERED_KEYS_MAX = 10_000

export interface KeyUseRecorder {
  /** Notes a use of the key `keyId`; writes it unless this process wrote it within the interval. Never throws. */
  record(keyId: string): void
  /** Resolves once every write started so far has finished (or failed). */
  settled(): Promise<void>
}

export interface KeyUseRecorderDeps {
  db: Kysely<DB>
  log: Logger
  /** Process-local throttle time; default systemClock. The time written is the database's. */
  clock?: Clock
}

/** A recorder writing each key's use at most once per `intervalMs` (default KEY_USE_WRITE_INTERVAL_MS). */
export function createKeyUseRecorder(deps: KeyUseRecorderDeps, options: { intervalMs?: number } = {}): KeyUseRecorder {
  const intervalMs = options.intervalMs ?? KEY_USE_WRITE_INTERVAL_MS
  if (!Number.isInteger(intervalMs) || intervalMs < 0) throw new RangeError(`intervalMs must be an integer >= 0, got ${intervalMs}`)
  const clock = deps.clock ?? systemClock
  const writtenAtMs = new Map<string, number>()
  const inFlight = new Set<Promise<void>>()
  return {
    record(keyId) {
      const nowMs = clock.now().getTime()
      const last = writtenAtMs.get(keyId)
      if (last !== undefined && nowMs - last < intervalMs) return
      if (writtenAtMs.size >= REMEMBERED_KEYS_MAX) writtenAtMs.clear()
      // Taken before the write ends, so the requests arriving meanwhile do not write too.
      writtenAtMs.set(keyId, nowMs)
      const write = apiKeyMarkUsed(deps.db, { id: keyId }).then(
        () => undefined,
        (err: unknown) => deps.log.warn({ err, keyId }, 'recording an API key use failed'),
      )
      inFlight.add(write)
      void write.finally(() => inFlight.delete(write))
    },
    async settled() {
      await Promise.all([...inFlight])
    },
  }
}
