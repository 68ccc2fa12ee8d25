/**
 * The request hash an idempotency key is stored with: a retry of the same request must hash the
 * same after an upgrade (the hashes here were made by earlier releases; the ids and traceparent a
 * submit carries are not part of it).
 */
import { describe, expect, it } from 'vitest'
import { normalizeSubmit } from '../../src/core/job.ts'

const now = new Date('2026-01-01T00:00:00Z')

describe('normalizeSubmit request hash', () => {
  it('is the hash earlier releases stored for the same request', () => {
    expect(normalizeSubmit({ type: 'a', idempotencyKey: 'k', payload: { x: 1 } }, now).requestHash).toBe(
      'f29bfc0eafb33328ed3aeb6aa66abf84d68be4bd1e003bcabb3d9d1ed4971100',
    )
    const recurring = {
      type: 'a',
      idempotencyKey: 'k',
      concurrencyKey: 'c',
      startDeadlineMs: 5000,
      schedule: { cron: '*/5 * * * *', timezone: 'Europe/Berlin' },
      priority: 3,
    }
    expect(normalizeSubmit(recurring, now).requestHash).toBe('0fee96e62b2137d4af5f24f356e8aa3fe232e6e82774b500231efc58ad27b9cf')
  })

  it('is null without an idempotency key', () => {
    expect(normalizeSubmit({ type: 'a', payload: { x: 1 } }, now).requestHash).toBeNull()
  })
})
