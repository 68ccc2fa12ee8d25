/**
 * Checks a parsed JSON value before anything recursive touches it or the
 * database stores it: nesting depth (MAX_PAYLOAD_DEPTH), and text the database
 * cannot hold (NUL, lone surrogates) in every string and key. Iterative, so a
 * value nested 100,000 levels deep is refused rather than overflowing the
 * stack. Used by normalizeSubmit (the payload) and the API's body parser (the
 * whole request body).
 */
import { textProblem } from './names.ts'

/** The first problem found: where (dotted path from the root, `root` itself for the value) and what. */
export interface JsonValueProblem {
  path: string
  /** Worded to follow the path: `must not contain NUL characters (\u0000)`. */
  problem: string
  /** depth: nested too deep; text: a string or key the database cannot store; poison: a `__proto__` key or `constructor.prototype`. */
  kind: 'depth' | 'text' | 'poison'
}

export interface JsonValueCheck {
  /** Path of the value itself, such as `payload`; '' for a request body. */
  root: string
  /** Largest nesting depth allowed: an object or array is one level. */
  maxDepth: number
  /** Refuse the keys `__proto__` and `constructor.prototype` (bodies of HTTP requests). */
  refusePoisonKeys?: boolean
}

const join = (path: string, key: string) => (path ? `${path}.${key}` : key)

/** The first problem of `value`, or undefined when it is fine. */
export function jsonValueProblem(value: unknown, check: JsonValueCheck): JsonValueProblem | undefined {
  const stack: Array<[unknown, string, number]> = [[value, check.root, 0]]
  while (stack.length > 0) {
    const [v, path, depth] = stack.pop() as [unknown, string, number]
    if (typeof v === 'string') {
      const problem = textProblem(v)
      if (problem) return { path, problem, kind: 'text' }
      continue
    }
    if (typeof v !== 'object' || v === null) continue
    if (depth + 1 > check.maxDepth) return { path, problem: `must nest at most ${check.maxDepth} levels deep`, kind: 'depth' }
    if (Array.isArray(v)) {
      for (let i = v.length - 1; i >= 0; i--) stack.push([v[i], join(path, String(i)), depth + 1])
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
      stack.push([child, join(path, key), depth + 1])
    }
  }
  return undefined
}
