import { describe, expect, it } from 'vitest'
import { sql } from 'kysely'
import { createClient } from '../../src/client.ts'
import { ValidationError } from '../../src/errors.ts'
import { useTestDb } from '../db.ts'
import { useTestApi } from './helpers.ts'

const t = useTestDb()
const api = useTestApi(t)

const JSON_TYPE = { 'content-type': 'application/json' }
const EVERY_RANGE =
  'schedule.every must be milliseconds, a duration such as 10s, 5m, 1h30m or 1500ms, or an ISO-8601 duration such as PT10S or P1D (no years or months), from 1 second to 366 days'
/** The refusal of an interval with a fraction of a millisecond, which would otherwise be rounded. */
const everyWholeMs = (given: string) => `schedule.every must be a whole number of milliseconds (intervals are whole milliseconds), got ${given}`
const TYPE_RULE = 'type must be 1-128 characters: letters, digits and _ . : / - (not first)'
const ONE_SCHEDULE = 'schedule must be exactly one of {at}, {cron, timezone?} or {every}'
const AT_FORMAT = 'schedule.at must be an ISO-8601 instant with a time zone, such as 2030-01-31T09:00:00Z'
const LIMIT_RULE = 'limit must be an integer from 1 to 500'
/** The refusal of a key an http job's payload does not take. */
const HTTP_PAYLOAD_KEY = (key: string) => `unknown field "payload.${key}" (an http job's payload takes url, method, headers, body, timeoutMs)`
const HTTP_METHOD_RULE = 'an HTTP method name (a token such as POST or PROPFIND; not CONNECT)'

interface Case {
  name: string
  method?: 'GET' | 'POST'
  /** Default /v1/jobs; `{job}` is replaced by an existing one-time job's id. */
  url?: string
  /** An object is sent as JSON; a string is sent as is. */
  body?: unknown
  headers?: Record<string, string>
  status: number
  /** The exact message, or a pattern for messages that quote a parser. */
  message: string | RegExp
  /** The field named in details, when the reply has details. */
  path?: string
}

const cases: Case[] = [
  { name: 'missing type', body: {}, status: 400, message: 'type is required', path: 'type' },
  { name: 'type not a string', body: { type: 5 }, status: 400, message: 'type must be a string', path: 'type' },
  { name: 'type with a space', body: { type: 'send email' }, status: 400, message: TYPE_RULE, path: 'type' },
  { name: 'type too long', body: { type: 'x'.repeat(129) }, status: 400, message: TYPE_RULE, path: 'type' },
  { name: 'unknown field', body: { type: 'x', colour: 'red' }, status: 400, message: 'unknown field "colour"', path: 'colour' },
  {
    name: 'unknown field inside schedule',
    body: { type: 'x', schedule: { cron: '* * * * *', tz: 'UTC' } },
    status: 400,
    message: 'unknown field "schedule.tz"',
    path: 'schedule.tz',
  },
  {
    name: "a recurring job's window given inside schedule, as a job shows it",
    body: { type: 'x', schedule: { cron: '30 2 * * *', timezone: 'Europe/Berlin', startAt: '2027-03-26T00:00:00Z' } },
    status: 400,
    message: 'unknown field "schedule.startAt" (startAt goes at the top level of the submit, beside schedule; a job shows it inside schedule)',
    path: 'schedule.startAt',
  },
  {
    name: 'a policy given inside schedule',
    body: { type: 'x', schedule: { every: '5m', overlapPolicy: 'skip' } },
    status: 400,
    message: 'unknown field "schedule.overlapPolicy" (overlapPolicy goes at the top level of the submit, beside schedule; a job shows it inside schedule)',
    path: 'schedule.overlapPolicy',
  },
  {
    name: 'a time zone on an interval schedule',
    body: { type: 'x', schedule: { every: '5m', timezone: 'Europe/Berlin' } },
    status: 400,
    message: 'unknown field "schedule.timezone" (timezone applies only to cron schedules, {cron, timezone})',
    path: 'schedule.timezone',
  },
  {
    name: 'priority above range',
    body: { type: 'x', priority: 5000 },
    status: 400,
    message: 'priority must be an integer from -1000 to 1000',
    path: 'priority',
  },
  {
    name: 'priority below range',
    body: { type: 'x', priority: -1001 },
    status: 400,
    message: 'priority must be an integer from -1000 to 1000',
    path: 'priority',
  },
  {
    name: 'priority not an integer',
    body: { type: 'x', priority: 1.5 },
    status: 400,
    message: 'priority must be an integer from -1000 to 1000',
    path: 'priority',
  },
  {
    name: 'priority as a string (no coercion)',
    body: { type: 'x', priority: '5' },
    status: 400,
    message: 'priority must be an integer from -1000 to 1000',
    path: 'priority',
  },
  { name: 'queue not a string', body: { type: 'x', queue: 5 }, status: 400, message: 'queue must be a string', path: 'queue' },
  {
    name: 'queue with a bad first character',
    body: { type: 'x', queue: '-mail' },
    status: 400,
    message: 'queue must be 1-64 characters: letters, digits and _ . : / - (not first)',
    path: 'queue',
  },
  {
    name: 'cron with too few fields',
    body: { type: 'x', schedule: { cron: '* * *' } },
    status: 400,
    message: 'cron expression "* * *" must have 5 fields (minute hour day-of-month month day-of-week) or 6 with seconds first, got 3',
    path: 'schedule.cron',
  },
  {
    name: 'cron with an impossible value',
    body: { type: 'x', schedule: { cron: '61 * * * *' } },
    status: 400,
    message: 'cron expression "61 * * * *": value 61 in the minute field is out of range (0-59)',
    path: 'schedule.cron',
  },
  {
    name: 'cron with H (a random value per evaluation)',
    body: { type: 'x', schedule: { cron: 'H * * * *' } },
    status: 400,
    message: 'cron expression "H * * * *": "H" in the minute field is not supported (it picks a random value); name the value',
    path: 'schedule.cron',
  },
  {
    name: 'cron alias with no fire times',
    body: { type: 'x', schedule: { cron: '@reboot' } },
    status: 400,
    message: /^cron alias "@reboot" is not supported; use one of @yearly/,
    path: 'schedule.cron',
  },
  {
    name: 'cron that never fires (no day matches the day fields)',
    body: { type: 'x', schedule: { cron: '0 0 31 4,6 *' } },
    status: 400,
    message: 'cron expression "0 0 31 4,6 *" never fires: no day matches its day-of-month, month and day-of-week fields together',
    path: 'schedule.cron',
  },
  {
    name: 'cron step larger than its field',
    body: { type: 'x', schedule: { cron: '*/61 * * * *' } },
    status: 400,
    message: 'cron expression "*/61 * * * *": step 61 in the minute field is larger than its largest value (59)',
    path: 'schedule.cron',
  },
  { name: 'cron not a string', body: { type: 'x', schedule: { cron: 5 } }, status: 400, message: 'schedule.cron must be a string', path: 'schedule.cron' },
  {
    name: 'unknown time zone',
    body: { type: 'x', schedule: { cron: '0 9 * * *', timezone: 'Mars/Olympus' } },
    status: 400,
    message: 'schedule.timezone "Mars/Olympus" is not a known IANA time zone (such as Europe/Berlin); offsets, abbreviations and POSIX rules are not accepted',
    path: 'schedule.timezone',
  },
  {
    // the runtime's zone data takes Java's short names, which mean other zones than they seem to (BST is Asia/Dhaka)
    name: 'a short zone name that is not an IANA one',
    body: { type: 'x', schedule: { cron: '0 9 * * *', timezone: 'BST' } },
    status: 400,
    message: 'schedule.timezone "BST" is not a known IANA time zone (such as Europe/Berlin); offsets, abbreviations and POSIX rules are not accepted',
    path: 'schedule.timezone',
  },
  {
    // the runtime's zone data keeps names the IANA database removed (US/Pacific-New in 2020b), which pgsched.submit_job refuses
    name: 'a zone name the IANA database removed',
    body: { type: 'x', schedule: { cron: '0 9 * * *', timezone: 'US/Pacific-New' } },
    status: 400,
    message:
      'schedule.timezone "US/Pacific-New" is not a known IANA time zone (such as Europe/Berlin); offsets, abbreviations and POSIX rules are not accepted',
    path: 'schedule.timezone',
  },
  {
    name: 'a SystemV/ zone name',
    body: { type: 'x', schedule: { cron: '0 9 * * *', timezone: 'SystemV/EST5EDT' } },
    status: 400,
    message:
      'schedule.timezone "SystemV/EST5EDT" is not a known IANA time zone (such as Europe/Berlin); offsets, abbreviations and POSIX rules are not accepted',
    path: 'schedule.timezone',
  },
  { name: 'instant without T', body: { type: 'x', schedule: { at: '2030-01-01 09:00' } }, status: 400, message: AT_FORMAT, path: 'schedule.at' },
  { name: 'instant without a time zone', body: { type: 'x', schedule: { at: '2030-01-01T09:00:00' } }, status: 400, message: AT_FORMAT, path: 'schedule.at' },
  {
    name: 'a number beyond what a double holds',
    body: '{"type":"x","payload":{"huge":1e400}}',
    headers: { 'content-type': 'application/json' },
    status: 400,
    message: 'payload.huge must be a finite number within ±1.7976931348623157e308 (not NaN or Infinity)',
    path: 'payload.huge',
  },
  {
    name: 'an integer whose digits JSON.parse changes',
    body: '{"type":"x","payload":{"id":[1,9007199254740993]}}',
    headers: { 'content-type': 'application/json' },
    status: 400,
    message:
      'payload.id.1 must be an integer within ±9007199254740991 to be kept exactly (JSON numbers are read as IEEE-754 doubles): send larger ones as strings',
    path: 'payload.id.1',
  },
  {
    name: 'an integer beyond 2^53 in a field with a range: refused for the range, not told to send a string',
    body: '{"type":"x","priority":1e300}',
    headers: { 'content-type': 'application/json' },
    status: 400,
    message: 'priority must be an integer from -1000 to 1000',
    path: 'priority',
  },
  {
    name: 'an integer beyond 2^53 and a NUL character: the NUL is named',
    body: '{"type":"x\\u0000","payload":{"id":9007199254740993}}',
    headers: { 'content-type': 'application/json' },
    status: 400,
    message: 'type must not contain NUL characters (\\u0000)',
    path: 'type',
  },
  {
    name: 'instant before the year 0001',
    body: { type: 'x', schedule: { at: '0000-01-01T00:00:00Z' } },
    status: 400,
    message: 'schedule.at "0000-01-01T00:00:00Z" must be within the years 0001 to 9999 (UTC)',
    path: 'schedule.at',
  },
  {
    name: 'instant after the year 9999 in UTC',
    body: { type: 'x', schedule: { every: '1h' }, endAt: '9999-12-31T23:00:00-12:00' },
    status: 400,
    message: 'endAt "9999-12-31T23:00:00-12:00" must be within the years 0001 to 9999 (UTC)',
    path: 'endAt',
  },
  {
    name: 'a start within the year 9999 to the microsecond, which rounds up past it',
    body: { type: 'x', schedule: { at: '9999-12-31T23:59:59.9999Z' } },
    status: 400,
    message: 'schedule.at "9999-12-31T23:59:59.9999Z" rounds up to the next millisecond, past the last instant taken (9999-12-31T23:59:59.999Z)',
    path: 'schedule.at',
  },
  {
    name: 'a recurring start that rounds up past the year 9999',
    body: { type: 'x', schedule: { every: '1h' }, startAt: '9999-12-31T23:59:59.9991Z' },
    status: 400,
    message: 'startAt "9999-12-31T23:59:59.9991Z" rounds up to the next millisecond, past the last instant taken (9999-12-31T23:59:59.999Z)',
    path: 'startAt',
  },
  {
    name: 'instant as a number',
    body: { type: 'x', schedule: { at: 1893488400000 } },
    status: 400,
    message: 'schedule.at must be a string',
    path: 'schedule.at',
  },
  {
    name: 'two schedule forms',
    body: { type: 'x', schedule: { at: '2030-01-01T09:00:00Z', cron: '* * * * *' } },
    status: 400,
    message: ONE_SCHEDULE,
    path: 'schedule',
  },
  { name: 'empty schedule', body: { type: 'x', schedule: {} }, status: 400, message: ONE_SCHEDULE, path: 'schedule' },
  { name: 'schedule as a string', body: { type: 'x', schedule: 'tomorrow' }, status: 400, message: ONE_SCHEDULE, path: 'schedule' },
  { name: 'interval under a second', body: { type: 'x', schedule: { every: 500 } }, status: 400, message: EVERY_RANGE, path: 'schedule.every' },
  { name: 'interval in months', body: { type: 'x', schedule: { every: 'P1M' } }, status: 400, message: EVERY_RANGE, path: 'schedule.every' },
  {
    name: 'interval as a fraction',
    body: { type: 'x', schedule: { every: 1.5 } },
    status: 400,
    message: EVERY_RANGE,
    path: 'schedule.every',
  },
  {
    name: 'interval with a fraction of a millisecond (compact)',
    body: { type: 'x', schedule: { every: '1.0005s' } },
    status: 400,
    message: everyWholeMs('"1.0005s"'),
    path: 'schedule.every',
  },
  {
    name: 'interval with a fraction of a millisecond (ISO-8601)',
    body: { type: 'x', schedule: { every: 'PT1.0005S' } },
    status: 400,
    message: everyWholeMs('"PT1.0005S"'),
    path: 'schedule.every',
  },
  {
    name: 'interval with a fraction of a millisecond (a number)',
    body: { type: 'x', schedule: { every: 1000.5 } },
    status: 400,
    message: everyWholeMs('1000.5'),
    path: 'schedule.every',
  },
  { name: 'maxAttempts zero', body: { type: 'x', maxAttempts: 0 }, status: 400, message: 'maxAttempts must be an integer from 1 to 1000', path: 'maxAttempts' },
  {
    name: 'timeoutMs negative',
    body: { type: 'x', timeoutMs: -1 },
    status: 400,
    message: 'timeoutMs must be an integer from 1 to 86400000',
    path: 'timeoutMs',
  },
  {
    name: 'empty idempotency key',
    body: { type: 'x', idempotencyKey: '' },
    status: 400,
    message: 'idempotencyKey must be a string of 1 to 255 characters',
    path: 'idempotencyKey',
  },
  {
    name: 'Idempotency-Key header too long',
    body: { type: 'x' },
    headers: { 'idempotency-key': 'k'.repeat(256) },
    status: 400,
    message: 'idempotency-key header must be a string of 1 to 255 characters',
    path: 'idempotency-key',
  },
  {
    name: 'Idempotency-Key header and body disagree',
    body: { type: 'x', idempotencyKey: 'a' },
    headers: { 'idempotency-key': 'b' },
    status: 400,
    message: 'Idempotency-Key header and body idempotencyKey differ; send one of them',
    path: 'idempotencyKey',
  },
  {
    name: 'unknown misfire policy',
    body: { type: 'x', schedule: { every: 'PT1M' }, misfirePolicy: 'sometimes' },
    status: 400,
    message: 'misfirePolicy must be one of fire_once, skip, fire_all',
    path: 'misfirePolicy',
  },
  {
    name: 'a misfire policy on a one-time job',
    body: { type: 'x', schedule: { at: '2030-01-01T00:00:00Z' }, misfirePolicy: 'skip' },
    status: 400,
    message: 'misfirePolicy applies only to recurring schedules ({cron} or {every})',
    path: 'misfirePolicy',
  },
  {
    name: 'an overlap policy on a job that runs now',
    body: { type: 'x', overlapPolicy: 'skip' },
    status: 400,
    message: 'overlapPolicy applies only to recurring schedules ({cron} or {every})',
    path: 'overlapPolicy',
  },
  {
    name: 'startAt on a one-time job',
    body: { type: 'x', startAt: '2030-01-01T00:00:00Z' },
    status: 400,
    message: 'startAt and endAt apply only to recurring schedules ({cron} or {every})',
    path: 'startAt',
  },
  {
    name: 'payload with a NUL character',
    body: { type: 'x', payload: { text: 'a\u0000b' } },
    status: 400,
    message: 'payload.text must not contain NUL characters (\\u0000)',
    path: 'payload.text',
  },
  {
    name: 'http job payload with a misspelt key',
    body: { type: 'http', payload: { url: 'https://example.com/hook', header: { authorization: 'Bearer x' } } },
    status: 400,
    message: HTTP_PAYLOAD_KEY('header'),
    path: 'payload.header',
  },
  {
    name: 'http job payload with timeout for timeoutMs',
    body: { type: 'http', payload: { url: 'https://example.com/hook', timeout: 5000 } },
    status: 400,
    message: HTTP_PAYLOAD_KEY('timeout'),
    path: 'payload.timeout',
  },
  {
    name: 'http job with a method that is no method name',
    body: { type: 'http', payload: { url: 'https://example.com/hook', method: 'GET /x' } },
    status: 400,
    message: `payload.method must be ${HTTP_METHOD_RULE}; got "GET /x"`,
    path: 'payload.method',
  },
  {
    name: 'http job with timeoutMs as a string',
    body: { type: 'http', payload: { url: 'https://example.com/hook', timeoutMs: '5000' } },
    status: 400,
    message: 'payload.timeoutMs must be an integer from 1 to 86400000 (milliseconds), got "5000"',
    path: 'payload.timeoutMs',
  },
  {
    name: 'http job with a header value that is a number',
    body: { type: 'http', payload: { url: 'https://example.com/hook', headers: { 'X-Count': 3 } } },
    status: 400,
    message: 'header "X-Count" in payload.headers must be a string, got a number',
    path: 'payload.headers.X-Count',
  },
  {
    name: 'http job without a url',
    body: { type: 'http', payload: { href: 'https://example.com/hook' } },
    status: 400,
    message: `${HTTP_PAYLOAD_KEY('href')}; payload.url is required: the http or https URL the job calls`,
    path: 'payload.url',
  },
  {
    name: 'http job with a URL that is not http or https',
    body: { type: 'http', payload: { url: 'file:///etc/passwd' } },
    status: 400,
    message: 'payload.url must be an http or https URL, got file:',
    path: 'payload.url',
  },
  {
    name: 'http job payload that is not an object',
    body: { type: 'http', payload: 'https://example.com/hook' },
    status: 400,
    message: 'payload of an http job must be an object {url, method?, headers?, body?, timeoutMs?}, got a string',
    path: 'payload',
  },
  {
    name: 'several problems at once',
    body: { type: 5, priority: 'high' },
    status: 400,
    message: 'type must be a string; priority must be an integer from -1000 to 1000',
  },
  { name: 'body is an array', body: '[]', headers: JSON_TYPE, status: 400, message: 'request body must be a JSON object', path: '' },
  { name: 'body is null', body: 'null', headers: JSON_TYPE, status: 400, message: 'request body must be a JSON object', path: '' },
  { name: 'empty JSON body', body: '', headers: JSON_TYPE, status: 400, message: 'request body must be a JSON object', path: '' },
  { name: 'malformed JSON', body: '{"type": "x",', headers: JSON_TYPE, status: 400, message: /^request body is not valid JSON: / },
  { name: 'single-quoted JSON', body: "{'type': 'x'}", headers: JSON_TYPE, status: 400, message: /^request body is not valid JSON: / },
  {
    name: '__proto__ key',
    body: '{"type": "x", "payload": {"__proto__": {"admin": true}}}',
    headers: JSON_TYPE,
    status: 400,
    message: 'request body must not contain the key "__proto__"',
  },
  {
    name: 'text/plain body',
    body: 'type=x',
    headers: { 'content-type': 'text/plain' },
    status: 415,
    message: 'Content-Type "text/plain" is not supported; send application/json',
  },
  {
    name: 'form-encoded body',
    body: 'type=x',
    headers: { 'content-type': 'application/x-www-form-urlencoded' },
    status: 415,
    message: 'Content-Type "application/x-www-form-urlencoded" is not supported; send application/json',
  },
  {
    name: 'body over 1 MiB and 64 KiB',
    body: JSON.stringify({ type: 'x', payload: { blob: 'x'.repeat(1_120_000) } }),
    headers: JSON_TYPE,
    status: 413,
    message: 'request body is larger than the limit of 1114112 bytes',
  },
  { name: 'malformed job id', method: 'GET', url: '/v1/jobs/12345', status: 400, message: 'id must be a UUID', path: 'id' },
  { name: 'malformed id on cancel', method: 'POST', url: '/v1/jobs/not-a-uuid/cancel', status: 400, message: 'id must be a UUID', path: 'id' },
  { name: 'malformed execution id', method: 'GET', url: '/v1/executions/xyz/output', status: 400, message: 'id must be a UUID', path: 'id' },
  { name: 'malformed URL encoding', method: 'GET', url: '/v1/jobs/%zz', status: 400, message: 'URL is malformed: /v1/jobs/%zz' },
  ...(['errorType', 'errorMessage', 'idempotencyKey'] as const).map(
    (filter): Case => ({
      name: `NUL in the ${filter} filter`,
      method: 'GET',
      url: `/v1/jobs?${filter}=a%00b`,
      status: 400,
      message: `${filter} must not contain NUL characters (\\u0000)`,
      path: filter,
    }),
  ),
  { name: 'limit zero', method: 'GET', url: '/v1/jobs?limit=0', status: 400, message: LIMIT_RULE, path: 'limit' },
  { name: 'limit too large', method: 'GET', url: '/v1/jobs?limit=501', status: 400, message: LIMIT_RULE, path: 'limit' },
  { name: 'limit not a number', method: 'GET', url: '/v1/jobs?limit=ten', status: 400, message: LIMIT_RULE, path: 'limit' },
  // JavaScript reads these as numbers (16, 100, 5, 0); a query string gives decimal digits
  ...['0x10', '1e2', '%205', '%20'].map(
    (limit): Case => ({
      name: `limit ${limit}`,
      method: 'GET',
      url: `/v1/jobs?limit=${limit}`,
      status: 400,
      message: LIMIT_RULE,
      path: 'limit',
    }),
  ),
  { name: 'history limit too large', method: 'GET', url: '/v1/jobs/{job}/executions?limit=1000', status: 400, message: LIMIT_RULE, path: 'limit' },
  {
    name: 'unknown status filter',
    method: 'GET',
    url: '/v1/jobs?status=DONE',
    status: 400,
    message: 'status must be one of SCHEDULED, RUNNING, PAUSED, CANCELLED, COMPLETED, FAILED, EXPIRED',
    path: 'status',
  },
  { name: 'unknown query parameter', method: 'GET', url: '/v1/jobs?sort=asc', status: 400, message: 'unknown query parameter "sort"', path: 'sort' },
  { name: 'empty type filter', method: 'GET', url: '/v1/jobs?type=', status: 400, message: TYPE_RULE, path: 'type' },
  {
    name: 'query parameter on a route that reads none',
    method: 'GET',
    url: '/v1/jobs/{job}?fields=id',
    status: 400,
    message: 'unknown query parameter "fields"',
    path: 'fields',
  },
  { name: 'query parameter on an action', method: 'POST', url: '/v1/jobs/{job}/cancel?x=1', status: 400, message: 'unknown query parameter "x"', path: 'x' },
  { name: 'queue filter no job can have', method: 'GET', url: '/v1/failures?queue=bad%20q', status: 400, message: /^queue must be /, path: 'queue' },
  {
    name: 'forged cursor',
    method: 'GET',
    url: '/v1/jobs?cursor=Zm9yZ2Vk',
    status: 400,
    message: 'cursor is invalid; pass nextCursor from the previous page',
    path: 'cursor',
  },
  {
    name: 'unknown job',
    method: 'GET',
    url: '/v1/jobs/01900000-0000-7000-8000-000000000000',
    status: 404,
    message: 'job 01900000-0000-7000-8000-000000000000 not found',
  },
  {
    name: 'pausing a one-time job',
    method: 'POST',
    url: '/v1/jobs/{job}/pause',
    status: 409,
    message: /^job [0-9a-f-]{36} is not recurring; only recurring jobs can be paused or resumed$/,
  },
  { name: 'unknown route', method: 'GET', url: '/v1/nothing', status: 404, message: 'no route GET /v1/nothing' },
  {
    name: 'wrong method',
    method: 'GET',
    url: '/v1/jobs/{job}/cancel',
    status: 405,
    message: /^GET is not allowed on \/v1\/jobs\/[0-9a-f-]{36}\/cancel; allowed: POST$/,
  },
]

async function snapshot() {
  const rows = await sql<{ t: string; n: string }>`
    select 'jobs' as t, count(*)::text as n from pgsched.jobs
    union all select 'executions', count(*)::text from pgsched.executions
    union all select 'triggers', count(*)::text from pgsched.triggers
    union all select 'keys', count(*)::text from pgsched.job_idempotency_keys
    union all select 'job states', string_agg(id::text || state, ',' order by id) from pgsched.jobs
  `.execute(t.db)
  return rows.rows
}

describe('bad input', () => {
  it(`answers each of ${cases.length} malformed requests with its exact 4xx and a message naming the problem, changing nothing`, async () => {
    expect(cases.length).toBeGreaterThanOrEqual(30)
    const key = await api.keyFor('acme')
    const existing = (await api.call(key, 'POST', '/v1/jobs', { type: 'existing' })).json().id as string
    const before = await snapshot()
    const failures: string[] = []
    for (const c of cases) {
      const body = c.body === undefined ? undefined : typeof c.body === 'string' ? c.body : JSON.stringify(c.body)
      const headers = { ...(typeof c.body === 'object' ? JSON_TYPE : {}), ...c.headers }
      const url = (c.url ?? '/v1/jobs').replace('{job}', existing)
      const res = await api.call(key, c.method ?? 'POST', url, body, headers)
      const reply = res.json() as { statusCode: number; error: string; message: string; details?: Array<{ path: string; message: string }> }
      const problems: string[] = []
      if (res.statusCode !== c.status) problems.push(`status ${res.statusCode}, expected ${c.status}`)
      if (reply.statusCode !== res.statusCode || typeof reply.error !== 'string') problems.push('error shape')
      const messageOk = typeof c.message === 'string' ? reply.message === c.message : c.message.test(reply.message)
      if (!messageOk) problems.push(`message ${JSON.stringify(reply.message)}`)
      if (c.path !== undefined && !reply.details?.some((d) => d.path === c.path)) problems.push(`details ${JSON.stringify(reply.details)}`)
      if (problems.length > 0) failures.push(`${c.name}: ${problems.join('; ')}`)
    }
    expect(failures).toEqual([])
    expect(await snapshot()).toEqual(before)
  })
})

describe('instants at the ends of the years 0001 to 9999', () => {
  it('keeps a schedule whose next fire time would fall after 9999 viewable and listable: it has nothing to come', async () => {
    const key = await api.keyFor('far')
    // a yearly cron from June 9999: its first fire time, 10000-01-01, is past the last instant pgsched takes
    const res = await api.call(key, 'POST', '/v1/jobs', { type: 'x', schedule: { cron: '0 0 1 1 *' }, startAt: '9999-06-01T00:00:00Z' })
    expect(res.statusCode).toBe(202)
    const id = res.json().id as string
    const view = await api.call(key, 'GET', `/v1/jobs/${id}`)
    expect(view.statusCode).toBe(200)
    expect(view.json()).toMatchObject({ status: 'COMPLETED', nextRunAt: null, schedule: { startAt: '9999-06-01T00:00:00.000Z' } })
    expect((await api.call(key, 'GET', '/v1/jobs')).statusCode).toBe(200)
  })

  it('refuses from TypeScript a start that rounds up past them, naming the field and saying why', async () => {
    const client = createClient({ db: t.db, tenant: 'far' })
    const message = 'schedule.at "9999-12-31T23:59:59.9999Z" rounds up to the next millisecond, past the last instant taken (9999-12-31T23:59:59.999Z)'
    await expect(client.submitJob({ type: 'x', schedule: { at: '9999-12-31T23:59:59.9999Z' } })).rejects.toMatchObject({
      message,
      details: [{ path: 'schedule.at', message }],
    })
  })

  it('refuses a Date outside them from TypeScript, naming the field', async () => {
    const client = createClient({ db: t.db, tenant: 'far' })
    await expect(client.submitJob({ type: 'x', schedule: { at: new Date(Date.UTC(10000, 0, 1)) } })).rejects.toMatchObject({
      details: [{ path: 'schedule.at', message: 'schedule.at "+010000-01-01T00:00:00.000Z" must be within the years 0001 to 9999 (UTC)' }],
    })
  })
})

describe('a cron expression with white space around it', () => {
  it('is held to 1024 characters without it over REST, as the client and SQL hold it', async () => {
    const key = await api.keyFor('cron-length')
    const body = `0 0 ${Array(508).fill('1').join(',')} * *` // 1,023 characters
    const padded = `  ${body}        ` // 1,033 as sent
    const res = await api.call(key, 'POST', '/v1/jobs', { type: 'x', schedule: { cron: padded } })
    expect(res.statusCode, res.body).toBe(202)
    expect(res.json().schedule.cron).toBe(body)
    await createClient({ db: t.db, tenant: 'cron-length' }).submitJob({ type: 'x', schedule: { cron: padded } })
    await sql`select pgsched.submit_job('x', cron => ${padded})`.execute(t.db)
    // past 1024 without it: refused, naming the length
    const long = await api.call(key, 'POST', '/v1/jobs', { type: 'x', schedule: { cron: ` ${body},1,1 ` } })
    expect(long.statusCode).toBe(400)
    expect(long.json().message).toContain('cron expression is 1027 characters long; at most 1024 are accepted')
  })
})

describe('text that is not UTF-8', () => {
  it('reads an Idempotency-Key header as UTF-8, so that it is the same key as in a body, and refuses one that is not', async () => {
    const key = await api.keyFor('bytes')
    // the bytes a client sends for the key in UTF-8, as Node's HTTP parser hands them over (one character per byte)
    const asSent = Buffer.from('schlüssel-✓', 'utf8').toString('latin1')
    const first = await api.call(key, 'POST', '/v1/jobs', { type: 'x' }, { 'idempotency-key': asSent })
    expect(first.statusCode).toBe(202)
    expect(first.json().idempotencyKey).toBe('schlüssel-✓')
    const again = await api.call(key, 'POST', '/v1/jobs', { type: 'x', idempotencyKey: 'schlüssel-✓' })
    expect(again.statusCode).toBe(200)
    expect(again.json().id).toBe(first.json().id)
    const latin1 = await api.call(key, 'POST', '/v1/jobs', { type: 'x' }, { 'idempotency-key': 'schl\u00fcssel' })
    expect(latin1.statusCode).toBe(400)
    expect(latin1.json().message).toBe('Idempotency-Key header is not valid UTF-8')
  })

  it('refuses a query parameter whose percent-encoding cannot be decoded, naming it, rather than reading its raw text', async () => {
    const key = await api.keyFor('bytes')
    const literal = await api.call(key, 'POST', '/v1/jobs', { type: 'x', idempotencyKey: '%FF' })
    expect(literal.statusCode).toBe(202)
    const rule = (name: string) =>
      `query parameter ${name} is not valid percent-encoded UTF-8 (a % must begin %XX, and the bytes must be UTF-8 without a lone surrogate)`
    for (const [query, name] of [
      ['idempotencyKey=%FF', 'idempotencyKey'], // not UTF-8
      ['idempotencyKey=%', 'idempotencyKey'], // a % without its two digits
      ['errorMessage=%ED%A0%80', 'errorMessage'], // an encoded lone surrogate
      ['type=x&errorType=ab%G1', 'errorType'],
    ]) {
      for (const path of ['/v1/jobs', '/v1/jobs/export']) {
        const res = await api.call(key, 'GET', `${path}?${query}`)
        expect(res.statusCode, `${path}?${query}`).toBe(400)
        expect(res.json()).toMatchObject({ message: rule(name as string), details: [{ path: name }] })
      }
    }
    // the key written as it is, %25FF, is found; + is a space, and a repeated or empty parameter reads as before
    const found = await api.call(key, 'GET', '/v1/jobs?idempotencyKey=%25FF')
    expect(found.json().items.map((j: { id: string }) => j.id)).toEqual([literal.json().id])
    expect((await api.call(key, 'GET', '/v1/jobs?errorMessage=a+b&limit=5')).statusCode).toBe(200)
    expect((await api.call(key, 'GET', '/v1/jobs?limit=5&limit=6')).statusCode).toBe(400)
  })

  it('refuses a body said to be in another charset with 415', async () => {
    const key = await api.keyFor('bytes')
    const res = await api.call(key, 'POST', '/v1/jobs', '{"type":"x"}', { 'content-type': 'application/json; charset=utf-16' })
    expect(res.statusCode).toBe(415)
    expect(res.json().message).toBe('Content-Type charset "utf-16" is not supported; send application/json in UTF-8')
    const utf8 = await api.call(key, 'POST', '/v1/jobs', '{"type":"x"}', { 'content-type': 'application/json; charset=UTF-8' })
    expect(utf8.statusCode).toBe(202)
  })

  it('refuses them rather than storing U+FFFD in place of their bytes', async () => {
    const key = await api.keyFor('bytes')
    const body = Buffer.concat([Buffer.from('{"type":"x","payload":{"name":"'), Buffer.from([0xff, 0xfe]), Buffer.from('"}}')])
    const res = await api.call(key, 'POST', '/v1/jobs', body, JSON_TYPE)
    expect(res.statusCode).toBe(400)
    expect(res.json().message).toBe('request body is not valid UTF-8')
    // the same text as UTF-8 is taken, and kept as sent
    const ok = await api.call(key, 'POST', '/v1/jobs', Buffer.from('{"type":"x","payload":{"name":"ÿþ","n":9007199254740991}}'), JSON_TYPE)
    expect(ok.statusCode).toBe(202)
    expect((await api.call(key, 'GET', `/v1/jobs/${ok.json().id}`)).json().payload).toEqual({ name: 'ÿþ', n: 9007199254740991 })
  })

  it('refuses a misspelt field from TypeScript, as REST does, rather than dropping it for its default', async () => {
    const client = createClient({ db: t.db, tenant: 'bytes' })
    const input = { type: 'x', maxAttemps: 3, queue: undefined }
    await expect(client.submitJob(input as unknown as Parameters<typeof client.submitJob>[0])).rejects.toMatchObject({
      details: [{ path: 'maxAttemps', message: 'unknown field "maxAttemps"' }],
    })
  })

  it('says a missing or non-string type is one, from TypeScript as over REST', async () => {
    const client = createClient({ db: t.db, tenant: 'bytes' })
    await expect(client.submitJob({} as unknown as Parameters<typeof client.submitJob>[0])).rejects.toMatchObject({
      details: [{ path: 'type', message: 'type is required' }],
    })
    await expect(client.submitJob({ type: 5 } as unknown as Parameters<typeof client.submitJob>[0])).rejects.toMatchObject({
      details: [{ path: 'type', message: 'type must be a string' }],
    })
  })

  it('says where a field given inside schedule goes, from TypeScript as over REST', async () => {
    const client = createClient({ db: t.db, tenant: 'bytes' })
    const input = { type: 'x', schedule: { cron: '30 2 * * *', startAt: new Date('2027-03-26T00:00:00Z') } }
    await expect(client.submitJob(input as unknown as Parameters<typeof client.submitJob>[0])).rejects.toThrow(
      'schedule must be exactly one of {at}, {cron, timezone?} or {every}; unexpected: startAt (startAt goes at the top level of the submit, beside schedule; a job shows it inside schedule)',
    )
    await expect(client.submitJob({ type: 'x', schedule: { every: '5m', timezone: 'UTC' } as unknown as { every: string } })).rejects.toThrow(
      'schedule must be exactly one of {at}, {cron, timezone?} or {every}; unexpected: timezone (timezone applies only to cron schedules, {cron, timezone})',
    )
  })

  it('refuses an interval with a fraction of a millisecond from TypeScript, naming the field, rather than rounding it', async () => {
    const client = createClient({ db: t.db, tenant: 'bytes' })
    for (const [every, given] of [
      ['1.0005s', '"1.0005s"'],
      ['PT1.0005S', '"PT1.0005S"'],
      [1000.5, '1000.5'],
    ] as const) {
      const err = await client.submitJob({ type: 'x', schedule: { every } }).catch((e: unknown) => e)
      expect(err, String(every)).toBeInstanceOf(ValidationError)
      expect((err as ValidationError).details, String(every)).toEqual([{ path: 'schedule.every', message: everyWholeMs(given) }])
    }
    // a fraction that is whole milliseconds is taken, exactly (1.001 * 1000 is 1000.9999999999999 as a double)
    expect((await client.submitJob({ type: 'x', schedule: { every: '1.001s' } })).job.schedule?.intervalMs).toBe(1001)
    expect((await client.submitJob({ type: 'x', schedule: { every: 'PT1.5000S' } })).job.schedule?.intervalMs).toBe(1500)
  })

  it("refuses an http job's payload from TypeScript as REST does, as JSON would store it, and only for type http", async () => {
    const client = createClient({ db: t.db, tenant: 'bytes' })
    const refusal = (payload: unknown) =>
      client.submitJob({ type: 'http', payload }).then(
        () => 'accepted',
        (err: unknown) => {
          expect(err).toBeInstanceOf(ValidationError)
          return (err as ValidationError).details
        },
      )
    expect(await refusal({ url: 'https://example.com/hook', header: { a: '1' }, timeout: 5000 })).toEqual([
      { path: 'payload.header', message: HTTP_PAYLOAD_KEY('header') },
      { path: 'payload.timeout', message: HTTP_PAYLOAD_KEY('timeout') },
    ])
    expect(await refusal({ url: 'https://example.com/hook', method: 'GET /x' })).toEqual([
      { path: 'payload.method', message: `payload.method must be ${HTTP_METHOD_RULE}; got "GET /x"` },
    ])
    // a method name the target may not take is its answer to give (405), as Node.js sends any
    expect(await refusal({ url: 'https://example.com/hook', method: 'BAN' })).toBe('accepted')
    // as stored: a URL object is its text, a key left undefined no key
    expect(await refusal({ url: new URL('https://example.com/hook'), method: 'post', headers: { 'X-A': '1', 'X-B': undefined }, body: undefined })).toBe(
      'accepted',
    )
    expect(await refusal({ url: 'https://example.com/hook', method: 'PROPFIND', headers: {}, body: { a: [1] }, timeoutMs: 86_400_000 })).toBe('accepted')
    // in a batch, named by its index
    await expect(
      client.submitJobs([
        { type: 'http', payload: { url: 'https://example.com/a' } },
        { type: 'http', payload: { url: 'https://example.com/b', timeoutMs: 0 } },
      ]),
    ).rejects.toMatchObject({
      details: [{ path: '1.payload.timeoutMs', message: 'payload.timeoutMs must be an integer from 1 to 86400000 (milliseconds), got 0' }],
    })
    // another type's payload is its handler's business
    expect((await client.submitJob({ type: 'http.like', payload: { url: 5, header: {} } })).created).toBe(true)
  })

  it('refuses NaN and Infinity in a TypeScript payload, which JSON would turn into null', async () => {
    const client = createClient({ db: t.db, tenant: 'bytes' })
    await expect(client.submitJob({ type: 'x', payload: { ratio: Number.NaN } })).rejects.toMatchObject({
      details: [{ path: 'payload.ratio', message: 'payload.ratio must be a finite number within ±1.7976931348623157e308 (not NaN or Infinity)' }],
    })
  })

  it('refuses a payload whose toJSON throws with a ValidationError naming the field, and writes nothing', async () => {
    const client = createClient({ db: t.db, tenant: 'tojson' })
    const broken = {
      toJSON() {
        throw new Error('no form today')
      },
    }
    const message = 'payload.when has a toJSON that threw (no form today): it has no JSON form'
    const err = await client.submitJob({ type: 'x', payload: { when: broken } }).catch((e: unknown) => e)
    expect(err).toBeInstanceOf(ValidationError)
    expect(err).toMatchObject({ message, details: [{ path: 'payload.when', message }] })
    expect((await client.listJobs({})).items).toEqual([])
  })
})
