/**
 * What the signed-in key may do, from GET /v1/identity: whether it is an operator key (which gets
 * the tenant filter and the queue controls) and the tenants it may see (the tenant filter's names).
 */
import { createContext } from 'preact'
import { call } from './api.ts'

export interface Identity {
  operator: boolean
  /** The tenants whose jobs the key may see (an operator key: those with jobs, settings or a key), for the tenant filter. */
  tenants: string[]
  /** The id of the key itself (GET /v1/identity's keyId). */
  keyId?: string
}

export const IdentityContext = createContext<Identity>({ operator: false, tenants: [] })

/** Checks the key (401 throws) and finds out whether it is an operator key. */
export async function loadIdentity(): Promise<Identity> {
  const { operator, tenants, keyId } = await call<{ operator: boolean; tenants: string[]; keyId: string }>('/v1/identity')
  return { operator, tenants, keyId }
}
