/**
 * /v1/jobs: submit, view, list, history and control. Each handler checks
 * nothing the client does not: it maps HTTP to a client call for the
 * request's tenant and the result to JSON. A job is committed before the
 * 202 is sent (the client's insert is one statement, outside any open
 * transaction).
 */
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import { ROOT_CONTEXT, trace, type Context } from '@opentelemetry/api'
import { ValidationError } from '../../errors.ts'
import { parseTraceparent, tracingOn } from '../../lib/tracing.ts'
import type { SubmitJobInput } from '../../core/job.ts'
import { IdParams, PageQuery } from '../schemas/common.ts'
import { CommonErrors, ErrorRef, ErrorResponses, documented } from '../schemas/error.ts'
import { ExecutionPageRef, executionToJson } from '../schemas/execution.ts'
import { JobPageRef, JobRef, ListJobsQuery, SubmitJobBodyRef, SubmitJobHeaders, jobToJson } from '../schemas/job.ts'
import type { RouteDeps } from './deps.ts'
import { clientForJob, operationsFor } from './job-operations.ts'

const security = [{ apiKey: [] }]

const strictUtf8 = new TextDecoder('utf-8', { fatal: true })

/** A header value as the UTF-8 text its bytes are (Node gives them as Latin-1 characters); 400 when they are not UTF-8. */
function utf8HeaderValue(value: string, name: string): string {
  try {
    return strictUtf8.decode(Buffer.from(value, 'latin1'))
  } catch {
    const message = `${name} header is not valid UTF-8`
    throw new ValidationError(message, [{ path: name.toLowerCase(), message }])
  }
}
const LOCATION = { Location: { type: 'string', format: 'uri-reference', description: 'The job: /v1/jobs/{id}.' } } as const

/**
 * The submit span's parent: the active span (HTTP instrumentation's), or else the caller's W3C
 * `traceparent` header, so a caller's trace continues through the submit to its runs. Nothing is
 * parsed while no OpenTelemetry SDK is registered.
 */
function submitTraceOptions(header: string | string[] | undefined): { traceContext?: Context } | undefined {
  if (typeof header !== 'string' || !tracingOn() || trace.getActiveSpan()) return undefined
  const remote = parseTraceparent(header)
  return remote && { traceContext: trace.setSpanContext(ROOT_CONTEXT, remote) }
}

/** Registers the /jobs routes (mounted under /v1 behind authentication). */
export const jobRoutes: FastifyPluginAsyncTypebox<RouteDeps> = async (app, deps) => {
  app.post(
    '/jobs',
    {
      schema: {
        operationId: 'submitJob',
        tags: ['jobs'],
        summary: 'Submit a job',
        description:
          'Accepts a job to run now, at a time (`schedule.at`) or on a schedule (`schedule.cron` / `schedule.every`). ' +
          'Replies 202 once the job is committed. With an idempotency key (body or `Idempotency-Key` header), ' +
          'repeating the same request returns the same job with 200; the same key with another body is a 409. ' +
          "A submit over one of the tenant's admission quotas (maxPending, maxSubmitsPerSecond) gets 429 with Retry-After and writes nothing.",
        security,
        headers: SubmitJobHeaders,
        body: SubmitJobBodyRef,
        response: {
          200: documented(JobRef, 'An earlier submit with the same idempotency key and body: that job, unchanged.', LOCATION),
          202: documented(JobRef, 'Accepted: the job is committed.', LOCATION),
          ...CommonErrors,
          409: documented(ErrorRef, 'The idempotency key was already used for a different request.'),
          413: ErrorResponses[413],
          415: ErrorResponses[415],
          429: ErrorResponses[429],
        },
      },
      // Node reads header bytes as Latin-1: a key sent in UTF-8 (as every client sends text) is read
      // as such, so that it is the same key as in a body, before the schema counts its characters
      preValidation: async (request) => {
        // Node joins repeated headers with ", ": two keys would become one key that neither is
        if ((request.raw.headersDistinct?.['idempotency-key']?.length ?? 0) > 1) {
          const message = 'Idempotency-Key is given more than once; send one'
          throw new ValidationError(message, [{ path: 'idempotencyKey', message }])
        }
        const key = request.headers['idempotency-key']
        if (typeof key === 'string' && /[\u0080-\u00ff]/.test(key)) request.headers['idempotency-key'] = utf8HeaderValue(key, 'Idempotency-Key')
      },
    },
    async (request, reply) => {
      const headerKey = request.headers['idempotency-key']
      const bodyKey = request.body.idempotencyKey
      if (headerKey !== undefined && bodyKey !== undefined && headerKey !== bodyKey) {
        const message = 'Idempotency-Key header and body idempotencyKey differ; send one of them'
        throw new ValidationError(message, [{ path: 'idempotencyKey', message }])
      }
      const input: SubmitJobInput = { ...request.body }
      const key = bodyKey ?? headerKey
      if (key !== undefined) input.idempotencyKey = key
      const { job, created } = await deps.clientFor(request).submitJob(input, submitTraceOptions(request.headers.traceparent))
      // Fastify's clock of the request, from its arrival: the job is committed by now.
      deps.metrics.submitDurable(job.queue, reply.elapsedTime)
      if (created) deps.metrics.jobSubmitted(job.queue)
      return reply
        .code(created ? 202 : 200)
        .header('location', `/v1/jobs/${job.id}`)
        .send(jobToJson(job))
    },
  )

  app.get(
    '/jobs',
    {
      schema: {
        operationId: 'listJobs',
        tags: ['jobs'],
        summary: 'List jobs',
        description:
          "The tenant's jobs (an operator key: every tenant's, or one named by `tenant`), newest first, filtered by status, type, queue, " +
          "idempotency key, the latest execution's error and creation time; keyset-paginated, so pages stay stable while jobs are added.",
        security,
        querystring: ListJobsQuery,
        response: { 200: documented(JobPageRef, 'A page of jobs.'), ...CommonErrors, 403: ErrorResponses[403] },
      },
    },
    async (request) => {
      const page = await operationsFor(deps, request).listJobs(request.query)
      return { items: page.items.map(jobToJson), nextCursor: page.nextCursor }
    },
  )

  app.get(
    '/jobs/:id',
    {
      schema: {
        operationId: 'viewJob',
        tags: ['jobs'],
        summary: 'View a job',
        description: "The job with its status, next run and latest execution. An operator key sees every tenant's jobs.",
        security,
        params: IdParams,
        response: { 200: documented(JobRef, 'The job.'), ...CommonErrors, 404: ErrorResponses[404] },
      },
    },
    async (request) => jobToJson(await (await clientForJob(deps, request, request.params.id)).viewJob(request.params.id)),
  )

  app.get(
    '/jobs/:id/executions',
    {
      schema: {
        operationId: 'listExecutions',
        tags: ['jobs'],
        summary: "A job's executions",
        description: "Runs of the job, latest fire time first, with state, attempt, times, result and error. An operator key sees every tenant's jobs.",
        security,
        params: IdParams,
        querystring: PageQuery,
        response: { 200: documented(ExecutionPageRef, 'A page of executions.'), ...CommonErrors, 404: ErrorResponses[404] },
      },
    },
    async (request) => {
      const page = await (await clientForJob(deps, request, request.params.id)).listExecutions(request.params.id, request.query)
      return { items: page.items.map(executionToJson), nextCursor: page.nextCursor }
    },
  )

  const control = (action: 'cancel' | 'pause' | 'resume', summary: string, description: string) =>
    app.post(
      `/jobs/:id/${action}`,
      {
        schema: {
          operationId: `${action}Job`,
          tags: ['jobs'],
          summary,
          description,
          security,
          params: IdParams,
          response: {
            200: documented(JobRef, 'The job after the change.'),
            ...CommonErrors,
            404: ErrorResponses[404],
            409: documented(ErrorRef, 'The job is not in a state that allows this.'),
            415: ErrorResponses[415],
          },
        },
      },
      async (request) => {
        const id = request.params.id
        const client = await clientForJob(deps, request, id)
        const job = action === 'cancel' ? await client.cancelJob(id) : action === 'pause' ? await client.pauseJob(id) : await client.resumeJob(id)
        return jobToJson(job)
      },
    )
  control('cancel', 'Cancel a job', 'Cancels pending executions and signals a running one; a recurring job stops firing. 409 when the job already finished.')
  control('pause', 'Pause a recurring job', 'Stops firing until resumed. 409 for a one-time or cancelled job.')
  control(
    'resume',
    'Resume a recurring job',
    'Continues the same schedule: the fire times that passed while it was paused are missed, and its misfire policy applies to them at the next pass (fire_once: one catch-up run; skip: none; fire_all: each). 409 for a one-time or cancelled job.',
  )
}
