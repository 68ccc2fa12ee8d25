import { describe, expect, it } from 'vitest'
import { formatLogLine } from '../../src/lib/pretty-log.ts'

const time = new Date(2026, 0, 2, 3, 4, 5).getTime()

describe('formatLogLine', () => {
  it('writes a pino line as time, level, component, message and the other fields', () => {
    const line = JSON.stringify({
      level: 30,
      time,
      pid: 1,
      hostname: 'h',
      name: 'pgsched',
      component: 'worker',
      queues: ['default'],
      count: 2,
      msg: 'worker started',
    })
    expect(formatLogLine(line, false)).toBe('03:04:05 INFO  [worker] worker started  queues=["default"] count=2\n')
  })

  it("shows an error's message and code, and its stack only at error and above", () => {
    const err = { type: 'Error', message: 'connect ECONNREFUSED 127.0.0.1:1', code: 'ECONNREFUSED', stack: 'Error: x\n    at y' }
    expect(formatLogLine(JSON.stringify({ level: 40, time, err, msg: 'retrying' }), false)).toBe(
      '03:04:05 WARN  retrying  connect ECONNREFUSED 127.0.0.1:1 (ECONNREFUSED)\n',
    )
    expect(formatLogLine(JSON.stringify({ level: 50, time, err, msg: 'failed' }), false)).toContain('(ECONNREFUSED)\n    at y\n')
  })

  it('colours the level only when asked, and passes other text through', () => {
    expect(formatLogLine(JSON.stringify({ level: 30, time, msg: 'm' }), true)).toBe('03:04:05 \u001b[32mINFO \u001b[0m m\n')
    expect(formatLogLine('not json', false)).toBe('not json\n')
  })
})
