/**
 * The payload of the built-in `http` handler, {url, method?, headers?, body?, timeoutMs?}, and its
 * check, defined once: a key it does not take (`header`, `timeout`) or a value it cannot send as
 * given (`method: 'GET /x'`, `timeoutMs: '5000'`) would otherwise be dropped or sent as is, and the
 * job would run without what its submitter meant. normalizeSubmit refuses such a payload for a job
 * of type `http` (ValidationError: REST answers 400), and the handler refuses it when it runs
 * (FatalError, not retried): a job written by pgsched.submit_job in SQL, or submitted before this
 * check, reaches the handler with its payload unchecked.
 */
import type { ErrorDetail } from '../errors.ts'
import type { FieldSet } from './known-fields.ts'

/** The job type of the built-in handler that calls a URL. */
export const HTTP_JOB_TYPE = 'http'

export interface HttpPayload {
  /** An absolute http or https URL. */
  url: string
  /** An HTTP method name, in any case (sent upper-cased); default GET. Not CONNECT. */
  method?: string
  /** Header names to string values. */
  headers?: Record<string, string>
  /** Any JSON value: a string is sent as is, another value as JSON (with content-type application/json). */
  body?: unknown
  /** The longest the request may take, in milliseconds (HTTP_TIMEOUT_MS); default none (the job's timeoutMs). */
  timeoutMs?: number
}

/** The keys an http job's payload takes: any other is refused. */
export const HTTP_PAYLOAD_FIELDS: FieldSet<HttpPayload> = { url: true, method: true, headers: true, body: true, timeoutMs: true }

/**
 * An HTTP method: an RFC 9110 token, in any case (sent upper-cased), as Node.js's client sends any;
 * a method the target does not take is its answer to give (405), which fails the job visibly. But
 * not CONNECT, which asks for a tunnel rather than a response.
 */
const HTTP_TOKEN = /^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/
/** A character Node.js's client refuses in a header value (RFC 9110 field-value: no CR, LF, NUL, …). */
const HEADER_VALUE_NOT_SENT = /[^\t\x20-\x7e\x80-\xff]/
const isHttpMethod = (method: string): boolean => HTTP_TOKEN.test(method) && method.toUpperCase() !== 'CONNECT'
const METHOD_RULE = 'an HTTP method name (a token such as POST or PROPFIND; not CONNECT)'

/** Range of timeoutMs: a job's own timeout is at most a day too. */
export const HTTP_TIMEOUT_MS = { min: 1, max: 86_400_000 } as const

const shownValue = (value: unknown): string => (value === undefined ? 'undefined' : (JSON.stringify(value) ?? String(value)))

/**
 * What `value` is, without its content: for the payload, the URL and headers, which may carry a token
 * (a message is returned to the caller, and stored as the error of a job the handler refuses).
 */
const kindOf = (value: unknown): string =>
  value === null ? 'null' : Array.isArray(value) ? 'an array' : typeof value === 'object' ? 'an object' : `a ${typeof value}`

/**
 * What is wrong with `payload` as an http job's payload (`root` leads each path): one detail per
 * problem, none when the handler can send it as given. A key whose value is undefined is no key
 * (JSON leaves it out).
 */
export function httpPayloadProblems(payload: unknown, root = 'payload'): ErrorDetail[] {
  const problems: ErrorDetail[] = []
  const bad = (path: string, message: string) => problems.push({ path, message })
  if (typeof payload !== 'object' || payload === null || Array.isArray(payload)) {
    bad(root, `${root} of an http job must be an object {url, method?, headers?, body?, timeoutMs?}, got ${kindOf(payload)}`)
    return problems
  }
  const p = payload as Record<string, unknown>
  const known = Object.keys(HTTP_PAYLOAD_FIELDS).join(', ')
  for (const key of Object.keys(p)) {
    if (!Object.hasOwn(HTTP_PAYLOAD_FIELDS, key) && p[key] !== undefined) {
      bad(`${root}.${key}`, `unknown field "${root}.${key}" (an http job's payload takes ${known})`)
    }
  }
  if (p.url === undefined) bad(`${root}.url`, `${root}.url is required: the http or https URL the job calls`)
  else if (typeof p.url !== 'string') bad(`${root}.url`, `${root}.url must be a string, got ${kindOf(p.url)}`)
  else {
    // the URL itself is not repeated: it may carry a token
    const url = URL.canParse(p.url) ? new URL(p.url) : undefined
    if (!url) bad(`${root}.url`, `${root}.url must be an absolute http or https URL, such as https://example.com/hook`)
    else if (url.protocol !== 'http:' && url.protocol !== 'https:') bad(`${root}.url`, `${root}.url must be an http or https URL, got ${url.protocol}`)
  }
  if (p.method !== undefined && (typeof p.method !== 'string' || !isHttpMethod(p.method))) {
    bad(`${root}.method`, `${root}.method must be ${METHOD_RULE}; got ${shownValue(p.method)}`)
  }
  if (p.headers !== undefined) {
    if (typeof p.headers !== 'object' || p.headers === null || Array.isArray(p.headers)) {
      bad(`${root}.headers`, `${root}.headers must be an object of header names to string values, got ${kindOf(p.headers)}`)
    } else {
      for (const [name, value] of Object.entries(p.headers as Record<string, unknown>)) {
        const path = `${root}.headers.${name}`
        if (value === undefined) continue
        if (typeof value !== 'string') {
          bad(path, `header ${JSON.stringify(name)} in ${root}.headers must be a string, got ${kindOf(value)}`)
          continue
        }
        if (!HTTP_TOKEN.test(name))
          bad(path, `header ${JSON.stringify(name)} in ${root}.headers cannot be sent: a header name is a token (letters, digits and some symbols, no spaces)`)
        else if (HEADER_VALUE_NOT_SENT.test(value)) {
          bad(path, `header ${JSON.stringify(name)} in ${root}.headers cannot be sent: its value has a line break or another control character`)
        }
      }
    }
  }
  const t = p.timeoutMs
  if (t !== undefined && (typeof t !== 'number' || !Number.isInteger(t) || t < HTTP_TIMEOUT_MS.min || t > HTTP_TIMEOUT_MS.max)) {
    bad(`${root}.timeoutMs`, `${root}.timeoutMs must be an integer from ${HTTP_TIMEOUT_MS.min} to ${HTTP_TIMEOUT_MS.max} (milliseconds), got ${shownValue(t)}`)
  }
  return problems
}
