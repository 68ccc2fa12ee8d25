import { createServer, type Server } from 'node:http'
import type { AddressInfo } from 'node:net'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { createClient } from '../../src/client.ts'
import { httpHandler } from '../../src/worker/http-handler.ts'
import { useTestDb } from '../db.ts'
import { waitFor } from '../wait-for.ts'
import { useWorkers } from './harness.ts'

const t = useTestDb()
const startWorker = useWorkers(t)
const hits = new Map<string, number>()
let server: Server
let base: string

beforeAll(async () => {
  server = createServer((req, res) => {
    hits.set(req.url ?? '', (hits.get(req.url ?? '') ?? 0) + 1)
    if (req.url === '/ok') {
      let body = ''
      req.on('data', (c) => (body += c))
      req.on('end', () => res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ echo: body, method: req.method })))
    } else if (req.url === '/missing') res.writeHead(404).end('no such thing')
    else if (req.url === '/unavailable') res.writeHead(503).end('try later')
    else if (req.url === '/slow') setTimeout(() => res.writeHead(200).end('late'), 2_000)
    else res.writeHead(500).end()
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`
})

afterAll(async () => {
  server.closeAllConnections()
  await new Promise((resolve) => server.close(resolve))
})

async function runToEnd(payload: Record<string, unknown>, maxAttempts = 3) {
  const client = createClient({ db: t.db })
  const { job } = await client.submitJob({ type: 'http', payload, maxAttempts, backoffBaseMs: 0, backoffMaxMs: 0 })
  return waitFor(
    async () => {
      const v = await client.viewJob(job.id)
      return v.status === 'COMPLETED' || v.status === 'FAILED' ? v : null
    },
    { what: 'http job to finish' },
  )
}

describe('http handler', () => {
  it('succeeds on 200 with a summary of the response', async () => {
    await startWorker([httpHandler])
    const job = await runToEnd({ url: `${base}/ok`, method: 'POST', body: { a: 1 } })
    expect(job.status).toBe('COMPLETED')
    expect(job.lastExecution?.result).toMatchObject({ status: 200, contentType: 'application/json', body: '{"echo":"{\\"a\\":1}","method":"POST"}' })
  })

  it('fails at once on 404', async () => {
    await startWorker([httpHandler])
    const job = await runToEnd({ url: `${base}/missing` })
    expect(job).toMatchObject({ status: 'FAILED', lastExecution: { attempt: 1, error: { fatal: true, message: `GET ${base}/missing answered 404` } } })
  })

  it('retries 503 until attempts run out', async () => {
    await startWorker([httpHandler])
    const before = hits.get('/unavailable') ?? 0
    const job = await runToEnd({ url: `${base}/unavailable` }, 3)
    expect(job).toMatchObject({ status: 'FAILED', lastExecution: { attempt: 3, error: { fatal: false } } })
    expect((hits.get('/unavailable') ?? 0) - before).toBe(3)
  })

  it('retries a request that times out', async () => {
    await startWorker([httpHandler])
    const job = await runToEnd({ url: `${base}/slow`, timeoutMs: 100 }, 2)
    expect(job).toMatchObject({
      status: 'FAILED',
      lastExecution: { attempt: 2, error: { fatal: false, message: `request to ${base}/slow failed: timed out after 100 ms` } },
    })
  })
})
