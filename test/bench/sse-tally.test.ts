import { describe, expect, it } from 'vitest'
import { idAfter, SseTally } from '../../src/bench/events.ts'

const message = (id: string, type: string, dataId = id) =>
  `id: ${id}\ndata: {"id":"${dataId}","type":"${type}","at":"2026-11-25T00:00:00.000Z","tenant":"t","jobId":"j","executionId":null,"queue":"default","jobType":"noop","attempt":0}\n\n`

describe('the benchmark SSE client', () => {
  it('orders event ids by batch, then index', () => {
    expect(idAfter('0-0', '1-0')).toBe(true)
    expect(idAfter('9-5', '10-0')).toBe(true)
    expect(idAfter('10-2', '10-10')).toBe(true)
    expect(idAfter('10-10', '10-2')).toBe(false)
    expect(idAfter('10-2', '10-2')).toBe(false)
    expect(idAfter('11-0', '10-9')).toBe(false)
  })

  it('counts the events by type across chunks that split messages anywhere', () => {
    const text = `: open\n\n${message('1-0', 'submitted')}${message('1-1', 'submitted')}: ping\n\n${message('2-0', 'started')}${message('12-0', 'succeeded')}`
    for (const size of [1, 7, 64, text.length]) {
      const tally = new SseTally()
      for (let i = 0; i < text.length; i += size) tally.push(text.slice(i, i + size))
      expect(tally.opened).toBe(true)
      expect(tally.count).toBe(4)
      expect(tally.byType).toEqual({ submitted: 2, started: 1, succeeded: 1 })
      expect(tally.outOfOrder).toBe(0)
      expect(tally.malformed).toBeUndefined()
    }
  })

  it('counts a repeated or earlier id as out of order', () => {
    const tally = new SseTally()
    tally.push(message('3-0', 'started') + message('3-1', 'started') + message('3-1', 'started') + message('2-7', 'succeeded'))
    expect(tally.count).toBe(4)
    expect(tally.outOfOrder).toBe(2)
  })

  it('reports a message whose data carries another id', () => {
    const tally = new SseTally()
    tally.push(message('3-1', 'started', '3-10'))
    expect(tally.malformed).toContain('id: 3-1')
  })

  it('is not opened before the open comment', () => {
    const tally = new SseTally()
    tally.push(': pi')
    tally.push('ng\n\n: op')
    expect(tally.opened).toBe(false)
    tally.push('en\n\n')
    expect(tally.opened).toBe(true)
  })
})
