/**
 * An event stream open when the API closes is logged and counted once, as any request: its route
 * reports its end, and Fastify runs onResponse for it too as the server closes under it.
 */
import { describe, expect, it } from 'vitest'
import { buildApp } from '../../src/api/app.ts'
import { createApiKey } from '../../src/api/auth.ts'
import { capturingLogger } from '../log-capture.ts'
import { useTestDb } from '../db.ts'
import { waitFor } from '../wait-for.ts'

const t = useTestDb()

describe('an event stream ended by the API closing', () => {
  it('is logged once, as any request', async () => {
    const logged = capturingLogger<Record<string, unknown>>('info')
    const app = buildApp({ db: t.db, log: logged.log })
    await app.listen({ host: '127.0.0.1', port: 0 })
    const address = app.server.address()
    const port = typeof address === 'object' && address ? address.port : 0
    const key = (await createApiKey(t.db, { tenant: 'a' })).key
    const c = new AbortController()
    const res = await fetch(`http://127.0.0.1:${port}/v1/events`, { headers: { authorization: `Bearer ${key}`, 'x-request-id': 'dbl' }, signal: c.signal })
    expect(res.status).toBe(200)
    await app.close()
    await waitFor(() => logged.lines.some((l) => l.requestId === 'dbl' && l.msg === 'request completed'), { what: 'a line' })
    c.abort()
    expect(logged.lines.filter((l) => l.requestId === 'dbl' && l.msg === 'request completed')).toHaveLength(1)
  })
})
