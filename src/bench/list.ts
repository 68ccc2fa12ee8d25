/**
 * The list scenario of `scheduler bench` (`--only list`): how fast the API answers the reads of the
 * jobs page with `historyRows` executions in history (list-history.ts writes them). One API
 * process on the seeded database; each request in LIST_REQUESTS is sent REQUESTS_PER_URL times in
 * a row over HTTP (after WARM_UP_REQUESTS unmeasured ones; fewer if it takes seconds, see
 * BUDGET_MS_PER_URL), and its median and p95 reported.
 *
 * The seeded database is named after its size and partition count, so an interrupted (or failed)
 * seeding resumes in the next run, and `keep` leaves it for the next run (to compare indexes or
 * code on the same history without writing it again); otherwise it is dropped at the end.
 */
import { performance } from 'node:perf_hooks'
import { sql, type Kysely } from 'kysely'
import pg from 'pg'
import { createApiKey } from '../api/auth.ts'
import { migrate } from '../db/migrate.ts'
import { createDb } from '../db/pool.ts'
import type { DB } from '../db/schema.ts'
import { LIST_TENANTS, writeListHistory } from './list-history.ts'
import { freePort } from './probes.ts'
import { spawnApi, type BenchProcess } from './processes.ts'
import type { Row } from './report.ts'
import { figure, quantile } from './stats.ts'

const REQUESTS_PER_URL = 20
const WARM_UP_REQUESTS = 2
/**
 * Time after which a request's repetitions stop (at least MIN_REQUESTS made): a request that takes
 * seconds (a plan that reads every job) is measured a few times, not for minutes.
 */
const BUDGET_MS_PER_URL = 60_000
const MIN_REQUESTS = 3
/** Pages followed (by nextCursor, 50 jobs each) before the deep page is measured. */
const DEEP_PAGES = 20
/** The tenant whose key makes the requests: the largest (55 % of the jobs). */
const TENANT = LIST_TENANTS[0]

/** What the requests may refer to, found on the seeded history before measuring. */
export interface ListContext {
  /** A recurring job of TENANT (so it has many executions). */
  recurringJobId: string
  /** A failed one-time job of TENANT. */
  failedJobId: string
  /** The cursor of page DEEP_PAGES + 1 of GET /v1/jobs, reached by following nextCursor. */
  deepCursor: string
}

/** One measured request: a label for the report, its path (with query) on the API, and whether the 100 ms target applies. */
export interface ListRequest {
  name: string
  path: (c: ListContext) => string
  /**
   * Not held to the target: a page of 500 is bound by building and sending its JSON, not by the
   * database; the failures report reads every failed job of the tenant.
   */
  untargeted?: boolean
}

/** The measured requests; a new endpoint of the jobs page is one more line here. */
export const LIST_REQUESTS: readonly ListRequest[] = [
  { name: 'GET /v1/jobs (first page, 50)', path: () => '/v1/jobs' },
  { name: 'GET /v1/jobs?status=SCHEDULED', path: () => '/v1/jobs?status=SCHEDULED' },
  { name: 'GET /v1/jobs?status=RUNNING', path: () => '/v1/jobs?status=RUNNING' },
  { name: 'GET /v1/jobs?status=PAUSED', path: () => '/v1/jobs?status=PAUSED' },
  { name: 'GET /v1/jobs?status=COMPLETED', path: () => '/v1/jobs?status=COMPLETED' },
  { name: 'GET /v1/jobs?status=FAILED', path: () => '/v1/jobs?status=FAILED' },
  { name: 'GET /v1/jobs?status=EXPIRED', path: () => '/v1/jobs?status=EXPIRED' },
  { name: 'GET /v1/jobs?status=CANCELLED', path: () => '/v1/jobs?status=CANCELLED' },
  { name: 'GET /v1/jobs?type=report.build', path: () => '/v1/jobs?type=report.build' },
  { name: 'GET /v1/jobs?queue=emails', path: () => '/v1/jobs?queue=emails' },
  { name: 'GET /v1/jobs?queue=bulk&status=FAILED', path: () => '/v1/jobs?queue=bulk&status=FAILED' },
  { name: 'GET /v1/jobs?type=… (a type no job has)', path: () => '/v1/jobs?type=no.such.type' },
  { name: `GET /v1/jobs?cursor=… (page ${DEEP_PAGES + 1})`, path: (c) => `/v1/jobs?cursor=${encodeURIComponent(c.deepCursor)}` },
  { name: 'GET /v1/jobs?limit=500', path: () => '/v1/jobs?limit=500', untargeted: true },
  { name: 'GET /v1/jobs/{id} (recurring)', path: (c) => `/v1/jobs/${c.recurringJobId}` },
  { name: 'GET /v1/jobs/{id} (failed)', path: (c) => `/v1/jobs/${c.failedJobId}` },
  { name: 'GET /v1/jobs/{id}/executions (recurring)', path: (c) => `/v1/jobs/${c.recurringJobId}/executions` },
  // the failures page: a report that groups every failed job of the tenant, so it reads them all
  { name: 'GET /v1/failures', path: () => '/v1/failures', untargeted: true },
  { name: 'GET /v1/failures?queue=bulk', path: () => '/v1/failures?queue=bulk', untargeted: true },
]

export interface ListScenario {
  databaseUrl: string
  partitions: number
  historyRows: number
  /** Leave the seeded database for the next run. */
  keep: boolean
  add: (row: Row) => void
  track: <P extends BenchProcess>(p: P) => P
  progress: (line: string) => void
}

async function admin(url: string, statement: string): Promise<void> {
  const client = new pg.Client({ connectionString: url })
  await client.connect()
  try {
    await client.query(statement)
  } finally {
    await client.end()
  }
}

async function getJson(base: string, path: string, key: string): Promise<unknown> {
  const res = await fetch(`${base}${path}`, { headers: { authorization: `Bearer ${key}` } })
  const body = await res.text()
  if (res.status !== 200) throw new Error(`list: GET ${path} answered ${res.status}: ${body.slice(0, 500)}`)
  return JSON.parse(body)
}

/** Seeds (or resumes seeding) the history, then measures every request of LIST_REQUESTS. */
export async function addListRows(o: ListScenario): Promise<void> {
  const name = `pgsched_bench_list_${o.historyRows}_p${o.partitions}`
  const url = new URL(o.databaseUrl)
  url.pathname = `/${name}`
  const exists = await (async () => {
    const client = new pg.Client({ connectionString: o.databaseUrl })
    await client.connect()
    try {
      return (await client.query('select 1 from pg_database where datname = $1', [name])).rowCount === 1
    } finally {
      await client.end()
    }
  })()
  if (!exists) await admin(o.databaseUrl, `create database ${name}`)
  else o.progress(`list: reusing database ${name}`)
  let seeded = false
  const database = createDb({ databaseUrl: url.toString(), poolSize: 4, applicationName: 'pgsched-bench' })
  try {
    // Migrations added since the database was seeded apply to it now (e.g. a new index).
    const t0 = performance.now()
    const { applied } = await migrate({ databaseUrl: url.toString(), partitions: o.partitions })
    if (exists && applied.length > 0) o.progress(`list: applied ${applied.join(', ')} in ${Math.round((performance.now() - t0) / 1000)} s`)
    await writeListHistory(database.db, o.historyRows, o.progress)
    seeded = true
    const key = (await createApiKey(database.db, { tenant: TENANT, name: 'bench list' })).key
    const port = await freePort()
    const api = o.track(spawnApi({ databaseUrl: url.toString(), port }))
    try {
      await api.ready
      const base = `http://127.0.0.1:${port}`
      const context = await listContext(database.db, base, key)
      for (const r of LIST_REQUESTS) {
        o.progress(`list: ${r.name}`)
        const path = r.path(context)
        const started = performance.now()
        const ms: number[] = []
        for (let i = 0; i < WARM_UP_REQUESTS + REQUESTS_PER_URL; i++) {
          if (ms.length >= MIN_REQUESTS && performance.now() - started > BUDGET_MS_PER_URL) break
          const t0 = performance.now()
          await getJson(base, path, key)
          if (i >= WARM_UP_REQUESTS) ms.push(performance.now() - t0)
        }
        const what = `${r.name}, ${o.historyRows.toLocaleString('en-US')} executions in history`
        o.add({ scenario: 'list', metric: `${what}: median of ${ms.length}`, unit: 'ms', figure: figure(ms), target: r.untargeted ? '' : '< 100' })
        o.add({ scenario: 'list', metric: `${what}: p95 of ${ms.length}`, unit: 'ms', figure: figure([quantile(ms, 0.95)]) })
      }
    } finally {
      await api.stop()
    }
  } finally {
    await database.db.destroy()
    // A seeding that failed half-way is kept too: the next run resumes it.
    if (o.keep || !seeded) o.progress(`list: kept database ${name} for the next run`)
    else await admin(o.databaseUrl, `drop database if exists ${name} with (force)`)
  }
}

async function listContext(db: Kysely<DB>, base: string, key: string): Promise<ListContext> {
  const { rows } = await sql<{ recurring: string | null; failed: string | null }>`
    select (select t.job_id from pgsched.triggers t join pgsched.jobs j on j.id = t.job_id
             where j.tenant = ${TENANT} and not t.paused order by t.job_id limit 1)::text as recurring,
           (select e.job_id from pgsched.executions e
             where e.tenant = ${TENANT} and e.state = 'failed' and e.attempt > 0 and e.job_id not in (select job_id from pgsched.triggers)
             limit 1)::text as failed`.execute(db)
  const recurringJobId = rows[0]?.recurring
  const failedJobId = rows[0]?.failed
  if (!recurringJobId || !failedJobId) throw new Error(`list: the history holds no recurring or no failed job of tenant ${TENANT}`)
  let cursor: string | null = null
  for (let page = 0; page < DEEP_PAGES; page++) {
    const path: string = cursor ? `/v1/jobs?cursor=${encodeURIComponent(cursor)}` : '/v1/jobs'
    cursor = ((await getJson(base, path, key)) as { nextCursor: string | null }).nextCursor
    if (!cursor) throw new Error(`list: GET /v1/jobs has fewer than ${DEEP_PAGES + 1} pages`)
  }
  return { recurringJobId, failedJobId, deepCursor: cursor as string }
}
