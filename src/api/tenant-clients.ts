/**
 * The client each API request acts through: one per tenant and API key, made once and kept (the
 * most recently used MAX_TENANT_CLIENTS). A client is a set of closures over the shared database
 * and submit batcher, so a request need not build its own (dozens of functions per request, a
 * measurable share of a submit's CPU at hundreds of submits a second).
 */
import type { Client } from '../client.ts'

/** Clients kept; the least recently used goes first beyond it. */
export const MAX_TENANT_CLIENTS = 1_000

export class TenantClients {
  private readonly base: Client
  private readonly byKey = new Map<string, Client>()

  constructor(base: Client) {
    this.base = base
  }

  /** The client of `tenant` acting for API key `keyId` (its jobs' createdBy is `api-key:<keyId>`). */
  get(tenant: string, keyId: string): Client {
    const key = `${tenant}\u0000${keyId}`
    let client = this.byKey.get(key)
    if (client) {
      // most recently used last
      this.byKey.delete(key)
    } else {
      client = this.base.withTenant(tenant, `api-key:${keyId}`)
      if (this.byKey.size >= MAX_TENANT_CLIENTS) {
        const oldest = this.byKey.keys().next().value
        if (oldest !== undefined) this.byKey.delete(oldest)
      }
    }
    this.byKey.set(key, client)
    return client
  }
}
