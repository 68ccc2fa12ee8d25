/**
 * How many long-lived responses (event streams, output follows) each tenant may hold open on one API
 * process. Each holds a socket and polls the database for as long as it is open, so without a bound one
 * tenant's client that reconnects in a loop, or opens a stream per job, takes the API's sockets and its
 * pool from every other tenant. Operator keys are not counted.
 */
import { QuotaExceededError } from '../errors.ts'

/** SCHEDULER_MAX_STREAMS_PER_TENANT's default. */
export const STREAMS_PER_TENANT_DEFAULT = 20

/** When a refused client may try again: a stream of the tenant may have ended by then. */
const STREAM_RETRY_AFTER_MS = 5_000

export class StreamSlots {
  private readonly open = new Map<string, number>()
  private readonly max: number

  constructor(max: number) {
    this.max = max
  }

  /** How many `tenant` holds open now. */
  held(tenant: string): number {
    return this.open.get(tenant) ?? 0
  }

  /**
   * Takes a slot for `tenant` (null: an operator key's stream, not counted) and returns its release,
   * which is idempotent. Throws a QuotaExceededError (429) when the tenant holds `max` already.
   */
  take(tenant: string | null, what: string): () => void {
    if (tenant === null) return () => {}
    const n = this.held(tenant)
    if (n >= this.max) {
      throw new QuotaExceededError(
        `${what}: tenant ${tenant} already has ${n} event streams and output follows open on this API process, the most it may ` +
          `(SCHEDULER_MAX_STREAMS_PER_TENANT=${this.max}); close one, or retry once one has ended`,
        'maxStreams',
        this.max,
        STREAM_RETRY_AFTER_MS,
      )
    }
    this.open.set(tenant, n + 1)
    let released = false
    return () => {
      if (released) return
      released = true
      const left = this.held(tenant) - 1
      if (left > 0) this.open.set(tenant, left)
      else this.open.delete(tenant)
    }
  }
}
