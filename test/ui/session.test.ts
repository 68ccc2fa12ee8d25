import { describe, expect, it } from 'vitest'
import { keyProblem } from '../../ui/src/session.ts'

describe('keyProblem', () => {
  it('takes a key of the shape the API issues', () => {
    expect(keyProblem(`psk_${'A'.repeat(20)}-_${'z9'.repeat(10)}1`)).toBeNull()
  })

  it("names a key's prefix, as the Keys page lists it, as only the start of a key", () => {
    expect(keyProblem('psk_AbCdEfGh…')).toMatch(/only the start of a key/)
  })

  it('refuses what is no key, or a key with a character a header cannot carry, as not a valid API key', () => {
    for (const text of [
      'hello',
      `psk_${'A'.repeat(42)}`,
      `psk_${'A'.repeat(44)}`,
      `psk_${'A'.repeat(42)}é`,
      `psk_${'A'.repeat(42)}€`,
      `Bearer psk_${'A'.repeat(43)}`,
    ])
      expect(keyProblem(text), text).toMatch(/not a valid API key/)
  })
})
