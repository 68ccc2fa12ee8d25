import { describe, expect, it } from 'vitest'
import { createClient } from '../../src/client.ts'
import { MAX_TENANT_CLIENTS, TenantClients } from '../../src/api/tenant-clients.ts'
import { useTestDb } from '../db.ts'

const t = useTestDb()

describe('TenantClients', () => {
  it('makes one client per tenant and key, scoped to that tenant, and keeps at most MAX_TENANT_CLIENTS', async () => {
    const clients = new TenantClients(createClient({ db: t.db, tenant: 'default' }))
    const a = clients.get('acme', 'k1')
    expect(clients.get('acme', 'k1')).toBe(a)
    expect(clients.get('acme', 'k2')).not.toBe(a)
    expect(a.tenant).toBe('acme')
    const { job } = await a.submitJob({ type: 'x' })
    expect(job.tenant).toBe('acme')
    expect((await clients.get('other', 'k1').listJobs()).items).toEqual([])
    for (let i = 0; i < MAX_TENANT_CLIENTS; i++) clients.get(`t${i}`, 'k')
    // the least recently used is gone: a new one is made for it
    expect(clients.get('acme', 'k1')).not.toBe(a)
  })
})
