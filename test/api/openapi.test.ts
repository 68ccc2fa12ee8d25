import SwaggerParser from '@apidevtools/swagger-parser'
import { describe, expect, it } from 'vitest'
import { useTestDb } from '../db.ts'
import { useTestApi } from './helpers.ts'

const t = useTestDb()
const api = useTestApi(t)

type Operation = {
  operationId?: string
  parameters?: Array<{ name: string; in: string; schema?: unknown }>
  requestBody?: { content: Record<string, { schema: Record<string, unknown> }> }
  responses: Record<string, { content?: Record<string, { schema?: unknown }> }>
  security?: unknown[]
}
type Doc = {
  openapi: string
  info: { description: string }
  paths: Record<string, Record<string, Operation>>
  components: { schemas: Record<string, unknown> }
}

/** The REST contract (DESIGN.md "REST contract (v1)", and the queue routes): path → method → operationId. */
const CONTRACT: Record<string, Record<string, string>> = {
  '/v1/jobs': { post: 'submitJob', get: 'listJobs' },
  '/v1/jobs/{id}': { get: 'viewJob', delete: 'deleteJob' },
  '/v1/jobs/{id}/retry': { post: 'retryJob' },
  '/v1/jobs/{id}/rerun': { post: 'rerunJob' },
  '/v1/jobs/bulk': { post: 'bulkJobs' },
  '/v1/jobs/export': { get: 'exportJobs' },
  '/v1/failures': { get: 'listFailures' },
  '/v1/identity': { get: 'viewIdentity' },
  '/v1/workers': { get: 'listWorkers' },
  '/v1/schedules': { get: 'listSchedules' },
  '/v1/stats': { get: 'viewStats' },
  '/v1/jobs/{id}/executions': { get: 'listExecutions' },
  '/v1/executions/{id}/output': { get: 'viewExecutionOutput' },
  '/v1/jobs/{id}/cancel': { post: 'cancelJob' },
  '/v1/jobs/{id}/pause': { post: 'pauseJob' },
  '/v1/jobs/{id}/resume': { post: 'resumeJob' },
  '/v1/queues': { get: 'listQueues' },
  '/v1/queues/{name}': { get: 'viewQueue', patch: 'updateQueue' },
  '/v1/queues/{name}/pause': { post: 'pauseQueue' },
  '/v1/queues/{name}/resume': { post: 'resumeQueue' },
  '/v1/keys': { get: 'listApiKeys', post: 'createApiKey' },
  '/v1/keys/{id}/revoke': { post: 'revokeApiKey' },
  '/v1/tenants': { get: 'listTenants' },
  '/v1/tenants/{name}': { get: 'viewTenant', patch: 'updateTenant' },
  '/v1/events': { get: 'streamEvents' },
  '/v1/webhooks': { get: 'listWebhooks', post: 'createWebhook' },
  '/v1/webhooks/{id}': { get: 'viewWebhook', patch: 'updateWebhook', delete: 'deleteWebhook' },
  '/v1/webhooks/{id}/deliveries': { get: 'listWebhookDeliveries' },
  '/healthz': { get: 'health' },
  '/readyz': { get: 'ready' },
  '/metrics': { get: 'metrics' },
}

describe('GET /openapi.json', () => {
  it('is a valid OpenAPI 3 document', async () => {
    const res = await api.app.inject({ method: 'GET', url: '/openapi.json' })
    expect(res.statusCode).toBe(200)
    const doc = res.json() as Doc
    expect(doc.openapi).toMatch(/^3\.\d+\.\d+$/)
    await expect(SwaggerParser.validate(structuredClone(doc) as never)).resolves.toBeDefined()
  })

  it('lists every route of the contract with its schemas', async () => {
    const doc = (await api.app.inject({ method: 'GET', url: '/openapi.json' })).json() as Doc
    expect(Object.keys(doc.paths).sort()).toEqual(Object.keys(CONTRACT).sort())
    for (const [path, methods] of Object.entries(CONTRACT)) {
      for (const [method, operationId] of Object.entries(methods)) {
        const op = doc.paths[path]?.[method]
        expect(op, `${method} ${path}`).toBeDefined()
        expect(op?.operationId).toBe(operationId)
        const ok = Object.keys(op?.responses ?? {}).filter((s) => s.startsWith('2'))
        expect(ok.length, `${method} ${path} has a success response`).toBeGreaterThan(0)
        // every success has a body but 204 No Content
        for (const status of ok.filter((s) => s !== '204')) expect(op?.responses[status]?.content, `${method} ${path} ${status}`).toBeDefined()
        if (path.startsWith('/v1/')) {
          expect(op?.security).toEqual([{ apiKey: [] }])
          expect(op?.responses['401']?.content?.['application/json']?.schema).toEqual({ $ref: '#/components/schemas/Error' })
        }
        if (path.includes('{id}')) {
          expect(op?.parameters).toContainEqual(expect.objectContaining({ name: 'id', in: 'path', schema: expect.objectContaining({ format: 'uuid' }) }))
          // an id of another tenant's, or of nothing, answers 404: the contract says so for generated clients
          expect(op?.responses['404']?.content?.['application/json']?.schema, `${method} ${path} 404`).toEqual({ $ref: '#/components/schemas/Error' })
        }
      }
    }
    // the actions take no body: none is documented, and the 400 that refuses one is
    expect(doc.info.description).toContain('An operation shown without a request body refuses one with a 400 (no body, an empty one or `{}` is none).')
    for (const [path, method] of [
      ['/v1/jobs/{id}/cancel', 'post'],
      ['/v1/jobs/{id}/pause', 'post'],
      ['/v1/jobs/{id}/resume', 'post'],
      ['/v1/jobs/{id}/retry', 'post'],
      ['/v1/jobs/{id}/rerun', 'post'],
      ['/v1/queues/{name}/pause', 'post'],
      ['/v1/queues/{name}/resume', 'post'],
      ['/v1/jobs/{id}', 'delete'],
      ['/v1/webhooks/{id}', 'delete'],
    ] as const) {
      const op = doc.paths[path]?.[method]
      expect(op?.requestBody, `${method} ${path}`).toBeUndefined()
      expect(op?.responses['400']?.content?.['application/json']?.schema, `${method} ${path} 400`).toEqual({ $ref: '#/components/schemas/Error' })
    }
    const submit = doc.paths['/v1/jobs']?.post
    expect(submit?.requestBody?.content['application/json']?.schema).toEqual({ $ref: '#/components/schemas/SubmitJobRequest' })
    const body = doc.components.schemas.SubmitJobRequest
    expect(body).toMatchObject({ type: 'object', required: ['type'], additionalProperties: false })
    expect(Object.keys((body as { properties: object }).properties)).toEqual(
      expect.arrayContaining(['type', 'payload', 'queue', 'priority', 'schedule', 'maxAttempts', 'timeoutMs', 'idempotencyKey']),
    )
    expect(submit?.parameters).toContainEqual(expect.objectContaining({ name: 'idempotency-key', in: 'header' }))
    expect(Object.keys(submit?.responses ?? {})).toEqual(expect.arrayContaining(['200', '202', '400', '401', '409', '413', '415']))
    expect(submit?.responses['202']?.content?.['application/json']?.schema).toEqual({ $ref: '#/components/schemas/Job' })
    const list = doc.paths['/v1/jobs']?.get
    expect(list?.parameters?.map((p) => p.name).sort()).toEqual([
      'createdAfter',
      'createdBefore',
      'cursor',
      'errorMessage',
      'errorType',
      'idempotencyKey',
      'limit',
      'queue',
      'status',
      'tenant',
      'type',
    ])
    expect(Object.keys(doc.components.schemas)).toEqual(expect.arrayContaining(['Job', 'Execution', 'Error']))
    expect(doc.components.schemas.Job).toMatchObject({
      properties: expect.objectContaining({
        status: expect.anything(),
        lastRun: expect.anything(),
        nextRunAt: expect.anything(),
        lastExecution: expect.anything(),
      }),
    })
  })

  it('documents X-Request-Id on every response, and Location on the 201 of a created job or webhook', async () => {
    const doc = (await api.app.inject({ method: 'GET', url: '/openapi.json' })).json() as Doc
    const withoutId: string[] = []
    for (const [path, methods] of Object.entries(doc.paths)) {
      for (const [method, op] of Object.entries(methods)) {
        for (const [status, response] of Object.entries(op.responses)) {
          if (!(response as { headers?: Record<string, unknown> }).headers?.['X-Request-Id']) withoutId.push(`${method.toUpperCase()} ${path} ${status}`)
        }
      }
    }
    expect(withoutId).toEqual([])
    const created = (path: string) =>
      Object.keys((doc.paths[path]?.post?.responses['201'] as { headers?: Record<string, unknown> } | undefined)?.headers ?? {}).sort()
    expect(created('/v1/webhooks')).toEqual(['Location', 'X-Request-Id'])
    // and the reply carries them
    const key = await api.keyFor('acme')
    const res = await api.call(key, 'POST', '/v1/webhooks', { url: 'https://hooks.example.com/a' })
    expect(res.statusCode).toBe(201)
    expect(res.headers.location).toBe(`/v1/webhooks/${res.json().id}`)
    expect(res.headers['x-request-id']).toEqual(expect.any(String))
  })

  it('serves the documentation UI at /docs', async () => {
    const res = await api.app.inject({ method: 'GET', url: '/docs/' })
    expect(res.statusCode).toBe(200)
    expect(res.headers['content-type']).toContain('text/html')
  })
})
