/**
 * Bad input at scale (fast-check): random JSON, mutated valid bodies, broken
 * JSON text and odd content types at POST /v1/jobs, and random query strings
 * at GET /v1/jobs. Whatever arrives, the answer is never a 5xx, the error
 * body has the one error shape, and a request that is not accepted leaves no
 * row behind (jobs, triggers, executions and idempotency keys are counted
 * after every request). FUZZ_RUNS sets the number of cases per property
 * (default 5,000).
 */
import fc from 'fast-check'
import { sql } from 'kysely'
import { describe, expect, it } from 'vitest'
import { useTestDb } from '../db.ts'
import { useTestApi } from '../api/helpers.ts'

const t = useTestDb({ truncate: false })
const api = useTestApi(t)
const RUNS = Number(process.env.FUZZ_RUNS ?? 5000)

async function rowCounts(): Promise<string> {
  const { rows } = await sql<{ counts: string }>`
    select concat_ws('/', (select count(*) from pgsched.jobs), (select count(*) from pgsched.triggers),
                          (select count(*) from pgsched.executions), (select count(*) from pgsched.job_idempotency_keys)) as counts`.execute(t.db)
  return rows[0]?.counts ?? ''
}

const iso = fc.date({ min: new Date('1900-01-01T00:00:00Z'), max: new Date('2300-01-01T00:00:00Z'), noInvalidDate: true }).map((d) => d.toISOString())
const name = fc.oneof(
  fc.constantFrom('email.send', 'ledger.sleep', 'report', 'a', 'x/y:z-1'),
  fc.string({ maxLength: 140 }),
  fc.stringMatching(/^[A-Za-z0-9][A-Za-z0-9_.:/-]{0,130}$/),
)
const cron = fc.oneof(
  fc.constantFrom('* * * * *', '*/5 * * * * *', '0 9 * * 1-5', '61 * * * *', '* * *', '@daily', 'L W # ?', '0 0 31 2 *', '*/0 * * * *'),
  fc
    .array(fc.constantFrom('*', '0', '59', '60', '*/2', '1-5', '5-1', 'MON', 'JAN', '?', 'L', '#', ','), { minLength: 0, maxLength: 8 })
    .map((a) => a.join(' ')),
  fc.string({ maxLength: 40 }),
)
const duration = fc.oneof(
  fc.constantFrom('PT1S', 'PT0S', 'P1D', 'P1Y', 'PT5M', 'P400D', 'PT0.5S', 'PT', 'P', '-PT1S'),
  fc.string({ maxLength: 20 }),
  fc.integer(),
  fc.double(),
)
const schedule = fc.oneof(
  fc.record({ at: fc.oneof(iso, fc.string({ maxLength: 40 }), fc.integer()) }),
  fc.record(
    { cron, timezone: fc.oneof(fc.constantFrom('UTC', 'Europe/Berlin', 'America/New_York', 'Mars/Olympus', ''), fc.string({ maxLength: 40 })) },
    { requiredKeys: ['cron'] },
  ),
  fc.record({ every: duration }),
)
const smallInt = fc.oneof(
  fc.integer({ min: -2000, max: 2000 }),
  fc.integer(),
  fc.constantFrom(0, -1, 1, 2 ** 31, 2 ** 53, -(2 ** 63), 1e308, Number.MAX_SAFE_INTEGER),
  fc.double(),
)

/** A body that is often valid: every field optional except type, values near and past their limits. */
const plausibleBody = fc.record(
  {
    type: name,
    payload: fc.jsonValue({ maxDepth: 4 }),
    queue: name,
    priority: smallInt,
    schedule,
    maxAttempts: smallInt,
    timeoutMs: smallInt,
    backoffBaseMs: smallInt,
    backoffMaxMs: smallInt,
    idempotencyKey: fc.string({ minLength: 0, maxLength: 300 }),
    startAt: fc.oneof(iso, fc.string({ maxLength: 30 })),
    endAt: fc.oneof(iso, fc.string({ maxLength: 30 })),
    misfirePolicy: fc.oneof(fc.constantFrom('fire_once', 'skip', 'fire_all'), fc.string({ maxLength: 10 })),
    misfireMaxRuns: smallInt,
    overlapPolicy: fc.oneof(fc.constantFrom('allow', 'skip', 'queue'), fc.string({ maxLength: 10 })),
  },
  { requiredKeys: ['type'] },
)

/**
 * A body inside every single-field rule (the schema's), so that some submits are accepted: with every
 * field drawn near and past its limits, nearly every plausible body breaks at least one rule.
 */
const validBody = fc.record(
  {
    type: fc.stringMatching(/^[A-Za-z0-9][A-Za-z0-9_.:/-]{0,20}$/),
    payload: fc.jsonValue({ maxDepth: 3 }),
    queue: fc.constantFrom('default', 'email', 'reports'),
    priority: fc.integer({ min: -1000, max: 1000 }),
    maxAttempts: fc.integer({ min: 1, max: 1000 }),
    schedule: fc.oneof(fc.record({ at: iso }), fc.record({ every: fc.constantFrom('PT1S', '5m', 60_000, '1h30m') })),
  },
  { requiredKeys: ['type'] },
)

/** A plausible body with one structural mutation. */
const mutatedBody = fc
  .tuple(plausibleBody, fc.nat(10), fc.jsonValue({ maxDepth: 3 }), fc.string({ minLength: 1, maxLength: 20 }), fc.string({ unit: 'binary', maxLength: 30 }))
  .map(([body, how, value, key, text]): unknown => {
    const b: Record<string, unknown> = { ...body }
    const keys = Object.keys(b)
    const some = keys[(JSON.stringify(value) ?? '').length % keys.length] ?? 'type'
    switch (how) {
      case 0:
        delete b[some]
        return b
      case 1:
        b[some] = value
        return b
      case 2:
        b[key] = value
        return b
      case 3:
        return [b]
      case 4:
        b.schedule = { ...(typeof b.schedule === 'object' ? b.schedule : {}), [key]: value }
        return b
      case 5:
        b.schedule = value
        return b
      case 6:
        b.payload = { [key]: [[[value]]] }
        return b
      case 7:
        return { ...b, constructor: { prototype: { polluted: true } } }
      case 8:
        b.type = `${String(b.type)}${'\u0000\u202e\ud800'.slice(0, 1 + (keys.length % 3))}`
        return b
      case 9:
        b.payload = { [text]: text, nul: `a\u0000b`, lone: '\ud800' }
        return b
      default:
        return value
    }
  })

/** A valid job whose payload is nested `depth` levels deep, as text (too deep for JSON.stringify). */
const deeplyNested = fc
  .oneof(fc.integer({ min: 100, max: 5000 }), fc.integer({ min: 5000, max: 200_000 }))
  .map((depth) => `{"type":"deep","payload":${'['.repeat(depth)}1${']'.repeat(depth)}}`)

/** JSON text that may be broken: truncated, with garbage, or not JSON at all. */
const bodyText = fc.oneof(
  fc.tuple(plausibleBody, fc.nat()).map(([b, cut]) => {
    const text = JSON.stringify(b)
    return text.slice(0, cut % (text.length + 1))
  }),
  fc.string({ maxLength: 200 }),
  deeplyNested,
  fc.constantFrom(
    '',
    ' ',
    'null',
    'true',
    '0',
    '"x"',
    '[]',
    '{}',
    '{"type":',
    '{"__proto__":{"x":1},"type":"a"}',
    '\uFEFF{"type":"a"}',
    '{"type":"a"}garbage',
    `{"type":"a","payload":${'['.repeat(100_000)}`,
  ),
)

type Request = { body: string; contentType: string | null; idempotencyHeader: string | null }

const request: fc.Arbitrary<Request> = fc.record({
  body: fc.oneof(
    { weight: 4, arbitrary: fc.oneof(plausibleBody, mutatedBody, fc.jsonValue()).map((v) => JSON.stringify(v) ?? 'null') },
    { weight: 1, arbitrary: validBody.map((v) => JSON.stringify(v)) },
    { weight: 1, arbitrary: bodyText },
  ),
  contentType: fc.oneof(
    { weight: 8, arbitrary: fc.constant('application/json') },
    {
      weight: 1,
      arbitrary: fc.constantFrom(
        null,
        'text/plain',
        'application/json; charset=latin1',
        'application/x-www-form-urlencoded',
        'APPLICATION/JSON',
        'multipart/form-data; boundary=x',
      ),
    },
  ),
  idempotencyHeader: fc.oneof({ weight: 6, arbitrary: fc.constant(null) }, { weight: 1, arbitrary: fc.stringMatching(/^[\x21-\x7e]{0,300}$/) }),
})

const queryString = fc
  .array(
    fc.tuple(
      fc.oneof(fc.constantFrom('status', 'type', 'queue', 'limit', 'cursor'), fc.string({ maxLength: 12 })),
      fc.oneof(
        fc.constantFrom('', 'COMPLETED', 'SCHEDULED', 'completed', '0', '1', '500', '501', '-1', '1e3', 'NaN', '9'.repeat(400), 'null', '[]'),
        fc.string({ maxLength: 300 }),
        fc.base64String({ maxLength: 80 }),
      ),
      fc.boolean(),
    ),
    { maxLength: 6 },
  )
  .map((pairs) => pairs.map(([k, v, raw]) => (raw ? `${k}=${v}` : `${encodeURIComponent(k)}=${encodeURIComponent(v)}`)).join('&'))

function expectErrorShape(status: number, text: string): void {
  expect(status, text).toBeLessThan(500)
  if (status >= 400) {
    const body = JSON.parse(text) as { statusCode: number; error: string; message: string }
    expect(body.statusCode).toBe(status)
    expect(typeof body.message).toBe('string')
  }
}

describe('bad input at scale', () => {
  it(`POST /v1/jobs: ${RUNS} random and mutated bodies, never a 5xx, never a row for a rejected request`, { timeout: 600_000 }, async () => {
    const key = await api.keyFor('fuzz')
    const statuses: Record<number, number> = {}
    let before = await rowCounts()
    await fc.assert(
      fc.asyncProperty(request, async (r) => {
        const headers: Record<string, string> = { authorization: `Bearer ${key}` }
        if (r.contentType) headers['content-type'] = r.contentType
        if (r.idempotencyHeader !== null) headers['idempotency-key'] = r.idempotencyHeader
        const res = await api.app.inject({ method: 'POST', url: '/v1/jobs', headers, payload: r.body })
        statuses[res.statusCode] = (statuses[res.statusCode] ?? 0) + 1
        expectErrorShape(res.statusCode, res.body)
        const after = await rowCounts()
        if (res.statusCode !== 202) expect(after, `${res.statusCode} ${res.body}`).toBe(before)
        else expect(after).not.toBe(before)
        before = after
      }),
      { numRuns: RUNS },
    )
    // Both sides were exercised: accepted jobs and rejections.
    expect(statuses[202]).toBeGreaterThan(0)
    expect(statuses[400]).toBeGreaterThan(RUNS / 4)
    expect((await api.app.inject({ method: 'GET', url: '/healthz' })).statusCode).toBe(200)
  })

  it(`GET /v1/jobs: ${RUNS} random query strings, never a 5xx`, { timeout: 600_000 }, async () => {
    // A tenant of its own with a few ordinary jobs, so pages have content without the POST case's payloads.
    const key = await api.keyFor('fuzz-list')
    for (let i = 0; i < 30; i++) {
      const body = { type: i % 2 ? 'email.send' : 'report', queue: i % 3 ? 'default' : 'mail', ...(i % 5 === 0 ? { schedule: { every: 'PT1H' } } : {}) }
      expect((await api.call(key, 'POST', '/v1/jobs', body)).statusCode).toBe(202)
    }
    await fc.assert(
      fc.asyncProperty(queryString, async (qs) => {
        const res = await api.app.inject({ method: 'GET', url: `/v1/jobs?${qs}`, headers: { authorization: `Bearer ${key}` } })
        expectErrorShape(res.statusCode, res.body)
      }),
      { numRuns: RUNS },
    )
  })
})
