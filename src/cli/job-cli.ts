/**
 * What the `scheduler jobs` commands share: a client on DATABASE_URL, JSON and table output, and
 * the filter options of listings and bulk calls.
 */
import type { Command } from 'commander'
import type { Kysely } from 'kysely'
import { createClient, type Client } from '../client.ts'
import type { Job, Schedule } from '../core/job.ts'
import { JOB_STATUSES, type JobStatus } from '../core/job-status.ts'
import { instantProblem } from '../core/formats.ts'
import type { DB } from '../db/schema.ts'
import { ValidationError } from '../errors.ts'
import type { JobListFilter } from '../job-operations.ts'
import { formatTable, withDatabase } from './shared.ts'

/**
 * Runs `fn` with a client on DATABASE_URL (tenant `tenant`, or `default`); its submits are
 * acknowledged only with a synchronous standby when SCHEDULER_REQUIRE_SYNC_STANDBY=on, as the API's.
 */
export const withClient = <T>(tenant: string | undefined, fn: (client: Client, db: Kysely<DB>) => Promise<T>) =>
  withDatabase('pgsched-jobs', ({ db }, config) => {
    const requireSyncStandby = config.api.requireSyncStandby === 'on'
    let client: Client
    try {
      client = createClient({ db, tenant: tenant ?? 'default', createdBy: 'cli', batchSubmits: false, requireSyncStandby })
    } catch (err: unknown) {
      // a tenant name no key can have is refused naming the flag that gave it
      if (!(err instanceof ValidationError)) throw err
      const word = (text: string) => text.replace(/^tenant /, '--tenant ')
      throw new ValidationError(
        word(err.message),
        err.details?.map((d) => ({ ...d, message: word(d.message) })),
      )
    }
    return fn(client, db)
  })

export const print = (value: unknown): void => {
  process.stdout.write(`${JSON.stringify(value, null, 2)}\n`)
}

export const ago = (d: Date | null): string =>
  d === null
    ? '-'
    : d
        .toISOString()
        .replace('T', ' ')
        .replace(/\.\d+Z$/, 'Z')

export function jobTable(jobs: readonly Job[]): string {
  return formatTable([
    ['ID', 'TENANT', 'TYPE', 'QUEUE', 'STATUS', 'ATTEMPTS', 'CREATED', 'NEXT RUN', 'LAST ERROR'],
    ...jobs.map((j) => [
      j.id,
      j.tenant,
      j.type,
      j.queue,
      j.status,
      String(j.lastExecution?.attempt ?? 0),
      ago(j.createdAt),
      ago(j.nextRunAt),
      lastErrorText(j).slice(0, 60),
    ]),
  ])
}

/**
 * What went wrong last, in one line: why the schedule stopped (schedule.error), which is what a
 * FAILED recurring job without a failed run has, else the last execution's error; '-' for none.
 */
export function lastErrorText(job: Job): string {
  if (job.schedule?.error) return `ScheduleError: ${job.schedule.error}`
  const error = job.lastExecution?.error
  return error ? `${error.name}: ${error.message}` : '-'
}

/** A job's schedule in one line: the cron expression and its time zone, or the interval; '-' for none. */
export function scheduleText(job: Job): string {
  const s = job.schedule
  if (!s) return '-'
  return s.cron !== null ? `cron ${s.cron} (${s.timezone})` : `every ${s.intervalMs} ms`
}

/** A job's attempts and the delays between them, for `jobs view`. */
export function attemptsText(job: Job): string {
  if (job.maxAttempts === 1) return '1, no retry'
  return `up to ${job.maxAttempts}; retry after a random delay up to ${job.backoffBaseMs} ms, doubling each attempt, at most ${job.backoffMaxMs} ms`
}

/** A recurring job's window, policies and state, for `jobs view`. */
export function scheduleRows(s: Schedule): string[][] {
  const misfire = s.misfirePolicy === 'fire_all' ? `fire_all (at most ${s.misfireMaxRuns} catch-up runs)` : s.misfirePolicy
  return [
    ['window', `${ago(s.startAt)} to ${ago(s.endAt)}`],
    ['misfire policy', misfire],
    ['overlap policy', s.overlapPolicy],
    ['paused', s.paused ? 'yes' : 'no'],
  ]
}

/** The filter options every listing and bulk call takes. */
export function filterOptions(command: Command): Command {
  return command
    .option('--status <status>', `one of ${JOB_STATUSES.join(', ')}`)
    .option('--type <type>', 'only jobs of this type')
    .option('--queue <queue>', 'only jobs of this queue')
    .option('--tenant <name>', "only this tenant's jobs (default: every tenant's)")
    .option('--idempotency-key <key>', 'only the job with this idempotency key')
    .option('--error-type <name>', "only jobs whose latest error's name is this")
    .option('--error-message <text>', "only jobs whose latest error's message is this (exact)")
    .option('--created-after <time>', 'only jobs created after this ISO-8601 instant (with a time zone: 2030-01-31T09:00:00Z)')
    .option('--created-before <time>', 'only jobs created before this ISO-8601 instant (with a time zone)')
}

export interface FilterOpts {
  status?: string
  type?: string
  queue?: string
  tenant?: string
  idempotencyKey?: string
  errorType?: string
  errorMessage?: string
  createdAfter?: string
  createdBefore?: string
}

export function filterOf(o: FilterOpts): JobListFilter {
  if (o.status !== undefined && !(JOB_STATUSES as readonly string[]).includes(o.status.toUpperCase())) {
    throw new ValidationError(`--status must be one of ${JOB_STATUSES.join(', ')}, got "${o.status}"`, [{ path: 'status', message: 'unknown status' }])
  }
  for (const [flag, value] of [
    ['--created-after', o.createdAfter],
    ['--created-before', o.createdBefore],
  ] as const) {
    const problem = value === undefined ? undefined : instantProblem(value, flag)
    if (problem) throw new ValidationError(problem, [{ path: flag, message: problem }])
  }
  const f: JobListFilter = {
    status: o.status?.toUpperCase() as JobStatus | undefined,
    type: o.type,
    queue: o.queue,
    tenant: o.tenant,
    idempotencyKey: o.idempotencyKey,
    errorType: o.errorType,
    errorMessage: o.errorMessage,
    createdAfter: o.createdAfter,
    createdBefore: o.createdBefore,
  }
  return Object.fromEntries(Object.entries(f).filter(([, v]) => v !== undefined)) as JobListFilter
}
