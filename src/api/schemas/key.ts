/** The JSON of an API key (GET /v1/keys, POST /v1/keys, POST /v1/keys/{id}/revoke) and the create body. */
import { Type, type Static } from '@fastify/type-provider-typebox'
import { TENANT_PATTERN, TENANT_RULE } from '../../core/names.ts'
import type { ApiKey } from '../../db/queries/api-keys.ts'
import { Cursor, DateTime, Limit, Nullable, Uuid } from './common.ts'

const tenantName = (description: string) =>
  Type.String({ minLength: 1, maxLength: 128, pattern: TENANT_PATTERN, 'x-expected': `a tenant name: ${TENANT_RULE}`, description })

const keyFields = {
  id: Uuid('Key id (what `scheduler keys revoke` and POST /v1/keys/{id}/revoke take).'),
  tenant: Type.String({ description: 'The tenant the key acts for.' }),
  name: Nullable(Type.String({ description: 'A label to recognise the key by.' })),
  keyPrefix: Type.String({ description: 'The first characters of the key: enough to recognise it, not to use it.' }),
  operator: Type.Boolean({ description: 'An operator key: sees every tenant and changes queues, tenants and keys.' }),
  createdAt: DateTime('When the key was created.'),
  lastUsedAt: Nullable(DateTime('When a request last authenticated with it, to within a minute; null: never recorded.')),
  revokedAt: Nullable(DateTime('When it was revoked; null: it works.')),
}

export const ApiKeySchema = Type.Object(keyFields, { $id: 'ApiKey', description: 'An API key, never its secret (only its SHA-256 is stored).' })
export type ApiKeyJson = Static<typeof ApiKeySchema>
export const ApiKeyRef = Type.Unsafe<ApiKeyJson>(Type.Ref('ApiKey'))

export const ApiKeyListSchema = Type.Object(
  {
    items: Type.Array(ApiKeyRef),
    nextCursor: Nullable(Type.String({ description: 'Pass as `cursor` for the next page; null on the last page.' })),
  },
  { $id: 'ApiKeyList', description: 'A page of API keys, oldest first, revoked ones included.' },
)
export const ApiKeyListRef = Type.Unsafe<Static<typeof ApiKeyListSchema>>(Type.Ref('ApiKeyList'))

export const CreatedApiKeySchema = Type.Object(
  { ...keyFields, key: Type.String({ description: 'The key itself: shown only in this answer, never again. Send it as `Authorization: Bearer <key>`.' }) },
  { $id: 'CreatedApiKey', description: 'A new API key with its secret, shown once.' },
)
export const CreatedApiKeyRef = Type.Unsafe<Static<typeof CreatedApiKeySchema>>(Type.Ref('CreatedApiKey'))

export const CreateApiKeyBody = Type.Object(
  {
    tenant: tenantName('The tenant the key acts for.'),
    name: Type.Optional(
      Type.String({ minLength: 1, maxLength: 200, 'x-expected': 'a label of 1 to 200 characters', description: 'A label to recognise the key by.' }),
    ),
  },
  {
    $id: 'CreateApiKeyRequest',
    additionalProperties: false,
    description:
      'A tenant key. Operator keys are created with `scheduler keys create --tenant <name> --operator`, which needs the database itself: a leaked operator key cannot make another.',
  },
)
export const CreateApiKeyBodyRef = Type.Unsafe<Static<typeof CreateApiKeyBody>>(Type.Ref('CreateApiKeyRequest'))

export const KeysQuery = Type.Object(
  { tenant: Type.Optional(tenantName("Only this tenant's keys.")), limit: Type.Optional(Limit), cursor: Type.Optional(Cursor) },
  { additionalProperties: false },
)

export function apiKeyToJson(k: ApiKey): ApiKeyJson {
  return {
    id: k.id,
    tenant: k.tenant,
    name: k.name,
    keyPrefix: k.keyPrefix,
    operator: k.operator,
    createdAt: k.createdAt.toISOString(),
    lastUsedAt: k.lastUsedAt?.toISOString() ?? null,
    revokedAt: k.revokedAt?.toISOString() ?? null,
  }
}
