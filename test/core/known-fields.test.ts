/**
 * core/known-fields.ts: the refusal of a key a call does not know, naming it, and the known keys
 * listed in the message when their list is short.
 */
import { describe, expect, it } from 'vitest'
import { assertKnownFields } from '../../src/core/known-fields.ts'
import { ValidationError } from '../../src/errors.ts'

/** The ValidationError `assertKnownFields` throws for these arguments. */
function refusal(...args: Parameters<typeof assertKnownFields>): ValidationError {
  try {
    assertKnownFields(...args)
  } catch (err: unknown) {
    expect(err).toBeInstanceOf(ValidationError)
    return err as ValidationError
  }
  throw new Error('not refused')
}

describe('assertKnownFields', () => {
  it('names each unknown key by its path and lists the known ones when the list is short', () => {
    const err = refusal({ tx: 1, traceContex: 2, trx: 3 }, { trx: true, traceContext: true }, 'options', 'options.')
    expect(err.details).toEqual([
      { path: 'options.tx', message: 'unknown field "options.tx"' },
      { path: 'options.traceContex', message: 'unknown field "options.traceContex"' },
    ])
    expect(err.message).toBe('unknown field "options.tx"; unknown field "options.traceContex" (known: trx, traceContext)')
  })

  it('leaves a long list of known keys out of the message', () => {
    const fields = Object.fromEntries(Array.from({ length: 20 }, (_, i) => [`knownFieldNumber${i}`, true as const]))
    const err = refusal({ statuss: 'FAILED' }, fields, 'params')
    expect(err.message).toBe('unknown field "statuss"')
    expect(err.details).toEqual([{ path: 'statuss', message: 'unknown field "statuss"' }])
  })

  it('takes a key whose value is undefined as absent, and refuses what is not an object', () => {
    expect(() => assertKnownFields({ trx: 1, tx: undefined }, { trx: true }, 'options', 'options.')).not.toThrow()
    expect(refusal(null, { trx: true }, 'options', 'options.').details).toEqual([{ path: 'options', message: 'options must be an object' }])
  })
})
