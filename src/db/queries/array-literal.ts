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
