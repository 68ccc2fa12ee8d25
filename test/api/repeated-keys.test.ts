/**
 * A request body that gives a key twice in one object is refused with a 400 naming it: JSON.parse
 * keeps the last value and drops the first without a word (`{"amount":1,"amount":1000}` would have
 * stored 1000), and I-JSON (RFC 7493) refuses such text. Keys are compared as JSON reads them.
 */
import { describe, expect, it } from 'vitest'
import { repeatedKey } from '../../src/api/json-body.ts'
import { useTestDb } from '../db.ts'
import { useTestApi } from './helpers.ts'

const t = useTestDb()
const api = useTestApi(t)

describe('repeatedKey', () => {
  it.each([
    ['{"a":1,"a":2}', 'a'],
    ['{"type":"a","payload":{"amount":1, "amount" : 1000}}', 'payload.amount'],
    ['{"p":[{"x":1},{"y":2,"y":3}]}', 'p.1.y'],
    ['{"a":1,"\\u0061":2}', 'a'],
    ['{"k\\"q":1,"k\\"q":2}', 'k"q'],
    ['{"s":"a:b","t":{"s":1},"u":[1,2,{"s":2,"s":3}]}', 'u.2.s'],
  ])('finds the repeated key of %s', (text, path) => {
    expect(repeatedKey(text)).toBe(path)
  })

  it.each([
    '{"a":1,"b":{"a":1},"c":[{"a":1},{"a":2}]}',
    '{"a":"\\"a\\":1, \\"a\\":2","b":"{\\"x\\":1,\\"x\\":2}"}',
    '{"a\\\\":1,"a":2}',
    '[{"a":1},{"a":1}]',
    '{}',
  ])('finds none in %s', (text) => {
    expect(repeatedKey(text)).toBeUndefined()
  })
})

describe('a request body with a key given twice', () => {
  it('is refused with a 400 naming the key, and nothing is written', async () => {
    const key = await api.keyFor('twice')
    for (const [body, path] of [
      ['{"type":"a","payload":{"amount":1,"amount":1000}}', 'payload.amount'],
      ['{"type":"a","type":"b"}', 'type'],
    ]) {
      const res = await api.app.inject({
        method: 'POST',
        url: '/v1/jobs',
        headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
        payload: body,
      })
      expect(res.statusCode, body).toBe(400)
      expect(res.json()).toMatchObject({
        message: `request body gives the key ${path} twice; give each key of an object once (JSON keeps only the last)`,
        details: [{ path }],
      })
    }
    expect((await api.call(key, 'GET', '/v1/jobs')).json().items).toEqual([])
    // the same keys in different objects are no repeat
    const ok = await api.call(key, 'POST', '/v1/jobs', { type: 'a', payload: { type: 'b', nested: { type: 'c' } } })
    expect(ok.statusCode).toBe(202)
  })
})
