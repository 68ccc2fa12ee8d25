/** The JSON of a tenant's settings (GET /v1/tenants and PATCH /v1/tenants/{name}) and the patch body. */
import { Type, type Static } from '@fastify/type-provider-typebox'
import { MAX_PENDING_MAX, SUBMITS_PER_SECOND_MAX, SUBMITS_PER_SECOND_MIN, WEIGHT_MAX, WEIGHT_MIN } from '../../tenant-admin.ts'
import { TENANT_PATTERN, TENANT_RULE } from '../../core/names.ts'
import { Nullable } from './common.ts'

const weightDescription = 'Turns per round in fair-share queues: a tenant of weight 2 gets twice the starts of one of weight 1 at the same priority.'
const maxPendingDescription =
  "Most pending executions of the tenant's own jobs (due now or later, every queue; its webhook deliveries, type pgsched.webhook, are left out); a submit beyond it gets 429. 0 refuses every submit; null: no quota."
const rateDescription = 'Most jobs submitted per second (a token bucket holding one second); a submit beyond it gets 429. Null: no quota.'

export const TenantSchema = Type.Object(
  {
    name: Type.String(),
    weight: Type.Number({ minimum: WEIGHT_MIN, maximum: WEIGHT_MAX, description: weightDescription }),
    maxPending: Nullable(Type.Integer({ minimum: 0, maximum: MAX_PENDING_MAX, description: maxPendingDescription })),
    maxSubmitsPerSecond: Nullable(Type.Number({ minimum: SUBMITS_PER_SECOND_MIN, maximum: SUBMITS_PER_SECOND_MAX, description: rateDescription })),
    pending: Type.Integer({ description: 'Pending executions of the tenant now (every queue), its webhook deliveries among them.' }),
    running: Type.Integer({ description: 'Running executions of the tenant now.' }),
  },
  { $id: 'Tenant', description: "A tenant's fair-share weight and admission quotas, with its live figures." },
)

export type TenantJson = Static<typeof TenantSchema>

export const TenantRef = Type.Unsafe<TenantJson>(Type.Ref('Tenant'))

export const TenantListSchema = Type.Object({ items: Type.Array(TenantRef) }, { $id: 'TenantList', description: 'Every tenant with a weight or a quota set.' })

export const TenantListRef = Type.Unsafe<Static<typeof TenantListSchema>>(Type.Ref('TenantList'))

export const TenantParams = Type.Object(
  {
    name: Type.String({
      minLength: 1,
      maxLength: 128,
      // the names API keys can have (a setting for another name would bind no one)
      pattern: TENANT_PATTERN,
      'x-expected': `a tenant name: ${TENANT_RULE}`,
      description: 'Tenant name.',
    }),
  },
  { additionalProperties: false },
)

export const TenantPatchBody = Type.Object(
  {
    weight: Type.Optional(
      Type.Number({ minimum: WEIGHT_MIN, maximum: WEIGHT_MAX, 'x-expected': `a number from ${WEIGHT_MIN} to ${WEIGHT_MAX}`, description: weightDescription }),
    ),
    maxPending: Type.Optional(
      Nullable(
        Type.Integer({
          minimum: 0,
          maximum: MAX_PENDING_MAX,
          'x-expected': `an integer from 0 to ${MAX_PENDING_MAX}, or null for no quota`,
          description: maxPendingDescription,
        }),
      ),
    ),
    maxSubmitsPerSecond: Type.Optional(
      Nullable(
        Type.Number({
          minimum: SUBMITS_PER_SECOND_MIN,
          maximum: SUBMITS_PER_SECOND_MAX,
          'x-expected': `a number from ${SUBMITS_PER_SECOND_MIN} to ${SUBMITS_PER_SECOND_MAX}, or null for no quota`,
          description: rateDescription,
        }),
      ),
    ),
  },
  { $id: 'UpdateTenantRequest', additionalProperties: false, minProperties: 1, description: 'The settings to change; at least one. Null removes a quota.' },
)

export const TenantPatchBodyRef = Type.Unsafe<Static<typeof TenantPatchBody>>(Type.Ref('UpdateTenantRequest'))

export { tenantToJson } from '../json.ts'
