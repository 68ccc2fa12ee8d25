import { describe, expect, it } from 'vitest'
import { uuidV7 } from '../../src/lib/uuid-v7.ts'

describe('uuidV7', () => {
  it('makes RFC 9562 version-7 ids carrying the millisecond', () => {
    const id = uuidV7(0x0190_1234_5678)
    expect(id).toMatch(/^01901234-5678-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/)
  })

  it('sorts ids in the order they were made, even 10,000 within one millisecond', () => {
    const ms = Date.now() + 1000
    const ids = Array.from({ length: 10_000 }, () => uuidV7(ms))
    expect([...ids].sort()).toEqual(ids)
    expect(new Set(ids).size).toBe(10_000)
  })
})
