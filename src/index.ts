/**
 * The package's public entry point: the client, handler definitions, the
 * worker system and the types callers need.
 */
export { createClient } from './client.ts'
export type { Client, CreateClientOptions, CallOptions, ListJobsParams, Page, SubmitResult, Executor } from './client.ts'
export { defineHandler, HandlerRegistry } from './worker/handlers.ts'
export type { Handler, HandlerContext, HandlerFn, HandlerOptions } from './worker/handlers.ts'
export type { SandboxMode } from './worker/sandbox-protocol.ts'
export { SandboxError } from './worker/sandbox.ts'
export { httpHandler, createHttpHandler } from './worker/http-handler.ts'
export { verifyWebhookSignature, signWebhook, SIGNATURE_HEADER, type VerifyWebhookSignatureParams } from './events/signature.ts'
export { compareEventIds } from './core/events.ts'
export type { JobEvent, EventType, EventFilter } from './core/events.ts'
export type { StreamEventsParams } from './events/event-stream.ts'
export type { WebhookAdmin, WebhookSubscription, WebhookDelivery, CreateWebhookInput } from './events/webhook-admin.ts'
export {
  FatalError,
  SchedulerError,
  ValidationError,
  NotFoundError,
  ConflictError,
  WebhookExistsError,
  InvalidStateError,
  ConfigError,
  ForbiddenError,
  QuotaExceededError,
  BusyError,
  UnreplicatedError,
  type QuotaName,
  type ErrorCode,
  type ErrorDetail,
} from './errors.ts'
export type { QueueAdmin, QueueView } from './queue-admin.ts'
export type { Job, Execution, ExecutionState, SubmitJobInput, ScheduleInput, Schedule, AttemptRecord } from './core/job.ts'
export type { ExecutionError } from './core/execution-error.ts'
export type { JobStatus, LastRun, RunStatus } from './core/job-status.ts'
export { createWorkerSystem } from './system.ts'
export type { CreateWorkerSystemParams, WorkerSystem } from './system.ts'
export { createOutputStore } from './worker/output-stores.ts'
export type { OutputSettings, CreateOutputStoreParams } from './worker/output-stores.ts'
export type { OutputStore, OutputHandle, OutputTarget } from './worker/output-store.ts'
export { loadConfig, unknownVariables, type UnknownVariable } from './config.ts'
export type { Config } from './config.ts'
export { createLogger, type Logger } from './logger.ts'
export { migrate } from './db/migrate.ts'
