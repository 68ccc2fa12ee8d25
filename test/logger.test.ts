/**
 * logger.ts: createLogger's options, refused when misspelt (from JavaScript) rather than ignored
 * (JSON lines where one human line each was asked for).
 */
import { describe, expect, it } from 'vitest'
import { ValidationError } from '../src/errors.ts'
import { createLogger } from '../src/logger.ts'

describe('createLogger', () => {
  it('refuses an option it does not know, naming it and the known ones', () => {
    const refusal = (options: unknown) => {
      try {
        createLogger(options as never)
      } catch (err: unknown) {
        expect(err).toBeInstanceOf(ValidationError)
        return { message: (err as ValidationError).message, details: (err as ValidationError).details }
      }
      throw new Error('not refused')
    }
    // a misspelt pretty would write JSON lines to a terminal
    expect(refusal({ level: 'silent', prety: { colors: true } })).toEqual({
      message: 'unknown field "prety" (known: level, name, pretty)',
      details: [{ path: 'prety', message: 'unknown field "prety"' }],
    })
    expect(refusal('silent').message).toBe('createLogger options must be an object')
    // a key left undefined is no option
    expect(createLogger({ level: 'silent', prety: undefined } as never).level).toBe('silent')
  })
})
