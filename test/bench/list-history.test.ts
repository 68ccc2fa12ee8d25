/**
 * The list scenario's history (src/bench/list-history.ts) and the job list over it: the history
 * is written once (a rerun adds nothing, an interrupted seeding is completed), and each status
 * filter of the list (some read through the candidates of db/queries/job-candidates.ts) returns
 * exactly the jobs that read that status, newest first, each once.
 */
import { sql } from 'kysely'
import { beforeAll, describe, expect, it } from 'vitest'
import { historyLayout, LIST_TENANTS, writeListHistory } from '../../src/bench/list-history.ts'
import { JOB_STATUSES, type JobStatus } from '../../src/core/job-status.ts'
import type { Job } from '../../src/core/job.ts'
import { jobList } from '../../src/db/queries/job-views.ts'
import { useTestDb } from '../db.ts'

const t = useTestDb({ truncate: false })
const ROWS = 10_000

async function counts(): Promise<{ jobs: number; executions: number; triggers: number; keys: number }> {
  const { rows } = await sql<{ jobs: number; executions: number; triggers: number; keys: number }>`
    select (select count(*) from pgsched.jobs)::int as jobs, (select count(*) from pgsched.executions)::int as executions,
           (select count(*) from pgsched.triggers)::int as triggers, (select count(*) from pgsched.job_idempotency_keys)::int as keys`.execute(t.db)
  return rows[0] as { jobs: number; executions: number; triggers: number; keys: number }
}

/** Every job of `tenant` matching `status`, page by page (limit 500). */
async function listAll(tenant: string, status?: JobStatus): Promise<Job[]> {
  const all: Job[] = []
  for (let beforeId: string | undefined; ; ) {
    const page = await jobList(t.db, { tenant, limit: 500, beforeId, status })
    all.push(...page)
    if (page.length < 500) return all
    beforeId = page[page.length - 1]?.id
  }
}

describe('the list history', () => {
  beforeAll(async () => {
    await writeListHistory(t.db, ROWS, () => undefined)
  })

  it('is written once: a rerun adds nothing, and a seeding interrupted after some chunks is completed', async () => {
    const l = historyLayout(ROWS)
    const full = await counts()
    expect(full).toMatchObject({ executions: ROWS, jobs: l.oneTimeJobs + l.recurringJobs, triggers: l.recurringJobs })
    expect(full.keys).toBeGreaterThan(0)
    await writeListHistory(t.db, ROWS, () => undefined)
    expect(await counts()).toEqual(full)
    // as if the seeding had stopped before the recurring jobs' chunk committed
    await sql`delete from pgsched.execution_history where job_id in (select job_id from pgsched.triggers);
              delete from pgsched.jobs where id in (select job_id from pgsched.triggers);
              delete from pgsched.triggers;
              delete from public.bench_list_seed where chunk in ('recurring 0', 'vacuumed')`.execute(t.db)
    expect((await counts()).executions).toBeLessThan(ROWS)
    await writeListHistory(t.db, ROWS, () => undefined)
    expect(await counts()).toEqual(full)
  })

  it('refuses to extend a history seeded for another size', async () => {
    await expect(writeListHistory(t.db, ROWS * 2, () => undefined)).rejects.toThrow(`seeded for ${ROWS} rows, not ${ROWS * 2}`)
  })

  it('holds every status, and each status filter lists exactly the jobs that read it, newest first, once each', async () => {
    const seen = new Set<string>()
    for (const tenant of LIST_TENANTS) {
      const all = await listAll(tenant)
      const byStatus = new Map<string, string[]>()
      for (const job of all) byStatus.set(job.status, [...(byStatus.get(job.status) ?? []), job.id])
      for (const status of byStatus.keys()) seen.add(status)
      for (const status of JOB_STATUSES) {
        const listed = (await listAll(tenant, status)).map((j) => j.id)
        expect({ tenant, status, listed }).toEqual({ tenant, status, listed: byStatus.get(status) ?? [] })
      }
    }
    expect([...seen].sort()).toEqual([...JOB_STATUSES].sort())
  })
})
