/**
 * The API's query-string parser: `a=1&b=x+y` as `{a: '1', b: 'x y'}`, a repeated name as an array of
 * its values, a name without `=` as the empty string. A name or value whose percent-encoding cannot
 * be decoded (a `%` not followed by two hex digits, bytes that are not UTF-8, an encoded lone
 * surrogate) is not taken as its raw text, as the router's default parser takes it (a filter for the
 * idempotency key `%FF` would then match the key written `%25FF`): the parameter is named under
 * UNDECODABLE, and refuseUndecodable answers 400 naming it.
 */
import type { FastifyInstance } from 'fastify'
import { ValidationError } from '../errors.ts'

const UNDECODABLE = Symbol('query parameters that could not be decoded')

type Parsed = Record<string, string | string[]> & { [UNDECODABLE]?: string[] }

function decode(text: string): string | undefined {
  const plain = text.replaceAll('+', ' ')
  if (!plain.includes('%')) return plain
  try {
    return decodeURIComponent(plain)
  } catch {
    return undefined
  }
}

/** Parses a query string (without its `?`). */
export function parseQueryString(text: string): Record<string, unknown> {
  const query: Parsed = Object.create(null)
  if (text.length === 0) return query
  for (const pair of text.split('&')) {
    if (pair.length === 0) continue
    const eq = pair.indexOf('=')
    const rawName = eq < 0 ? pair : pair.slice(0, eq)
    const rawValue = eq < 0 ? '' : pair.slice(eq + 1)
    const name = decode(rawName)
    const value = decode(rawValue)
    if (name === undefined || value === undefined) {
      // named as it can be read: the decoded name, or its raw text when that is what could not be decoded
      const undecodable = query[UNDECODABLE] ?? []
      undecodable.push(name ?? rawName)
      query[UNDECODABLE] = undecodable
      continue
    }
    const before = query[name]
    query[name] = before === undefined ? value : Array.isArray(before) ? [...before, value] : [before, value]
  }
  return query
}

/** Answers 400 naming the first query parameter whose percent-encoding could not be decoded. */
export function refuseUndecodable(app: FastifyInstance): void {
  app.addHook('preValidation', async (request) => {
    const names = (request.query as Parsed | undefined)?.[UNDECODABLE]
    if (names === undefined || names.length === 0) return
    const name = names[0] as string
    const message = `query parameter ${name} is not valid percent-encoded UTF-8 (a % must begin %XX, and the bytes must be UTF-8 without a lone surrogate)`
    throw new ValidationError(message, [{ path: name, message }])
  })
}
