/**
 * HTTP conventions and inputs the database could refuse: 405 with Allow, 415 for a
 * Content-Encoding, 413 without 100 Continue (over a real socket), the JSON nesting limit, NUL
 * characters and lone surrogates, lengths counted in characters, and the duration forms.
 */
import { request as httpRequest } from 'node:http'
import { connect } from 'node:net'
import type { AddressInfo } from 'node:net'
import { sql } from 'kysely'
import { describe, expect, it } from 'vitest'
import { createApiKey } from '../../src/api/auth.ts'
import { MAX_PAYLOAD_BYTES } from '../../src/core/names.ts'
import { useTestDb } from '../db.ts'
import { useTestApi } from './helpers.ts'

const t = useTestDb()
const api = useTestApi(t)
const JSON_TYPE = { 'content-type': 'application/json' }

interface ErrorReply {
  statusCode: number
  error: string
  message: string
  details?: Array<{ path: string; message: string }>
}

const nested = (depth: number) => `${'['.repeat(depth)}${']'.repeat(depth)}`
const jobCount = async () => Number((await sql<{ n: string }>`select count(*)::text as n from pgsched.jobs`.execute(t.db)).rows[0]?.n)

describe('HTTP conventions', () => {
  it('answers a known path with a method it does not serve 405 with Allow', async () => {
    const key = await api.keyFor('acme')
    const id = (await api.call(key, 'POST', '/v1/jobs', { type: 'x' })).json().id as string
    const cases: Array<[string, string, string]> = [
      ['DELETE', '/v1/jobs', 'GET, HEAD, POST'],
      ['PUT', `/v1/jobs/${id}`, 'DELETE, GET, HEAD'],
      ['GET', `/v1/jobs/${id}/cancel`, 'POST'],
      ['DELETE', '/v1/queues/default', 'GET, HEAD, PATCH'],
      ['POST', '/healthz', 'GET, HEAD'],
    ]
    for (const [method, url, allow] of cases) {
      const res = await api.app.inject({ method: method as 'GET', url, headers: { authorization: `Bearer ${key}` } })
      expect(res.statusCode, `${method} ${url}`).toBe(405)
      expect(res.headers.allow).toBe(allow)
      expect(res.headers['x-request-id']).toBeTruthy()
      expect(res.json()).toEqual({ statusCode: 405, error: 'Method Not Allowed', message: `${method} is not allowed on ${url}; allowed: ${allow}` })
    }
    const unknown = await api.app.inject({ method: 'DELETE', url: '/v1/nothing' })
    expect(unknown.statusCode).toBe(404)
    expect(unknown.headers.allow).toBeUndefined()
  })

  it("answers a method a static path does not serve (/v1/jobs/bulk, /v1/jobs/export) 405 with that path's Allow, not as a job id", async () => {
    const key = await api.keyFor('acme')
    const cases: Array<[string, string, string]> = [
      ['GET', '/v1/jobs/bulk', 'POST'],
      ['DELETE', '/v1/jobs/bulk', 'POST'],
      ['DELETE', '/v1/jobs/export?format=csv', 'GET, HEAD'],
      ['POST', '/v1/jobs/export', 'GET, HEAD'],
    ]
    for (const [method, url, allow] of cases) {
      const res = await api.app.inject({ method: method as 'GET', url, headers: { authorization: `Bearer ${key}` } })
      expect(res.statusCode, `${method} ${url}`).toBe(405)
      expect(res.headers.allow, `${method} ${url}`).toBe(allow)
      expect(res.json().message, `${method} ${url}`).toBe(`${method} is not allowed on ${url.split('?')[0]}; allowed: ${allow}`)
    }
    // a job id there is still a job id
    expect((await api.call(key, 'GET', '/v1/jobs/00000000-0000-7000-8000-000000000001')).statusCode).toBe(404)
  })

  it('answers a body with a Content-Encoding other than identity 415, and accepts identity', async () => {
    const key = await api.keyFor('acme')
    const body = JSON.stringify({ type: 'x' })
    const gzip = await api.call(key, 'POST', '/v1/jobs', body, { ...JSON_TYPE, 'content-encoding': 'gzip' })
    expect(gzip.statusCode).toBe(415)
    expect(gzip.headers['accept-encoding']).toBe('identity')
    expect(gzip.json<ErrorReply>().message).toBe('Content-Encoding "gzip" is not supported; send the body uncompressed')
    const identity = await api.call(key, 'POST', '/v1/jobs', body, { ...JSON_TYPE, 'content-encoding': 'identity' })
    expect(identity.statusCode).toBe(202)
  })

  it('takes a payload at its 1 MiB limit over REST with the default body limit, and names the payload one byte over it', async () => {
    const key = await api.keyFor('acme')
    // {"blob":"…"} is 11 characters around the blob
    const body = (n: number) => JSON.stringify({ type: 'x', idempotencyKey: 'k'.repeat(255), payload: { blob: 'x'.repeat(n - 11) } })
    const at = await api.call(key, 'POST', '/v1/jobs', JSON.parse(body(MAX_PAYLOAD_BYTES)))
    expect(at.statusCode, at.body.slice(0, 200)).toBe(202)
    const over = await api.app.inject({
      method: 'POST',
      url: '/v1/jobs',
      headers: { authorization: `Bearer ${key}`, ...JSON_TYPE },
      payload: body(MAX_PAYLOAD_BYTES + 1).replace('"k', '"j'),
    })
    expect(over.statusCode).toBe(400)
    expect(over.json().message).toBe(`payload must be at most ${MAX_PAYLOAD_BYTES} bytes as JSON`)
  })

  it('answers Expect: 100-continue over the body limit with 413 and no 100 Continue, and within it with 100 then 202', async () => {
    const key = await api.keyFor('acme')
    await api.app.listen({ host: '127.0.0.1', port: 0 })
    const { port } = api.app.server.address() as AddressInfo
    /** Sends the head only and collects what the server answers until it closes or `until` matches. */
    const exchange = (length: number, until: RegExp, body?: string) =>
      new Promise<string>((resolve, reject) => {
        const socket = connect(port, '127.0.0.1')
        let received = ''
        const timer = setTimeout(() => {
          socket.destroy()
          resolve(received)
        }, 10_000)
        socket.on('data', (chunk) => {
          received += chunk.toString('latin1')
          if (received.startsWith('HTTP/1.1 100') && body !== undefined && !received.includes('\r\n\r\nHTTP')) socket.write(body)
          if (until.test(received)) {
            clearTimeout(timer)
            socket.destroy()
            resolve(received)
          }
        })
        socket.on('error', reject)
        socket.write(
          `POST /v1/jobs HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer ${key}\r\nContent-Type: application/json\r\n` +
            `Content-Length: ${length}\r\nExpect: 100-continue\r\n\r\n`,
        )
      })
    const large = await exchange(1_153_434, /\r\n\r\n\{.*\}/s)
    expect(large.split('\r\n')[0]).toBe('HTTP/1.1 413 Payload Too Large')
    expect(large).not.toContain('100 Continue')
    const body = JSON.stringify({ type: 'x' })
    const small = await exchange(Buffer.byteLength(body), /HTTP\/1\.1 202.*\r\n\r\n\{.*\}/s, body)
    expect(small.split('\r\n')[0]).toBe('HTTP/1.1 100 Continue')
    expect(small).toMatch(/HTTP\/1\.1 202 Accepted/)
  })
})

describe('a repeated Idempotency-Key header', () => {
  it('is refused with 400, not joined into one key that neither is', async () => {
    const key = await api.keyFor('acme')
    if (!api.app.server.listening) await api.app.listen({ host: '127.0.0.1', port: 0 })
    const { port } = api.app.server.address() as AddressInfo
    const answer = await new Promise<{ status: number; body: string }>((resolve, reject) => {
      const req = httpRequest({ host: '127.0.0.1', port, method: 'POST', path: '/v1/jobs' }, (res) => {
        let body = ''
        res.on('data', (c: Buffer) => (body += c.toString()))
        res.on('end', () => resolve({ status: res.statusCode ?? 0, body }))
      })
      req.on('error', reject)
      // raw headers: the same name twice, as a client merging two header sources would send it
      for (const [name, value] of [
        ['authorization', `Bearer ${key}`],
        ['content-type', 'application/json'],
        ['idempotency-key', 'a'],
        ['idempotency-key', 'b'],
      ] as const) {
        if (name === 'idempotency-key') req.appendHeader(name, value)
        else req.setHeader(name, value)
      }
      req.end(JSON.stringify({ type: 'x' }))
    })
    expect(answer.status).toBe(400)
    expect(JSON.parse(answer.body)).toMatchObject({
      message: 'Idempotency-Key is given more than once; send one',
      details: [{ path: 'idempotencyKey', message: 'Idempotency-Key is given more than once; send one' }],
    })
    const { rows } = await t.pool.query<{ n: string }>("select count(*)::text as n from pgsched.jobs where idempotency_key like 'a%'")
    expect(rows[0]?.n).toBe('0')
  })
})

describe('inputs the database could refuse', () => {
  it('accepts a payload 64 levels deep and refuses 65, 1,000 and 100,000 levels with a 400 naming payload', async () => {
    const key = await api.keyFor('acme')
    const submit = (depth: number) => api.call(key, 'POST', '/v1/jobs', `{"type":"x","payload":${nested(depth)}}`, JSON_TYPE)
    expect((await submit(64)).statusCode).toBe(202)
    const before = await jobCount()
    for (const depth of [65, 1000, 100_000]) {
      const res = await submit(depth)
      expect(res.statusCode, `${depth} levels`).toBe(400)
      expect(res.json<ErrorReply>()).toEqual({
        statusCode: 400,
        error: 'Bad Request',
        message: 'request body must nest at most 65 levels deep (a payload at most 64)',
        details: [{ path: 'payload', message: 'request body must nest at most 65 levels deep (a payload at most 64)' }],
      })
    }
    expect(await jobCount()).toBe(before)
  })

  it('refuses NUL characters, lone surrogates and a tenant filter no tenant can have with a 400 whose details name the field, before the database sees them', async () => {
    const key = await api.keyFor('acme')
    const cases: Array<[string, 'GET' | 'POST', string, string | undefined, string]> = [
      ['NUL in idempotencyKey', 'POST', '/v1/jobs', '{"type":"x","idempotencyKey":"a\\u0000b"}', 'idempotencyKey'],
      ['NUL in concurrencyKey', 'POST', '/v1/jobs', '{"type":"x","concurrencyKey":"a\\u0000"}', 'concurrencyKey'],
      ['NUL in a payload key', 'POST', '/v1/jobs', '{"type":"x","payload":{"a\\u0000":1}}', 'payload.a\u0000'],
      ['lone high surrogate in a payload string', 'POST', '/v1/jobs', '{"type":"x","payload":{"s":"\\ud800"}}', 'payload.s'],
      ['lone low surrogate in a payload array', 'POST', '/v1/jobs', '{"type":"x","payload":["ok","x\\udc00"]}', 'payload.1'],
      ['lone surrogate in idempotencyKey', 'POST', '/v1/jobs', '{"type":"x","idempotencyKey":"\\ud83d"}', 'idempotencyKey'],
      ['NUL in the type filter', 'GET', '/v1/jobs?type=a%00b', undefined, 'type'],
      ['NUL in the queue filter', 'GET', '/v1/jobs?queue=a%00b', undefined, 'queue'],
      ["NUL in the figures' queue filter", 'GET', '/v1/stats?queue=a%00b', undefined, 'queue'],
      ['a tenant filter no tenant can have', 'GET', '/v1/stats?tenant=%20', undefined, 'tenant'],
      ['NUL in a tenant name', 'GET', '/v1/tenants/a%00b', undefined, 'name'],
      ['NUL in a queue name', 'GET', '/v1/queues/a%00b', undefined, 'name'],
    ]
    const opKey = (await createApiKey(t.db, { tenant: 'ops', operator: true })).key
    const before = await jobCount()
    for (const [name, method, url, body, path] of cases) {
      const res = await api.call(url.startsWith('/v1/jobs') ? key : opKey, method, url, body, body ? JSON_TYPE : {})
      const reply = res.json<ErrorReply>()
      expect(res.statusCode, `${name}: ${res.body}`).toBe(400)
      expect(
        reply.details?.map((d) => d.path),
        name,
      ).toContain(path)
      expect(reply.message, name).not.toMatch(/database|invalid byte sequence|unsupported Unicode/)
    }
    expect(await jobCount()).toBe(before)
  })

  it('refuses a body on every route the OpenAPI document shows without one, naming the route, and takes none, an empty one or {}', async () => {
    const doc = (await api.app.inject({ method: 'GET', url: '/openapi.json' })).json<{
      paths: Record<string, Record<string, { requestBody?: unknown }>>
    }>()
    const bodyless = Object.entries(doc.paths).flatMap(([path, ops]) =>
      Object.entries(ops)
        .filter(([method, op]) => ['post', 'put', 'patch', 'delete'].includes(method) && op.requestBody === undefined)
        .map(([method]) => [method.toUpperCase() as 'POST' | 'DELETE', path] as const),
    )
    // the job, queue and key actions, and the deletes
    expect(bodyless.map(([m, p]) => `${m} ${p}`).sort()).toEqual([
      'DELETE /v1/jobs/{id}',
      'DELETE /v1/webhooks/{id}',
      'POST /v1/jobs/{id}/cancel',
      'POST /v1/jobs/{id}/pause',
      'POST /v1/jobs/{id}/rerun',
      'POST /v1/jobs/{id}/resume',
      'POST /v1/jobs/{id}/retry',
      'POST /v1/keys/{id}/revoke',
      'POST /v1/queues/{name}/pause',
      'POST /v1/queues/{name}/resume',
    ])
    const opKey = (await createApiKey(t.db, { tenant: 'ops', operator: true })).key
    const id = '01900000-0000-7000-8000-000000000001'
    for (const [method, path] of bodyless) {
      const url = path.replace('{id}', id).replace('{name}', 'bodyless')
      const message = `${method} ${path} takes no request body; send none (or {})`
      for (const body of ['{"reason":"maintenance"}', '[]', 'null', '0', '"x"', '{"":null}']) {
        const res = await api.call(opKey, method, url, body, JSON_TYPE)
        expect(res.statusCode, `${method} ${path} ${body}: ${res.body}`).toBe(400)
        expect(res.json<ErrorReply>()).toEqual({ statusCode: 400, error: 'Bad Request', message, details: [{ path: '', message }] })
      }
      // no body, an empty one and {} reach the route (which finds no such job: 404)
      for (const [body, headers] of [
        [undefined, {}],
        ['', JSON_TYPE],
        [' \n', JSON_TYPE],
        ['{}', JSON_TYPE],
        ['{ }', JSON_TYPE],
      ] as const) {
        const res = await api.call(opKey, method, url, body, headers)
        expect(res.statusCode, `${method} ${path} ${JSON.stringify(body)}: ${res.body}`).not.toBe(400)
      }
    }
  })

  it('documents on every route that reads a body the 413 and 415 it answers', async () => {
    const doc = (await api.app.inject({ method: 'GET', url: '/openapi.json' })).json<{
      paths: Record<string, Record<string, { responses: Record<string, unknown> }>>
    }>()
    const opKey = (await createApiKey(t.db, { tenant: 'ops', operator: true })).key
    const id = '01900000-0000-7000-8000-000000000002'
    const writes = Object.entries(doc.paths).flatMap(([path, ops]) =>
      Object.keys(ops)
        .filter((method) => ['post', 'put', 'patch', 'delete'].includes(method))
        .map((method) => [method.toUpperCase() as 'POST' | 'PATCH' | 'DELETE', path] as const),
    )
    expect(writes.length).toBeGreaterThan(15)
    const undocumented: string[] = []
    for (const [method, path] of writes) {
      const url = path.replace('{id}', id).replace('{name}', 'documented')
      const sent = [
        await api.call(opKey, method, url, 'type=x', { 'content-type': 'text/plain' }),
        await api.call(opKey, method, url, '{}', { ...JSON_TYPE, 'content-encoding': 'gzip' }),
        await api.call(opKey, method, url, JSON.stringify({ pad: 'x'.repeat(1_200_000) }), JSON_TYPE),
      ]
      for (const res of sent) {
        expect([413, 415], `${method} ${path}: ${res.body}`).toContain(res.statusCode)
        const documented = doc.paths[path]?.[method.toLowerCase()]?.responses[String(res.statusCode)]
        if (documented === undefined) undocumented.push(`${method} ${path} ${res.statusCode}`)
      }
    }
    expect(undocumented).toEqual([])
  })

  it('counts lengths in characters as the database does: 255 emoji are a valid idempotency key, 256 are not', async () => {
    const key = await api.keyFor('acme')
    const ok = await api.call(key, 'POST', '/v1/jobs', { type: 'x', idempotencyKey: '😀'.repeat(128) })
    expect(ok.statusCode).toBe(202)
    expect(ok.json().idempotencyKey).toBe('😀'.repeat(128))
    expect((await api.call(key, 'POST', '/v1/jobs', { type: 'x', idempotencyKey: '😀'.repeat(255) })).statusCode).toBe(202)
    const long = await api.call(key, 'POST', '/v1/jobs', { type: 'x', idempotencyKey: '😀'.repeat(256) })
    expect(long.statusCode).toBe(400)
    expect(long.json<ErrorReply>().details?.[0]?.path).toBe('idempotencyKey')
  })

  it('accepts every as 10s, 5m, 1h30m, 1500ms, ISO-8601 and milliseconds alike, from 1 second to 366 days', async () => {
    const key = await api.keyFor('acme')
    const forms: Array<[string | number, number]> = [
      ['10s', 10_000],
      ['5m', 300_000],
      ['1h30m', 5_400_000],
      ['1d', 86_400_000],
      ['1500ms', 1500],
      ['PT10S', 10_000],
      ['PT1H30M', 5_400_000],
      [10_000, 10_000],
    ]
    for (const [every, ms] of forms) {
      const res = await api.call(key, 'POST', '/v1/jobs', { type: 'x', schedule: { every } })
      expect(res.statusCode, String(every)).toBe(202)
      expect(res.json().schedule.intervalMs, String(every)).toBe(ms)
    }
    for (const every of ['0s', '500ms', '10 s', 'P1M', 'PT', '', 999, '367d']) {
      const res = await api.call(key, 'POST', '/v1/jobs', { type: 'x', schedule: { every } })
      expect(res.statusCode, String(every)).toBe(400)
      expect(res.json<ErrorReply>().details?.[0]?.path).toBe('schedule.every')
    }
  })
})
