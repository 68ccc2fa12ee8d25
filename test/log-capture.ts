/**
 * A pino logger whose lines are kept, parsed, for tests that assert what a component logs. `L` is
 * the shape the test reads of each line.
 */
import { Writable } from 'node:stream'
import { pino } from 'pino'
import type { Logger } from '../src/logger.ts'

export function capturingLogger<L = { level: number; msg: string }>(level = 'info', lines: L[] = []): { log: Logger; lines: L[] } {
  const log = pino(
    { level },
    new Writable({
      write(chunk, _encoding, done) {
        lines.push(JSON.parse(String(chunk)) as L)
        done()
      },
    }),
  ) as unknown as Logger
  return { log, lines }
}
