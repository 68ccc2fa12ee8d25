/**
 * The application/json body parser. Differs from Fastify's in three ways: an
 * empty body is "no body" (so `POST /v1/jobs/{id}/cancel` works from clients
 * that always send Content-Type: application/json), a syntax error names
 * where the JSON breaks, and the parsed value is checked before any route
 * sees it (core/json-value.ts): at most MAX_PAYLOAD_DEPTH + 1 levels deep (the
 * body object holds the payload), no NUL character or lone surrogate in any
 * string or key (the database could not store them), and, like Fastify's, no
 * `__proto__` key or `constructor.prototype`, which could poison objects built
 * from the body, no number beyond what a double holds (1e400) and no integer
 * beyond ±(2^53 − 1), whose digits JSON.parse may have changed (refused once the route's schema has
 * accepted the body, so a field with a range of its own is refused for that range); and the bytes
 * must be UTF-8 (not replaced by U+FFFD); and no key given twice in one object
 * (JSON.parse keeps the last value, silently dropping what the client sent first). Each refusal is
 * a 400 whose details name the field.
 *
 * A route that takes no body (no body schema: the job and queue actions, the deletes) refuses one
 * with a 400 (`refuseBody`), as other routes refuse fields they do not know, rather than ignoring
 * what the client meant by it; no body, an empty one and `{}` (which many clients send) are none.
 */
import type { FastifyRequest } from 'fastify'
import { jsonValueProblem } from '../core/json-value.ts'
import { MAX_PAYLOAD_DEPTH } from '../core/names.ts'
import { ValidationError } from '../errors.ts'

/** Nesting depth of a request body: the body object, then a payload of MAX_PAYLOAD_DEPTH levels. */
export const MAX_BODY_DEPTH = MAX_PAYLOAD_DEPTH + 1

/** The refusal of an integer beyond ±(2^53 − 1), kept until the route's schema has looked at the body. */
const inexactOf = new WeakMap<FastifyRequest, ValidationError>()

/**
 * Why `body` is refused, or undefined; `deferred` for an integer beyond ±(2^53 − 1) and nothing
 * else wrong, whose refusal waits for the route's schema (refuseInexact): a field with a range of
 * its own (`maxSubmitsPerSecond: 1e300`) is refused for that range, not told to send a string.
 */
function bodyProblem(body: unknown): { now?: ValidationError; deferred?: ValidationError } {
  let found = jsonValueProblem(body, { root: '', maxDepth: MAX_BODY_DEPTH, refusePoisonKeys: true, exactIntegers: true })
  if (!found) return {}
  let deferred: ValidationError | undefined
  if (found.kind === 'inexact') {
    const message = `${found.path === '' ? 'request body' : found.path} ${found.problem}`
    deferred = new ValidationError(message, [{ path: found.path, message }])
    found = jsonValueProblem(body, { root: '', maxDepth: MAX_BODY_DEPTH, refusePoisonKeys: true })
    if (!found) return { deferred }
  }
  const field = found.path.split('.')[0] ?? ''
  if (found.kind === 'depth') {
    const message = `request body must nest at most ${MAX_BODY_DEPTH} levels deep (a payload at most ${MAX_PAYLOAD_DEPTH})`
    return { now: new ValidationError(message, [{ path: field, message }]) }
  }
  const message = `${found.path === '' || found.kind === 'poison' ? 'request body' : found.path} ${found.problem}`
  return { now: new ValidationError(message, [{ path: found.path, message }]) }
}

/**
 * A preHandler hook: refuses a body that held an integer beyond ±(2^53 − 1) (whose digits JSON.parse
 * may have changed) once the route's schema has accepted it, as it does a payload's.
 */
export async function refuseInexact(request: FastifyRequest): Promise<void> {
  const refusal = inexactOf.get(request)
  if (refusal !== undefined) throw refusal
}

const join = (path: string, key: string) => (path ? `${path}.${key}` : key)

/**
 * The dotted path of the first key given twice in one object of `text`, JSON that JSON.parse took
 * (which keeps the last value of a repeated key, dropping the others without a word), or undefined.
 * One pass over the text: each string is found by its closing quote, and is a key when a colon
 * follows it; keys are compared as JSON reads them (an escaped `"\u0061"` is `"a"`).
 */
export function repeatedKey(text: string): string | undefined {
  // each open object or array: its path, and an object's keys so far (an array's: null, with its index)
  const frames: Array<{ path: string; keys: Set<string> | null; index: number; key: string }> = []
  const n = text.length
  let i = 0
  const childPath = (): string => {
    const top = frames[frames.length - 1]
    if (top === undefined) return ''
    return join(top.path, top.keys === null ? String(top.index) : top.key)
  }
  while (i < n) {
    const c = text.charCodeAt(i)
    if (c === 0x22) {
      // a string: up to the quote not escaped by an odd run of backslashes
      let end = text.indexOf('"', i + 1)
      for (;;) {
        let slashes = 0
        while (text.charCodeAt(end - 1 - slashes) === 0x5c) slashes++
        if (slashes % 2 === 0) break
        end = text.indexOf('"', end + 1)
      }
      let j = end + 1
      while (j < n && (text.charCodeAt(j) === 0x20 || text.charCodeAt(j) === 0x0a || text.charCodeAt(j) === 0x0d || text.charCodeAt(j) === 0x09)) j++
      const top = frames[frames.length - 1]
      if (text.charCodeAt(j) === 0x3a && top?.keys) {
        const raw = text.slice(i + 1, end)
        const key = raw.includes('\\') ? (JSON.parse(`"${raw}"`) as string) : raw
        if (top.keys.has(key)) return join(top.path, key)
        top.keys.add(key)
        top.key = key
      }
      i = end + 1
    } else if (c === 0x7b || c === 0x5b) {
      frames.push({ path: childPath(), keys: c === 0x7b ? new Set() : null, index: 0, key: '' })
      i++
    } else if (c === 0x7d || c === 0x5d) {
      frames.pop()
      i++
    } else {
      if (c === 0x2c) {
        const top = frames[frames.length - 1]
        if (top && top.keys === null) top.index++
      }
      i++
    }
  }
  return undefined
}

/** Decodes UTF-8 strictly: a byte sequence that is not UTF-8 throws, rather than becoming U+FFFD. */
const utf8 = new TextDecoder('utf-8', { fatal: true, ignoreBOM: false })

/** A charset the body is said to be in other than UTF-8 (which JSON requires, RFC 8259), or undefined. */
function otherCharset(contentType: string | undefined): string | undefined {
  const charset = /;\s*charset\s*=\s*"?([^";\s]+)"?/i.exec(contentType ?? '')?.[1]
  return charset !== undefined && !/^utf-?8$/i.test(charset) ? charset : undefined
}

/** Fastify content-type parser (`parseAs: 'buffer'`). */
export function parseJsonBody(request: FastifyRequest, body: string | Buffer, done: (err: Error | null, body?: unknown) => void): void {
  const charset = otherCharset(request.headers['content-type'])
  if (charset !== undefined) {
    done(Object.assign(new Error(`Content-Type charset "${charset}" is not supported; send application/json in UTF-8`), { statusCode: 415 }))
    return
  }
  let text: string
  try {
    text = typeof body === 'string' ? body : utf8.decode(body)
  } catch {
    done(new ValidationError('request body is not valid UTF-8'))
    return
  }
  if (text.trim() === '') {
    done(null, undefined)
    return
  }
  let value: unknown
  try {
    // No reviver: V8 parses any depth iteratively, a reviver recurses (and overflows at ~10k levels).
    value = JSON.parse(text)
  } catch (err: unknown) {
    done(new ValidationError(`request body is not valid JSON: ${err instanceof Error ? err.message : String(err)}`))
    return
  }
  const problem = bodyProblem(value)
  if (problem.now) {
    done(problem.now)
    return
  }
  // only an object can repeat a key: a body without one is not scanned
  const repeated = text.includes(':') ? repeatedKey(text) : undefined
  if (repeated !== undefined) {
    const message = `request body gives the key ${repeated} twice; give each key of an object once (JSON keeps only the last)`
    done(new ValidationError(message, [{ path: repeated, message }]))
    return
  }
  if (problem.deferred) inexactOf.set(request, problem.deferred)
  done(null, value)
}

/** Whether `body` is `{}`: taken as no body. */
function isEmptyObject(body: unknown): boolean {
  return typeof body === 'object' && body !== null && !Array.isArray(body) && Object.keys(body).length === 0
}

/**
 * A preValidation hook for the routes that take no body: refuses a body other than none, an empty
 * one or `{}`, naming the route as the OpenAPI document writes it (`POST /v1/jobs/{id}/cancel`).
 */
export async function refuseBody(request: FastifyRequest): Promise<void> {
  if (request.body === undefined || isEmptyObject(request.body)) return
  const route = (request.routeOptions.url ?? request.url).replace(/:([A-Za-z_]\w*)/g, '{$1}')
  const message = `${request.method} ${route} takes no request body; send none (or {})`
  throw new ValidationError(message, [{ path: '', message }])
}
