/**
 * Jobs as CSV (RFC 4180): one header row, then a row per job, lines ending in CRLF. A field
 * holding a comma, a double quote, CR or LF is quoted, with its quotes doubled; the payload is
 * written as JSON. Free text a tenant wrote (error type and message, idempotency key) that a
 * spreadsheet would read as a formula (it starts with =, +, -, @, a tab or CR) gets a leading `'`,
 * so opening an export never runs it. Also the JSON form of an export (the API's and the CLI's).
 */
import type { Job } from '../core/job.ts'
import { jobToJson } from './json.ts'

const COLUMNS = [
  'id',
  'tenant',
  'type',
  'queue',
  'status',
  'priority',
  'attempts',
  'createdAt',
  'nextRunAt',
  'lastRunStatus',
  'lastRunFinishedAt',
  'errorType',
  'errorMessage',
  'idempotencyKey',
  'payload',
] as const

/** Columns holding text a tenant wrote. */
const FREE_TEXT: ReadonlySet<string> = new Set(['errorType', 'errorMessage', 'idempotencyKey'])

/** A field as CSV. */
export function csvField(value: string | number | null): string {
  if (value === null) return ''
  const text = String(value)
  return /[",\r\n]/.test(text) ? `"${text.replaceAll('"', '""')}"` : text
}

/** Free text as CSV, kept from being read as a spreadsheet formula. */
export function csvText(value: string | null): string {
  if (value === null) return ''
  return csvField(/^[=+\-@\t\r]/.test(value) ? `'${value}` : value)
}

export function jobsCsvHeader(): string {
  return `${COLUMNS.join(',')}\r\n`
}

export function jobCsvRow(job: Job): string {
  const last = job.lastExecution
  const fields: Record<(typeof COLUMNS)[number], string | number | null> = {
    id: job.id,
    tenant: job.tenant,
    type: job.type,
    queue: job.queue,
    status: job.status,
    priority: job.priority,
    attempts: last?.attempt ?? 0,
    createdAt: job.createdAt.toISOString(),
    nextRunAt: job.nextRunAt?.toISOString() ?? null,
    lastRunStatus: job.lastRun?.status ?? null,
    lastRunFinishedAt: job.lastRun?.finishedAt?.toISOString() ?? null,
    errorType: last?.error?.name ?? null,
    errorMessage: last?.error?.message ?? null,
    idempotencyKey: job.idempotencyKey,
    payload: JSON.stringify(job.payload),
  }
  return `${COLUMNS.map((c) => (FREE_TEXT.has(c) ? csvText(fields[c] as string | null) : csvField(fields[c]))).join(',')}\r\n`
}

/** A job export as CSV text, a header row first, then a row per job as they come. */
export async function* jobsCsv(jobs: AsyncIterable<Job>): AsyncGenerator<string> {
  yield jobsCsvHeader()
  for await (const job of jobs) yield jobCsvRow(job)
}

/** A job export as one JSON array of the REST API's Job objects, written a job at a time. */
export async function* jobsJsonArray(jobs: AsyncIterable<Job>): AsyncGenerator<string> {
  let first = true
  for await (const job of jobs) {
    yield `${first ? '[' : ','}\n${JSON.stringify(jobToJson(job))}`
    first = false
  }
  yield first ? '[]\n' : '\n]\n'
}
