/**
 * `buildApp(deps)`: the REST API as a Fastify instance, not listening (the
 * caller listens, tests use `inject`). It wires, in order: strict request
 * validation (validation.ts), the JSON body parser (json-body.ts), the one
 * error handler (error-handler.ts), request ids, logging and metrics, the
 * OpenAPI document (/openapi.json, UI at /docs, generated from the route
 * schemas), the ops routes and, under /v1 behind API-key authentication,
 * the job and execution routes. All job logic is the client's (client.ts);
 * the API adds HTTP, authentication and validation only.
 */
import { performance } from 'node:perf_hooks'
import { randomUUID } from 'node:crypto'
import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import Fastify, { LogController, type FastifyBaseLogger, type FastifyRequest } from 'fastify'
import swagger from '@fastify/swagger'
import swaggerUi from '@fastify/swagger-ui'
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox'
import type { Kysely } from 'kysely'
import { createClient, type Client } from '../client.ts'
import type { DB } from '../db/schema.ts'
import { SchedulerError } from '../errors.ts'
import { BODY_LIMIT_BYTES_DEFAULT } from '../core/names.ts'
import { packageRoot } from '../lib/package-root.ts'
import type { Logger } from '../logger.ts'
import { buildNullableSerializer } from './serializer.ts'
import { createApiKey, createAuthenticator } from './auth.ts'
import { apiKeyPage, apiKeyRevoke } from '../db/queries/api-keys.ts'
import { KEY_USE_WRITE_INTERVAL_MS, createKeyUseRecorder } from './key-use-recorder.ts'
import { TenantClients } from './tenant-clients.ts'
import { frameworkErrorHandler, registerErrorHandling } from './error-handler.ts'
import { answerClientError, continueWithinLimit, indexRouteMethods, refuseContentEncodings } from './http-conventions.ts'
import { parseJsonBody, refuseBody, refuseInexact } from './json-body.ts'
import { parseQueryString, refuseUndecodable } from './query-string.ts'
import { OutageLog } from './outage.ts'
import { createApiMetrics } from './metrics.ts'
import { executionRoutes, FOLLOW_POLL_MS } from './routes/executions.ts'
import { OutputReaders } from './output-readers.ts'
import type { S3Settings } from '../lib/s3.ts'
import { healthRoutes } from './routes/health.ts'
import { dashboardDirDefault, registerDashboard } from './dashboard.ts'
import { jobRoutes } from './routes/jobs.ts'
import { queueRoutes } from './routes/queues.ts'
import { tenantRoutes } from './routes/tenants.ts'
import { keyRoutes } from './routes/keys.ts'
import { QueueListSchema, QueuePatchBody, QueueSchema } from './schemas/queue.ts'
import { OPERATIONS_SCHEMAS } from './schemas/operations.ts'
import { jobOperationRoutes } from './routes/job-operations.ts'
import { viewRoutes } from './routes/views.ts'
import { TenantListSchema, TenantPatchBody, TenantSchema } from './schemas/tenant.ts'
import { ApiKeyListSchema, ApiKeySchema, CreateApiKeyBody, CreatedApiKeySchema } from './schemas/key.ts'
import { eventRoutes } from './routes/events.ts'
import { streamEventMessages } from '../events/event-stream.ts'
import { webhookRoutes } from './routes/webhooks.ts'
import { EventSchema } from './schemas/event.ts'
import { UpdateWebhookBody, WebhookSchema } from './schemas/webhook.ts'
import type { RouteDeps } from './routes/deps.ts'
import { ErrorDetailSchema, ErrorResponses, ErrorSchema } from './schemas/error.ts'
import { ExecutionPageSchema, ExecutionSchema } from './schemas/execution.ts'
import { JobPageSchema, JobSchema, SubmitJobBody } from './schemas/job.ts'
import { createValidatorCompiler } from './validation.ts'
import { StreamSlots, STREAMS_PER_TENANT_DEFAULT } from './stream-slots.ts'
import { trackHandlers, type HandlersInFlight } from './handlers-in-flight.ts'

export interface AppDeps {
  db: Kysely<DB>
  log: Logger
  /** Default: `createClient({ db })`; each request uses it through `withTenant`. */
  client?: Client
  /** Largest accepted request body; default 1 MiB. */
  bodyLimitBytes?: number
  /** How long a valid API key is trusted without a database lookup; default 5000 (0 = always look up). */
  apiKeyCacheMs?: number
  /**
   * SCHEDULER_HTTP_ALLOW as the workers have it, for the default client: webhook URLs whose host it
   * admits are not refused at creation (a given `client` has its own, createClient's httpAllow).
   */
  httpAllow?: string
  /**
   * How often this process writes one API key's last use (api_keys.last_used_at); default
   * KEY_USE_WRITE_INTERVAL_MS (a minute), 0 = at every request.
   */
  keyUseWriteIntervalMs?: number
  /** SCHEDULER_WEBHOOK_MAX_PER_TENANT, for the default client (a given `client` has its own); default 100. */
  webhookMaxPerTenant?: number
  /** How long a queue depth reading is reused by /metrics; default 5000. */
  queueDepthCacheMs?: number
  /** For /readyz; default: the package's migrations/ folder. */
  migrationsDir?: string
  /** Reading output kept in S3 (endpoint, region; credentials from the AWS SDK's usual sources). */
  outputS3?: S3Settings
  /** How often `GET /v1/executions/{id}/output?follow=true` polls; default FOLLOW_POLL_MS. */
  outputFollowPollMs?: number
  /** Event retention (SCHEDULER_EVENTS_RETENTION_MS): how long a stream's events are captured after it leaves. */
  eventsRetentionMs?: number
  /** Event streams and output follows one tenant may hold open (SCHEDULER_MAX_STREAMS_PER_TENANT); default 20. */
  maxStreamsPerTenant?: number
  /** The built dashboard served at /ui; default: the package's dist/ui. */
  dashboardDir?: string
}

/**
 * Schemas routes reference by `$id`: the components of the OpenAPI document, named so a generated
 * client can use them (SubmitJobRequest, Job, JobPage, Error, …).
 */
const SHARED_SCHEMAS = [
  ErrorDetailSchema,
  ErrorSchema,
  ExecutionSchema,
  ExecutionPageSchema,
  JobSchema,
  JobPageSchema,
  SubmitJobBody,
  QueueSchema,
  QueueListSchema,
  QueuePatchBody,
  TenantSchema,
  TenantListSchema,
  TenantPatchBody,
  ApiKeySchema,
  ApiKeyListSchema,
  CreatedApiKeySchema,
  CreateApiKeyBody,
  UpdateWebhookBody,
  ...OPERATIONS_SCHEMAS,
]

/** A client-supplied X-Request-Id is kept when it is short and plain; otherwise a UUID is made. */
const REQUEST_ID = /^[A-Za-z0-9._:-]{1,128}$/
/** Routes polled by machines: their request log lines go to debug. */
const QUIET_ROUTES = new Set(['/healthz', '/readyz', '/metrics'])

/** The query string of a route that takes no query parameter. */
const NO_QUERY = { type: 'object', properties: {}, additionalProperties: false } as const
/** Methods whose requests are read for a body (a GET's or HEAD's is not). */
const BODY_METHODS = new Set(['POST', 'PUT', 'PATCH', 'DELETE'])

/** Long-lived streams look their key up again at most this often, whatever the key cache's time. */
const KEY_RECHECK_MIN_MS = 1_000

function packageVersion(): string {
  try {
    return (JSON.parse(readFileSync(join(packageRoot(), 'package.json'), 'utf8')) as { version: string }).version
  } catch {
    return '0.0.0'
  }
}

/** The API, ready to `listen()` or `inject()`. Call `close()` when done (the db stays the caller's). */
export function buildApp(deps: AppDeps) {
  const bodyLimitBytes = deps.bodyLimitBytes ?? BODY_LIMIT_BYTES_DEFAULT
  const app = Fastify({
    loggerInstance: deps.log.child({ component: 'api' }) as FastifyBaseLogger,
    // One line per request, written by the onResponse hook below (no headers, no bodies).
    logController: new LogController({ disableRequestLogging: true, requestIdLogLabel: 'requestId' }),
    genReqId: (req) => {
      const header = req.headers['x-request-id']
      return typeof header === 'string' && REQUEST_ID.test(header) ? header : randomUUID()
    },
    bodyLimit: bodyLimitBytes,
    // undecodable percent-encoding named, not read as raw text (refuseUndecodable below)
    routerOptions: { querystringParser: parseQueryString },
    // answered before any hook runs: the request id and the request's log line and count added here
    frameworkErrors: (err, request, reply) => {
      reply.header('x-request-id', request.id)
      reply.raw.once('finish', () => requestDone(request, reply.statusCode, reply.elapsedTime))
      frameworkErrorHandler(bodyLimitBytes)(err, request, reply)
    },
    // a request the HTTP parser refused: answered without logging its raw bytes (its key)
    clientErrorHandler: answerClientError,
    // nullable values written without validating them (api/serializer.ts)
    schemaController: { compilersFactory: { buildSerializer: buildNullableSerializer } },
  }).withTypeProvider<TypeBoxTypeProvider>()

  // First: every request is counted from its first hook, for a graceful close.
  settledOf.set(app, trackHandlers(app))
  const routeMethods = indexRouteMethods(app)
  continueWithinLimit(app, bodyLimitBytes)
  app.setValidatorCompiler(createValidatorCompiler(SHARED_SCHEMAS))
  // JSON only: text/plain would otherwise reach the schemas as a string instead of a 415.
  app.removeAllContentTypeParsers()
  app.addContentTypeParser('application/json', { parseAs: 'buffer' }, parseJsonBody)
  // an integer beyond ±(2^53 − 1) is refused once the route's schema has had its say (json-body.ts)
  app.addHook('preHandler', refuseInexact)
  const outages = new OutageLog(deps.log.child({ component: 'api' }))
  // submits refused for want of a synchronous standby (SCHEDULER_REQUIRE_SYNC_STANDBY): until one is accepted
  const refusals = new OutageLog(deps.log.child({ component: 'api' }), {
    start: 'submits refused',
    end: 'submits acknowledged again (the database has a synchronous standby)',
  })
  registerErrorHandling(app, { bodyLimitBytes, outages, refusals, routeMethods })
  refuseUndecodable(app)

  const metrics = createApiMetrics({ db: deps.db, log: deps.log, queueDepthCacheMs: deps.queueDepthCacheMs })
  const client = deps.client ?? createClient({ db: deps.db, httpAllow: deps.httpAllow, webhookMaxPerTenant: deps.webhookMaxPerTenant })
  const keyUses = createKeyUseRecorder(
    { db: deps.db, log: deps.log.child({ component: 'api' }) },
    { intervalMs: deps.keyUseWriteIntervalMs ?? KEY_USE_WRITE_INTERVAL_MS },
  )
  // Last-use writes still running finish before close() resolves, and so before the pool is closed.
  app.addHook('onClose', async () => keyUses.settled())
  const authenticator = createAuthenticator(deps.db, { cacheMs: deps.apiKeyCacheMs ?? 5000, keyUses })
  // Open output follows end when the API closes, or close() would wait for them.
  const closing = new AbortController()
  app.addHook('preClose', async () => closing.abort())
  const output = {
    readers: new OutputReaders({ db: deps.db, s3: deps.outputS3 }),
    closing: closing.signal,
    followPollMs: deps.outputFollowPollMs ?? FOLLOW_POLL_MS,
  }

  app.decorateRequest('identity', null)
  app.addHook('onRequest', async (request, reply) => {
    reply.header('x-request-id', request.id)
  })
  refuseContentEncodings(app)
  // A request answered: counted, logged, and a 2xx from a route that needs the database says it is back.
  // From onResponse, and from a stream's route once it ends (a hijacked reply runs no onResponse).
  // once per request: a stream's end is reported by its route, and Fastify may run onResponse for it
  // too when the server closes under it
  const done = new WeakSet<FastifyRequest>()
  function requestDone(request: FastifyRequest, statusCode: number, durationMs: number): void {
    if (done.has(request)) return
    done.add(request)
    const route = request.routeOptions.url ?? 'unmatched'
    metrics.observeRequest({ method: request.method, route, statusCode }, durationMs)
    const fields = {
      tenant: request.identity?.tenant,
      method: request.method,
      route,
      statusCode,
      durationMs: Math.round(durationMs * 10) / 10,
    }
    if (QUIET_ROUTES.has(route)) request.log.debug(fields, 'request completed')
    else request.log.info(fields, 'request completed')
    // A 2xx from a route that needs the database: the database is back, if it was gone.
    const startedAt = performance.now() - durationMs
    if (statusCode >= 200 && statusCode < 300 && (route.startsWith('/v1/') || route === '/readyz')) outages.succeeded(startedAt)
    if (statusCode >= 200 && statusCode < 300 && request.method === 'POST' && route === '/v1/jobs') refusals.succeeded(startedAt)
  }
  app.addHook('onResponse', async (request, reply) => requestDone(request, reply.statusCode, reply.elapsedTime))

  // Shared response schemas: referenced by $id from routes, components in the OpenAPI document.
  for (const schema of [...SHARED_SCHEMAS, EventSchema, WebhookSchema]) app.addSchema(schema)
  void app.register(swagger, {
    refResolver: {
      buildLocalReference: (json, _baseUri, _fragment, i) => (typeof json.$id === 'string' ? json.$id : `def-${i}`),
    },
    openapi: {
      openapi: '3.1.0',
      info: {
        title: 'pgsched',
        version: packageVersion(),
        description:
          'Submit, view, list and control jobs of the pgsched scheduler. Every /v1 call needs `Authorization: Bearer <api key>`; ' +
          "a key acts for one tenant, and other tenants' jobs answer 404. Errors are `{statusCode, error, message, details?}`. " +
          'An operation shown without a request body refuses one with a 400 (no body, an empty one or `{}` is none).',
      },
      tags: [
        { name: 'keys', description: 'The calling key' },
        { name: 'jobs', description: 'Submit, view, list and control jobs' },
        { name: 'executions', description: 'Runs of jobs' },
        { name: 'queues', description: 'Queue settings (operator keys only) and figures' },
        { name: 'workers', description: 'Workers and what they hold' },
        { name: 'tenants', description: 'Tenant weights and admission quotas (operator keys only)' },
        { name: 'events', description: 'Job and execution events as Server-Sent Events' },
        { name: 'webhooks', description: 'Webhook subscriptions and their deliveries' },
        { name: 'ops', description: 'Health, readiness and metrics' },
      ],
      components: {
        securitySchemes: {
          apiKey: {
            type: 'http',
            scheme: 'bearer',
            description: 'An API key made by `scheduler keys create --tenant <name>` (`--operator` for the queue routes).',
          },
        },
      },
    },
  })
  void app.register(swaggerUi, { routePrefix: '/docs' })
  app.get('/openapi.json', { schema: { hide: true } }, async () => app.swagger())

  void app.register(healthRoutes, { db: deps.db, metrics, migrationsDir: deps.migrationsDir })
  // biome-ignore lint/nursery/noMisusedPromises: an async plugin is a FastifyPluginAsync, which fastify awaits
  void app.register(async (ui) => registerDashboard(ui, deps.dashboardDir ?? dashboardDirDefault()))

  const tenantClients = new TenantClients(client)
  void app.register(
    // biome-ignore lint/nursery/noMisusedPromises: an async plugin is a FastifyPluginAsync, which fastify awaits
    async (v1) => {
      v1.addHook('onRequest', async (request) => {
        request.identity = await authenticator.authenticate(request.headers.authorization)
      })
      // A route that reads no query parameter refuses them, as the others refuse those they do not
      // know (GET /v1/jobs/{id}?fields=x would otherwise answer as if it had been understood).
      // A route that takes no body refuses one too (json-body.ts: none, an empty one and {} are none).
      v1.addHook('onRoute', (route) => {
        if (route.schema && route.schema.querystring === undefined) route.schema.querystring = NO_QUERY
        // a body of another type, or compressed, is a 415 and one over the limit a 413, on every route that reads one
        if (route.schema?.response && BODY_METHODS.has(String(route.method))) {
          route.schema.response = { ...(route.schema.response as object), 413: ErrorResponses[413], 415: ErrorResponses[415] }
        }
        if (route.schema && route.schema.body === undefined) {
          const own = route.preValidation
          route.preValidation = [...(own === undefined ? [] : Array.isArray(own) ? own : [own]), refuseBody]
        }
      })
      const routeDeps: RouteDeps = {
        metrics,
        streamEnded: (request, reply) => requestDone(request, 200, reply.elapsedTime),
        output,
        eventsRetentionMs: deps.eventsRetentionMs,
        eventMessages: (tenant, params) => streamEventMessages(deps.db, tenant, params),
        keyStillValid: (request) =>
          authenticator.authenticate(request.headers.authorization, { fresh: true }).then(
            () => true,
            (err: unknown) => !(err instanceof SchedulerError && err.code === 'unauthorized'),
          ),
        keyRecheckMs: Math.max(KEY_RECHECK_MIN_MS, deps.apiKeyCacheMs ?? 5000),
        streams: new StreamSlots(deps.maxStreamsPerTenant ?? STREAMS_PER_TENANT_DEFAULT),
        keys: {
          list: (params) => apiKeyPage(deps.db, params),
          create: (params) => createApiKey(deps.db, { ...params, operator: false }),
          revoke: async (id) => {
            const revoked = await apiKeyRevoke(deps.db, { id })
            authenticator.forget(id)
            return revoked
          },
        },
        clientFor(request: FastifyRequest) {
          const identity = request.identity
          if (!identity) throw new SchedulerError('unauthorized', 'missing API key; send Authorization: Bearer <api key>')
          return tenantClients.get(identity.tenant, identity.keyId)
        },
      }
      await v1.register(jobRoutes, routeDeps)
      await v1.register(executionRoutes, routeDeps)
      await v1.register(jobOperationRoutes, routeDeps)
      await v1.register(viewRoutes, routeDeps)
      await v1.register(queueRoutes, routeDeps)
      await v1.register(tenantRoutes, routeDeps)
      await v1.register(keyRoutes, routeDeps)
      await v1.register(eventRoutes, routeDeps)
      await v1.register(webhookRoutes, routeDeps)
    },
    { prefix: '/v1' },
  )

  return app
}

export type App = ReturnType<typeof buildApp>

const settledOf = new WeakMap<object, HandlersInFlight>()

/**
 * Resolves true once no request of `app` is in flight (false after `timeoutMs`): after
 * `app.close()`, before the caller closes the pool its hooks and handlers use.
 */
export function apiHandlersSettled(app: App, timeoutMs: number): Promise<boolean> {
  return settledOf.get(app)?.settled(timeoutMs) ?? Promise.resolve(true)
}
