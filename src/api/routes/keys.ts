/**
 * /v1/keys: API keys for operator keys (other keys get 403): list them (never their secret), create a
 * tenant key (its secret in the answer, once) and revoke one. A revoked key stops working at once in
 * this API process and within the key cache's time (5 s) in the others.
 * Operator keys are made only with `scheduler keys create --operator`, which needs the database.
 * Each creation and revocation is logged (info) with the key it concerns and the key that asked.
 */
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import { NotFoundError } from '../../errors.ts'
import { API_KEY_POSITION } from '../../db/queries/api-keys.ts'
import { decodeCursor, encodeCursor } from '../../paging.ts'
import { CommonErrors, ErrorResponses, documented } from '../schemas/error.ts'
import { ApiKeyListRef, ApiKeyRef, CreateApiKeyBodyRef, CreatedApiKeyRef, KeysQuery, apiKeyToJson } from '../schemas/key.ts'
import { Type } from '@fastify/type-provider-typebox'
import { Uuid } from '../schemas/common.ts'
import { assertOperator, type RouteDeps } from './deps.ts'

const security = [{ apiKey: [] }]
const errors = { ...CommonErrors, 403: ErrorResponses[403] }
const WHY = 'API keys give access to tenants'
const KeyParams = Type.Object({ id: Uuid('Key id.') }, { additionalProperties: false })

/** Registers the /keys routes (mounted under /v1 behind authentication). */
export const keyRoutes: FastifyPluginAsyncTypebox<RouteDeps> = async (app, deps) => {
  app.get(
    '/keys',
    {
      schema: {
        operationId: 'listApiKeys',
        tags: ['keys'],
        summary: 'List API keys',
        description:
          'The API keys (or one tenant’s), oldest first, a page at a time (`limit`, default 50; pass `nextCursor` as `cursor` for the next), revoked ones included, with when each was last used. Never a secret.',
        security,
        querystring: KeysQuery,
        response: { 200: documented(ApiKeyListRef, 'The keys.'), ...errors },
      },
    },
    async (request) => {
      assertOperator(request, WHY)
      const { tenant, limit = 50, cursor } = request.query
      const after = cursor === undefined ? undefined : decodeCursor(cursor, API_KEY_POSITION)
      const page = await deps.keys.list({ tenant, limit, after })
      return { items: page.items.map(apiKeyToJson), nextCursor: page.next === null ? null : encodeCursor(page.next) }
    },
  )

  app.post(
    '/keys',
    {
      schema: {
        operationId: 'createApiKey',
        tags: ['keys'],
        summary: 'Create a tenant API key',
        description:
          'A new key for the tenant; the answer carries the key itself, once (only its SHA-256 is stored). ' +
          'Operator keys are made with `scheduler keys create --operator` only.',
        security,
        body: CreateApiKeyBodyRef,
        response: { 201: documented(CreatedApiKeyRef, 'The key, with its secret.'), ...errors },
      },
    },
    async (request, reply) => {
      assertOperator(request, WHY)
      const created = await deps.keys.create({ tenant: request.body.tenant, name: request.body.name ?? null })
      // who made which key, for the audit trail (the key itself is never logged)
      request.log.info({ keyId: created.id, tenant: created.tenant, byKeyId: request.identity?.keyId }, 'API key created')
      reply.code(201)
      return { ...apiKeyToJson(created), key: created.key }
    },
  )

  app.post(
    '/keys/:id/revoke',
    {
      schema: {
        operationId: 'revokeApiKey',
        tags: ['keys'],
        summary: 'Revoke an API key',
        description:
          'The key stops working: at once in the API process that answers, within the key cache’s time (5 s) in the others. ' +
          'Revoking a revoked key keeps its first revocation time. The calling key may revoke itself.',
        security,
        params: KeyParams,
        response: { 200: documented(ApiKeyRef, 'The key, revoked.'), ...errors, 404: ErrorResponses[404] },
      },
    },
    async (request) => {
      assertOperator(request, WHY)
      const revoked = await deps.keys.revoke(request.params.id)
      if (!revoked) throw new NotFoundError(`API key ${request.params.id} not found`)
      request.log.info({ keyId: revoked.id, tenant: revoked.tenant, operator: revoked.operator, byKeyId: request.identity?.keyId }, 'API key revoked')
      return apiKeyToJson(revoked)
    },
  )
}
