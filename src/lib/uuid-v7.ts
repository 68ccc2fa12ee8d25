/**
 * UUIDv7 (RFC 9562): 48 bits of Unix milliseconds, version 7, random bits.
 * Built from Node's buffered `randomUUID()` (a v4 whose variant bits are
 * already right), which is many times faster than generating the random part
 * per call; ids sort by creation millisecond, in random order within one.
 */
import { randomUUID } from 'node:crypto'

export function uuidV7(nowMs: number = Date.now()): string {
  const time = nowMs.toString(16).padStart(12, '0')
  return `${time.slice(0, 8)}-${time.slice(8, 12)}-7${randomUUID().slice(15)}`
}
