/**
 * Tenant operations (client.tenants): list tenants with settings, view one, and set its fair-share
 * weight and admission quotas (migrations/0016_fair_share_and_quotas.sql). They act for every
 * tenant: the REST API offers them to operator keys only. A change applies to this process's next
 * submit at once and to other processes' within a second.
 */
import type { Kysely } from 'kysely'
import type { DB } from './db/schema.ts'
import { forgetQuotaTenants } from './db/queries/admission.ts'
import { tenantList, tenantNames, tenantUpdate, type TenantPatch, type TenantView } from './db/queries/tenants.ts'
import { ValidationError } from './errors.ts'
import { TENANT_RULE, isTenantName } from './core/names.ts'
import { assertKnownFields, assertNoMoreArguments, RUNS_ON_CLIENT, type FieldSet } from './core/known-fields.ts'

export type { TenantPatch, TenantView }

export const WEIGHT_MIN = 0.001
export const WEIGHT_MAX = 1000
export const MAX_PENDING_MAX = 1_000_000_000
export const SUBMITS_PER_SECOND_MIN = 0.001
export const SUBMITS_PER_SECOND_MAX = 1_000_000

export interface TenantAdmin {
  /** Tenants with settings, by name, with their pending and running executions. */
  list(): Promise<TenantView[]>
  /** One tenant (weight 1 and no quotas when it has no settings). */
  view(name: string): Promise<TenantView>
  /** Changes the given settings (null removes a quota); the rest stay as they are. */
  update(name: string, patch: TenantPatch): Promise<TenantView>
  /** Names of the tenants that have jobs, settings or an API key, in order, at most `limit` (default 1000). */
  names(limit?: number): Promise<string[]>
}

/** The settings a patch may change; any other is refused, as REST refuses it: a misspelt `weigth` would be dropped. */
const PATCH_FIELDS: FieldSet<TenantPatch> = { weight: true, maxPending: true, maxSubmitsPerSecond: true }

function invalid(path: string, message: string): never {
  throw new ValidationError(message, [{ path, message }])
}

/** The rule every submit holds a tenant to: settings for a name no job can have would apply to nothing. */
function assertTenantName(name: string): void {
  if (typeof name !== 'string' || !isTenantName(name)) invalid('name', `tenant must be ${TENANT_RULE}, got ${JSON.stringify(name)}`)
}

/** Checks a patch, naming the field and the range it must be in, or a field it does not know. */
export function assertTenantPatch(patch: TenantPatch): void {
  assertKnownFields(patch, PATCH_FIELDS, 'tenant patch')
  const { weight, maxPending, maxSubmitsPerSecond } = patch
  if (weight === undefined && maxPending === undefined && maxSubmitsPerSecond === undefined) {
    invalid('', 'give at least one of weight, maxPending and maxSubmitsPerSecond')
  }
  if (weight !== undefined && !(typeof weight === 'number' && weight >= WEIGHT_MIN && weight <= WEIGHT_MAX)) {
    invalid('weight', `weight must be a number from ${WEIGHT_MIN} to ${WEIGHT_MAX} (got ${String(weight)})`)
  }
  if (maxPending != null && !(Number.isInteger(maxPending) && maxPending >= 0 && maxPending <= MAX_PENDING_MAX)) {
    invalid('maxPending', `maxPending must be an integer from 0 to ${MAX_PENDING_MAX}, or null for no quota (got ${String(maxPending)})`)
  }
  if (
    maxSubmitsPerSecond != null &&
    !(typeof maxSubmitsPerSecond === 'number' && maxSubmitsPerSecond >= SUBMITS_PER_SECOND_MIN && maxSubmitsPerSecond <= SUBMITS_PER_SECOND_MAX)
  ) {
    invalid(
      'maxSubmitsPerSecond',
      `maxSubmitsPerSecond must be a number from ${SUBMITS_PER_SECOND_MIN} to ${SUBMITS_PER_SECOND_MAX}, or null for no quota (got ${String(maxSubmitsPerSecond)})`,
    )
  }
}

export function tenantAdmin(db: Kysely<DB>): TenantAdmin {
  const view = async (name: string): Promise<TenantView> => {
    assertTenantName(name)
    const [t] = await tenantList(db, { only: name })
    if (!t) throw new Error(`tenant ${name} missing from its own listing`)
    return t
  }
  /** Refuses an argument past those `call` takes (`{ trx }` among them: these calls run on the client's connections). */
  const takesOnly = (call: string, takes: readonly string[], extra: readonly unknown[]) =>
    assertNoMoreArguments(`tenants.${call}`, takes, extra, RUNS_ON_CLIENT)
  return {
    async list(...extra: unknown[]) {
      takesOnly('list', [], extra)
      return tenantList(db)
    },
    async view(name, ...extra: unknown[]) {
      takesOnly('view', ['name'], extra)
      return view(name)
    },
    async names(limit = 1000, ...extra: unknown[]) {
      takesOnly('names', ['limit'], extra)
      return tenantNames(db, { limit })
    },
    async update(name, patch, ...extra: unknown[]) {
      takesOnly('update', ['name', 'patch'], extra)
      assertTenantName(name)
      assertTenantPatch(patch)
      await tenantUpdate(db, name, patch)
      forgetQuotaTenants(db)
      return view(name)
    },
  }
}
