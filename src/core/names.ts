/**
 * Names, patterns and limits of what users submit: job types (handler names),
 * queues, tenants, idempotency keys, priorities, attempts, durations and the
 * payload size. The one TypeScript home of these rules: config, handlers,
 * normalizeSubmit, the API schemas and API keys import them from here. The
 * database enforces the same rules with check constraints (migration 0001);
 * test/core/names.test.ts probes both with boundary values so they cannot drift.
 */

/** Longest job type (handler name), in characters. */
export const TYPE_MAX_LENGTH = 128
/** Longest queue name, in characters. */
export const QUEUE_MAX_LENGTH = 64
/** Longest tenant name, in characters. */
export const TENANT_MAX_LENGTH = 128
/** Longest idempotency key, in characters. */
export const IDEMPOTENCY_KEY_MAX_LENGTH = 255
/** Longest concurrency key, in characters. */
export const CONCURRENCY_KEY_MAX_LENGTH = 255

/** A job type: a letter or digit, then letters, digits and `_ . : / -` (jobs_type_check). */
export const TYPE_PATTERN = `^[A-Za-z0-9][A-Za-z0-9_.:/-]{0,${TYPE_MAX_LENGTH - 1}}$`
/** A queue name: as a type, shorter (jobs_queue_check). */
export const QUEUE_PATTERN = `^[A-Za-z0-9][A-Za-z0-9_.:/-]{0,${QUEUE_MAX_LENGTH - 1}}$`
/**
 * A tenant name given to `keys create`: `@` allowed (e-mail-like names), `/` not. The jobs and API keys
 * tables only bound its length (jobs_tenant_check, api_keys_tenant_check); pgsched.submit_job and the
 * rows of pgsched.tenants (trigger tenants_name_check, migration 0080) are held to this pattern.
 */
export const TENANT_PATTERN = `^[A-Za-z0-9][A-Za-z0-9_.:@-]{0,${TENANT_MAX_LENGTH - 1}}$`

/**
 * Job types starting with this are pgsched's own (`pgsched.webhook` deliveries): only pgsched
 * creates them, never a submit (normalizeSubmit, POST /v1/jobs and pgsched.submit_job refuse them).
 */
export const RESERVED_TYPE_PREFIX = 'pgsched.'
/** Why a submitted type is refused although it has a type's shape. */
export const RESERVED_TYPE_RULE = `not start with ${RESERVED_TYPE_PREFIX} (reserved for pgsched's own jobs)`

/** The rule for a type, in words, for error messages and API docs. */
export const TYPE_RULE = `1-${TYPE_MAX_LENGTH} characters: letters, digits and _ . : / - (not first)`
/** The rule for a queue name, in words. */
export const QUEUE_RULE = `1-${QUEUE_MAX_LENGTH} characters: letters, digits and _ . : / - (not first)`
/** The rule for a tenant name, in words. */
export const TENANT_RULE = `1-${TENANT_MAX_LENGTH} characters: letters, digits and _ . : @ - (not first)`

const TYPE_RE = new RegExp(TYPE_PATTERN)
const QUEUE_RE = new RegExp(QUEUE_PATTERN)
const TENANT_RE = new RegExp(TENANT_PATTERN)

/** Whether `value` is a valid job type (handler name). */
export function isTypeName(value: unknown): value is string {
  return typeof value === 'string' && TYPE_RE.test(value)
}

/** Whether `value` is a valid queue name. */
export function isQueueName(value: unknown): value is string {
  return typeof value === 'string' && QUEUE_RE.test(value)
}

/** Whether `value` is a valid tenant name for a new API key. */
export function isTenantName(value: unknown): value is string {
  return typeof value === 'string' && TENANT_RE.test(value)
}

/** An inclusive integer range. */
export interface IntRange {
  readonly min: number
  readonly max: number
}

/** Priority: higher runs first (jobs_priority_check, executions_priority_check). */
export const PRIORITY: IntRange = { min: -1000, max: 1000 }
/** Attempts per execution (jobs_max_attempts_check). */
export const MAX_ATTEMPTS: IntRange = { min: 1, max: 1000 }
/** Time limit of one attempt, in milliseconds: up to a day (jobs_timeout_ms_check). */
export const TIMEOUT_MS: IntRange = { min: 1, max: 86_400_000 }
/** How late after its time a job's work may start (1 s to 7 days; migration 0018). */
export const START_DEADLINE_MS: IntRange = { min: 1_000, max: 604_800_000 }
/** Retry delay base, in milliseconds: up to a day (jobs_backoff_check). */
export const BACKOFF_BASE_MS: IntRange = { min: 0, max: 86_400_000 }
/** Retry delay cap, in milliseconds: at least the base, up to a week (jobs_backoff_check). */
export const BACKOFF_MAX_MS: IntRange = { min: 0, max: 604_800_000 }
/** Cap on catch-up runs of misfire policy fire_all (triggers_misfire_max_runs_check). */
export const MISFIRE_MAX_RUNS: IntRange = { min: 1, max: 10_000 }
/** Interval of an `{every}` schedule, in milliseconds: one second to 366 days (triggers_interval_ms_check). */
export const INTERVAL_MS: IntRange = { min: 1000, max: 31_622_400_000 }

/** Largest payload, in bytes of its JSON text (1 MiB). Checked by normalizeSubmit only. */
export const MAX_PAYLOAD_BYTES = 1_048_576
/**
 * The API's default request body limit: a payload at MAX_PAYLOAD_BYTES and the rest of a submit
 * (1 MiB and 64 KiB), so that the largest payload taken can be sent over REST without a setting.
 */
export const BODY_LIMIT_BYTES_DEFAULT = MAX_PAYLOAD_BYTES + 65_536

/** Hash partitions per large table, fixed by the first migrate (0001 checks 1..256). */
export const PARTITION_COUNT: IntRange = { min: 1, max: 256 }
/**
 * Partition count of a new install when none is given: DESIGN.md's 4. Config, `migrate()`,
 * the CLI and the bench all default to this one value.
 */
export const PARTITION_COUNT_DEFAULT = 4

/**
 * Largest nesting depth of a payload (an object or array counts one level; a scalar payload is 0).
 * Deeper JSON is refused with a 400 before it is parsed into memory or stored: JSON decoders and
 * recursive code (a reviver, canonical hashing) break on thousands of levels. 64 is far more than
 * any real document uses (measured: none of our fixtures nests past 6).
 */
export const MAX_PAYLOAD_DEPTH = 64

/**
 * Text the database can store: PostgreSQL text and jsonb hold no NUL character, and a lone UTF-16
 * surrogate has no UTF-8 form (I-JSON, RFC 7493, refuses both). As a JSON-Schema pattern for
 * strings without NUL; lone surrogates are checked by `textProblem`.
 */
export const NO_NUL_PATTERN = '^[^\\u0000]*$'

/** A UTF-16 surrogate not paired (in `u` mode a pair is one code point and never matches). */
const LONE_SURROGATE = /\p{Cs}/u
const LONE_SURROGATES = new RegExp(LONE_SURROGATE.source, 'gu')

/** Length in characters (Unicode code points), as PostgreSQL's length() counts them: an emoji is one. */
export function codePointLength(value: string): number {
  let n = 0
  for (const _ of value) n++
  return n
}

/** Why `value` cannot be stored as text: a NUL character or a lone surrogate; undefined when it can. */
export function textProblem(value: string): string | undefined {
  if (value.includes('\u0000')) return 'must not contain NUL characters (\\u0000)'
  if (LONE_SURROGATE.test(value)) return 'must be well-formed Unicode (no lone surrogates, \\ud800-\\udfff)'
  return undefined
}

/** `value` as the database can store it: what textProblem names (a NUL character, a lone surrogate) becomes U+FFFD. */
export function storableText(value: string): string {
  return value.replaceAll('\u0000', '\uFFFD').replace(LONE_SURROGATES, '\uFFFD')
}
