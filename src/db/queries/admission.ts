/**
 * Admission quotas per tenant (migrations/0016_fair_share_and_quotas.sql): before a submit writes
 * anything, pgsched.admit_submits() decides under the tenant's row lock how many of its jobs are
 * admitted. Only tenants with a quota pay for it: the names of those tenants are read at most once
 * a second per database handle (so a quota set in SQL or by another process applies within a
 * second; one set through this process's tenant operations at once).
 */
import { sql, type Kysely } from 'kysely'
import type { QuotaName } from '../../errors.ts'
import type { DB } from '../schema.ts'
import { PREPARE } from '../pool.ts'
import { perDbCache } from './per-db-cache.ts'

/** How long the names of the tenants with quotas are used. */
export const QUOTA_TENANTS_TTL_MS = 1_000

/** Why submits were refused. */
export interface QuotaRejection {
  quota: QuotaName
  limit: number
  retryAfterMs: number
  message: string
}

const quotaTenants = perDbCache(QUOTA_TENANTS_TTL_MS, async (db) => {
  const { rows } = await sql<{ name: string }>`${sql.raw(PREPARE)}
    select name from pgsched.tenants where max_pending is not null or max_submits_per_second is not null`.execute(db)
  return new Set(rows.map((r) => r.name))
})

/** Whether `tenant` has an admission quota (as read in the last second through `db`). */
export async function tenantHasQuota(db: Kysely<DB>, tenant: string): Promise<boolean> {
  return (await quotaTenants.get(db)).has(tenant)
}

/** Forgets what was read through `db` (after this process changed a tenant's quotas). */
export function forgetQuotaTenants(db: Kysely<DB>): void {
  quotaTenants.forget(db)
}

/**
 * How many of `n` submits of `tenant` are admitted now (`partial`: as many as fit; otherwise all
 * or none), and why the others are not. Run it in the transaction that writes the admitted ones:
 * it holds the tenant's row lock until that transaction ends.
 */
export async function admitSubmits(
  trx: Kysely<DB>,
  tenant: string,
  n: number,
  partial: boolean,
): Promise<{ admitted: number; rejection: QuotaRejection | null }> {
  const { rows } = await sql<{ admitted: number; quota: QuotaName | null; quota_value: number | null; retry_after_ms: number | null; message: string | null }>`
    ${sql.raw(PREPARE)} select * from pgsched.admit_submits(${tenant}::text, ${n}::int, ${partial}::boolean)`.execute(trx)
  const r = rows[0]
  if (!r) throw new Error('pgsched.admit_submits returned no row')
  const rejection =
    r.admitted < n && r.quota !== null
      ? { quota: r.quota, limit: r.quota_value ?? 0, retryAfterMs: r.retry_after_ms ?? 1000, message: r.message ?? `tenant over its ${r.quota} quota` }
      : null
  return { admitted: r.admitted, rejection }
}
