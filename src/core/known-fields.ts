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
 * createWorkerSystem, createOutputStore, migrate and createLogger, and the objects nested in them
 * (createWorkerSystem's config and its sections, createOutputStore's settings and
 * settings.s3Credentials, createLogger's pretty), each named by its full path (and loadConfig's
 * flags, refused in its ConfigError). assertNoMoreArguments refuses, likewise, an argument past those a client
 * method takes.
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
 * once what a misspelt key should have been (createClient's eleven options take about 120), while a
 * longer one would bury the key refused; the call's documentation lists those.
 */
const KNOWN_FIELDS_LISTED_MAX_CHARS = 140

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

/** Where a call that takes no `{ trx }` runs, for its refusal of one: the client's pool. */
export const RUNS_ON_CLIENT = "on the client's own connections, never in the caller's transaction"
/** Where a call that takes no `{ trx }` runs, for its refusal of one: a transaction it opens. */
export const RUNS_IN_OWN_TRANSACTION = "in a transaction of its own, never in the caller's"

/**
 * Refuses arguments past those a call takes, given from JavaScript or with a cast (`extra`: the rest
 * parameter after them; undefined is no argument): `listSchedules(params, { trx })` or
 * `queues.pause(name, { trx })` would run outside the caller's transaction while the caller believes
 * it ran in theirs, and `listWorkers({ limit: 5 })` would list every worker. `takes` names the
 * arguments the call takes (`options` last when it takes call options); `runs` says where a call
 * that runs statements but takes no call options runs. The refusal names the call and the argument:
 * for such a call, `options` for the place call options would have, else `arguments.<index>`.
 */
export function assertNoMoreArguments(call: string, takes: readonly string[], extra: readonly unknown[], runs?: string): void {
  const index = extra.findIndex((argument) => argument !== undefined)
  if (index === -1) return
  const takesOptions = takes[takes.length - 1] === 'options'
  const inOptionsPlace = index === 0 && takes.length > 0 && !takesOptions && runs !== undefined
  const head =
    takes.length === 0
      ? 'takes no arguments'
      : inOptionsPlace
        ? 'takes no options'
        : `takes at most ${takes.length} argument${takes.length === 1 ? '' : 's'} (${takes.join(', ')}), got one more`
  const message = `${call} ${head}${runs !== undefined && !takesOptions ? `: it runs ${runs} (it has no trx)` : ''}`
  throw new ValidationError(message, [{ path: inOptionsPlace ? 'options' : `arguments.${takes.length + index}`, message }])
}
