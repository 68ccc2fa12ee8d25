import { describe, expect, it } from 'vitest'
import { createClient } from '../../src/client.ts'
import { useTestDb } from '../db.ts'
import { useTestApi } from './helpers.ts'

const t = useTestDb()
const api = useTestApi(t)

describe('GET /v1/jobs pagination', () => {
  it('lists 1,234 jobs 100 at a time while 200 more arrive, missing and repeating none', async () => {
    const key = await api.keyFor('acme')
    const client = createClient({ db: t.db, tenant: 'acme' })
    const original = (await client.submitJobs(Array.from({ length: 1234 }, (_, i) => ({ type: 'bulk', payload: { i } })))).map((r) => r.id)

    const seen: string[] = []
    const inserted: string[] = []
    let cursor: string | null = null
    let pages = 0
    do {
      const url: string = `/v1/jobs?limit=100${cursor ? `&cursor=${cursor}` : ''}`
      // Each page is read while 16 jobs are submitted through the API at the same time.
      const [page, ...submitted] = await Promise.all([
        api.call(key, 'GET', url),
        ...Array.from({ length: inserted.length < 200 ? Math.min(16, 200 - inserted.length) : 0 }, (_, i) =>
          api.call(key, 'POST', '/v1/jobs', { type: 'late', payload: { page: pages, i } }),
        ),
      ])
      expect(page?.statusCode).toBe(200)
      for (const s of submitted) {
        expect(s.statusCode).toBe(202)
        inserted.push(s.json().id)
      }
      const body = page?.json() as { items: Array<{ id: string }>; nextCursor: string | null }
      expect(body.items.length).toBeLessThanOrEqual(100)
      seen.push(...body.items.map((j) => j.id))
      cursor = body.nextCursor
      pages++
    } while (cursor)
    while (inserted.length < 200) inserted.push((await api.call(key, 'POST', '/v1/jobs', { type: 'late' })).json().id)

    expect(inserted).toHaveLength(200)
    expect(new Set(seen).size).toBe(seen.length)
    const seenSet = new Set(seen)
    expect(original.filter((id) => !seenSet.has(id))).toEqual([])
    // Newest first: the original jobs appear in reverse order of submission.
    const originalSet = new Set(original)
    expect(seen.filter((id) => originalSet.has(id))).toEqual([...original].reverse())
    expect(pages).toBeGreaterThanOrEqual(13)
    const total = await t.db
      .selectFrom('pgsched.jobs')
      .select((eb) => eb.fn.countAll<string>().as('n'))
      .executeTakeFirst()
    expect(total?.n).toBe('1434')
  })

  it('rejects a cursor it did not issue', async () => {
    const key = await api.keyFor('acme')
    const res = await api.call(key, 'GET', '/v1/jobs?cursor=bm90LWEtdXVpZA')
    expect(res.statusCode).toBe(400)
    expect(res.json()).toEqual({
      statusCode: 400,
      error: 'Bad Request',
      message: 'cursor is invalid; pass nextCursor from the previous page',
      details: [{ path: 'cursor', message: 'cursor is invalid; pass nextCursor from the previous page' }],
    })
  })

  it("refuses an executions cursor whose fire time is outside PostgreSQL's range as invalid, not with the database's wording", async () => {
    const key = await api.keyFor('acme')
    const { job } = await createClient({ db: t.db, tenant: 'acme' }).submitJob({ type: 'paged' })
    // digits the cursor's pattern accepts, but past year 9999 (the first: past bigint; the second: past timestamptz)
    for (const forged of ['9999999999999999999', '9223372036854775807', '-9223372036854775808', '253402300800000000']) {
      const res = await api.call(key, 'GET', `/v1/jobs/${job.id}/executions?cursor=${Buffer.from(forged).toString('base64url')}`)
      expect(res.statusCode, forged).toBe(400)
      expect(res.json(), forged).toMatchObject({
        message: 'cursor is invalid; pass nextCursor from the previous page',
        details: [{ path: 'cursor', message: 'cursor is invalid; pass nextCursor from the previous page' }],
      })
    }
    // the cursor of a real page still works, at the edges of the range too
    for (const edge of ['253402300799999999', '-62135596800000000']) {
      const res = await api.call(key, 'GET', `/v1/jobs/${job.id}/executions?cursor=${Buffer.from(edge).toString('base64url')}`)
      expect(res.statusCode, edge).toBe(200)
    }
  })
})
