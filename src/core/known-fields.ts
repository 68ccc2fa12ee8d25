/**
 * The fields a call takes, and the refusal of any other: REST answers an unknown field or query
 * parameter with a 400, and the TypeScript client, called from plain JavaScript or with a cast,
 * refuses one too, rather than dropping a misspelt filter (`statuss`) and acting as if it had not
 * been given (listing every job; a bulk cancel of every job). A key whose value is undefined is no
 * field, as an absent one. Used by normalizeSubmit and by the client's list and bulk calls.
 */
import { ValidationError, type ErrorDetail } from '../errors.ts'

/** The fields of `T`, each `true`: a record the compiler keeps in step with the type. */
export type FieldSet<T> = Record<keyof Required<T>, true>

/** One detail per own key of `value` that is not in `fields` and not undefined; `prefix` leads each path (`filter.`). */
export function unknownFields(value: Record<string, unknown>, fields: Readonly<Record<string, true>>, prefix = ''): ErrorDetail[] {
  const details: ErrorDetail[] = []
  for (const key of Object.keys(value)) {
    if (Object.hasOwn(fields, key) || value[key] === undefined) continue
    details.push({ path: `${prefix}${key}`, message: `unknown field "${prefix}${key}"` })
  }
  return details
}

/**
 * Throws a ValidationError when `value` is not an object (`what` names it: `listJobs params`) or
 * has a key `fields` lacks, naming each such key.
 */
export function assertKnownFields(value: unknown, fields: Readonly<Record<string, true>>, what: string, prefix = ''): void {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    const message = `${what} must be an object`
    throw new ValidationError(message, [{ path: prefix.replace(/\.$/, ''), message }])
  }
  const details = unknownFields(value as Record<string, unknown>, fields, prefix)
  if (details.length > 0) throw new ValidationError(details.map((d) => d.message).join('; '), details)
}
