/**
 * Job operations over REST: retry, rerun and delete one job, cancel, retry or delete many by
 * filter, and export a filtered job list as CSV or JSON. A tenant key acts on its own tenant's
 * jobs (another tenant's job is a 404, and is never counted); an operator key on every
 * tenant's, narrowed by a `tenant` filter.
 */
import { Readable } from 'node:stream'
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import type { FastifyRequest } from 'fastify'
import type { Client } from '../../client.ts'
import type { Job } from '../../core/job.ts'
import type { JobOperations } from '../../job-operations.ts'
import { IdParams } from '../schemas/common.ts'
import { CommonErrors, ErrorRef, ErrorResponses, REQUEST_ID_HEADER, documented } from '../schemas/error.ts'
import { JobRef, jobToJson } from '../schemas/job.ts'
import { BulkJobsBodyRef, BulkJobsResultRef, ExportJobsQuery } from '../schemas/operations.ts'
import { jobsCsv, jobsJsonArray } from '../jobs-csv.ts'
import type { RouteDeps } from './deps.ts'

const security = [{ apiKey: [] }]

/** The operations for the request's key: its tenant's, or every tenant's for an operator key. */
export function operationsFor(deps: RouteDeps, request: FastifyRequest) {
  const client = deps.clientFor(request)
  return request.identity?.operator ? client.allTenants() : client
}

/**
 * The client for a route addressing one job: the key's tenant's, or for an operator key the
 * job's own tenant's (so operators see and control every tenant's jobs by id).
 */
export async function clientForJob(deps: RouteDeps, request: FastifyRequest, id: string): Promise<Client> {
  const client = deps.clientFor(request)
  if (!request.identity?.operator) return client
  const tenant = await client.allTenants().tenantOfJob(id)
  return tenant === undefined || tenant === client.tenant ? client : client.withTenant(tenant, `api-key:${request.identity.keyId}`)
}

/** The client for a route addressing one execution: as clientForJob, by the execution's job. */
export async function clientForExecution(deps: RouteDeps, request: FastifyRequest, id: string): Promise<Client> {
  const client = deps.clientFor(request)
  if (!request.identity?.operator) return client
  const tenant = await client.allTenants().tenantOfExecution(id)
  return tenant === undefined || tenant === client.tenant ? client : client.withTenant(tenant, `api-key:${request.identity.keyId}`)
}

/** Registers the job operation routes (mounted under /v1 behind authentication). */
export const jobOperationRoutes: FastifyPluginAsyncTypebox<RouteDeps> = async (app, deps) => {
  const ops = (request: FastifyRequest): JobOperations => operationsFor(deps, request)
  const single = (action: 'retry' | 'rerun', summary: string, description: string) =>
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
            200: documented(JobRef, 'The job, with its new execution pending.'),
            ...CommonErrors,
            404: ErrorResponses[404],
            409: documented(ErrorRef, "The job's status does not allow this; the message names it."),
            415: ErrorResponses[415],
            // the new execution is a submit to the tenant's quotas
            429: ErrorResponses[429],
          },
        },
      },
      async (request) => {
        const o = ops(request)
        const job = action === 'retry' ? await o.retryJob(request.params.id) : await o.rerunJob(request.params.id)
        return jobToJson(job)
      },
    )
  single(
    'retry',
    'Retry a failed job',
    'For a FAILED, EXPIRED or CANCELLED job: a new execution due now, its attempts counted from 0; earlier executions and their attempts ' +
      'stay as history. A cancelled job becomes active again (a recurring one runs once; its schedule stays stopped). Other statuses: 409.',
  )
  single(
    'rerun',
    'Run a finished job again',
    'For a finished job (COMPLETED, FAILED, EXPIRED or CANCELLED): runs it once more now with the same payload, as a new execution; ' +
      'history kept. A job with work pending or running: 409.',
  )

  app.delete(
    '/jobs/:id',
    {
      schema: {
        operationId: 'deleteJob',
        tags: ['jobs'],
        summary: 'Delete a finished job',
        description:
          'Removes a finished job (COMPLETED, FAILED, EXPIRED or CANCELLED; nothing pending or running) with its executions, attempts, ' +
          'output kept in PostgreSQL, schedule and idempotency key (which may then be used again). Otherwise 409.',
        security,
        params: IdParams,
        response: {
          204: { description: 'Deleted.', type: 'null', headers: REQUEST_ID_HEADER },
          ...CommonErrors,
          404: ErrorResponses[404],
          409: documented(ErrorRef, 'The job is not finished; the message names its status.'),
        },
      },
    },
    async (request, reply) => {
      await ops(request).deleteJob(request.params.id)
      return reply.code(204).send(null)
    },
  )

  app.post(
    '/jobs/bulk',
    {
      schema: {
        operationId: 'bulkJobs',
        tags: ['jobs'],
        summary: 'Cancel, retry or delete many jobs',
        description:
          'Acts on at most `limit` jobs of the filter that the action applies to, in one transaction, and reports how many it found ' +
          '(`matched`), changed (`changed`) and how many are left (`remaining`). Safe to repeat: a job acted on no longer matches. ' +
          'Repeat until `remaining` is 0. An empty filter is refused unless `filter.all` is true. A tenant key covers its own jobs only.',
        security,
        body: BulkJobsBodyRef,
        response: {
          200: documented(BulkJobsResultRef, 'The counts of this call.'),
          ...CommonErrors,
          403: ErrorResponses[403],
          415: ErrorResponses[415],
          // a retry or rerun that a tenant's quotas cannot take (nothing is changed)
          429: ErrorResponses[429],
        },
      },
    },
    async (request) => ops(request).bulkJobs(request.body),
  )

  app.get(
    '/jobs/export',
    {
      schema: {
        operationId: 'exportJobs',
        tags: ['jobs'],
        summary: 'Export jobs as CSV or JSON',
        description:
          'Every job of the filters of GET /v1/jobs, newest first, streamed as a download (Content-Disposition: attachment): `format=json` ' +
          '(default) one JSON array of Job objects; `format=csv` RFC 4180 text with a header row (fields holding a comma, quote or line break ' +
          'are quoted, quotes doubled; the payload as JSON).',
        security,
        querystring: ExportJobsQuery,
        response: {
          200: {
            description: 'The jobs.',
            headers: {
              ...REQUEST_ID_HEADER,
              'Content-Disposition': { type: 'string', description: 'attachment, with a file name ending in .json or .csv.' },
            },
            content: {
              'application/json': { schema: { type: 'array', items: { $ref: 'Job#' } } },
              'text/csv': { schema: { type: 'string' } },
            },
          },
          ...CommonErrors,
          403: ErrorResponses[403],
        },
      },
    },
    async (request, reply) => {
      const { format = 'json', ...filter } = request.query
      const jobs = ops(request).exportJobs(filter)
      // The first page is read before the headers go out, so a bad filter still answers with its error.
      const first = await jobs.next()
      async function* all(): AsyncGenerator<Job> {
        if (first.done) return
        yield first.value
        yield* jobs
      }
      // after the headers (200), a failure can only break the transfer off (the stream's error
      // destroys the socket: no client takes a cut-short file for a whole one); it is logged here
      async function* logged(chunks: AsyncGenerator<string>): AsyncGenerator<string> {
        try {
          yield* chunks
        } catch (err: unknown) {
          request.log.error({ err }, 'the export failed after its download began: the download is broken off')
          throw err
        }
      }
      const body = logged(format === 'csv' ? jobsCsv(all()) : jobsJsonArray(all()))
      return reply
        .type(format === 'csv' ? 'text/csv; charset=utf-8' : 'application/json; charset=utf-8')
        .header('content-disposition', `attachment; filename="jobs.${format}"`)
        .header('cache-control', 'no-store')
        .send(Readable.from(body, { objectMode: false }) as unknown as string)
    },
  )
}
