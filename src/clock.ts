/**
 * Wall-clock access for computing fire times of recurring jobs only. Leases,
 * claims and run_at comparisons always use the database clock (`now()`).
 */
export interface Clock {
  now(): Date
}

export const systemClock: Clock = { now: () => new Date() }
