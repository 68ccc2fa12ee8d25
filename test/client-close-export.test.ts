/**
 * close() and the methods that answer at once: after close, withTenant, allTenants and exportJobs
 * throw InvalidStateError (not a rejected promise, which left a TypeError and an unhandled
 * rejection); an export read across close() ends with InvalidStateError at its next step, after
 * close() waited for the step under way, rather than with the driver's error of a closed pool.
 */
import { describe, expect, it } from 'vitest'
import { createClient } from '../src/client.ts'
import { InvalidStateError } from '../src/errors.ts'
import { useTestDb } from './db.ts'

const t = useTestDb()

describe('a client after close()', () => {
  it('refuses its methods that answer at once by throwing InvalidStateError, with no unhandled rejection', async () => {
    const client = createClient({ databaseUrl: t.url })
    await client.close()
    let unhandled = 0
    const onUnhandled = () => unhandled++
    process.on('unhandledRejection', onUnhandled)
    try {
      expect(() => client.withTenant('acme')).toThrow(InvalidStateError)
      expect(() => client.allTenants()).toThrow(InvalidStateError)
      expect(() => client.exportJobs()).toThrow('the pgsched client is closed: exportJobs was called after close()')
      await expect(client.viewJob('01900000-0000-7000-8000-000000000000')).rejects.toThrow(InvalidStateError)
      await new Promise((r) => setTimeout(r, 50))
      expect(unhandled).toBe(0)
    } finally {
      process.off('unhandledRejection', onUnhandled)
    }
  })

  it("ends an export read across close() with InvalidStateError, not with the closed pool's error", async () => {
    const client = createClient({ databaseUrl: t.url, tenant: 'exp' })
    await client.submitJobs(Array.from({ length: 600 }, (_, i) => ({ type: 'exp', payload: { i } })))
    let n = 0
    let closing: Promise<void> | undefined
    const read = (async () => {
      for await (const _ of client.exportJobs()) {
        n++
        if (n === 1) closing = client.close()
      }
    })()
    await expect(read).rejects.toThrow('the pgsched client is closed: exportJobs was read after close()')
    await closing
    expect(n).toBe(1)
  })

  it('lets an export read before close() finish', async () => {
    const client = createClient({ databaseUrl: t.url, tenant: 'exp2' })
    await client.submitJobs(Array.from({ length: 700 }, () => ({ type: 'exp' })))
    let n = 0
    for await (const _ of client.exportJobs()) n++
    expect(n).toBe(700)
    await client.close()
  })
})
