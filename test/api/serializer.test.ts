/**
 * The response serializers (src/api/serializer.ts) write each nullable value with fast-json-stringify's
 * `nullable` instead of an `anyOf` it validates at every response: the same text as Fastify's own
 * compiler for real jobs (with and without a last execution, an error, a schedule), while the route
 * schemas, and so the OpenAPI document, keep their `anyOf`.
 */
import fastJsonStringify from 'fast-json-stringify'
import { describe, expect, it } from 'vitest'
import { buildNullableSerializer, nullableForSerializer } from '../../src/api/serializer.ts'
import { ExecutionSchema } from '../../src/api/schemas/execution.ts'
import { JobSchema, jobToJson } from '../../src/api/schemas/job.ts'
import { Nullable } from '../../src/api/schemas/common.ts'
import { Type } from '@fastify/type-provider-typebox'
import { createClient } from '../../src/client.ts'
import { useTestDb } from '../db.ts'

const t = useTestDb()

/** Every `anyOf` in `schema` that has a `{type: 'null'}` branch, by path. */
function nullUnions(schema: unknown, path = '#'): string[] {
  if (typeof schema !== 'object' || schema === null) return []
  const own =
    Array.isArray((schema as { anyOf?: unknown }).anyOf) && (schema as { anyOf: Array<{ type?: unknown }> }).anyOf.some((s) => s.type === 'null') ? [path] : []
  return [...own, ...Object.entries(schema).flatMap(([k, v]) => nullUnions(v, `${path}/${k}`))]
}

describe('response serializers', () => {
  it('rewrite T-or-null as a nullable T, keeping annotations, and leave other unions and the input alone', () => {
    const schema = Type.Object({
      at: Nullable(Type.String({ format: 'date-time' })),
      either: Type.Union([Type.String(), Type.Integer()]),
      nested: Nullable(Type.Object({ x: Nullable(Type.Integer()) }, { description: 'a nested object' })),
      // a union of a union and null stays a union: fast-json-stringify would not read its nullable
      unionOrNull: Nullable(Type.Union([Type.String(), Type.Integer()])),
    })
    const before = JSON.stringify(schema)
    const out = nullableForSerializer(schema) as { properties: Record<string, Record<string, unknown>> }
    expect(out.properties.at).toEqual({ type: 'string', format: 'date-time', nullable: true })
    expect(out.properties.either?.anyOf).toHaveLength(2)
    expect(out.properties.nested).toMatchObject({ type: 'object', description: 'a nested object', nullable: true })
    expect((out.properties.nested as { properties: Record<string, unknown> }).properties.x).toEqual({ type: 'integer', nullable: true })
    expect(nullUnions(out)).toEqual(['#/properties/unionOrNull'])
    const write = buildNullableSerializer()({ schema })
    expect(write({ at: null, either: 3, nested: null, unionOrNull: null })).toBe('{"at":null,"either":3,"nested":null,"unionOrNull":null}')
    expect(JSON.parse(write({ at: '2030-01-01T00:00:00.000Z', either: 'a', nested: { x: null }, unionOrNull: 7 }))).toEqual({
      at: '2030-01-01T00:00:00.000Z',
      either: 'a',
      nested: { x: null },
      unionOrNull: 7,
    })
    // the route's schema (the OpenAPI document's) is not changed
    expect(JSON.stringify(schema)).toBe(before)
    expect(nullUnions(JobSchema).length).toBeGreaterThan(5)
  })

  it('write real jobs exactly as the anyOf schemas do', async () => {
    const shared = { Execution: ExecutionSchema }
    const fast = buildNullableSerializer(shared)({ schema: JobSchema })
    const reference = fastJsonStringify(JobSchema as fastJsonStringify.AnySchema, { schema: shared as fastJsonStringify.Options['schema'] })
    const client = createClient({ db: t.db, tenant: 'acme' })
    const { job: submitted } = await client.submitJob({ type: 'demo.serialize', payload: { n: 1, s: 'x' }, priority: 5 })
    const { job: recurring } = await client.submitJob({ type: 'demo.serialize', schedule: { cron: '0 9 * * *', timezone: 'Europe/Paris' } })
    const { job: other } = await client.submitJob({ type: 'demo.serialize', idempotencyKey: 'k-1', concurrencyKey: 'c' })
    const viewed = await client.viewJob(submitted.id)
    const jobs = [submitted, viewed, recurring, await client.viewJob(recurring.id), await client.cancelJob(other.id)].map(jobToJson)
    // an execution that failed: the error object inside the nullable execution
    const lastExecution = viewed.lastExecution && jobToJson(viewed).lastExecution
    expect(lastExecution).toBeTruthy()
    const error = { message: 'boom', name: 'Error', fatal: true, attempt: 1, workerId: 'w-1', at: new Date(0).toISOString() }
    jobs.push({ ...jobToJson(viewed), lastExecution: { ...(lastExecution as NonNullable<typeof lastExecution>), state: 'failed', error } })
    for (const json of jobs) {
      expect(fast(json)).toBe(reference(json))
      expect(JSON.parse(fast(json))).toEqual(JSON.parse(JSON.stringify(json)))
    }
    expect(jobs.filter((j) => j.lastExecution !== null).length).toBeGreaterThan(2)
    expect(jobs.filter((j) => j.schedule !== null).length).toBe(2)
  })
})
