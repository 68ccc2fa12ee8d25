/**
 * Job operations of the client: list and export jobs by filter, retry, rerun and delete one job,
 * and cancel, retry or delete many by filter, a bounded number per call. A scope is one tenant
 * (every client) or every tenant (`client.allTenants()`, what operator keys use), where a
 * `tenant` filter may narrow it. A job of another tenant is never found (404).
 */
import type { Kysely } from 'kysely'
import type { Job } from './core/job.ts'
import { JOB_STATUSES, type JobStatus } from './core/job-status.ts'
import type { DB } from './db/schema.ts'
import { ForbiddenError, InvalidStateError, NotFoundError, ValidationError } from './errors.ts'
import type { JobFilter } from './db/queries/job-filter.ts'
import { jobGetById, jobList } from './db/queries/job-views.ts'
import { jobCancelSweep } from './db/queries/jobs.ts'
import {
  ACTION_STATUSES,
  executionTenantOf,
  jobCancelMany,
  jobCountForAction,
  jobDeleteMany,
  jobIdsForAction,
  jobRunAgainMany,
  jobTenantOf,
  type JobAction,
} from './db/queries/job-operations.ts'
import { UUID, assertUuid, decodeCursor, encodeCursor, limitOf, type Page } from './paging.ts'
import { assertKnownFields, assertNoMoreArguments, RUNS_IN_OWN_TRANSACTION, RUNS_ON_CLIENT, type FieldSet } from './core/known-fields.ts'

/** The filters of a job list or export. Dates as Date or ISO-8601 text. */
export interface JobListFilter {
  status?: JobStatus
  type?: string
  queue?: string
  /** Every-tenant scope only (in a tenant's scope, only its own name is accepted). */
  tenant?: string
  idempotencyKey?: string
  /** `name` of the latest execution's error. */
  errorType?: string
  /** `message` of the latest execution's error (exact). */
  errorMessage?: string
  createdAfter?: Date | string
  createdBefore?: Date | string
}

export interface ListJobsParams extends JobListFilter {
  /** 1–500, default 50. */
  limit?: number
  /** `nextCursor` of the previous page. */
  cursor?: string
}

/** Which jobs a bulk operation acts on: every field given must match. */
export interface BulkFilter extends JobListFilter {
  /** At most 1000 job ids. */
  ids?: string[]
  /** Required (true) when no other field is given: the operation then covers every job in scope. */
  all?: boolean
}

export type BulkAction = 'cancel' | 'retry' | 'delete'
export const BULK_ACTIONS: readonly BulkAction[] = ['cancel', 'retry', 'delete']
export const BULK_LIMIT_MAX = 1000

export interface BulkJobsParams {
  action: BulkAction
  filter: BulkFilter
  /** Most jobs acted on in this call: 1–1000, default 1000. */
  limit?: number
  /**
   * Only jobs after this one (id order): the previous call's `lastId`. A walk that passes it acts
   * on each job once, even when a retried job fails again and matches the filter again.
   */
  after?: string
}

export interface BulkJobsResult {
  action: BulkAction
  /** Jobs of the filter the action applied to when this call looked (at most `limit`). */
  matched: number
  /** Jobs this call changed (fewer than matched when some changed meanwhile). */
  changed: number
  /** Jobs of the filter the action still applies to (0: done); with `after`, those after `lastId`. */
  remaining: number
  /** The last job (id order) this call looked at: `after` for the next call; null when it found none. */
  lastId: string | null
}

export interface JobOperations {
  listJobs(params?: ListJobsParams): Promise<Page<Job>>
  /** Every matching job, newest first, read a page at a time. */
  exportJobs(filter?: JobListFilter): AsyncGenerator<Job, void, undefined>
  /**
   * A failed, expired or cancelled job runs again now: a new execution, attempts from 0; history kept.
   * Runs in a transaction of its own: it takes no call options (a second argument is refused, ValidationError).
   */
  retryJob(id: string): Promise<Job>
  /** A finished job (completed, failed, expired or cancelled) runs once more now; history kept. Its own transaction, no call options. */
  rerunJob(id: string): Promise<Job>
  /** Deletes a finished job with its executions, attempts and output. Its own transaction, no call options. */
  deleteJob(id: string): Promise<void>
  /** Cancels, retries or deletes at most `limit` jobs of the filter; repeat until `remaining` is 0. Its own transaction, no call options. */
  bulkJobs(params: BulkJobsParams): Promise<BulkJobsResult>
  /** The tenant a job belongs to (in a tenant's scope, always that tenant); undefined when there is no such job. */
  tenantOfJob(id: string): Promise<string | undefined>
  /** The tenant an execution's job belongs to (in a tenant's scope, always that tenant); undefined when there is no such execution. */
  tenantOfExecution(id: string): Promise<string | undefined>
}

/** The fields each call takes; any other is refused (core/known-fields.ts), as REST refuses it. */
const LIST_FILTER_FIELDS: FieldSet<JobListFilter> = {
  status: true,
  type: true,
  queue: true,
  tenant: true,
  idempotencyKey: true,
  errorType: true,
  errorMessage: true,
  createdAfter: true,
  createdBefore: true,
}
const LIST_JOBS_FIELDS: FieldSet<ListJobsParams> = { ...LIST_FILTER_FIELDS, limit: true, cursor: true }
const BULK_FILTER_FIELDS: FieldSet<BulkFilter> = { ...LIST_FILTER_FIELDS, ids: true, all: true }
const BULK_JOBS_FIELDS: FieldSet<BulkJobsParams> = { action: true, filter: true, limit: true, after: true }

/** The action's past participle, for messages. */
const DONE: Record<JobAction, string> = { cancel: 'cancelled', retry: 'retried', rerun: 'rerun', delete: 'deleted' }

const fail = (path: string, message: string) => new ValidationError(message, [{ path, message }])

/**
 * Refuses an argument past those a call takes: retryJob, rerunJob, deleteJob and bulkJobs each run in
 * a transaction of its own, the others on the client's connections, so `{ trx }` given from
 * JavaScript would be ignored and the caller believe the call ran in theirs.
 */
const assertNoMore = (call: string, takes: readonly string[], extra: readonly unknown[], runs = RUNS_ON_CLIENT) =>
  assertNoMoreArguments(call, takes, extra, runs)

function dateOf(value: Date | string | undefined, path: string): Date | undefined {
  if (value === undefined) return undefined
  const date = value instanceof Date ? value : new Date(value)
  if (Number.isNaN(date.getTime())) throw fail(path, `${path} must be an ISO-8601 date-time`)
  return date
}

const sameTenantOnly = (own: string, asked: string) =>
  new ForbiddenError(`tenant filter "${asked}": a key of tenant "${own}" sees its own jobs only; only an operator key may name another tenant`)

/** The database filter of a list filter in a scope (`own`: the scope's tenant, null for every tenant). */
function toFilter(own: string | null, f: JobListFilter, path = ''): JobFilter {
  if (f.status !== undefined && !JOB_STATUSES.includes(f.status)) throw fail(`${path}status`, `${path}status must be one of ${JOB_STATUSES.join(', ')}`)
  if (own !== null && f.tenant !== undefined && f.tenant !== own) throw sameTenantOnly(own, f.tenant)
  return {
    tenant: own ?? f.tenant ?? null,
    status: f.status,
    type: f.type,
    queue: f.queue,
    idempotencyKey: f.idempotencyKey,
    errorType: f.errorType,
    errorMessage: f.errorMessage,
    createdAfter: dateOf(f.createdAfter, `${path}createdAfter`),
    createdBefore: dateOf(f.createdBefore, `${path}createdBefore`),
  }
}

function bulkFilter(own: string | null, f: BulkFilter): JobFilter {
  if (typeof f !== 'object' || f === null) throw fail('filter', 'filter must be an object')
  // a misspelt field would otherwise leave the filter empty but for `all`, or wider than meant
  assertKnownFields(f, BULK_FILTER_FIELDS, 'filter', 'filter.')
  const { all, ids, ...rest } = f
  const given = Object.values(rest).some((v) => v !== undefined) || ids !== undefined
  if (!given && all !== true) throw fail('filter', 'filter is empty: name the jobs (ids, status, type, queue, …) or set filter.all to true for every job')
  if (ids !== undefined) {
    if (!Array.isArray(ids) || ids.length > BULK_LIMIT_MAX) throw fail('filter.ids', `filter.ids must be an array of at most ${BULK_LIMIT_MAX} job ids`)
    for (const id of ids) if (typeof id !== 'string' || !UUID.test(id)) throw fail('filter.ids', 'filter.ids must hold UUIDs')
  }
  return { ...toFilter(own, rest, 'filter.'), ...(ids === undefined ? {} : { ids }) }
}

/** The operations in a scope: `own` is the tenant, or null for every tenant. */
export function jobOperations(db: Kysely<DB>, own: string | null): JobOperations {
  /** The tenant a single-job operation acts as: the scope's, or (every tenant) the job's own. */
  async function tenantFor(id: string): Promise<string> {
    assertUuid(id, 'id')
    const tenant = own ?? (await jobTenantOf(db, id))
    if (tenant === undefined) throw new NotFoundError(`job ${id} not found`)
    return tenant
  }

  async function view(tenant: string, id: string): Promise<Job> {
    const job = await jobGetById(db, { tenant, id })
    if (!job) throw new NotFoundError(`job ${id} not found`)
    return job
  }

  /** Acts on the given jobs in one transaction; returns the ids changed. */
  async function act(action: JobAction, tenant: string | null, ids: readonly string[], filter?: JobFilter): Promise<string[]> {
    const changed = await db.transaction().execute(async (trx) => {
      if (action === 'cancel') return (await jobCancelMany(trx, { tenant, ids, filter })).jobIds
      if (action === 'delete') return jobDeleteMany(trx, { tenant, ids, filter })
      return jobRunAgainMany(trx, { tenant, ids, filter, action })
    })
    // once the cancel committed: what claims and retries in flight moved where it could not see
    if (action === 'cancel') await jobCancelSweep(db, changed)
    return changed
  }

  /** One job: acts, or says why not (404 when absent, 409 naming its status). */
  async function actOnOne(action: JobAction, id: string, allowed: string): Promise<Job | undefined> {
    const tenant = await tenantFor(id)
    const changed = await act(action, tenant, [id])
    if (action === 'delete' && changed.length > 0) return undefined
    const job = await view(tenant, id)
    if (changed.length === 0) {
      // its status allows the action, but an execution of it is still due or held (a cancelled job whose last run has not ended yet)
      if (action !== 'cancel' && ACTION_STATUSES[action].includes(job.status)) {
        throw new InvalidStateError(
          `job ${id} is ${job.status}, but an execution of it is still waiting or held by a worker; it can be ${DONE[action]} once that has ended`,
        )
      }
      throw new InvalidStateError(`job ${id} is ${job.status}; only ${allowed} jobs can be ${DONE[action]}`)
    }
    return job
  }

  const ops: JobOperations = {
    async listJobs(params = {}, ...extra: unknown[]) {
      assertNoMore('listJobs', ['params'], extra)
      assertKnownFields(params, LIST_JOBS_FIELDS, 'listJobs params')
      const limit = limitOf(params.limit)
      const beforeId = params.cursor === undefined ? undefined : decodeCursor(params.cursor, UUID)
      const items = await jobList(db, { ...toFilter(own, params), limit: limit + 1, beforeId })
      const page = items.slice(0, limit)
      const last = page[page.length - 1]
      return { items: page, nextCursor: items.length > limit && last ? encodeCursor(last.id) : null }
    },

    async *exportJobs(filter = {}, ...extra: unknown[]) {
      assertNoMore('exportJobs', ['filter'], extra)
      assertKnownFields(filter, LIST_FILTER_FIELDS, 'exportJobs filter')
      const f = toFilter(own, filter)
      let beforeId: string | undefined
      for (;;) {
        const items = await jobList(db, { ...f, limit: 500, beforeId })
        yield* items
        const last = items[items.length - 1]
        if (items.length < 500 || !last) return
        beforeId = last.id
      }
    },

    async retryJob(id, ...extra: unknown[]) {
      assertNoMore('retryJob', ['id'], extra, RUNS_IN_OWN_TRANSACTION)
      return (await actOnOne('retry', id, 'FAILED, EXPIRED or CANCELLED')) as Job
    },
    async rerunJob(id, ...extra: unknown[]) {
      assertNoMore('rerunJob', ['id'], extra, RUNS_IN_OWN_TRANSACTION)
      return (await actOnOne('rerun', id, 'finished (COMPLETED, FAILED, EXPIRED or CANCELLED)')) as Job
    },
    async deleteJob(id, ...extra: unknown[]) {
      assertNoMore('deleteJob', ['id'], extra, RUNS_IN_OWN_TRANSACTION)
      await actOnOne('delete', id, 'finished (COMPLETED, FAILED, EXPIRED or CANCELLED)')
    },

    async tenantOfJob(id, ...extra: unknown[]) {
      assertNoMore('tenantOfJob', ['id'], extra)
      assertUuid(id, 'id')
      return own ?? jobTenantOf(db, id)
    },

    async tenantOfExecution(id, ...extra: unknown[]) {
      assertNoMore('tenantOfExecution', ['id'], extra)
      assertUuid(id, 'id')
      return own ?? executionTenantOf(db, id)
    },

    async bulkJobs(params, ...extra: unknown[]) {
      assertNoMore('bulkJobs', ['params'], extra, RUNS_IN_OWN_TRANSACTION)
      assertKnownFields(params, BULK_JOBS_FIELDS, 'bulkJobs params')
      const { action } = params
      if (!BULK_ACTIONS.includes(action)) throw fail('action', `action must be one of ${BULK_ACTIONS.join(', ')}`)
      const limit = params.limit ?? BULK_LIMIT_MAX
      if (!Number.isInteger(limit) || limit < 1 || limit > BULK_LIMIT_MAX) throw fail('limit', `limit must be an integer from 1 to ${BULK_LIMIT_MAX}`)
      const filter = bulkFilter(own, params.filter)
      if (params.after !== undefined) assertUuid(params.after, 'after')
      const ids = await jobIdsForAction(db, { filter, action, limit, afterId: params.after })
      // the filter again when acting: a job that changed since its id was read no longer matches
      const changed = await act(action, filter.tenant, ids, filter)
      const lastId = ids[ids.length - 1] ?? null
      // with a walk's position, what is left after this call's last job; without, all that still matches
      const afterId = params.after === undefined ? undefined : (lastId ?? params.after)
      const remaining = await jobCountForAction(db, { filter, action, afterId })
      return { action, matched: ids.length, changed: changed.length, remaining, lastId }
    },
  }
  return ops
}
