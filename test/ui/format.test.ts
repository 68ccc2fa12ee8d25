import { describe, expect, it } from 'vitest'
import { duration } from '../../ui/src/format.ts'

describe('duration', () => {
  it('writes each unit as before', () => {
    expect(duration(null)).toBe('—')
    expect(duration(250)).toBe('250 ms')
    expect(duration(1500)).toBe('1.5 s')
    expect(duration(60_000)).toBe('1 min')
    expect(duration(90_000)).toBe('1 min 30 s')
    expect(duration(5_400_000)).toBe('1.5 h')
  })

  it('rounds before it picks the unit: never "60 s" of a minute or "1000 ms" of a second', () => {
    expect(duration(119_600)).toBe('2 min')
    expect(duration(59_960)).toBe('1 min')
    expect(duration(3_599_600)).toBe('1.0 h')
    expect(duration(999.6)).toBe('1.0 s')
    expect(duration(59_940)).toBe('59.9 s')
    expect(duration(119_400)).toBe('1 min 59 s')
  })
})
