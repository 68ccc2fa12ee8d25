/**
 * Database outages as the API sees them: one warning when requests start failing because the
 * database is unreachable or read-only, and one line when a request that uses it succeeds again
 * (with the outage's length and how many requests got 503), instead of an error line per request.
 * Only a request begun after the outage was seen ends it: one begun before may have had its
 * answers from the database before it went, and ending the outage on it had the outage reported twice.
 */
import { performance } from 'node:perf_hooks'
import type { Logger } from '../logger.ts'

export class OutageLog {
  private readonly log: Logger
  private readonly words: { start: string; end: string }
  private sinceMs: number | undefined
  /** When the outage was seen, on performance.now()'s clock (that of a request's start). */
  private seenAt = 0
  private answered503 = 0

  /** `words`: how the lines name the outage (default: the database unavailable, and available again). */
  constructor(log: Logger, words = { start: 'database unavailable', end: 'database available again' }) {
    this.log = log
    this.words = words
  }

  /** A request got 503 because of the database (`reason`: what the reply said). */
  failed(reason: string, err: unknown): void {
    this.answered503++
    if (this.sinceMs !== undefined) return
    this.sinceMs = Date.now()
    this.seenAt = performance.now()
    this.log.warn({ err }, `${this.words.start}: ${reason}; requests that need it get 503 until it is back`)
  }

  /**
   * A request that used the database succeeded: ends the outage, if any, and if the request began
   * (`startedAt`, performance.now()'s clock) after it was seen.
   */
  succeeded(startedAt: number): void {
    if (this.sinceMs === undefined || startedAt < this.seenAt) return
    this.log.warn({ outageMs: Date.now() - this.sinceMs, answered503: this.answered503 }, this.words.end)
    this.sinceMs = undefined
    this.answered503 = 0
  }
}
