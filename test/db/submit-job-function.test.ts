import { sql } from 'kysely'
import { isIanaTimeZone, isValidTimeZone } from '../../src/core/cron.ts'
import { describe, expect, it } from 'vitest'
import { createClient } from '../../src/client.ts'
import { useTestDb } from '../db.ts'

const t = useTestDb()

/** The zones of the old `systemv` file, which ICU reads and the IANA database no longer has. */
const SYSTEMV_ZONES = ['AST4', 'AST4ADT', 'CST6', 'CST6CDT', 'EST5', 'EST5EDT', 'HST10', 'MST7', 'MST7MDT', 'PST8', 'PST8PDT', 'YST9', 'YST9YDT'].map(
  (z) => `SystemV/${z}`,
)

async function submit(args: string): Promise<string> {
  const { rows } = await sql<{ id: string }>`select pgsched.submit_job(${sql.raw(args)}) as id`.execute(t.db)
  return (rows[0] as { id: string }).id
}

describe('pgsched.submit_job', () => {
  it('submits a job due now that the client can view', async () => {
    const id = await submit(`'email.send', '{"to": "a@b.c"}', priority => 7, tenant => 'acme'`)
    const job = await createClient({ db: t.db, tenant: 'acme' }).viewJob(id)
    expect(job).toMatchObject({ type: 'email.send', priority: 7, queue: 'default', maxAttempts: 5, status: 'SCHEDULED', payload: { to: 'a@b.c' } })
    expect(job.createdBy).toMatch(/^sql:/)
  })

  it('submits delayed, cron and interval jobs', async () => {
    const at = await submit(`'report', run_at => '2031-01-01 09:00+00'`)
    const cron = await submit(`'digest', cron => '0 9 * * 1-5', timezone => 'Europe/Berlin'`)
    const every = await submit(`'sync', every => interval '5 minutes'`)
    const client = createClient({ db: t.db })
    expect((await client.viewJob(at)).nextRunAt?.toISOString()).toBe('2031-01-01T09:00:00.000Z')
    expect((await client.viewJob(cron)).schedule).toMatchObject({ kind: 'cron', cron: '0 9 * * 1-5', timezone: 'Europe/Berlin' })
    expect((await client.viewJob(every)).schedule).toMatchObject({ kind: 'interval', intervalMs: 300_000 })
  })

  it('takes a concurrency key and a start deadline, as the REST and TypeScript submits do', async () => {
    const id = await submit(`'sync', concurrency_key => 'customer-7', start_deadline_ms => 900000, run_at => '2031-01-01 09:00+00'`)
    const job = await createClient({ db: t.db }).viewJob(id)
    expect(job).toMatchObject({ concurrencyKey: 'customer-7', startDeadlineMs: 900_000 })
    const { rows } = await sql<{ concurrency_key: string; start_deadline: Date }>`
      select concurrency_key, start_deadline from pgsched.executions where job_id = ${id}::uuid`.execute(t.db)
    expect(rows).toEqual([{ concurrency_key: 'customer-7', start_deadline: new Date('2031-01-01T09:15:00Z') }])
    // a recurring job's fires get them from the job
    const every = await submit(`'sync', every => interval '1 hour', concurrency_key => 'customer-8', start_deadline_ms => 60000`)
    expect(await createClient({ db: t.db }).viewJob(every)).toMatchObject({ concurrencyKey: 'customer-8', startDeadlineMs: 60_000 })
    await expect(submit(`'sync', start_deadline_ms => 10`)).rejects.toThrow('start_deadline_ms must be an integer from 1000 to 604800000 (7 days), got 10')
    await expect(submit(`'sync', concurrency_key => ''`)).rejects.toThrow('concurrency_key must be 1-255 characters, got 0 characters')
    // part of the idempotency request: the same key with another concurrency key is a conflict
    await submit(`'sync', idempotency_key => 'k1', concurrency_key => 'a'`)
    await expect(submit(`'sync', idempotency_key => 'k1', concurrency_key => 'b'`)).rejects.toThrow('was already used for a different job request')
  })

  it('rolls back with the caller transaction', async () => {
    await expect(
      t.db.transaction().execute(async (trx) => {
        await sql`select pgsched.submit_job('x')`.execute(trx)
        throw new Error('caller fails')
      }),
    ).rejects.toThrow('caller fails')
    expect(await t.db.selectFrom('pgsched.jobs').selectAll().execute()).toEqual([])
  })

  it('returns the same job for a repeated idempotency key and refuses a different request', async () => {
    const a = await submit(`'charge', '{"cents": 1}', idempotency_key => 'k'`)
    const b = await submit(`'charge', '{"cents": 1}', idempotency_key => 'k'`)
    expect(b).toBe(a)
    await expect(submit(`'charge', '{"cents": 2}', idempotency_key => 'k'`)).rejects.toThrow(`idempotency key 'k' was already used for a different job request`)
  })

  it.each([
    ['backoff_base_ms => 5'],
    ['backoff_max_ms => 5000'],
    ["misfire_policy => 'skip'"],
    ["overlap_policy => 'skip'"],
    ["start_at => '2031-01-01 00:00+00'"],
    ["end_at => '2031-01-01 00:00+00'"],
  ])('takes a repeat with %s changed for a different request, not the same', async (changed) => {
    const a = await submit(`'sync', every => interval '1 hour', idempotency_key => 'same'`)
    expect(await submit(`'sync', every => interval '1 hour', idempotency_key => 'same'`)).toBe(a)
    await expect(submit(`'sync', every => interval '1 hour', idempotency_key => 'same', ${changed}`)).rejects.toThrow(
      `idempotency key 'same' was already used for a different job request`,
    )
  })

  it('still matches a repeat to a key stored before migration 0048, by the hash of the fields it covered then', async () => {
    const a = await submit(`'charge', '{"cents": 1}', idempotency_key => 'old', max_attempts => 3`)
    // the hash as migration 0045's pgsched.submit_job wrote it
    await sql`
      update pgsched.job_idempotency_keys
         set request_hash = 'sql:' || encode(sha256(convert_to(jsonb_build_object(
               'type', 'charge', 'payload', '{"cents": 1}'::jsonb, 'queue', 'default', 'priority', 0,
               'run_at', null::timestamptz, 'cron', null::text, 'timezone', 'UTC', 'every', null::text,
               'max_attempts', 3, 'timeout_ms', 300000, 'concurrency_key', null::text, 'start_deadline_ms', null::int)::text, 'UTF8')), 'hex')
       where idempotency_key = 'old'`.execute(t.db)
    expect(await submit(`'charge', '{"cents": 1}', idempotency_key => 'old', max_attempts => 3`)).toBe(a)
    await expect(submit(`'charge', '{"cents": 1}', idempotency_key => 'old', max_attempts => 4`)).rejects.toThrow(
      'was already used for a different job request',
    )
  })

  it.each([
    [`'bad type'`, 'type must be 1-128 characters'],
    [`'x', priority => 5000`, 'priority must be an integer from -1000 to 1000, got 5000'],
    [`'x', cron => '* * *'`, 'cron expression "* * *" must have 5 fields'],
    [`'x', cron => '60 * * * *'`, 'cron expression "60 * * * *": value 60 in the minute field is out of range (0-59)'],
    [`'x', cron => '0 9 * * *', timezone => 'Mars/Olympus'`, `timezone 'Mars/Olympus' is not a known IANA time zone`],
    [`'x', every => interval '10 milliseconds'`, 'every must be from 1 second to 366 days'],
    [`'x', run_at => now(), every => interval '1 hour'`, 'give at most one of run_at, cron and every'],
    [`'x', max_attempts => 0`, 'max_attempts must be an integer from 1 to 1000'],
    // time zones PostgreSQL reads but the dispatcher (the runtime's IANA database) cannot
    ...['UTC+3', 'GMT+3', '+05:30', 'MSK', 'IST', 'XYZ3', 'localtime', 'posixrules', 'Factory', 'posix/Europe/Berlin'].map((tz) => [
      `'x', cron => '0 12 * * *', timezone => '${tz}'`,
      `timezone '${tz}' is not a known IANA time zone (such as Europe/Berlin); offsets, abbreviations and POSIX rules are not accepted`,
    ]),
    [`'x', tenant => 'bad tenant!'`, `tenant must be 1-128 characters: letters, digits and _ . : @ - (not first), got 'bad tenant!'`],
    [`'x', every => interval '1 month'`, 'every must be given in days, hours, minutes and seconds (no years or months)'],
    [`'x', every => interval '1 year'`, 'every must be given in days, hours, minutes and seconds (no years or months)'],
    [`'x', every => interval '1 hour', start_at => now() + interval '1 day', end_at => now()`, 'end_at must be after start_at'],
    // instants PostgreSQL writes as text no ISO-8601 reader takes back (BC, five-digit years)
    [`'x', run_at => '0001-12-31 23:59:59+00 BC'`, 'run_at must be within the years 0001 to 9999 (UTC)'],
    [`'x', run_at => '10000-01-01 00:00:00+00'`, 'run_at must be within the years 0001 to 9999 (UTC)'],
    [`'x', run_at => 'infinity'`, 'run_at must be within the years 0001 to 9999 (UTC)'],
    [`'x', every => interval '1 hour', start_at => '9999-12-31 23:00:00-12'`, 'start_at must be within the years 0001 to 9999 (UTC)'],
    [`'x', every => interval '1 hour', end_at => 'infinity'`, 'end_at must be within the years 0001 to 9999 (UTC)'],
    // named by the function, not by a table constraint's row dump
    [`'x', every => interval '1 hour', misfire_policy => 'nope'`, `misfire_policy must be one of fire_once, skip, fire_all, got 'nope'`],
    [`'x', every => interval '1 hour', overlap_policy => 'nope'`, `overlap_policy must be one of allow, skip, queue, got 'nope'`],
    [`'x', backoff_base_ms => 5000, backoff_max_ms => 1000`, 'backoff_max_ms must be an integer from backoff_base_ms (5000) to 604800000, got 1000'],
    // what the client and the API refuse too
    [`'x', payload => jsonb_build_object('s', repeat('x', 1048576))`, 'payload must be at most 1048576 bytes as JSON text, got 1048585'],
    [`'x', payload => (repeat('[', 65) || repeat(']', 65))::jsonb`, 'payload must nest at most 64 levels deep'],
    [`'x', payload => (repeat('{"a":', 65) || '1' || repeat('}', 65))::jsonb`, 'payload must nest at most 64 levels deep'],
    [`'x', timezone => 'Asia/Tokyo'`, `timezone applies only to cron schedules, got 'Asia/Tokyo' without cron`],
    [`'x', every => interval '1 day', timezone => 'Europe/Berlin'`, `timezone applies only to cron schedules, got 'Europe/Berlin' without cron`],
    [`'x', idempotency_key => ''`, 'idempotency_key must be 1-255 characters, got 0 characters'],
    [`'x', idempotency_key => repeat('k', 256)`, 'idempotency_key must be 1-255 characters, got 256 characters'],
  ])('rejects %s with a message naming the problem', async (args, message) => {
    await expect(submit(args)).rejects.toThrow(message)
    expect(await t.db.selectFrom('pgsched.jobs').selectAll().execute()).toEqual([])
  })

  it('takes a payload nesting 64 levels deep, as the client does (a scalar adds no level)', async () => {
    const arrays = await submit(`'x', payload => (repeat('[', 64) || repeat(']', 64))::jsonb`)
    const objects = await submit(`'x', payload => (repeat('{"a":', 64) || '1' || repeat('}', 64))::jsonb`)
    const client = createClient({ db: t.db })
    expect(JSON.stringify((await client.viewJob(arrays)).payload)).toBe('['.repeat(64) + ']'.repeat(64))
    expect(JSON.stringify((await client.viewJob(objects)).payload)).toBe(`${'{"a":'.repeat(64)}1${'}'.repeat(64)}`)
  })

  it('takes the IANA names the dispatcher reads, with or without a slash, in any case as the API does', async () => {
    const zones = ['UTC', 'Europe/Berlin', 'Etc/GMT+3', 'America/Argentina/Buenos_Aires', 'Japan', 'EST5EDT', 'utc', 'japan', 'est5edt', 'europe/berlin']
    for (const tz of zones) {
      expect(isValidTimeZone(tz), tz).toBe(true)
      await submit(`'x', cron => '0 12 * * *', timezone => '${tz}'`)
    }
    const { rows } = await sql<{ n: number }>`select count(*)::int as n from pgsched.triggers`.execute(t.db)
    expect(rows[0]?.n).toBe(zones.length)
    for (const tz of ['factory', 'LOCALTIME', 'Posix/Europe/Berlin']) {
      expect(isValidTimeZone(tz), tz).toBe(false)
      await expect(submit(`'x', cron => '0 12 * * *', timezone => '${tz}'`)).rejects.toThrow('is not a known IANA time zone')
    }
  })

  it('takes and refuses the same time zone names as the client and the API (isIanaTimeZone)', async () => {
    const { rows: pg } = await sql<{ name: string }>`select name from pg_timezone_names where position('/' in name) = 0`.execute(t.db)
    // Java's short names, which the runtime's zone data (ICU) takes besides the IANA ones
    const java = 'ACT AET AGT ART AST BET BST CAT CNT CST CTT EAT ECT IET IST JST MIT NET NST PLT PNT PRT PST SST VST'.split(' ')
    const names = [...new Set([...pg.map((r) => r.name), ...java, ...pg.map((r) => r.name.toLowerCase()), 'Europe/Berlin', 'europe/berlin', 'Etc/GMT+3'])]
    // abbreviations PostgreSQL reads that are no zones, and POSIX rules without a slash
    names.push('posix/Europe/Berlin', 'right/UTC', 'Mars/Olympus', 'UTC+3', '+05:30', 'CEST', 'pdt', 'EST5', 'XYZ-3', 'GMT+5')
    const { rows } = await sql<{ name: string; known: boolean }>`
      select n as name, pgsched.time_zone_known(n) as known from unnest(${names}::text[]) n`.execute(t.db)
    const differ = rows.filter((r) => r.known !== isIanaTimeZone(r.name)).map((r) => `${r.name}: SQL ${r.known}`)
    expect(differ).toEqual([])
    expect(rows.filter((r) => java.includes(r.name) && r.known)).toEqual([])
  })

  it.each([
    // PostgreSQL reads these as POSIX rules (Etc/GMT+05: a zone named "ETC/GMT" 5 hours behind UTC); the dispatcher cannot read them
    ...['Etc/GMT+05', 'Etc/UTC+1', 'Etc/GMT+13', 'Etc/GMT+15', 'Etc/GMT-15', 'Europe/Berlin1', 'Asia/Kathmandu+5', 'America/Foo3', 'Foo/Bar5'].map((tz) => [
      tz,
      false,
    ]),
    // the runtime reads these, but they are no IANA zones (SystemV/EST5EDT is a POSIX rule to a PostgreSQL whose zone files lack it)
    ...['SystemV/EST5EDT', 'SystemV/AST4', 'US/Pacific-New', 'Canada/East-Saskatchewan', 'us/pacific-new'].map((tz) => [tz, true]),
  ] as [string, boolean][])('refuses %s with SQLSTATE 22023 and writes nothing', async (tz, runtimeKnows) => {
    expect(isValidTimeZone(tz)).toBe(runtimeKnows)
    expect(isIanaTimeZone(tz)).toBe(false)
    const err = await submit(`'tick', cron => '0 9 * * *', timezone => '${tz}', tenant => 't1'`).catch((e: unknown) => e)
    expect(err).toMatchObject({
      code: '22023',
      message: `timezone '${tz}' is not a known IANA time zone (such as Europe/Berlin); offsets, abbreviations and POSIX rules are not accepted`,
    })
    expect(await t.db.selectFrom('pgsched.jobs').selectAll().execute()).toEqual([])
  })

  it('takes Etc/GMT names at both ends of their offsets and in any case, as the dispatcher does', async () => {
    const zones = ['Etc/GMT-14', 'Etc/GMT+12', 'Etc/GMT0', 'Etc/GMT-0', 'etc/gmt+5']
    for (const tz of zones) await submit(`'x', cron => '0 12 * * *', timezone => '${tz}'`)
    const { rows } = await sql<{ n: number }>`select count(*)::int as n from pgsched.triggers`.execute(t.db)
    expect(rows[0]?.n).toBe(zones.length)
  })

  it('agrees with isIanaTimeZone on every Area/Location zone PostgreSQL lists that the runtime reads, in any case, and on names only one of them reads', async () => {
    // the names without a slash are walked by the test above; posix/ and right/ are refused by both before any lookup
    const { rows: pg } = await sql<{ name: string }>`
      select name from pg_timezone_names where position('/' in name) > 0 and name !~* '^(posix|right)/'`.execute(t.db)
    const listed = pg.map((r) => r.name).filter((tz) => isValidTimeZone(tz))
    const offsets = ['', '0', '00', '05', '5', '9', '10', '12', '13', '14', '15', '99'].flatMap((h) => [
      `Etc/GMT+${h}`,
      `Etc/GMT-${h}`,
      `Etc/GMT${h}`,
      `Etc/UTC+${h}`,
    ])
    const others = [
      'Etc/GMT+5:30',
      'Europe/Berlin1',
      'Asia/Kathmandu+5',
      'America/Foo3',
      'Foo/Bar5',
      'Mars/Olympus',
      'US/Pacific-New',
      'Canada/East-Saskatchewan',
    ]
    const names = [...new Set([...listed, ...listed.map((n) => n.toLowerCase()), ...offsets, ...others, ...SYSTEMV_ZONES])]
    const { rows } = await sql<{ name: string; known: boolean }>`
      select n as name, pgsched.time_zone_known(n) as known from unnest(${names}::text[]) n`.execute(t.db)
    expect(rows.filter((r) => r.known !== isIanaTimeZone(r.name)).map((r) => `${r.name}: SQL ${r.known}`)).toEqual([])
    // of the zones PostgreSQL lists, both refuse the runtime's legacy names only (none with current zone files)
    const refused = rows.filter((r) => listed.includes(r.name) && !r.known).map((r) => r.name)
    expect(refused.filter((tz) => !/^(SystemV\/.*|US\/Pacific-New|Canada\/East-Saskatchewan)$/.test(tz))).toEqual([])
  })

  it('refuses an interval with a fraction of a millisecond (SQLSTATE 22023) rather than cutting it off, and takes whole milliseconds', async () => {
    const err = await submit(`'x', every => interval '1.0005 seconds'`).catch((e: unknown) => e)
    expect(err).toMatchObject({
      code: '22023',
      message: 'every must be a whole number of milliseconds (intervals are whole milliseconds), got 00:00:01.0005',
    })
    await expect(submit(`'x', every => interval '1 hour 1 microsecond'`)).rejects.toThrow('every must be a whole number of milliseconds')
    expect(await t.db.selectFrom('pgsched.jobs').selectAll().execute()).toEqual([])
    const id = await submit(`'x', every => interval '1.5 seconds'`)
    expect((await createClient({ db: t.db }).viewJob(id)).schedule).toMatchObject({ kind: 'interval', intervalMs: 1500 })
  })

  it('keeps whole milliseconds as the client does: run_at and start_at up, end_at down, and refuses a start past the last instant', async () => {
    const at = await submit(`'x', run_at => '2030-01-01 00:00:00.123456+00'`)
    const every = await submit(`'x', every => interval '1 second', start_at => '2030-01-01 00:00:00.0001+00', end_at => '2030-01-02 00:00:00.9999+00'`)
    const { rows: due } = await sql<{ run_at: string; scheduled_for: string }>`
      select to_char(run_at at time zone 'UTC', 'HH24:MI:SS.US') as run_at, to_char(scheduled_for at time zone 'UTC', 'HH24:MI:SS.US') as scheduled_for
        from pgsched.due where job_id = ${at}::uuid`.execute(t.db)
    expect(due).toEqual([{ run_at: '00:00:00.124000', scheduled_for: '00:00:00.124000' }])
    const { rows: window } = await sql<{ start_at: string; end_at: string }>`
      select to_char(start_at at time zone 'UTC', 'HH24:MI:SS.US') as start_at, to_char(end_at at time zone 'UTC', 'HH24:MI:SS.US') as end_at
        from pgsched.triggers where job_id = ${every}::uuid`.execute(t.db)
    expect(window).toEqual([{ start_at: '00:00:00.001000', end_at: '00:00:00.999000' }])
    const client = createClient({ db: t.db })
    expect((await client.viewJob(at)).nextRunAt?.toISOString()).toBe('2030-01-01T00:00:00.124Z')
    for (const [args, name] of [
      [`'x', run_at => '9999-12-31 23:59:59.9995+00'`, 'run_at'],
      [`'x', every => interval '1 second', start_at => '9999-12-31 23:59:59.999001+00'`, 'start_at'],
    ] as const) {
      await expect(submit(args)).rejects.toMatchObject({
        code: '22023',
        message: `${name} rounds up to the next millisecond, past the last instant taken (9999-12-31T23:59:59.999Z)`,
      })
    }
    // an end that rounds down onto its start leaves no window, as the client finds
    await expect(
      submit(`'x', every => interval '1 second', start_at => '2030-01-01 00:00:00.0001+00', end_at => '2030-01-01 00:00:00.0009+00'`),
    ).rejects.toMatchObject({ code: '22023', message: expect.stringContaining('end_at must be after start_at') })
  })

  it('stores an interval schedule whose window ended before its first fire time with nothing to come', async () => {
    const id = await submit(`'x', every => interval '1 hour', end_at => now() - interval '1 day'`)
    const { rows } = await sql<{ next_fire_at: Date | null }>`select next_fire_at from pgsched.triggers where job_id = ${id}::uuid`.execute(t.db)
    expect(rows).toEqual([{ next_fire_at: null }])
  })
})

describe('pgsched.submit_job of a one-time job', () => {
  it.each([
    [`misfire_policy => 'skip'`, { misfirePolicy: 'skip' as const }, "misfire_policy applies only to recurring schedules (cron or every), got 'skip'"],
    [
      `misfire_policy => 'fire_all'`,
      { misfirePolicy: 'fire_all' as const },
      "misfire_policy applies only to recurring schedules (cron or every), got 'fire_all'",
    ],
    [`overlap_policy => 'queue'`, { overlapPolicy: 'queue' as const }, "overlap_policy applies only to recurring schedules (cron or every), got 'queue'"],
  ])('refuses %s as the client refuses it, naming the argument', async (arg, field, message) => {
    await expect(createClient({ db: t.db }).submitJob({ type: 'x', ...field })).rejects.toThrow('applies only to recurring schedules')
    const err = await sql`select pgsched.submit_job('x', ${sql.raw(arg)})`.execute(t.db).catch((e: unknown) => e)
    expect(err).toMatchObject({ code: '22023', message })
    expect(await t.db.selectFrom('pgsched.jobs').selectAll().execute()).toEqual([])
  })

  it('takes the policies of a recurring job, and a one-time job with their defaults named', async () => {
    await sql`select pgsched.submit_job('x', every => interval '1 hour', misfire_policy => 'skip', overlap_policy => 'queue')`.execute(t.db)
    await sql`select pgsched.submit_job('x', misfire_policy => 'fire_once', overlap_policy => 'allow')`.execute(t.db)
    expect(await t.db.selectFrom('pgsched.jobs').select('id').execute()).toHaveLength(2)
  })
})
