/**
 * Array parameters of uuids or integers as PostgreSQL array literals ('{a,b}').
 * Such elements never need quoting, while pg's general array serialiser quotes
 * and escapes every one: for the key arrays of the hot statements (lease
 * writes, batch submit) that was a large share of the client's CPU and garbage.
 * Text arrays keep pg's serialiser.
 */
export function keyArray(values: ReadonlyArray<string | number>): string {
  return `{${values.join(',')}}`
}

/**
 * An array parameter of times (null elements allowed) as an array literal of ISO 8601 UTC texts, for a
 * `::timestamptz[]` cast: such texts need no quoting either, and Date.prototype.toISOString costs a
 * fraction of pg's serialiser for a Date (local time, its offset, each field padded). For years 0 to
 * 9999 (toISOString writes others in its extended form, which PostgreSQL does not read).
 */
export function timeArray(values: ReadonlyArray<Date | null>): string {
  return `{${values.map((d) => (d === null ? 'NULL' : d.toISOString())).join(',')}}`
}
