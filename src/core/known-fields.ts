/**
 * The fields a call takes, and the refusal of any other: REST answers an unknown field or query
 * parameter with a 400, and the TypeScript client, called from plain JavaScript or with a cast,
 * refuses one too, rather than dropping a misspelt filter (`statuss`) and acting as if it had not
 * been given (listing every job; a bulk cancel of every job). A key whose value is undefined is no
 * field, as an absent one. Used by normalizeSubmit, by the client's list and bulk calls, by its
 * option objects: createClient's options, each call's `{ trx, traceContext }` (a misspelt `tx`
 * would run the call outside the caller's transaction), webhooks.create and tenants.update; and by
 * the package's other exported functions that take an options object: defineHandler (a misspelt
 * `sandBox` would run the handler with no sandbox), createHttpHandler, verifyWebhookSignature,
 * createWorkerSystem, createOutputStore, migrate and createLogger (and loadConfig's flags, refused
 * in its ConfigError).
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
 * Longest list of the known fields a refusal's message carries, in characters: the list says at
 * once what a misspelt key should have been (createClient's ten options take about 100), while a
 * longer one would bury the key refused; the call's documentation lists those.
 */
const KNOWN_FIELDS_LISTED_MAX_CHARS = 120

/**
 * Throws a ValidationError when `value` is not an object (`what` names it: `listJobs params`) or
 * has a key `fields` lacks, naming each such key (in the details, and in the message followed by the
 * known fields when their list is short).
 */
export function assertKnownFields(value: unknown, fields: Readonly<Record<string, true>>, what: string, prefix = ''): void {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    const message = `${what} must be an object`
    throw new ValidationError(message, [{ path: prefix.replace(/\.$/, ''), message }])
  }
  const details = unknownFields(value as Record<string, unknown>, fields, prefix)
  if (details.length === 0) return
  const known = Object.keys(fields).join(', ')
  const listed = known.length <= KNOWN_FIELDS_LISTED_MAX_CHARS ? ` (known: ${known})` : ''
  throw new ValidationError(`${details.map((d) => d.message).join('; ')}${listed}`, details)
}
