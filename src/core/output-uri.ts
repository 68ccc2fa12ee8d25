/**
 * Where an attempt's output lives, as stored in executions.output_uri:
 *   pgsched:output/<executionId>/<attempt>               rows of pgsched.execution_output (default)
 *   s3://<bucket>/<keyPrefix><executionId>/<attempt>/    part objects under that key prefix
 *   file://<path>                                        one file, readable on the worker's host only
 * Workers format these when they store a run's first chunk; the API parses them to stream the
 * output back. The truncation and drop markers written into the output live here too.
 */

/** Output in PostgreSQL: the attempt's rows of pgsched.execution_output. */
export interface PostgresOutputLocation {
  store: 'postgres'
  executionId: string
  attempt: number
}

/** Output in an S3-compatible object store: the objects under `keyPrefix` (ending in `/`), in key order. */
export interface S3OutputLocation {
  store: 's3'
  bucket: string
  keyPrefix: string
  /** The attempt, when the key prefix ends in `<executionId>/<attempt>/` as workers write it. */
  attempt: number | null
}

/** Output in a file on the local disk. */
export interface FileOutputLocation {
  store: 'file'
  /** A file:// URL. */
  url: URL
}

export type OutputLocation = PostgresOutputLocation | S3OutputLocation | FileOutputLocation

const POSTGRES_URI = /^pgsched:output\/([0-9a-f-]{36})\/(\d{1,9})$/
const S3_ATTEMPT = /\/(\d{1,9})\/$/

/** `pgsched:output/<executionId>/<attempt>`. */
export function postgresOutputUri(executionId: string, attempt: number): string {
  return `pgsched:output/${executionId}/${attempt}`
}

/** `s3://<bucket>/<keyPrefix>`; keyPrefix ends in `/`. */
export function s3OutputUri(bucket: string, keyPrefix: string): string {
  return `s3://${bucket}/${keyPrefix}`
}

/** The location named by an output URI; null for none, or for a form no store here reads. */
export function parseOutputUri(uri: string | null): OutputLocation | null {
  if (!uri) return null
  const pg = POSTGRES_URI.exec(uri)
  if (pg) return { store: 'postgres', executionId: pg[1] as string, attempt: Number(pg[2]) }
  let url: URL
  try {
    url = new URL(uri)
  } catch {
    return null
  }
  if (url.protocol === 'file:') return { store: 'file', url }
  if (url.protocol === 's3:' && url.hostname) {
    const keyPrefix = decodeURIComponent(url.pathname.replace(/^\//, ''))
    const attempt = S3_ATTEMPT.exec(keyPrefix)
    return { store: 's3', bucket: url.hostname, keyPrefix, attempt: attempt ? Number(attempt[1]) : null }
  }
  return null
}

/** The attempt an output URI belongs to, when it says (Postgres and S3 forms; file names end in `.<attempt>.log`). */
export function outputUriAttempt(location: OutputLocation): number | null {
  if (location.store === 'postgres' || location.store === 's3') return location.attempt
  const m = /\.(\d{1,9})\.log$/.exec(location.url.pathname)
  return m ? Number(m[1]) : null
}

/**
 * Where attempt `attempt` of an execution wrote its output, from where its latest attempt did
 * (`latest`; null when that one stored none): the same store, the attempt's part of the name changed.
 * With no latest location, the default store (PostgreSQL). Null when the latest form does not say its
 * attempt (a file or key named otherwise), so that no other attempt's place can be told.
 */
export function outputLocationOfAttempt(executionId: string, latest: OutputLocation | null, attempt: number): OutputLocation | null {
  if (latest === null || latest.store === 'postgres') return { store: 'postgres', executionId, attempt }
  if (latest.store === 's3') {
    if (latest.attempt === null) return null
    return { ...latest, keyPrefix: latest.keyPrefix.replace(S3_ATTEMPT, `/${attempt}/`), attempt }
  }
  if (!/\.(\d{1,9})\.log$/.test(latest.url.pathname)) return null
  const url = new URL(latest.url.href)
  url.pathname = url.pathname.replace(/\.(\d{1,9})\.log$/, `.${attempt}.log`)
  return { store: 'file', url }
}

/** Written once into an attempt's output where it reached its cap; what the handler writes after it is discarded. */
export function truncationMarker(maxBytes: number): string {
  return `\n[pgsched: output truncated at ${maxBytes} bytes]\n`
}

/**
 * Written after the output of a run its stopping worker handed back (its attempt not counted): the next
 * run of the execution, under the same attempt number, appends its own output after it.
 */
export function handedBackMarker(): string {
  return '\n[pgsched: this run was handed back when its worker stopped (its attempt not counted); the output of the next run follows]\n'
}

/** Written where output was discarded because the store did not take it in time (unavailable, or too slow). */
export function droppedMarker(bytes: number): string {
  return `\n[pgsched: ${bytes} bytes of output dropped: the output store did not keep up]\n`
}

/** Which store workers write output to (SCHEDULER_OUTPUT_STORE, parsed). */
export type OutputStoreSetting =
  | { kind: 'postgres' }
  | { kind: 'file'; dir: string }
  /** keyPrefix is empty or ends in `/`. */
  | { kind: 's3'; bucket: string; keyPrefix: string }

/**
 * Parses SCHEDULER_OUTPUT_STORE: `postgres` (the default), `file` (the directory `fileDir`,
 * SCHEDULER_OUTPUT_DIR), `file:///absolute/dir`, or `s3://bucket` / `s3://bucket/prefix`.
 * @throws Error saying what is accepted.
 */
export function parseOutputStoreSetting(value: string, fileDir: string): OutputStoreSetting {
  if (value === 'postgres') return { kind: 'postgres' }
  if (value === 'file') return { kind: 'file', dir: fileDir }
  const accepted = 'must be postgres, file, file:///absolute/dir or s3://bucket/prefix'
  let url: URL
  try {
    url = new URL(value)
  } catch {
    throw new Error(`${accepted} (got ${JSON.stringify(value)})`)
  }
  // written with the URL's slashes (file:///dir, file://localhost/dir): the parser reads "file:dir"
  // and "file:./dir" as /dir, a folder at the root the writer of a relative path did not mean
  const absolute = /^file:\/\/(localhost)?\//i.test(value)
  if (url.protocol === 'file:' && absolute && url.pathname.length > 1 && !url.search && !url.hash && (url.hostname === '' || url.hostname === 'localhost')) {
    return { kind: 'file', dir: decodeURIComponent(url.pathname) }
  }
  if (url.protocol === 's3:' && /^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$/.test(url.hostname) && !url.search && !url.hash && !url.username) {
    const path = decodeURIComponent(url.pathname).replace(/^\/+/, '').replace(/\/+$/, '')
    return { kind: 's3', bucket: url.hostname, keyPrefix: path ? `${path}/` : '' }
  }
  throw new Error(`${accepted} (got ${JSON.stringify(value)})`)
}
