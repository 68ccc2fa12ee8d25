/**
 * Kysely table types for schema `pgsched` (snake_case rows, as stored).
 * Row types stay inside src/db/: queries map them to domain types.
 */
import type { ColumnType, Generated, Insertable, Selectable } from 'kysely'

type Timestamp = ColumnType<Date, Date | string, Date | string>
type DefaultTimestamp = ColumnType<Date, Date | string | undefined, Date | string>
type Json = ColumnType<unknown, string, string>

export interface JobsTable {
  id: ColumnType<string, string | undefined, never>
  tenant: string
  type: string
  queue: Generated<string>
  priority: Generated<number>
  payload: Json
  max_attempts: Generated<number>
  backoff_base_ms: Generated<number>
  backoff_max_ms: Generated<number>
  timeout_ms: Generated<number>
  idempotency_key: string | null
  /** Migration 0013. */
  concurrency_key: ColumnType<string | null, string | null | undefined, string | null>
  /** Migration 0018. */
  start_deadline_ms: ColumnType<number | null, number | null | undefined, number | null>
  /** Migration 0023: the submit's W3C traceparent, when a tracer recorded it. */
  traceparent: ColumnType<string | null, string | null | undefined, string | null>
  state: Generated<'active' | 'paused' | 'cancelled'>
  created_by: string | null
  created_at: DefaultTimestamp
  updated_at: DefaultTimestamp
}

export interface JobIdempotencyKeysTable {
  tenant: string
  idempotency_key: string
  job_id: string
  request_hash: string
  created_at: DefaultTimestamp
}

export type TriggerKind = 'once' | 'cron' | 'interval'
export type MisfirePolicy = 'fire_once' | 'skip' | 'fire_all'
export type OverlapPolicy = 'allow' | 'skip' | 'queue'

export interface TriggersTable {
  job_id: string
  kind: TriggerKind
  cron_expression: string | null
  timezone: Generated<string>
  interval_ms: ColumnType<string | null, string | number | null, string | number | null>
  start_at: Timestamp | null
  end_at: Timestamp | null
  next_fire_at: Timestamp | null
  last_fire_at: Timestamp | null
  /** Overlap policy queue: the fire time waiting for the previous run (migration 0004). */
  queued_fire_at: Timestamp | null
  misfire_policy: Generated<MisfirePolicy>
  misfire_max_runs: Generated<number>
  overlap_policy: Generated<OverlapPolicy>
  paused: Generated<boolean>
  /** When the schedule was last resumed after a pause (migration 0075). */
  resumed_at: Generated<Timestamp | null>
  /** Why the dispatcher stopped the schedule (migration 0009). */
  error: Generated<string | null>
  created_at: DefaultTimestamp
  updated_at: DefaultTimestamp
}

export type ExecutionState = 'pending' | 'running' | 'succeeded' | 'failed' | 'cancelled'

export interface ExecutionsTable {
  id: ColumnType<string, string | undefined, never>
  job_id: string
  queue: string
  type: string
  priority: number
  scheduled_for: Timestamp
  run_at: Timestamp
  state: Generated<ExecutionState>
  attempt: Generated<number>
  max_attempts: number
  timeout_ms: number
  worker_id: string | null
  lease_expires_at: Timestamp | null
  started_at: Timestamp | null
  finished_at: Timestamp | null
  result: Json | null
  error: Json | null
  output_uri: string | null
  created_at: DefaultTimestamp
  /** Migration 0013. */
  concurrency_key: ColumnType<string | null, string | null | undefined, string | null>
  /** Migration 0016 (null on executions finished before it). */
  tenant: ColumnType<string | null, string | null | undefined, string | null>
  /** Migration 0017. */
  attempt_log: Json | null
  last_worker_id: string | null
  /** Migration 0018. */
  start_deadline: ColumnType<Date | null, Date | string | null | undefined, Date | string | null>
}

/** Migration 0028: what may be claimed (pending executions). */
export interface DueTable {
  execution_id: Generated<string>
  job_id: string
  queue: string
  type: string
  priority: number
  run_at: Timestamp
  scheduled_for: Timestamp
  attempt: Generated<number>
  max_attempts: number
  timeout_ms: number
  tenant: string
  concurrency_key: string | null
  start_deadline: Timestamp | null
  created_at: DefaultTimestamp
  /** Migration 0031: the place in a fair queue's order; 'infinity' (Infinity) until given; null outside fair queues. */
  fair_key: number | null
  /** Migration 0072: times requeued, the attempt not counted, after its lease expired before it began. */
  unstarted_requeues: Generated<number>
}

/** Migration 0028: what workers hold (running executions and their leases). */
export interface RunsTable {
  execution_id: string
  job_id: string
  worker_id: string
  attempt: number
  lease_expires_at: Timestamp
  started_at: Timestamp
  queue: string
  type: string
  priority: number
  run_at: Timestamp
  scheduled_for: Timestamp
  max_attempts: number
  timeout_ms: number
  tenant: string
  concurrency_key: string | null
  start_deadline: Timestamp | null
  created_at: Timestamp
  output_uri: string | null
  /** Migration 0072: whether its handler has started, as far as the database knows (claim, then heartbeat). */
  began: Generated<boolean>
  unstarted_requeues: Generated<number>
}

export interface WorkersTable {
  id: string
  host: string
  pid: number
  queues: string[]
  types: string[]
  concurrency: number
  started_at: DefaultTimestamp
  last_seen_at: DefaultTimestamp
  stopped_at: Timestamp | null
  /** Migration 0053: the lease length it runs with (it is live while seen within it); null for workers registered before. */
  lease_ms: number | null
  /** Migration 0067: executions whose handler was running at its last heartbeat; null when never reported. */
  running: number | null
}

export interface ApiKeysTable {
  id: ColumnType<string, string | undefined, never>
  tenant: string
  name: string | null
  key_prefix: string
  key_hash: Buffer
  created_at: DefaultTimestamp
  revoked_at: Timestamp | null
  /** Migration 0012. */
  operator: ColumnType<boolean, boolean | undefined, boolean>
  /** Migration 0069: written by the API at most once a minute per key and process. */
  last_used_at: ColumnType<Date | null, never, Date | string | null>
}

/** Queue settings (migration 0012). */
export interface QueuesTable {
  name: string
  paused: ColumnType<boolean, boolean | undefined, boolean>
  concurrency_limit: number | null
  paused_at: Timestamp | null
  updated_at: DefaultTimestamp
  /** Migration 0013. */
  key_concurrency_limit: number | null
  /** Migration 0015. */
  rate_limit: number | null
  rate_period_ms: number | null
  next_start_at: Timestamp | null
  /** Migration 0016. */
  fair_share: ColumnType<boolean, boolean | undefined, boolean>
  /** Migration 0031: a change of fair share, the transactions open when a reaper first saw it, and when its executions were marked again. */
  fair_changed_at: ColumnType<Date | null, Date | null | undefined, Date | null>
  fair_waiting_for: ColumnType<string[] | null, string[] | null | undefined, string[] | null>
  fair_settled_at: ColumnType<Date | null, Date | null | undefined, Date | null>
}

/** Tenant settings: fair-share weight and admission quotas (migration 0016). */
export interface TenantsTable {
  name: string
  weight: ColumnType<number, number | undefined, number>
  max_pending: number | null
  max_submits_per_second: number | null
  submit_tokens: number | null
  submit_tokens_at: Timestamp | null
  updated_at: DefaultTimestamp
}

/** Workers waiting for a wake-up (migrations 0006 and 0011; unlogged). */
export interface WaitingWorkersTable {
  worker_id: string
  queues: string[]
  /** null: any type. */
  types: string[] | null
  min_priority: number
  since: DefaultTimestamp
  /** The channel it LISTENs on for wake-ups meant for it alone (migration 0044); null: pgsched_executions. */
  channel: string | null
}

/** Handler output in chunks (migration 0020). */
export interface ExecutionOutputTable {
  execution_id: string
  attempt: number
  /** bigint, generated. */
  seq: ColumnType<string, never, never>
  data: Buffer
  created_at: DefaultTimestamp
}

export interface SettingsTable {
  name: string
  value: string
}

export interface DB {
  'pgsched.jobs': JobsTable
  'pgsched.job_idempotency_keys': JobIdempotencyKeysTable
  'pgsched.triggers': TriggersTable
  /** A view since migration 0028 (read-only): pending from due, running from runs, the rest from execution_history. */
  'pgsched.executions': ExecutionsTable
  'pgsched.execution_history': ExecutionsTable
  'pgsched.due': DueTable
  'pgsched.runs': RunsTable
  'pgsched.workers': WorkersTable
  'pgsched.waiting_workers': WaitingWorkersTable
  'pgsched.api_keys': ApiKeysTable
  'pgsched.settings': SettingsTable
  'pgsched.queues': QueuesTable
  'pgsched.tenants': TenantsTable
  'pgsched.execution_output': ExecutionOutputTable
}

export type JobRow = Selectable<JobsTable>
export type TriggerRow = Selectable<TriggersTable>
export type ExecutionRow = Selectable<ExecutionsTable>
export type WorkerRow = Selectable<WorkersTable>
export type ApiKeyRow = Selectable<ApiKeysTable>
export type NewJobRow = Insertable<JobsTable>
