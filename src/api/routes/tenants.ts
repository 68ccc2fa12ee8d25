/**
 * /v1/tenants: each tenant's fair-share weight and admission quotas, with its pending and running
 * executions. Settings of one tenant bound what it may do to the others, so these routes answer
 * operator keys only (`scheduler keys create --tenant <name> --operator`); other keys get 403.
 */
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import type { FastifyRequest } from 'fastify'
import { CommonErrors, ErrorResponses, documented } from '../schemas/error.ts'
import { TenantListRef, TenantParams, TenantPatchBodyRef, TenantRef, tenantToJson } from '../schemas/tenant.ts'
import { assertOperator, type RouteDeps } from './deps.ts'

const security = [{ apiKey: [] }]
const errors = { ...CommonErrors, 403: ErrorResponses[403] }
const tenant = documented(TenantRef, 'The tenant (one without settings answers weight 1 and no quotas).')

/** Registers the /tenants routes (mounted under /v1 behind authentication). */
export const tenantRoutes: FastifyPluginAsyncTypebox<RouteDeps> = async (app, deps) => {
  const tenantsFor = (request: FastifyRequest) => {
    const client = deps.clientFor(request)
    assertOperator(request, 'tenant quotas and weights bound every tenant')
    return client.tenants
  }

  app.get(
    '/tenants',
    {
      schema: {
        operationId: 'listTenants',
        tags: ['tenants'],
        summary: 'List tenants with settings',
        description: 'Every tenant with a weight or a quota set, with its pending and running executions.',
        security,
        response: { 200: documented(TenantListRef, 'The tenants.'), ...errors },
      },
    },
    async (request) => ({ items: (await tenantsFor(request).list()).map(tenantToJson) }),
  )

  app.get(
    '/tenants/:name',
    {
      schema: {
        operationId: 'viewTenant',
        tags: ['tenants'],
        summary: 'View a tenant',
        description: 'A tenant without settings has weight 1 and no quotas.',
        security,
        params: TenantParams,
        response: { 200: tenant, ...errors },
      },
    },
    async (request) => tenantToJson(await tenantsFor(request).view(request.params.name)),
  )

  app.patch(
    '/tenants/:name',
    {
      schema: {
        operationId: 'updateTenant',
        tags: ['tenants'],
        summary: "Set a tenant's weight and quotas",
        description:
          'Fields left out stay as they are; null removes a quota. A submit over a quota gets 429 with Retry-After and writes nothing. ' +
          'Applies to the next submit in this API process and within a second everywhere else.',
        security,
        params: TenantParams,
        body: TenantPatchBodyRef,
        response: { 200: tenant, ...errors },
      },
    },
    async (request) => tenantToJson(await tenantsFor(request).update(request.params.name, request.body)),
  )
}
