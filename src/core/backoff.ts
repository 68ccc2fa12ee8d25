/**
 * The retry delays a job's backoff settings allow (the run_at of a retry is computed in SQL,
 * db/queries/fragments.ts retryRunAt: full jitter, a random wait from 0 to the cap of the attempt).
 */

export interface BackoffSettings {
  maxAttempts: number
  backoffBaseMs: number
  backoffMaxMs: number
}

/** The longest wait after failed attempt `attempt` (1 for the first): min(max, base · 2^(attempt−1)). */
export function retryDelayCapMs(s: Omit<BackoffSettings, 'maxAttempts'>, attempt: number): number {
  return Math.min(s.backoffMaxMs, s.backoffBaseMs * 2 ** (attempt - 1))
}

/**
 * The most time all the waits between a job's attempts can add up to (the last attempt starts at
 * most this long after the first failed, plus the attempts' own run time); on average half of it.
 */
export function retryWindowMaxMs(s: BackoffSettings): number {
  let total = 0
  for (let attempt = 1; attempt < s.maxAttempts; attempt++) total += retryDelayCapMs(s, attempt)
  return total
}
