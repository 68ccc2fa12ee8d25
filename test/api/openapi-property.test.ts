/**
 * The OpenAPI document is as strict as the API: submits generated from
 * /openapi.json's SubmitJobRequest schema (test/api/schema-arbitrary.ts) are
 * each accepted (202, or 200 for a repeated idempotency key) with a body
 * valid per the Job schema, or refused only for a cross-field reason the
 * document names; every 4xx body is valid per the Error schema; and the
 * document validates as OpenAPI 3.1.
 */
import SwaggerParser from '@apidevtools/swagger-parser'
import { Ajv } from 'ajv'
import fc from 'fast-check'
import { describe, expect, it } from 'vitest'
import { useTestDb } from '../db.ts'
import { useTestApi } from './helpers.ts'
import { schemaArbitrary } from './schema-arbitrary.ts'

const t = useTestDb()
const api = useTestApi(t)

const RUNS = 400

type Doc = { openapi: string; components: { schemas: Record<string, Record<string, unknown>> } }

/**
 * Refusals a schema-valid submit may get, each named in the document (a field's description or
 * the route's): the reason relates two fields, or the request to earlier ones.
 */
const CROSS_FIELD: Array<{ status: number; path?: string; message: RegExp }> = [
  { status: 400, path: 'endAt', message: /^endAt must be after startAt$/ },
  { status: 400, path: 'startAt', message: /^startAt and endAt apply only to recurring schedules/ },
  { status: 400, path: 'endAt', message: /^startAt and endAt apply only to recurring schedules/ },
  // the policies' descriptions say "Recurring jobs only."
  ...(['misfirePolicy', 'misfireMaxRuns', 'overlapPolicy'] as const).map((path) => ({
    status: 400,
    path,
    message: new RegExp(`^${path} applies only to recurring schedules`),
  })),
  { status: 400, path: 'backoffMaxMs', message: /^backoffMaxMs must be an integer from \d+ to/ },
  { status: 409, message: /^idempotency key ".*" was already used for a different job request$/s },
  // not cross-field, but named in the payload's description: keys that could poison objects
  { status: 400, message: /^request body must not contain (the key "__proto__"|"constructor\.prototype")$/ },
  // named in the payload's description too: integers a JSON reader may not keep exactly
  { status: 400, message: /^payload.* must be an integer within ±9007199254740991 to be kept exactly/s },
  // named in the payload's description too: the payload of a job of type http (the built-in handler's)
  {
    status: 400,
    message:
      /^(payload of an http job must|unknown field "payload\..*" \(an http job's payload takes|payload\.url (is required|must)|payload\.method must be an HTTP method|payload\.headers must be an object of header names|header .* in payload\.headers |payload\.timeoutMs must be an integer from 1 to 86400000 \(milliseconds\))/s,
  },
]

async function documentOf(): Promise<Doc> {
  const res = await api.app.inject({ method: 'GET', url: '/openapi.json' })
  expect(res.statusCode).toBe(200)
  return res.json() as Doc
}

/** Validators for the document's components, with its formats (the checks are the server's own). */
function componentValidators(doc: Doc) {
  const ajv = new Ajv({ strict: false, allErrors: true })
  for (const format of ['date-time', 'uuid', 'cron', 'time-zone', 'pgsched-duration', 'pgsched-job-type', 'uri-reference']) ajv.addFormat(format, true)
  ajv.addSchema({ $id: 'doc', components: doc.components })
  return (name: string) => {
    const validate = ajv.getSchema(`doc#/components/schemas/${name}`)
    if (!validate) throw new Error(`no component ${name}`)
    return (value: unknown) => (validate(value) ? [] : (validate.errors ?? []).map((e) => `${e.instancePath} ${e.message}`))
  }
}

describe('/openapi.json as a contract', () => {
  it('validates as OpenAPI 3.1', async () => {
    const doc = await documentOf()
    expect(doc.openapi).toBe('3.1.0')
    await expect(SwaggerParser.validate(structuredClone(doc) as never)).resolves.toBeDefined()
  })

  it('accepts every schema-valid submit, or refuses it only for a documented cross-field reason with a documented error body', async () => {
    const doc = await documentOf()
    const request = doc.components.schemas.SubmitJobRequest
    expect(request).toBeDefined()
    const validator = componentValidators(doc)
    const [validJob, validError, validRequest] = [validator('Job'), validator('Error'), validator('SubmitJobRequest')]
    const key = await api.keyFor('fuzz')
    const counts = { accepted: 0, crossField: 0 }
    await fc.assert(
      fc.asyncProperty(schemaArbitrary(doc, request as Record<string, unknown>), async (body) => {
        expect(validRequest(body), 'the generator made a schema-valid body').toEqual([])
        const res = await api.call(key, 'POST', '/v1/jobs', body)
        if (res.statusCode === 202 || res.statusCode === 200) {
          counts.accepted++
          expect(validJob(res.json()), `${res.statusCode} body`).toEqual([])
          return
        }
        const reply = res.json() as { statusCode: number; message: string; details?: Array<{ path: string; message: string }> }
        expect(validError(reply), `${res.statusCode} body ${res.body}`).toEqual([])
        const problems = reply.details && reply.details.length > 0 ? reply.details : [{ path: undefined, message: reply.message }]
        for (const p of problems) {
          const documented = CROSS_FIELD.some((c) => c.status === res.statusCode && (c.path === undefined || c.path === p.path) && c.message.test(p.message))
          expect(documented, `${res.statusCode} ${JSON.stringify(p)} for ${JSON.stringify(body)}`).toBe(true)
        }
        counts.crossField++
      }),
      { numRuns: RUNS },
    )
    // startAt/endAt and the policies (each present half the time) apply to recurring schedules only:
    // about 18 % is accepted (67-80 of 400 in six runs). The bound only shows the property is not
    // vacuous; at 15 % it failed about one run in 25 by chance (59 accepted), at 5 % that is some
    // seven standard deviations away.
    console.info(`openapi property: ${counts.accepted} accepted, ${counts.crossField} refused for a cross-field reason`)
    expect(counts.accepted).toBeGreaterThan(RUNS * 0.05)
  })
})
