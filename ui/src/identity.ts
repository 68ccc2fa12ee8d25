/**
 * What the signed-in key may do. GET /v1/tenants answers operator keys only, so its answer
 * tells an operator key (which gets the tenant filter, fed by that list) from a tenant key.
 */
import { createContext } from 'preact'
import { ApiError, call } from './api.ts'

export interface Identity {
  operator: boolean
  /** Tenants with settings (operator keys), for the tenant filter. */
  tenants: string[]
}

export const IdentityContext = createContext<Identity>({ operator: false, tenants: [] })

/** Checks the key (401 throws) and finds out whether it is an operator key. */
export async function loadIdentity(): Promise<Identity> {
  await call('/v1/jobs?limit=1')
  try {
    const { items } = await call<{ items: Array<{ name: string }> }>('/v1/tenants')
    return { operator: true, tenants: items.map((t) => t.name) }
  } catch (err: unknown) {
    if (err instanceof ApiError && err.status === 403) return { operator: false, tenants: [] }
    throw err
  }
}
