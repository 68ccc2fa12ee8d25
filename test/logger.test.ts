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

  it('refuses a key of pretty it does not know, naming its full path', () => {
    let err: unknown
    try {
      // a misspelt colors: lines coloured (or not) against what was asked
      createLogger({ level: 'silent', pretty: { color: false } } as never)
    } catch (e: unknown) {
      err = e
    }
    expect(err).toBeInstanceOf(ValidationError)
    expect((err as ValidationError).message).toBe('unknown field "pretty.color" (known: colors)')
    expect((err as ValidationError).details).toEqual([{ path: 'pretty.color', message: 'unknown field "pretty.color"' }])
    // colors alone, or a plain true or false, as ever
    expect(createLogger({ level: 'silent', pretty: { colors: false } }).level).toBe('silent')
    expect(createLogger({ level: 'silent', pretty: true } as never).level).toBe('silent')
    expect(createLogger({ level: 'silent', pretty: false } as never).level).toBe('silent')
  })
})
