/**
 * `scheduler jobs …` and `scheduler workers list`, run as the real bin against this file's
 * database: JSON and table output, the single-job operations, the export, and `jobs bulk` repeating its
 * calls until nothing is left, with progress on stderr (a line per call when stderr is not a
 * terminal).
 */
import { execFile, spawn } from 'node:child_process'
import { once } from 'node:events'
import { mkdtemp, readdir, readFile, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { promisify } from 'node:util'
import { sql } from 'kysely'
import { describe, expect, it } from 'vitest'
import { createClient } from '../../src/client.ts'
import type { Job } from '../../src/core/job.ts'
import { workerRegister } from '../../src/db/queries/workers.ts'
import { useTestDb } from '../db.ts'
import { insertExecution, insertExecutions } from '../factories.ts'

const exec = promisify(execFile)
const t = useTestDb()

const scheduler = (...args: string[]) => exec('node', ['bin/scheduler', ...args], { env: { ...process.env, DATABASE_URL: t.url } })
const failing = (...args: string[]) =>
  scheduler(...args).then(
    () => {
      throw new Error(`scheduler ${args.join(' ')} succeeded`)
    },
    (err: { code: number; stderr: string }) => err,
  )

describe('scheduler jobs submit with SCHEDULER_REQUIRE_SYNC_STANDBY=on', () => {
  it('is refused by a server without a synchronous standby, naming why, and exits 1', async () => {
    const refused = await exec('node', ['bin/scheduler', 'jobs', 'submit', 'mail.send', '--tenant', 'strict'], {
      env: { ...process.env, DATABASE_URL: t.url, SCHEDULER_REQUIRE_SYNC_STANDBY: 'on' },
    }).then(
      () => undefined,
      (err: { code: number; stderr: string }) => err,
    )
    expect(refused?.code).toBe(1)
    expect(refused?.stderr).toContain('the database has no synchronous standby now')
  })
})

describe('scheduler jobs', () => {
  it('submits, lists, views, cancels, retries, reruns and deletes a job', async () => {
    const submitted = JSON.parse(
      (await scheduler('jobs', 'submit', 'mail.send', '--tenant', 'acme', '--payload', '{"to":"a@b.c"}', '--queue', 'mail', '--json')).stdout,
    )
    expect(submitted).toMatchObject({ tenant: 'acme', type: 'mail.send', queue: 'mail', payload: { to: 'a@b.c' }, status: 'SCHEDULED' })
    const id = submitted.id as string

    const table = (await scheduler('jobs', 'list', '--queue', 'mail')).stdout
    expect(table.split('\n')[0]).toMatch(/^ID\s+TENANT\s+TYPE\s+QUEUE\s+STATUS/)
    expect(table).toContain(id)
    const listed = JSON.parse((await scheduler('jobs', 'list', '--tenant', 'acme', '--status', 'scheduled', '--json')).stdout)
    expect(listed.items.map((j: { id: string }) => j.id)).toEqual([id])

    const view = (await scheduler('jobs', 'view', id)).stdout
    expect(view).toMatch(/payload\s+\{"to":"a@b.c"\}/)
    // no worker serves the type in its queue: the table says so, as the JSON's unserved does
    expect(view).toMatch(/\nunserved\s+no live worker serves type "mail\.send" in queue "mail"/)
    expect(JSON.parse((await scheduler('jobs', 'cancel', id, '--json')).stdout).status).toBe('CANCELLED')
    const retried = JSON.parse((await scheduler('jobs', 'retry', id, '--json')).stdout)
    expect(retried).toMatchObject({ status: 'SCHEDULED', lastRun: { status: 'PENDING' } })

    const refused = await failing('jobs', 'rerun', id)
    expect(refused.code).toBe(1)
    expect(refused.stderr).toContain(`job ${id} is SCHEDULED`)

    await scheduler('jobs', 'cancel', id)
    expect((await scheduler('jobs', 'delete', id)).stdout).toBe(`deleted job ${id}\n`)
    expect((await failing('jobs', 'view', id)).stderr).toContain(`job ${id} not found`)
    // a filter's instant is named by its flag, with the form it takes
    const badFlag = await failing('jobs', 'list', '--created-after', 'yesterday')
    expect(badFlag.stderr).toContain('--created-after must be an ISO-8601 instant with a time zone, such as 2030-01-31T09:00:00Z')
    // a flag refused is usage (2), as a missing argument is; a job in the wrong state is a failure (1, above)
    expect(badFlag.code).toBe(2)
    // an id that is not a UUID is named as such, as the API does
    expect((await failing('jobs', 'view', 'not-a-uuid')).stderr).toContain('id must be a UUID')
    // a time zone without --cron is refused, not dropped (the job would run at once)
    for (const schedule of [[], ['--every', '5s']]) {
      const noCron = await failing('jobs', 'submit', 'email', '--tenant', 'cli', '--timezone', 'Europe/Berlin', ...schedule)
      expect(noCron.code).not.toBe(0)
      expect(noCron.stderr).toContain('--timezone applies only to --cron schedules')
    }
  }, 120_000)

  it("shows why a schedule stopped, with its time zone, in jobs view and in the list's LAST ERROR", async () => {
    const submitted = JSON.parse(
      (await scheduler('jobs', 'submit', 'digest', '--tenant', 'sched', '--cron', '0 9 * * 1-5', '--timezone', 'Europe/Berlin', '--json')).stdout,
    )
    const id = submitted.id as string
    expect((await scheduler('jobs', 'view', id)).stdout).toMatch(/schedule\s+cron 0 9 \* \* 1-5 \(Europe\/Berlin\)/)
    // a schedule the dispatcher stopped (a zone written by SQL that no runtime knows)
    const reason = 'cron "0 9 * * 1-5" in time zone "Invalid/Zone" is invalid: RangeError: Invalid time zone specified: Invalid/Zone'
    await sql`update pgsched.triggers set timezone = 'Invalid/Zone', next_fire_at = null, error = ${reason} where job_id = ${id}::uuid`.execute(t.db)
    expect((await scheduler('jobs', 'view', id)).stdout).toMatch(/last error\s+ScheduleError: cron "0 9 \* \* 1-5" in time zone "Invalid\/Zone" is invalid/)
    const row = (await scheduler('jobs', 'list', '--tenant', 'sched')).stdout.split('\n').find((l) => l.startsWith(id))
    expect(row).toContain('ScheduleError: cron "0 9 * * 1-5" in time zone "Inval')
  })

  it('says in jobs view that the queue of a job is paused, and since when, while it is', async () => {
    const id = JSON.parse((await scheduler('jobs', 'submit', 'mail', '--tenant', 'held', '--queue', 'held', '--json')).stdout).id as string
    await scheduler('queues', 'pause', 'held')
    const pausedAt = (await t.db.selectFrom('pgsched.queues').select('paused_at').where('name', '=', 'held').executeTakeFirstOrThrow()).paused_at
    const since = (pausedAt as Date)
      .toISOString()
      .replace('T', ' ')
      .replace(/\.\d+Z$/, 'Z')
    const view = (await scheduler('jobs', 'view', id)).stdout
    expect(view).toContain(`held (paused since ${since}: nothing of it starts until the queue is resumed)`)
    expect(JSON.parse((await scheduler('jobs', 'view', id, '--json')).stdout)).toMatchObject({
      queuePaused: true,
      queuePausedAt: (pausedAt as Date).toISOString(),
    })
    await scheduler('queues', 'resume', 'held')
    expect((await scheduler('jobs', 'view', id)).stdout).toMatch(/^queue\s+held$/m)
  })

  it('pauses and resumes a recurring job, and refuses to pause a one-time job', async () => {
    const id = JSON.parse((await scheduler('jobs', 'submit', 'digest', '--tenant', 'pause', '--every', '5m', '--json')).stdout).id as string
    expect((await scheduler('jobs', 'pause', id)).stdout).toMatch(new RegExp(`${id}\\s+pause\\s+digest\\s+default\\s+PAUSED`))
    const trigger = await t.db.selectFrom('pgsched.triggers').select('paused').where('job_id', '=', id).executeTakeFirstOrThrow()
    expect(trigger.paused).toBe(true)
    const resumed = JSON.parse((await scheduler('jobs', 'resume', id, '--json')).stdout)
    expect(resumed).toMatchObject({ id, status: 'SCHEDULED', schedule: { paused: false } })
    const once = JSON.parse((await scheduler('jobs', 'submit', 'mail', '--tenant', 'pause', '--json')).stdout).id as string
    const refused = await failing('jobs', 'pause', once)
    expect(refused.code).toBe(1)
    expect(refused.stderr).toContain(`job ${once} is not recurring; only recurring jobs can be paused or resumed`)
  })

  it('exports the jobs of a filter as CSV to stdout and as JSON to a file', async () => {
    const ids: string[] = []
    for (const payload of ['{"n":1}', '{"note":"=SUM(A1),\\"x\\""}']) {
      ids.push(JSON.parse((await scheduler('jobs', 'submit', 'report', '--tenant', 'export', '--payload', payload, '--json')).stdout).id)
    }
    await scheduler('jobs', 'submit', 'report', '--tenant', 'other-export')
    const csv = await scheduler('jobs', 'export', '--tenant', 'export', '--format', 'csv')
    const lines = csv.stdout.split('\r\n')
    expect(lines[0]).toMatch(/^id,tenant,type,queue,status,/)
    // newest first, and the payload as JSON in a quoted field with its quotes doubled
    expect(lines.slice(1, 3).map((l) => l.slice(0, 36))).toEqual([ids[1], ids[0]])
    expect(lines[1]).toContain('"{""note"":""=SUM(A1),\\""x\\""""}"')
    expect(lines).toHaveLength(4)
    expect(csv.stderr).toBe('exported 2 jobs\n')

    const dir = await mkdtemp(join(tmpdir(), 'pgsched-export-'))
    try {
      const file = join(dir, 'jobs.json')
      const written = await scheduler('jobs', 'export', '--tenant', 'export', '--output', file)
      expect(written.stdout).toBe('')
      expect(written.stderr).toBe(`exported 2 jobs to ${file}\n`)
      const jobs = JSON.parse(await readFile(file, 'utf8'))
      expect(jobs.map((j: { id: string; tenant: string }) => [j.id, j.tenant])).toEqual([
        [ids[1], 'export'],
        [ids[0], 'export'],
      ])
      expect(jobs[1].payload).toEqual({ n: 1 })
      // a refused export leaves no file behind
      const bad = await failing('jobs', 'export', '--created-after', 'yesterday', '--output', join(dir, 'bad.json'))
      expect(bad.code).toBe(2)
      expect(bad.stderr).toContain('--created-after must be an ISO-8601 instant')
      expect(await readdir(dir)).toEqual(['jobs.json'])
      const format = await failing('jobs', 'export', '--format', 'xml')
      expect(format.code).toBe(2)
      expect(format.stderr).toContain('--format must be csv or json, got "xml"')
    } finally {
      await rm(dir, { recursive: true, force: true })
    }
  })

  it('ends an export quietly, exit code 0, when its reader closes standard output early (| head)', async () => {
    await insertExecutions(t.db, 3000, { state: 'pending', job: { tenant: 'piped', queue: 'piped' } })
    const child = spawn('node', ['bin/scheduler', 'jobs', 'export', '--tenant', 'piped', '--format', 'csv'], { env: { ...process.env, DATABASE_URL: t.url } })
    let stderr = ''
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()))
    // the reader takes the first chunk and goes away, as `head -3` does
    const first = await new Promise<string>((resolve) => child.stdout.once('data', (d: Buffer) => resolve(d.toString())))
    child.stdout.destroy()
    const [code] = (await once(child, 'exit')) as [number | null]
    expect(first).toMatch(/^id,/)
    expect(stderr).not.toMatch(/EPIPE|error/i)
    expect(code).toBe(0)
  })

  it('ends jobs list quietly, exit code 0, when its reader closes standard output early (| head)', async () => {
    await insertExecutions(t.db, 500, { state: 'pending', job: { tenant: 'listed', queue: 'listed', payload: { pad: 'x'.repeat(2000) } } })
    const child = spawn('node', ['bin/scheduler', 'jobs', 'list', '--tenant', 'listed', '--limit', '500', '--json'], {
      env: { ...process.env, DATABASE_URL: t.url },
    })
    let stderr = ''
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()))
    await new Promise<void>((resolve) => child.stdout.once('data', () => resolve()))
    child.stdout.destroy()
    const [code] = (await once(child, 'exit')) as [number | null]
    expect(stderr).not.toMatch(/EPIPE|error/i)
    expect(code).toBe(0)
  })

  it("prints queues list and tenants list --json in the REST API's shape, {items: [...]}", async () => {
    await scheduler('queues', 'limit', 'cli-q', '3')
    await scheduler('tenants', 'set', 'cli-t', '--weight', '2')
    // refusals name the flag or argument, and "none" for no limit, as the commands take them
    for (const [args, message] of [
      [['jobs', 'submit', 'ok', '--at', '2030-01-01'], '--at must be an ISO-8601 instant with a time zone'],
      [['jobs', 'submit', 'ok', '--payload', '{to:1}'], '--payload must be JSON: Expected property name'],
      [['jobs', 'submit', 'ok', '--priority', '5000'], '--priority must be an integer from -1000 to 1000'],
      // decimal integers only, as the configuration takes them
      [['jobs', 'submit', 'ok', '--priority', ''], '--priority must be an integer, got ""'],
      [['jobs', 'submit', 'ok', '--priority', '0x10'], '--priority must be an integer, got "0x10"'],
      [['jobs', 'submit', 'ok', '--max-attempts', '1e1'], '--max-attempts must be an integer, got "1e1"'],
      [['jobs', 'list', '--limit', 'abc'], '--limit must be an integer, got "abc"'],
      [['tenants', 'set', 'cli-t', '--max-pending', '0x10'], '--max-pending must be a number or "none", got "0x10"'],
      [['tenants', 'set', 'cli-t', '--weight', '1e1'], '--weight must be a number, got "1e1"'],
      [
        ['webhooks', 'deliveries', '01900000-0000-7000-8000-000000000000', '--tenant', 'cli-t', '--limit', '1e2'],
        '--limit must be an integer from 1 to 1000, got "1e2"',
      ],
      [['jobs', 'list', '--limit', '900'], '--limit must be an integer from 1 to 500'],
      [['jobs', 'list', '--cursor', 'zzz'], '--cursor is invalid; pass nextCursor from the previous page'],
      [['queues', 'limit', 'cli-q', '0'], '<limit> must be an integer from 1 to 100000, or "none" for no limit (got 0)'],
      [['queues', 'rate-limit', 'cli-q', '5', '--per-ms', '0'], '--per-ms must be an integer from 1 to 86400000 (got 0)'],
      [['queues', 'rate-limit', 'cli-q', 'none', '--per-ms', '500'], '--per-ms goes with a limit: "none" removes the rate limit and takes no period'],
      [['queues', 'key-rate-limit', 'cli-q', 'none', '--per-ms', '500'], '--per-ms goes with a limit: "none" removes the rate limit and takes no period'],
      [['tenants', 'set', 'cli-t', '--weight', 'none'], '--weight must be a number, got "none"'],
      [['tenants', 'set', 'cli-t', '--max-pending', '-5'], '--max-pending must be an integer from 0 to 1000000000, or "none" for no quota (got -5)'],
      [['tenants', 'set', 'cli-t'], 'nothing to change: give at least one of --weight, --max-pending and --max-submits-per-second'],
      [['jobs', 'submit', 'ok', '--tenant', 'bad tenant'], '--tenant must be 1-128 characters'],
    ] as const) {
      const refused = await failing(...args)
      expect(refused.code, args.join(' ')).toBe(2)
      expect(refused.stderr, args.join(' ')).toContain(`scheduler: ${message}`)
    }
    // a name no submit can have is refused, as the API refuses it: its settings would apply to nothing
    const badName = await failing('tenants', 'set', 'bad tenant!', '--weight', '2')
    expect(badName.code).toBe(2)
    expect(badName.stderr).toContain('tenant must be 1-128 characters: letters, digits and _ . : @ - (not first), got "bad tenant!"')
    const queues = JSON.parse((await scheduler('queues', 'list', '--json')).stdout)
    expect(Object.keys(queues)).toEqual(['items'])
    expect(queues.items).toContainEqual(expect.objectContaining({ name: 'cli-q', concurrencyLimit: 3 }))
    const tenants = JSON.parse((await scheduler('tenants', 'list', '--json')).stdout)
    expect(Object.keys(tenants)).toEqual(['items'])
    expect(tenants.items).toContainEqual(expect.objectContaining({ name: 'cli-t', weight: 2 }))
  })

  it('warns when a queue changed has no work and no live worker serving it (a misspelt name), and shows the workers serving each queue', async () => {
    const misspelt = await scheduler('queues', 'pause', 'mial')
    expect(misspelt.stderr).toBe(
      'scheduler: warning: queue "mial" has no pending or running work and no live worker serves it: paused anyway (check the name if you meant an existing queue)\n',
    )
    expect(misspelt.stdout).toMatch(/^QUEUE .* WORKERS\nmial +yes .* 0$/m)
    // a queue a live worker serves, or with work, is changed without a word
    await workerRegister(t.db, {
      id: '01900000-0000-7000-8000-0000000000a1',
      host: 'h',
      pid: 1,
      queues: ['served'],
      types: ['x'],
      concurrency: 1,
      leaseMs: 30_000,
    })
    const served = await scheduler('queues', 'limit', 'served', '3')
    expect(served.stderr).toBe('')
    expect(served.stdout).toMatch(/^served +no +3 .* 1$/m)
    await insertExecution(t.db, { state: 'pending', job: { queue: 'busy' } })
    expect((await scheduler('queues', 'pause', 'busy')).stderr).toBe('')
    const view = JSON.parse((await scheduler('queues', 'view', 'served', '--json')).stdout)
    expect(view).toMatchObject({ name: 'served', liveWorkers: 1 })
    expect(JSON.parse((await scheduler('queues', 'view', 'nowhere', '--json')).stdout)).toMatchObject({ name: 'nowhere', liveWorkers: 0, due: 0 })
  })

  it('bulk-cancels 2,500 jobs in calls of 1,000, with a progress line per call on stderr', async () => {
    await insertExecutions(t.db, 2500, { state: 'pending', job: { tenant: 'bulk', queue: 'bulk' } })
    await insertExecution(t.db, { state: 'pending', job: { tenant: 'bulk', queue: 'other' } })
    const { stdout, stderr } = await scheduler('jobs', 'bulk', 'cancel', '--queue', 'bulk', '--json')
    expect(JSON.parse(stdout)).toEqual({ action: 'cancel', matched: 2500, changed: 2500, remaining: 0, calls: 3 })
    expect(stderr.trimEnd().split('\n')).toEqual([
      'cancel: 1000 of 2500 jobs (40%), 1500 left',
      'cancel: 2000 of 2500 jobs (80%), 500 left',
      'cancel: 2500 of 2500 jobs (100%), 0 left',
    ])
    const states = await t.db
      .selectFrom('pgsched.jobs')
      .select(['queue', 'state'])
      .select((eb) => eb.fn.countAll<string>().as('n'))
      .where('tenant', '=', 'bulk')
      .groupBy(['queue', 'state'])
      .orderBy('queue')
      .execute()
    expect(states.map((s) => [s.queue, s.state, Number(s.n)])).toEqual([
      ['bulk', 'cancelled', 2500],
      ['other', 'active', 1],
    ])

    const again = await scheduler('jobs', 'bulk', 'cancel', '--queue', 'bulk')
    expect(again.stdout).toBe('cancel: 0 jobs changed in 1 call\n')
    expect((await failing('jobs', 'bulk', 'cancel')).stderr).toContain(
      'scheduler: no jobs named: give a filter (--status, --type, --queue, --ids, …) or --all for every job',
    )
    expect((await failing('jobs', 'bulk', 'cancel', '--all', '--batch', '0x10')).stderr).toContain('--batch must be an integer from 1 to 1000, got "0x10"')
    expect((await failing('jobs', 'bulk', 'cancel', '--all', '--batch', '0')).stderr).toContain('--batch must be an integer from 1 to 1000, got "0"')
  }, 120_000)
})

describe('scheduler jobs submit with the settings the client and the REST API take', () => {
  it("shows them in jobs view, with a recurring job's window and policies", async () => {
    const submit = async (...args: string[]) =>
      JSON.parse((await scheduler('jobs', 'submit', 'shown', '--tenant', 'view', ...args, '--json')).stdout).id as string
    const recurringId = await submit(
      ...['--cron', '0 9 * * 1-5', '--timezone', 'Europe/Berlin', '--priority', '7', '--max-attempts', '3', '--backoff-base-ms', '250'],
      ...['--backoff-max-ms', '9000', '--timeout-ms', '5000', '--start-deadline-ms', '60000', '--concurrency-key', 'customer-42'],
      ...['--idempotency-key', 'k-1', '--start-at', '2030-01-01T00:00:00Z', '--misfire-policy', 'fire_all', '--misfire-max-runs', '7'],
      ...['--overlap-policy', 'queue'],
    )
    const view = (await scheduler('jobs', 'view', recurringId)).stdout
    for (const line of [
      /priority\s+7\n/,
      /attempts\s+up to 3; retry after a random delay up to 250 ms, doubling each attempt, at most 9000 ms\n/,
      /timeout\s+5000 ms per attempt\n/,
      /start deadline\s+60000 ms after its time\n/,
      /concurrency key\s+customer-42\n/,
      /idempotency key\s+k-1\n/,
      /window\s+2030-01-01 00:00:00Z to -\n/,
      /misfire policy\s+fire_all \(at most 7 catch-up runs\)\n/,
      /overlap policy\s+queue\n/,
      /paused\s+no\n/,
      /next run\s+2030-01-01 08:00:00Z\n/,
    ]) {
      expect(view).toMatch(line)
    }
    const onceView = (await scheduler('jobs', 'view', await submit('--max-attempts', '1'))).stdout
    expect(onceView).toMatch(/attempts\s+1, no retry\n/)
    expect(onceView).toMatch(/last run\s+PENDING, not started yet\n/)
    expect(onceView).toMatch(/start deadline\s+-\n/)
    expect(onceView).not.toMatch(/window|misfire policy|overlap policy/)
    // an execution waiting for its next attempt says which
    const retrying = await insertExecution(t.db, { state: 'pending', attempt: 1, job: { tenant: 'default', maxAttempts: 3 } })
    expect((await scheduler('jobs', 'view', retrying.jobId)).stdout).toMatch(/last run\s+PENDING, waiting for attempt 2 \(attempt 1 failed\)\n/)
  })

  // each value differs from the default, and is read back from the stored job through the client
  const recurring = ['--every', '5m']
  const settings = [
    { flag: '--timeout-ms', value: '5000', schedule: [], stored: (j: Job) => j.timeoutMs, expected: 5000 },
    { flag: '--backoff-base-ms', value: '250', schedule: [], stored: (j: Job) => j.backoffBaseMs, expected: 250 },
    { flag: '--backoff-max-ms', value: '9000', schedule: [], stored: (j: Job) => j.backoffMaxMs, expected: 9000 },
    { flag: '--start-deadline-ms', value: '60000', schedule: [], stored: (j: Job) => j.startDeadlineMs, expected: 60_000 },
    { flag: '--concurrency-key', value: 'customer-42', schedule: [], stored: (j: Job) => j.concurrencyKey, expected: 'customer-42' },
    {
      flag: '--start-at',
      value: '2030-01-01T00:00:00Z',
      schedule: recurring,
      stored: (j: Job) => j.schedule?.startAt,
      expected: new Date('2030-01-01T00:00:00Z'),
    },
    {
      flag: '--end-at',
      value: '2030-02-01T00:00:00+01:00',
      schedule: ['--cron', '0 9 * * *'],
      stored: (j: Job) => j.schedule?.endAt,
      expected: new Date('2030-01-31T23:00:00Z'),
    },
    { flag: '--misfire-policy', value: 'fire_all', schedule: recurring, stored: (j: Job) => j.schedule?.misfirePolicy, expected: 'fire_all' },
    { flag: '--misfire-max-runs', value: '7', schedule: recurring, stored: (j: Job) => j.schedule?.misfireMaxRuns, expected: 7 },
    { flag: '--overlap-policy', value: 'queue', schedule: recurring, stored: (j: Job) => j.schedule?.overlapPolicy, expected: 'queue' },
  ]
  for (const { flag, value, schedule, stored, expected } of settings) {
    it(`stores ${flag} ${value}`, async () => {
      const id = JSON.parse((await scheduler('jobs', 'submit', 'digest', '--tenant', 'settings', ...schedule, flag, value, '--json')).stdout).id as string
      expect(stored(await createClient({ db: t.db, tenant: 'settings' }).viewJob(id))).toEqual(expected)
    })
  }

  it('refuses a bad value of each, naming its flag, with exit code 2, as the client refuses the field', async () => {
    for (const [args, message] of [
      [['--timeout-ms', '0'], '--timeout-ms must be an integer from 1 to 86400000'],
      [['--timeout-ms', '1.5'], '--timeout-ms must be an integer, got "1.5"'],
      [['--backoff-base-ms', '-1'], '--backoff-base-ms must be an integer from 0 to 86400000'],
      [['--backoff-base-ms', '5000', '--backoff-max-ms', '100'], '--backoff-max-ms must be an integer from 5000 to 604800000'],
      [['--start-deadline-ms', '10'], '--start-deadline-ms must be an integer from 1000 to 604800000'],
      [['--concurrency-key', ''], '--concurrency-key must be a string of 1 to 255 characters'],
      [['--every', '5m', '--start-at', 'tomorrow'], '--start-at must be an ISO-8601 instant with a time zone, such as 2030-01-31T09:00:00Z'],
      [['--every', '5m', '--end-at', '2030-01-01'], '--end-at must be an ISO-8601 instant with a time zone'],
      [['--every', '5m', '--start-at', '2030-02-01T00:00:00Z', '--end-at', '2030-01-01T00:00:00Z'], '--end-at must be after --start-at'],
      [['--at', '2030-01-01T00:00:00Z', '--start-at', '2030-01-01T00:00:00Z'], '--start-at and --end-at apply only to recurring schedules (--cron or --every)'],
      [['--every', '5m', '--misfire-policy', 'sometimes'], '--misfire-policy must be one of fire_once, skip, fire_all'],
      [['--misfire-policy', 'skip'], '--misfire-policy applies only to recurring schedules (--cron or --every)'],
      [['--every', '5m', '--misfire-max-runs', '0'], '--misfire-max-runs must be an integer from 1 to 10000'],
      [['--every', '5m', '--overlap-policy', 'never'], '--overlap-policy must be one of allow, skip, queue'],
    ] as const) {
      const refused = await failing('jobs', 'submit', 'digest', '--tenant', 'settings', ...args)
      expect(refused.code, args.join(' ')).toBe(2)
      expect(refused.stderr, args.join(' ')).toContain(`scheduler: ${message}`)
    }
    // a payload's own key of that name is not a flag
    const payloadKey = await failing('jobs', 'submit', 'http', '--tenant', 'settings', '--payload', '{"url":"https://example.com/","startAt":1}')
    expect(payloadKey.stderr).toContain('unknown field "payload.startAt"')
    // nothing half-submitted
    expect(await createClient({ db: t.db, tenant: 'settings' }).listJobs({})).toMatchObject({ items: [] })
  }, 120_000)
})

describe('scheduler jobs bulk on a terminal', () => {
  it('rewrites one progress line in place', async () => {
    await insertExecutions(t.db, 1500, { state: 'pending', job: { tenant: 'tty', queue: 'tty' } })
    // script(1) runs the command on a pseudo-terminal: stderr is a TTY there
    const { stdout } = await exec('script', ['-qec', 'node bin/scheduler jobs bulk cancel --queue tty', '/dev/null'], {
      env: { ...process.env, DATABASE_URL: t.url },
    })
    expect(stdout).toContain('\rcancel: 1000 of 1500 jobs (66%), 500 left\u001b[K')
    expect(stdout).toContain('\rcancel: 1500 of 1500 jobs (100%), 0 left\u001b[K\r\n')
    expect(stdout).toContain('cancel: 1500 jobs changed in 2 calls')
  }, 120_000)
})

describe('scheduler workers list', () => {
  it('lists the workers with their state, as a table and as JSON', async () => {
    const id = '00000000-0000-7000-8000-00000000e001'
    await workerRegister(t.db, { id, host: 'box-1', pid: 4242, queues: ['mail'], types: ['mail.send'], concurrency: 8, leaseMs: 30_000 })
    // RUNNING, HELD, SLOTS: a worker that has not reported its running count yet shows '-'
    const table = (await scheduler('workers', 'list')).stdout
    expect(table).toMatch(/RUNNING\s+HELD\s+SLOTS/)
    expect(table).toMatch(new RegExp(`${id}\\s+alive\\s+box-1\\s+4242\\s+mail\\s+mail\\.send\\s+-\\s+0\\s+8`))
    await t.db.updateTable('pgsched.workers').set({ running: 0 }).where('id', '=', id).execute()
    expect((await scheduler('workers', 'list')).stdout).toMatch(/mail\.send\s+0\s+0\s+8/)
    const json = JSON.parse((await scheduler('workers', 'list', '--json')).stdout)
    expect(json.items).toEqual([expect.objectContaining({ id, state: 'alive', host: 'box-1', inFlight: 0, running: 0 })])
  }, 120_000)
})
