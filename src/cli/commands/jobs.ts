/**
 * `scheduler jobs submit|list|view|cancel|pause|resume|retry|rerun|delete|export|bulk`: jobs from
 * the command line.
 * Like `scheduler queues`, it works on the database (DATABASE_URL), so it acts as an operator
 * key does: on every tenant's jobs unless `--tenant` names one (submit: the tenant to submit for,
 * default `default`). Each prints a readable table, or with --json the REST API's JSON.
 */
import { once } from 'node:events'
import { createWriteStream } from 'node:fs'
import { rename, rm } from 'node:fs/promises'
import type { Writable } from 'node:stream'
import type { Command } from 'commander'
import type { Kysely } from 'kysely'
import { jobsCsv, jobsJsonArray } from '../../api/jobs-csv.ts'
import { jobToJson } from '../../api/json.ts'
import type { Client } from '../../client.ts'
import type { Job, MisfirePolicy, OverlapPolicy, SubmitJobInput } from '../../core/job.ts'
import {
  BACKOFF_BASE_MS,
  BACKOFF_MAX_MS,
  CONCURRENCY_KEY_MAX_LENGTH,
  MISFIRE_MAX_RUNS,
  START_DEADLINE_MS,
  TIMEOUT_MS,
  type IntRange,
} from '../../core/names.ts'
import { jobTenantOf } from '../../db/queries/job-operations.ts'
import type { DB } from '../../db/schema.ts'
import { NotFoundError, ValidationError } from '../../errors.ts'
import { assertUuid } from '../../paging.ts'
import {
  ago,
  attemptsText,
  filterOf,
  filterOptions,
  jobTable,
  lastErrorText,
  print,
  scheduleRows,
  scheduleText,
  withClient,
  type FilterOpts,
} from '../job-cli.ts'
import { formatTable, inCliWords } from '../shared.ts'
import { registerJobsBulk } from './jobs-bulk.ts'

/** The client acting for the job's tenant (`--tenant`, or the job's own). */
async function clientForJob(client: Client, db: Kysely<DB>, id: string, tenant: string | undefined): Promise<Client> {
  // as the API answers it: an id that is not a UUID is not "not found"
  assertUuid(id, 'id')
  if (tenant !== undefined) return client.withTenant(tenant, 'cli')
  const own = await jobTenantOf(db, id)
  if (own === undefined) throw new NotFoundError(`job ${id} not found`)
  return client.withTenant(own, 'cli')
}

function number(text: string | undefined, name: string): number | undefined {
  if (text === undefined) return undefined
  // decimal digits only, as the configuration reads numbers: not "", "0x10" or "1e1", which Number() takes
  const n = /^\s*[+-]?\d+\s*$/.test(text) ? Number(text) : Number.NaN
  if (!Number.isSafeInteger(n)) throw new ValidationError(`${name} must be an integer, got "${text}"`, [{ path: name, message: 'an integer' }])
  return n
}

interface SubmitOpts {
  tenant?: string
  payload?: string
  queue?: string
  priority?: string
  at?: string
  cron?: string
  every?: string
  timezone?: string
  idempotencyKey?: string
  maxAttempts?: string
  timeoutMs?: string
  backoffBaseMs?: string
  backoffMaxMs?: string
  startDeadlineMs?: string
  concurrencyKey?: string
  startAt?: string
  endAt?: string
  misfirePolicy?: string
  misfireMaxRuns?: string
  overlapPolicy?: string
  json?: boolean
}

function submitInput(type: string, o: SubmitOpts): SubmitJobInput {
  let payload: unknown
  if (o.payload !== undefined) {
    try {
      payload = JSON.parse(o.payload)
    } catch (err: unknown) {
      // the parser's words say where (Node.js: "Expected property name or '}' in JSON at position 1")
      const why = err instanceof SyntaxError ? `: ${err.message}` : ''
      throw new ValidationError(`--payload must be JSON${why}`, [{ path: 'payload', message: `not JSON${why}` }])
    }
  }
  const schedules = [o.at, o.cron, o.every].filter((s) => s !== undefined).length
  if (schedules > 1) throw new ValidationError('give one of --at, --cron and --every', [{ path: 'schedule', message: 'one of --at, --cron, --every' }])
  // a time zone without a cron expression would be dropped, and the job run at once
  if (o.timezone !== undefined && o.cron === undefined) {
    throw new ValidationError('--timezone applies only to --cron schedules', [{ path: 'schedule.timezone', message: '--timezone needs --cron' }])
  }
  const input: SubmitJobInput = { type }
  if (payload !== undefined) input.payload = payload
  if (o.queue !== undefined) input.queue = o.queue
  if (o.priority !== undefined) input.priority = number(o.priority, 'priority')
  if (o.maxAttempts !== undefined) input.maxAttempts = number(o.maxAttempts, 'maxAttempts')
  if (o.timeoutMs !== undefined) input.timeoutMs = number(o.timeoutMs, 'timeoutMs')
  if (o.backoffBaseMs !== undefined) input.backoffBaseMs = number(o.backoffBaseMs, 'backoffBaseMs')
  if (o.backoffMaxMs !== undefined) input.backoffMaxMs = number(o.backoffMaxMs, 'backoffMaxMs')
  if (o.startDeadlineMs !== undefined) input.startDeadlineMs = number(o.startDeadlineMs, 'startDeadlineMs')
  if (o.idempotencyKey !== undefined) input.idempotencyKey = o.idempotencyKey
  if (o.concurrencyKey !== undefined) input.concurrencyKey = o.concurrencyKey
  // the recurring settings as given: the client refuses a bad one, or one for a job that runs once
  if (o.startAt !== undefined) input.startAt = o.startAt
  if (o.endAt !== undefined) input.endAt = o.endAt
  if (o.misfirePolicy !== undefined) input.misfirePolicy = o.misfirePolicy as MisfirePolicy
  if (o.misfireMaxRuns !== undefined) input.misfireMaxRuns = number(o.misfireMaxRuns, 'misfireMaxRuns')
  if (o.overlapPolicy !== undefined) input.overlapPolicy = o.overlapPolicy as OverlapPolicy
  if (o.at !== undefined) input.schedule = { at: o.at }
  if (o.cron !== undefined) input.schedule = o.timezone === undefined ? { cron: o.cron } : { cron: o.cron, timezone: o.timezone }
  if (o.every !== undefined) input.schedule = { every: /^\d+$/.test(o.every) ? Number(o.every) : o.every }
  return input
}

const range = ({ min, max }: IntRange): string => `${min} to ${max}`

/** The submit's fields as `jobs submit` takes them. */
const SUBMIT_WORDS = {
  'schedule.at': '--at',
  'schedule.cron': '--cron',
  'schedule.timezone': '--timezone',
  'schedule.every': '--every',
  queue: '--queue',
  priority: '--priority',
  maxAttempts: '--max-attempts',
  timeoutMs: '--timeout-ms',
  backoffBaseMs: '--backoff-base-ms',
  backoffMaxMs: '--backoff-max-ms',
  startDeadlineMs: '--start-deadline-ms',
  idempotencyKey: '--idempotency-key',
  concurrencyKey: '--concurrency-key',
  startAt: '--start-at',
  endAt: '--end-at',
  misfirePolicy: '--misfire-policy',
  misfireMaxRuns: '--misfire-max-runs',
  overlapPolicy: '--overlap-policy',
  tenant: '--tenant',
}

/**
 * Runs a submit with its refusals in the command's words: each field named by its flag
 * (inCliWords), also where a message names startAt or endAt after its start ("endAt must be after
 * startAt"), and the recurring schedules by theirs ("({cron} or {every})" → "(--cron or --every)").
 */
async function inSubmitWords<T>(fn: () => Promise<T>): Promise<T> {
  try {
    return await inCliWords(SUBMIT_WORDS, fn)
  } catch (err: unknown) {
    if (!(err instanceof ValidationError)) throw err
    const word = (text: string) =>
      text
        .replace(/(?<![\w.])startAt\b/g, '--start-at')
        .replace(/(?<![\w.])endAt\b/g, '--end-at')
        .replaceAll('({cron} or {every})', '(--cron or --every)')
    throw new ValidationError(
      word(err.message),
      err.details?.map((d) => ({ ...d, message: word(d.message) })),
    )
  }
}

/** The job's queue, and when it is paused, since when: its pending work waits for the resume. */
function queueText(job: Job): string {
  if (!job.queuePaused) return job.queue
  const since = job.queuePausedAt ? ` since ${ago(job.queuePausedAt)}` : ''
  return `${job.queue} (paused${since}: nothing of it starts until the queue is resumed)`
}

function showJob(job: Job, json: boolean | undefined): void {
  if (json) print(jobToJson(job))
  else process.stdout.write(`${jobTable([job])}\n`)
}

export function registerJobs(program: Command): void {
  const jobs = program.command('jobs').description('submit, list, view, cancel, retry, rerun and delete jobs, one or many at a time')
  const json = ['--json', 'print JSON (as the REST API answers)'] as const
  const tenant = ['--tenant <name>', "the job's tenant (default: whichever it is)"] as const

  jobs
    .command('submit')
    .description('submit a job (now, at a time, or on a schedule) for a tenant')
    .argument('<type>', 'the handler name')
    .option('--tenant <name>', 'the tenant', 'default')
    .option('--payload <json>', 'the payload, as JSON')
    .option('--queue <queue>', 'the queue (default: default)')
    .option('--priority <n>', 'higher runs first (-1000 to 1000)')
    .option('--at <time>', 'run once at this ISO-8601 time')
    .option('--cron <expression>', 'run on this cron schedule')
    .option('--timezone <zone>', 'the cron schedule’s IANA time zone (default UTC)')
    .option('--every <duration>', 'run every interval (10s, 5m, 1h, or milliseconds)')
    .option('--idempotency-key <key>', 'the same key and request return the same job')
    .option('--max-attempts <n>', 'attempts per execution')
    .option('--timeout-ms <ms>', `time limit of one attempt in milliseconds, ${range(TIMEOUT_MS)} (default 300000)`)
    .option('--backoff-base-ms <ms>', `retry delay base in milliseconds, ${range(BACKOFF_BASE_MS)} (default 1000)`)
    .option(
      '--backoff-max-ms <ms>',
      `retry delay cap in milliseconds, at least --backoff-base-ms, up to ${BACKOFF_MAX_MS.max} (default 3600000, or --backoff-base-ms when larger)`,
    )
    .option(
      '--start-deadline-ms <ms>',
      `each execution must start within this many ms after its time, or it expires (${range(START_DEADLINE_MS)}; default none)`,
    )
    .option(
      '--concurrency-key <key>',
      `jobs with the same key run at most the queue's per-key concurrency limit at once (1-${CONCURRENCY_KEY_MAX_LENGTH} characters)`,
    )
    .option('--start-at <time>', 'with --cron or --every: the first possible fire time (ISO-8601 instant)')
    .option('--end-at <time>', 'with --cron or --every: the last possible fire time (ISO-8601 instant, after --start-at)')
    .option('--misfire-policy <policy>', 'with --cron or --every, for fire times missed while nothing dispatched: fire_once (default), skip or fire_all')
    .option('--misfire-max-runs <n>', `with --misfire-policy fire_all: most catch-up runs, ${range(MISFIRE_MAX_RUNS)} (default 100)`)
    .option('--overlap-policy <policy>', 'with --cron or --every, when the previous run is still going: allow (default), skip or queue')
    .option(...json)
    .action((type: string, o: SubmitOpts) =>
      withClient(o.tenant, async (client) => {
        const { job, created } = await inSubmitWords(() => client.submitJob(submitInput(type, o)))
        if (o.json) return print(jobToJson(job))
        process.stdout.write(`${created ? 'submitted' : 'already submitted (same idempotency key)'}\n${jobTable([job])}\n`)
      }),
    )

  filterOptions(jobs.command('list').description('jobs, newest first, by filter (a page at a time)'))
    .option('--limit <n>', 'page size, 1-500', '50')
    .option('--cursor <cursor>', 'the next-page cursor printed by the previous page')
    .option(...json)
    .action((o: FilterOpts & { limit: string; cursor?: string; json?: boolean }) =>
      withClient(undefined, async (client) => {
        const page = await inCliWords({ limit: '--limit', cursor: '--cursor' }, () =>
          client.allTenants().listJobs({ ...filterOf(o), limit: number(o.limit, '--limit'), cursor: o.cursor }),
        )
        if (o.json) return print({ items: page.items.map(jobToJson), nextCursor: page.nextCursor })
        process.stdout.write(page.items.length === 0 ? 'no jobs\n' : `${jobTable(page.items)}\n`)
        if (page.nextCursor) process.stdout.write(`more: --cursor ${page.nextCursor}\n`)
      }),
    )

  jobs
    .command('view')
    .description('one job with its status, schedule and latest execution')
    .argument('<id>')
    .option(...tenant)
    .option(...json)
    .action((id: string, o: { tenant?: string; json?: boolean }) =>
      withClient(undefined, async (client, db) => {
        const job = await (await clientForJob(client, db, id, o.tenant)).viewJob(id)
        if (o.json) return print(jobToJson(job))
        process.stdout.write(
          `${formatTable([
            ['FIELD', 'VALUE'],
            ['id', job.id],
            ['tenant', job.tenant],
            ['type', job.type],
            ['queue', queueText(job)],
            ['status', job.status],
            // a type no live worker serves in the queue (a misspelt type, or its workers down): said at once
            ...(job.unserved ? [['unserved', job.unserved]] : []),
            ['payload', JSON.stringify(job.payload)],
            ['priority', String(job.priority)],
            ['attempts', attemptsText(job)],
            ['timeout', `${job.timeoutMs} ms per attempt`],
            ['start deadline', job.startDeadlineMs === null ? '-' : `${job.startDeadlineMs} ms after its time`],
            ['concurrency key', job.concurrencyKey ?? '-'],
            ['idempotency key', job.idempotencyKey ?? '-'],
            ['schedule', scheduleText(job)],
            ...(job.schedule ? scheduleRows(job.schedule) : []),
            ['next run', ago(job.nextRunAt)],
            [
              'last run',
              !job.lastRun
                ? '-'
                : job.lastRun.attempt === 0
                  ? `${job.lastRun.status}, not started yet`
                  : job.lastRun.status === 'PENDING'
                    ? `PENDING, waiting for attempt ${job.lastRun.attempt + 1} (attempt ${job.lastRun.attempt} failed)`
                    : `${job.lastRun.status}, attempt ${job.lastRun.attempt}`,
            ],
            ['last error', lastErrorText(job)],
            ['created', ago(job.createdAt)],
          ])}\n`,
        )
      }),
    )

  const act = (name: 'cancel' | 'pause' | 'resume' | 'retry' | 'rerun' | 'delete', description: string) =>
    jobs
      .command(name)
      .description(description)
      .argument('<id>')
      .option(...tenant)
      .option(...json)
      .action((id: string, o: { tenant?: string; json?: boolean }) =>
        withClient(undefined, async (client, db) => {
          const c = await clientForJob(client, db, id, o.tenant)
          if (name === 'delete') {
            await c.deleteJob(id)
            if (o.json) print({ id, deleted: true })
            else process.stdout.write(`deleted job ${id}\n`)
            return
          }
          const job = await (name === 'cancel'
            ? c.cancelJob(id)
            : name === 'pause'
              ? c.pauseJob(id)
              : name === 'resume'
                ? c.resumeJob(id)
                : name === 'retry'
                  ? c.retryJob(id)
                  : c.rerunJob(id))
          showJob(job, o.json)
        }),
      )
  act('cancel', 'cancel a job: pending runs are dropped, a running one is told to stop, a recurring one stops firing')
  act('pause', 'pause a recurring job: no fire time starts until it is resumed (a run in progress goes on)')
  act('resume', 'resume a paused recurring job from its next fire time')
  act('retry', 'run a FAILED, EXPIRED or CANCELLED job again now (attempts from 0; history kept)')
  act('rerun', 'run a finished job once more now with the same payload (history kept)')
  act('delete', 'delete a finished job with its executions and output')

  filterOptions(jobs.command('export').description('every job of a filter, newest first, as CSV or JSON (as GET /v1/jobs/export)'))
    .option('--format <format>', 'csv (RFC 4180, a header row) or json (one array)', 'json')
    .option('--output <file>', 'write to this file (complete or not at all) instead of standard output')
    .action((o: FilterOpts & { format: string; output?: string }) =>
      withClient(undefined, async (client) => {
        if (o.format !== 'csv' && o.format !== 'json') {
          throw new ValidationError(`--format must be csv or json, got "${o.format}"`, [{ path: 'format', message: 'csv or json' }])
        }
        const counted = countJobs(client.allTenants().exportJobs(filterOf(o)))
        const text = o.format === 'csv' ? jobsCsv(counted.jobs) : jobsJsonArray(counted.jobs)
        if (o.output === undefined) {
          // a reader that stops early (`| head`) ends the export, quietly: it was asked for
          if (await writeToStdout(text)) process.stderr.write(`exported ${jobsText(counted.count())}\n`)
          return
        }
        // written beside the file and renamed when whole: a failed export leaves no file that looks complete
        const partial = `${o.output}.partial-${process.pid}`
        const file = createWriteStream(partial, { flags: 'wx' })
        try {
          await once(file, 'open')
          await writeAll(text, file)
          file.end()
          await once(file, 'finish')
          await rename(partial, o.output)
        } catch (err) {
          file.destroy()
          await rm(partial, { force: true })
          throw err
        }
        process.stderr.write(`exported ${jobsText(counted.count())} to ${o.output}\n`)
      }),
    )

  registerJobsBulk(jobs)
}

/** Jobs passed through, counted, with a progress line on stderr every 10,000. */
function countJobs(jobs: AsyncIterable<Job>): { jobs: AsyncGenerator<Job>; count(): number } {
  let n = 0
  async function* counted(): AsyncGenerator<Job> {
    for await (const job of jobs) {
      yield job
      if (++n % 10_000 === 0) process.stderr.write(`exported ${n} jobs so far\n`)
    }
  }
  return { jobs: counted(), count: () => n }
}

const jobsText = (n: number): string => `${n} job${n === 1 ? '' : 's'}`

/** Writes every chunk to `out`, waiting while its buffer is full. */
/**
 * Writes `chunks` to standard output; false when its reader closed it (EPIPE), which ends the writing
 * without an error. Any other error of the stream is thrown.
 */
async function writeToStdout(chunks: AsyncIterable<string>): Promise<boolean> {
  const out = process.stdout
  let failed: NodeJS.ErrnoException | undefined
  // kept after an EPIPE: a write still buffered fails the same way, with no one else listening
  out.on('error', (err: NodeJS.ErrnoException) => {
    failed ??= err
  })
  for await (const chunk of chunks) {
    if (failed !== undefined) break
    if (!out.write(chunk)) {
      await new Promise<void>((resolve) => {
        const done = () => {
          out.off('drain', done)
          out.off('error', done)
          resolve()
        }
        out.on('drain', done)
        out.on('error', done)
      })
    }
  }
  if (failed !== undefined && failed.code !== 'EPIPE') throw failed
  return failed === undefined
}

async function writeAll(chunks: AsyncIterable<string>, out: Writable): Promise<void> {
  for await (const chunk of chunks) {
    if (!out.write(chunk)) await once(out, 'drain')
  }
}
