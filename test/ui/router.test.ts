import { describe, expect, it } from 'vitest'
import { parseRoute } from '../../ui/src/router.ts'

describe('parseRoute', () => {
  it('decodes the path and reads the query', () => {
    const route = parseRoute('#/jobs/a%20b?status=FAILED')
    expect(route.path).toEqual(['jobs', 'a b'])
    expect(route.query.get('status')).toBe('FAILED')
    expect(parseRoute('').path).toEqual([])
  })

  it('keeps a segment with a malformed escape as written instead of throwing', () => {
    expect(parseRoute('#/jobs/100%').path).toEqual(['jobs', '100%'])
    expect(parseRoute('#/webhooks/%E0%A4%A').path).toEqual(['webhooks', '%E0%A4%A'])
    expect(parseRoute('#/jobs/a%20b/100%zz').path).toEqual(['jobs', 'a b', '100%zz'])
  })
})
