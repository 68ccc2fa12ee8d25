/**
 * The application/json body parser. Differs from Fastify's in two ways: an
 * empty body is "no body" (so `POST /v1/jobs/{id}/cancel` works from clients
 * that always send Content-Type: application/json), and a syntax error names
 * where the JSON breaks. Like Fastify's, it refuses `__proto__` keys and
 * `constructor.prototype`, which could poison objects built from the body.
 */
import type { FastifyRequest } from 'fastify'
import { ValidationError } from '../errors.ts'

function refusePoisonKeys(this: unknown, key: string, value: unknown): unknown {
  if (key === '__proto__') throw new ValidationError('request body must not contain the key "__proto__"')
  if (key === 'constructor' && typeof value === 'object' && value !== null && Object.hasOwn(value, 'prototype')) {
    throw new ValidationError('request body must not contain "constructor.prototype"')
  }
  return value
}

/** Fastify content-type parser (`parseAs: 'string'`). */
export function parseJsonBody(_request: FastifyRequest, body: string | Buffer, done: (err: Error | null, body?: unknown) => void): void {
  const text = typeof body === 'string' ? body : body.toString('utf8')
  if (text.trim() === '') {
    done(null, undefined)
    return
  }
  try {
    done(null, JSON.parse(text, refusePoisonKeys))
  } catch (err: unknown) {
    if (err instanceof ValidationError) done(err)
    else done(new ValidationError(`request body is not valid JSON: ${err instanceof Error ? err.message : String(err)}`))
  }
}
