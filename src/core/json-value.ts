/**
 * Checks a parsed JSON value before anything recursive touches it or the
 * database stores it: nesting depth (MAX_PAYLOAD_DEPTH), and text the database
 * cannot hold (NUL, lone surrogates) in every string and key. Iterative, so a
 * value nested 100,000 levels deep is refused rather than overflowing the
 * stack. Numbers must be finite (JSON.stringify would write NaN or Infinity as
 * null); read from JSON text (`exactIntegers`), integers must lie within
 * ±(2^53 − 1), beyond which JSON.parse may already have changed their digits
 * (9007199254740993 reads as …992), as RFC 7493 (I-JSON) advises. Used by
 * normalizeSubmit (the payload) and the API's body parser (the whole request
 * body).
 */
import { textProblem } from './names.ts'

/** The first problem found: where (dotted path from the root, `root` itself for the value) and what. */
export interface JsonValueProblem {
  path: string
  /** Worded to follow the path: `must not contain NUL characters (\u0000)`. */
  problem: string
  /**
   * depth: nested too deep; text: a string or key the database cannot store; poison: a `__proto__`
   * key or `constructor.prototype`; number: a number JSON cannot write (NaN, Infinity); inexact: an
   * integer read from JSON text beyond ±(2^53 − 1) (`exactIntegers`); type: a value of the caller's
   * with no JSON form (a BigInt, a function, a symbol, a Map or a Set).
   */
  kind: 'depth' | 'text' | 'poison' | 'number' | 'inexact' | 'type'
}

export interface JsonValueCheck {
  /** Path of the value itself, such as `payload`; '' for a request body. */
  root: string
  /** Largest nesting depth allowed: an object or array is one level. */
  maxDepth: number
  /** Refuse the keys `__proto__` and `constructor.prototype` (bodies of HTTP requests). */
  refusePoisonKeys?: boolean
  /** Refuse integers beyond ±Number.MAX_SAFE_INTEGER (values read from JSON text, whose digits JSON.parse may have changed). */
  exactIntegers?: boolean
}

/** Why a number is refused (see the module comment). */
const NOT_FINITE = 'must be a finite number within ±1.7976931348623157e308 (not NaN or Infinity)'
const INEXACT_INTEGER = `must be an integer within ±${Number.MAX_SAFE_INTEGER} to be kept exactly (JSON numbers are read as IEEE-754 doubles): send larger ones as strings`

const NO_BIGINT = 'must be a JSON value, not a BigInt (give it as a number within ±2^53 or as a string)'

const join = (path: string, key: string) => (path ? `${path}.${key}` : key)

/** What a toJSON threw, in a few words (its message, cut at 200 characters). */
function describeThrown(err: unknown): string {
  let text: string
  try {
    text = err instanceof Error ? err.message : String(err)
  } catch {
    text = 'a value with no text form'
  }
  return text.length > 200 ? `${text.slice(0, 200)}…` : text
}

/** The first problem of `value`, or undefined when it is fine. */
export function jsonValueProblem(value: unknown, check: JsonValueCheck): JsonValueProblem | undefined {
  // [value, path, depth, its key (for toJSON), whether toJSON was applied, whether an object holds it]
  const stack: Array<[unknown, string, number, string, boolean, boolean]> = [[value, check.root, 0, '', false, false]]
  // the objects and arrays enclosing the value popped last, outermost first: a depth-first walk pops
  // each value right after its ancestors, so the first `depth` entries are the enclosing ones
  const enclosing: object[] = []
  while (stack.length > 0) {
    const [v, path, depth, key, converted, inObject] = stack.pop() as [unknown, string, number, string, boolean, boolean]
    // what JSON.stringify writes for a value with toJSON (a Date, a BigInt given one, a class's own form) is that value's result
    if (!converted && (typeof v === 'object' || typeof v === 'bigint') && v !== null) {
      const toJSON = (v as { toJSON?: unknown }).toJSON
      if (typeof toJSON === 'function') {
        let converted: unknown
        try {
          converted = toJSON.call(v, key)
        } catch (err: unknown) {
          // JSON.stringify would throw it too: named as this value's problem, not thrown from deep inside a submit
          return { path, problem: `has a toJSON that threw (${describeThrown(err)}): it has no JSON form`, kind: 'type' }
        }
        stack.push([converted, path, depth, key, true, inObject])
        continue
      }
    }
    if (typeof v === 'string') {
      const problem = textProblem(v)
      if (problem) return { path, problem, kind: 'text' }
      continue
    }
    if (typeof v === 'number') {
      if (!Number.isFinite(v)) return { path, problem: NOT_FINITE, kind: 'number' }
      if (check.exactIntegers && Math.abs(v) > Number.MAX_SAFE_INTEGER) return { path, problem: INEXACT_INTEGER, kind: 'inexact' }
      continue
    }
    // values JSON has no form for: JSON.stringify throws on a BigInt, and writes a function or symbol
    // given as the whole value as nothing at all (in an object it leaves the key out, in an array it
    // writes null, as for undefined: what JavaScript code expects of JSON)
    if (typeof v === 'bigint') return { path, problem: NO_BIGINT, kind: 'type' }
    if (typeof v === 'function' || typeof v === 'symbol') {
      if (path === check.root && !inObject) return { path, problem: `must be a JSON value, not a ${typeof v}`, kind: 'type' }
      continue
    }
    if (typeof v !== 'object' || v === null) continue
    // written as {}: its entries would be lost without a word
    if (v instanceof Map || v instanceof Set) {
      return { path, problem: `must be a JSON value, not a ${v instanceof Map ? 'Map (give an object)' : 'Set (give an array)'}`, kind: 'type' }
    }
    // JSON.stringify throws on a value that contains itself; named here rather than as too deep
    enclosing.length = depth
    if (enclosing.includes(v)) return { path, problem: 'must not contain itself (a circular structure has no JSON form)', kind: 'type' }
    enclosing.push(v)
    if (depth + 1 > check.maxDepth) return { path, problem: `must nest at most ${check.maxDepth} levels deep`, kind: 'depth' }
    if (Array.isArray(v)) {
      for (let i = v.length - 1; i >= 0; i--) stack.push([v[i], join(path, String(i)), depth + 1, String(i), false, true])
      continue
    }
    for (const key of Object.keys(v).reverse()) {
      const keyProblem = textProblem(key)
      if (keyProblem) return { path: join(path, key), problem: `key ${keyProblem}`, kind: 'text' }
      const child = (v as Record<string, unknown>)[key]
      if (check.refusePoisonKeys) {
        if (key === '__proto__') return { path, problem: 'must not contain the key "__proto__"', kind: 'poison' }
        if (key === 'constructor' && typeof child === 'object' && child !== null && Object.hasOwn(child, 'prototype')) {
          return { path, problem: 'must not contain "constructor.prototype"', kind: 'poison' }
        }
      }
      stack.push([child, join(path, key), depth + 1, key, false, true])
    }
  }
  return undefined
}
