/**
 * Checks and cursors shared by the client's calls: ids must be UUIDs, a page's limit is 1 to 500,
 * and a keyset cursor is its value in base64url (refused unless it decodes to a valid value).
 */
import { ValidationError } from './errors.ts'

export const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i
export function assertUuid(id: string, what: string): void {
  if (typeof id !== 'string' || !UUID.test(id)) {
    throw new ValidationError(`${what} must be a UUID`, [{ path: what, message: `${what} must be a UUID` }])
  }
}

export function encodeCursor(value: string): string {
  return Buffer.from(value, 'utf8').toString('base64url')
}

export function decodeCursor(cursor: string, valid: RegExp, inRange: (value: string) => boolean = () => true): string {
  const value = Buffer.from(cursor, 'base64url').toString('utf8')
  if (!valid.test(value) || encodeCursor(value) !== cursor || !inRange(value)) {
    throw new ValidationError('cursor is invalid; pass nextCursor from the previous page', [
      { path: 'cursor', message: 'cursor is invalid; pass nextCursor from the previous page' },
    ])
  }
  return value
}

/**
 * An executions cursor (a fire time in microseconds since 1970) that names an instant PostgreSQL
 * can compute with: years 1 to 9999 (a forged cursor past them would fail in the statement, with the
 * database's wording instead of this one).
 */
export function fireTimeUsInRange(value: string): boolean {
  const us = BigInt(value)
  return us >= FIRE_TIME_US_MIN && us <= FIRE_TIME_US_MAX
}

const FIRE_TIME_US_MIN = -62_135_596_800_000_000n // 0001-01-01T00:00:00Z
const FIRE_TIME_US_MAX = 253_402_300_799_999_999n // 9999-12-31T23:59:59.999999Z

export function limitOf(limit: number | undefined): number {
  const value = limit ?? 50
  if (!Number.isInteger(value) || value < 1 || value > 500) {
    throw new ValidationError('limit must be an integer from 1 to 500', [{ path: 'limit', message: 'limit must be an integer from 1 to 500' }])
  }
  return value
}

/** A keyset page. */
export interface Page<T> {
  items: T[]
  nextCursor: string | null
}
