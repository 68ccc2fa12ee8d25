/**
 * SQL for tenant settings (migration 0016): the fair-share weight and the admission quotas, with
 * each tenant's pending and running executions.
 */
import { sql, type Kysely } from 'kysely'
import type { DB } from '../schema.ts'

/** A tenant as operators see it: its settings and live figures. */
export interface TenantView {
  name: string
  /** Turns per round in fair-share queues (default 1). */
  weight: number
  /** Most pending executions of the tenant's own jobs (webhook deliveries left out); null: no quota. */
  maxPending: number | null
  /** Most submits per second; null: no quota. */
  maxSubmitsPerSecond: number | null
  /** Pending executions (due now or later), every queue. */
  pending: number
  running: number
}

/** The settings to change: a field left out stays as it is; null removes a quota. */
export interface TenantPatch {
  weight?: number
  maxPending?: number | null
  maxSubmitsPerSecond?: number | null
}

interface TenantRow {
  name: string
  weight: number
  max_pending: number | null
  max_submits_per_second: number | null
  pending: number
  running: number
}

/**
 * Tenants with settings (or just `only`, with or without), by name. A tenant whose settings are back
 * to the defaults (weight 1, no quota) keeps its row (its submit bucket) but has no settings to list.
 */
export async function tenantList(db: Kysely<DB>, params: { only?: string } = {}): Promise<TenantView[]> {
  const only = params.only ?? null
  const { rows } = await sql<TenantRow>`
    with named as (
      select name, weight, max_pending, max_submits_per_second from pgsched.tenants
       where (${only}::text is null and (weight <> 1 or max_pending is not null or max_submits_per_second is not null))
          or name = ${only}::text
      union all
      select ${only}::text, 1, null, null where ${only}::text is not null and not exists (select 1 from pgsched.tenants where name = ${only}::text)
    )
    select n.name, n.weight, n.max_pending, n.max_submits_per_second,
           (select count(*) from pgsched.executions e where e.state = 'pending' and e.tenant = n.name)::float8 as pending,
           (select count(*) from pgsched.executions e where e.state = 'running' and e.tenant = n.name)::float8 as running
      from named n
     order by n.name`.execute(db)
  return rows.map((r) => ({
    name: r.name,
    weight: r.weight,
    maxPending: r.max_pending,
    maxSubmitsPerSecond: r.max_submits_per_second,
    pending: r.pending,
    running: r.running,
  }))
}

/** Creates the tenant's settings row or changes the given fields of it. */
export async function tenantUpdate(db: Kysely<DB>, name: string, patch: TenantPatch): Promise<void> {
  const has = (k: keyof TenantPatch) => patch[k] !== undefined
  await sql`
    insert into pgsched.tenants as t (name, weight, max_pending, max_submits_per_second, updated_at)
    values (${name}::text, coalesce(${patch.weight ?? null}::float8, 1), ${patch.maxPending ?? null}::int, ${patch.maxSubmitsPerSecond ?? null}::float8, now())
    on conflict (name) do update
       set weight = case when ${has('weight')} then excluded.weight else t.weight end,
           max_pending = case when ${has('maxPending')} then excluded.max_pending else t.max_pending end,
           max_submits_per_second = case when ${has('maxSubmitsPerSecond')} then excluded.max_submits_per_second else t.max_submits_per_second end,
           -- a new rate starts with a full bucket
           submit_tokens = case when ${has('maxSubmitsPerSecond')} then null else t.submit_tokens end,
           updated_at = now()`.execute(db)
}

/**
 * The names of tenants that have jobs, settings or an API key not revoked, in order, at most
 * `limit`. The tenants with jobs come from a skip scan of jobs_tenant_list_idx (one index probe
 * per tenant, not a read of every job), stopped after `limit` names.
 */
export async function tenantNames(db: Kysely<DB>, params: { limit: number }): Promise<string[]> {
  const { rows } = await sql<{ name: string }>`
    with recursive seen(name, n) as (
      (select tenant, 1 from pgsched.jobs order by tenant limit 1)
      union all
      select (select j.tenant from pgsched.jobs j where j.tenant > s.name order by j.tenant limit 1), s.n + 1
        from seen s
       where s.name is not null and s.n < ${params.limit}::int
    )
    select name from seen where name is not null
    union
    select name from pgsched.tenants
    union
    select tenant from pgsched.api_keys where revoked_at is null
    order by 1
    limit ${params.limit}::int`.execute(db)
  return rows.map((r) => r.name)
}
