/** compareEventIds, exported for clients that order the events they read: ids compare as the stream orders them, a bad one is a ValidationError. */
import { describe, expect, it } from 'vitest'
import { compareEventIds } from '../../src/core/events.ts'
import { ValidationError } from '../../src/errors.ts'

describe('compareEventIds', () => {
  it('orders ids by batch, then index, a bare batch number after every event of its batch', () => {
    expect(compareEventIds('9-5', '10-0')).toBeLessThan(0)
    expect(compareEventIds('10-2', '10-1')).toBeGreaterThan(0)
    expect(compareEventIds('10', '10-999')).toBeGreaterThan(0)
    expect(compareEventIds('10-3', '10-3')).toBe(0)
  })

  it('refuses what is no event id with a ValidationError naming it', () => {
    expect(() => compareEventIds('10-1', 'abc')).toThrow(ValidationError)
    expect(() => compareEventIds('x', '10-1')).toThrow('not an event id: "x" (ids look like 42-0: <batch>-<index>)')
  })
})
