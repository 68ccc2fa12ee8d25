/**
 * UUIDv7 (RFC 9562): 48 bits of Unix milliseconds, version 7, a 12-bit
 * counter (RFC 9562 method 1) so ids made in one process sort in the order
 * they were made even within a millisecond, then random bits. The random part
 * comes from Node's buffered `randomUUID()` (a v4 whose variant bits are
 * already right), many times faster than generating randomness per call.
 * When the counter runs out within a millisecond, the time borrows the next one.
 */
import { randomUUID } from 'node:crypto'

let lastMs = -1
let counter = 0
/** The text of lastMs and the version digit ('xxxxxxxx-xxxx-7'): made once per millisecond. */
let prefix = ''
/** The counter's three hex digits, by value. */
const COUNTER_HEX = Array.from({ length: 0x1000 }, (_, i) => i.toString(16).padStart(3, '0'))

export function uuidV7(nowMs: number = Date.now()): string {
  if (nowMs > lastMs) {
    lastMs = nowMs
    counter = Math.floor(Math.random() * 0x400) // start low: room to count up
    prefix = timePrefix(lastMs)
  } else if (++counter > 0xfff) {
    lastMs++
    counter = 0
    prefix = timePrefix(lastMs)
  }
  return prefix + (COUNTER_HEX[counter] as string) + randomUUID().slice(18)
}

function timePrefix(ms: number): string {
  const time = ms.toString(16).padStart(12, '0')
  return `${time.slice(0, 8)}-${time.slice(8, 12)}-7`
}
