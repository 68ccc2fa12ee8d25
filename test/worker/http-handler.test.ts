import { createServer, type Server } from 'node:http'
import type { AddressInfo } from 'node:net'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { sql } from 'kysely'
import { createClient } from '../../src/client.ts'
import { loadConfig } from '../../src/config.ts'
import { ValidationError } from '../../src/errors.ts'
import { createWorkerSystem } from '../../src/system.ts'
import { createHttpHandler, type HttpResolve } from '../../src/worker/http-handler.ts'
import { useTestDb } from '../db.ts'
import { capturingLogger } from '../log-capture.ts'
import { waitFor } from '../wait-for.ts'
import { useWorkers } from './harness.ts'

const t = useTestDb()
/** The handler with the test server's address allowed. */
const local = createHttpHandler({ allow: '127.0.0.1' })
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
    else if (req.url?.startsWith('/redirect?to=')) res.writeHead(302, { location: decodeURIComponent(req.url.slice('/redirect?to='.length)) }).end()
    else if (req.url === '/big') res.writeHead(200, { 'content-type': 'text/plain' }).end('x'.repeat(100_000))
    else if (req.url === '/binary') res.writeHead(200, { 'content-type': 'application/zip' }).end(Buffer.from([0x50, 0x4b, 3, 4, 0, 0, 0xff]))
    else if (req.url === '/accents') res.writeHead(200, { 'content-type': 'text/plain; charset=utf-8' }).end(`x${'é'.repeat(3_000)}`)
    else if (req.url === '/see-other') res.writeHead(303, { location: '/headers' }).end()
    else if (req.url?.startsWith('/bad-location')) res.writeHead(302, { location: 'http://[::1/elsewhere?token=LOCATION-SECRET' }).end()
    else if (req.url === '/headers')
      res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ method: req.method, headers: req.headers }))
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
  return (await runAllToEnd([payload], maxAttempts))[0] as Awaited<ReturnType<ReturnType<typeof createClient>['viewJob']>>
}

/** Submits through the client, or (`sql`) through pgsched.submit_job, which does not check an http job's payload. */
async function runAllToEnd(payloads: Array<Record<string, unknown>>, maxAttempts = 3, via: 'client' | 'sql' = 'client') {
  const client = createClient({ db: t.db })
  const submitted = async (payload: Record<string, unknown>): Promise<string> =>
    via === 'client'
      ? (await client.submitJob({ type: 'http', payload, maxAttempts, backoffBaseMs: 0, backoffMaxMs: 0 })).job.id
      : ((
          await sql<{ id: string }>`select pgsched.submit_job('http', ${JSON.stringify(payload)}::jsonb, max_attempts => ${maxAttempts},
            backoff_base_ms => 0, backoff_max_ms => 0) as id`.execute(t.db)
        ).rows[0]?.id as string)
  const ids = await Promise.all(payloads.map(submitted))
  return waitFor(
    async () => {
      const views = await Promise.all(ids.map((id) => client.viewJob(id)))
      return views.every((v) => v.status === 'COMPLETED' || v.status === 'FAILED') ? views : null
    },
    { what: 'http jobs to finish' },
  )
}

/** The body the http handler kept in a job's result. */
const resultBody = (job: { lastExecution?: { result?: unknown } | null } | undefined): string =>
  String((job?.lastExecution?.result as { body?: unknown } | undefined)?.body)

describe('http handler', () => {
  it('succeeds on 200 with a summary of the response', async () => {
    await startWorker([local])
    const job = await runToEnd({ url: `${base}/ok`, method: 'POST', body: { a: 1 } })
    expect(job.status).toBe('COMPLETED')
    expect(job.lastExecution?.result).toMatchObject({ status: 200, contentType: 'application/json', body: '{"echo":"{\\"a\\":1}","method":"POST"}' })
  })

  it('takes each key of its payload, the method in any case', async () => {
    await startWorker([local])
    const job = await runToEnd({ url: `${base}/ok`, method: 'put', headers: { 'X-Note': 'n' }, body: 'plain', timeoutMs: 5_000 })
    expect(job.status).toBe('COMPLETED')
    expect(job.lastExecution?.result).toMatchObject({ status: 200, body: '{"echo":"plain","method":"PUT"}' })
  })

  it('is refused at submit, sending nothing, when its payload has a key it does not take or a value it cannot send as given', async () => {
    const client = createClient({ db: t.db })
    const before = hits.get('/ok') ?? 0
    const jobs = async () => (await sql<{ n: number }>`select count(*)::int as n from pgsched.jobs where type = 'http'`.execute(t.db)).rows[0]?.n
    const jobsBefore = await jobs()
    await expect(client.submitJob({ type: 'http', payload: { url: `${base}/ok`, header: { 'X-Note': 'n' } } })).rejects.toMatchObject({
      name: 'ValidationError',
      details: [{ path: 'payload.header', message: `unknown field "payload.header" (an http job's payload takes url, method, headers, body, timeoutMs)` }],
    })
    await expect(client.submitJob({ type: 'http', payload: { url: `${base}/ok`, method: 'GET /x' } })).rejects.toBeInstanceOf(ValidationError)
    expect(await jobs()).toBe(jobsBefore)
    expect(hits.get('/ok') ?? 0).toBe(before)
  })

  it('fails at once on 404', async () => {
    await startWorker([local])
    const job = await runToEnd({ url: `${base}/missing` })
    expect(job).toMatchObject({ status: 'FAILED', lastExecution: { attempt: 1, error: { fatal: true, message: `GET ${base}/missing answered 404` } } })
  })

  it('fails at once, not after every attempt, on a payload written in SQL it cannot send as meant, naming what is wrong and what it takes', async () => {
    await startWorker([local])
    const cases = [
      [
        { url: `${base}/ok`, method: 'GET\r\nX-Injected: 1' },
        'http job refused: payload.method must be an HTTP method name (a token such as POST or PROPFIND; not CONNECT)',
      ],
      [{ url: `${base}/ok`, headers: { 'X-Note': 'a\r\nX-Injected: 1' } }, 'http job refused: header "X-Note" in payload.headers cannot be sent'],
      [{ url: `${base}/ok`, headers: { 'Bad Name': 'x' } }, 'http job refused: header "Bad Name" in payload.headers cannot be sent'],
      [{ url: `${base}/ok`, headers: { 'X-Count': 3 } }, 'http job refused: header "X-Count" in payload.headers must be a string, got a number'],
      [{ url: `${base}/ok`, timeoutMs: -5 }, 'http job refused: payload.timeoutMs must be an integer from 1 to 86400000 (milliseconds), got -5'],
      // a misspelt key would otherwise be dropped: the request sent without the headers, or the timeout, meant
      [
        { url: `${base}/ok`, header: { authorization: 'Bearer x' } },
        `http job refused: unknown field "payload.header" (an http job's payload takes url, method, headers, body, timeoutMs)`,
      ],
      [{ url: `${base}/ok`, timeout: 5000 }, 'unknown field "payload.timeout"'],
      // no method name, rather than sent as is; CONNECT asks for a tunnel, not a response
      [{ url: `${base}/ok`, method: 'GET /x' }, 'http job refused: payload.method must be an HTTP method name'],
      [{ url: `${base}/ok`, method: 'connect' }, 'payload.method must be an HTTP method name (a token such as POST or PROPFIND; not CONNECT); got "connect"'],
      [{ url: `${base}/ok`, timeoutMs: '5000' }, 'payload.timeoutMs must be an integer from 1 to 86400000 (milliseconds), got "5000"'],
      [{ url: `${base}/ok`, headers: ['x-a: 1'] }, 'payload.headers must be an object of header names to string values, got an array'],
      [{ url: 5 }, 'http job refused: payload.url must be a string, got a number'],
      [
        { uri: `${base}/ok` },
        'http job refused: unknown field "payload.uri" (an http job\'s payload takes url, method, headers, body, timeoutMs); payload.url is required',
      ],
      [{ url: 'ftp://127.0.0.1/ok' }, 'http job refused: payload.url must be an http or https URL, got ftp:'],
    ] as const
    const before = hits.get('/ok') ?? 0
    const jobs = await runAllToEnd(
      cases.map(([payload]) => payload),
      3,
      'sql',
    )
    for (const [i, [payload, says]] of cases.entries()) {
      expect(jobs[i], JSON.stringify(payload)).toMatchObject({ status: 'FAILED', lastExecution: { attempt: 1, error: { fatal: true } } })
      expect(jobs[i]?.lastExecution?.error?.message, JSON.stringify(payload)).toContain(says)
    }
    expect(hits.get('/ok') ?? 0).toBe(before)
  })

  it('keeps credentials, the query and tokens in the path out of its error (stored with the execution and logged)', async () => {
    await startWorker([local])
    const withSecrets = base.replace('http://', 'http://admin:hunter2@')
    const job = await runToEnd({ url: `${withSecrets}/fails?token=SEKRET-TOKEN#frag` }, 1)
    expect(job).toMatchObject({ status: 'FAILED', lastExecution: { error: { message: `GET ${base}/fails?… answered 500` } } })
    expect(JSON.stringify(job.lastExecution?.error)).not.toMatch(/admin|hunter2|SEKRET|frag/)
    // a token in the path (a Slack-style webhook URL), shown as …; ids and words stay
    const inPath = await runToEnd({ url: `${base}/services/T0123ABC/1234567890/xoxbAbCdEf0123456789GhIjKl` }, 1)
    expect(inPath.lastExecution?.error?.message).toBe(`GET ${base}/services/T0123ABC/1234567890/… answered 500`)
  })

  it('retries 503 until attempts run out', async () => {
    await startWorker([local])
    const before = hits.get('/unavailable') ?? 0
    const job = await runToEnd({ url: `${base}/unavailable` }, 3)
    expect(job).toMatchObject({ status: 'FAILED', lastExecution: { attempt: 3, error: { fatal: false } } })
    expect((hits.get('/unavailable') ?? 0) - before).toBe(3)
  })

  it('retries a request that times out', async () => {
    await startWorker([local])
    const job = await runToEnd({ url: `${base}/slow`, timeoutMs: 100 }, 2)
    expect(job).toMatchObject({
      status: 'FAILED',
      lastExecution: { attempt: 2, error: { fatal: false, message: `request to ${base}/slow failed: timed out after 100 ms` } },
    })
  })

  it('keeps the first 4 KiB of a large body and says it was cut', async () => {
    await startWorker([local])
    const job = await runToEnd({ url: `${base}/big` })
    expect(job.lastExecution?.result).toMatchObject({ status: 200, body: 'x'.repeat(4096), truncated: true })
  })

  it('keeps a body that is no UTF-8 text, or holds a NUL, as base64, and a UTF-8 body cut within a character as text', async () => {
    await startWorker([local])
    const [binary, accents] = await runAllToEnd([{ url: `${base}/binary` }, { url: `${base}/accents` }])
    expect(binary).toMatchObject({ status: 'COMPLETED', lastExecution: { result: { status: 200, body: null, bodyBase64: 'UEsDBAAA/w==', truncated: false } } })
    expect(accents?.status).toBe('COMPLETED')
    expect(accents?.lastExecution?.result).toEqual({
      status: 200,
      contentType: 'text/plain; charset=utf-8',
      body: `x${'é'.repeat(2_047)}`,
      truncated: true,
    })
  })

  it('fails on a redirect whose Location is not a URL without storing or logging what it or the URL called held', async () => {
    const { log, lines } = capturingLogger<Record<string, unknown>>('debug')
    await startWorker([local], { log })
    const job = await runToEnd({ url: `${base}/bad-location?api_key=QUERY-SECRET` }, 1)
    expect(job).toMatchObject({
      status: 'FAILED',
      lastExecution: { error: { message: `GET ${base}/bad-location?… answered 302 with a Location that is not a URL` } },
    })
    expect(JSON.stringify(lines)).not.toMatch(/QUERY-SECRET|LOCATION-SECRET/)
  })

  it('sends on to another origin only standard headers that carry no credential, and every header within one origin', async () => {
    await startWorker([local])
    const headers = { Authorization: 'Bearer a', 'Private-Token': 'b', 'X-Goog-Api-Key': 'c', Cookie: 'd', 'X-Note': 'e', Accept: 'application/json' }
    const port = new URL(base).port
    const [across, within] = await runAllToEnd([
      { url: `${base}/redirect?to=${encodeURIComponent(`http://localhost:${port}/headers`)}`, headers },
      { url: `${base}/redirect?to=${encodeURIComponent('/headers')}`, headers },
    ])
    const received = (job: typeof across) => JSON.parse(resultBody(job)).headers as Record<string, string>
    const acrossHeaders = received(across)
    expect(acrossHeaders.accept).toBe('application/json')
    for (const name of ['authorization', 'private-token', 'x-goog-api-key', 'cookie', 'x-note']) expect(acrossHeaders[name], name).toBeUndefined()
    expect(received(within)).toMatchObject({ authorization: 'Bearer a', 'private-token': 'b', 'x-goog-api-key': 'c', cookie: 'd', 'x-note': 'e' })
  })

  it('sends no Content-Type, in whatever case given, on the GET a 303 leads to', async () => {
    await startWorker([local])
    const job = await runToEnd({
      url: `${base}/see-other`,
      method: 'POST',
      headers: { 'Content-Type': 'text/csv' },
      body: 'a,b',
    })
    const answer = JSON.parse(resultBody(job)) as { method: string; headers: Record<string, string> }
    expect(answer.method).toBe('GET')
    expect(answer.headers['content-type']).toBeUndefined()
  })

  it('refuses an option it does not know, naming it and the known ones, rather than following redirects', () => {
    const refusal = (options: unknown) => {
      try {
        createHttpHandler(options as never)
      } catch (err: unknown) {
        expect(err).toBeInstanceOf(ValidationError)
        return { message: (err as ValidationError).message, details: (err as ValidationError).details }
      }
      throw new Error('not refused')
    }
    // from JavaScript: a misspelt redirects would leave redirects followed
    expect(refusal({ allow: '127.0.0.1', redirect: 'refuse' })).toEqual({
      message: 'unknown field "redirect" (known: allow, resolve, redirects)',
      details: [{ path: 'redirect', message: 'unknown field "redirect"' }],
    })
    expect(refusal('127.0.0.1').message).toBe('createHttpHandler options must be an object')
    // a key left undefined is no option
    expect(createHttpHandler({ allow: '127.0.0.1', redirect: undefined } as never).type).toBe('http')
  })
})

describe('http handler address policy', () => {
  /** Resolves the names of these tests as a hostile DNS server might; no other name is found. */
  const names: Record<string, string> = { 'api.example.com': '127.0.0.1', 'both.example.com': '93.184.216.34,10.1.2.3' }
  const resolve = ((hostname: string, _options: object, callback: (err: Error | null, addresses: Array<{ address: string; family: number }>) => void) => {
    const known = names[hostname]
    if (known === undefined) return callback(Object.assign(new Error(`getaddrinfo ENOTFOUND ${hostname}`), { code: 'ENOTFOUND' }), [])
    callback(
      null,
      known.split(',').map((address) => ({ address, family: address.includes(':') ? 6 : 4 })),
    )
  }) as HttpResolve

  it('refuses loopback, private, link-local and metadata addresses, and names that resolve to them, with a fatal error naming the rule', async () => {
    await startWorker([createHttpHandler({ resolve })])
    const port = new URL(base).port
    const targets = [
      [`http://127.0.0.1:${port}/ok`, '127.0.0.1 is a loopback address'],
      ['http://10.0.0.1/', '10.0.0.1 is a private address'],
      ['http://169.254.169.254/latest/meta-data/', '169.254.169.254 is a link-local (cloud metadata among them) address'],
      [`http://[::1]:${port}/ok`, '::1 is a loopback address'],
      [`http://api.example.com:${port}/ok`, 'api.example.com (127.0.0.1) is a loopback address'],
      ['http://both.example.com/', 'both.example.com (10.1.2.3) is a private address'],
      ['http://[::ffff:127.0.0.1]/', 'is a loopback address'],
      ['http://[64:ff9b::a00:1]/', 'is a NAT64, 6to4, IPv4-compatible or IPv4-translated IPv6 address'],
      ['http://[2002:a00:1::]/', 'is a NAT64, 6to4, IPv4-compatible or IPv4-translated IPv6 address'],
      ['http://[::ffff:0:7f00:1]/', 'is a NAT64, 6to4, IPv4-compatible or IPv4-translated IPv6 address'],
      ['http://[fec0::1]/', 'is a unique-local or site-local (private IPv6) address'],
      ['http://2130706433/', '127.0.0.1 is a loopback address'], // decimal, normalised by the URL parser
      ['http://0x7f.1/', '127.0.0.1 is a loopback address'],
      ['http://[fd00:ec2::254]/', 'is a unique-local or site-local (private IPv6) address'],
    ] as const
    const before = hits.get('/ok') ?? 0
    const jobs = await runAllToEnd(targets.map(([url]) => ({ url })))
    for (const [i, [url, says]] of targets.entries()) {
      const job = jobs[i]
      expect(job?.status, url).toBe('FAILED')
      expect(job?.lastExecution?.attempt, url).toBe(1) // fatal: not retried
      expect(job?.lastExecution?.error?.fatal, url).toBe(true)
      expect(job?.lastExecution?.error?.message, url).toContain(says)
      expect(job?.lastExecution?.error?.message, url).toContain('SCHEDULER_HTTP_ALLOW')
    }
    expect(hits.get('/ok') ?? 0).toBe(before) // no request reached the server
  })

  it('does not follow a redirect into a refused address', async () => {
    // allowed by name: the server itself; its redirect to a loopback address is checked again
    await startWorker([createHttpHandler({ allow: 'localhost' })])
    const port = new URL(base).port
    const target = encodeURIComponent(`http://127.0.0.1:${port}/ok`)
    const before = hits.get('/ok') ?? 0
    const job = await runToEnd({ url: `http://localhost:${port}/redirect?to=${target}` })
    expect(job.status).toBe('FAILED')
    expect(job.lastExecution?.error).toMatchObject({ fatal: true })
    expect(job.lastExecution?.error?.message).toContain('127.0.0.1 is a loopback address')
    expect(hits.get('/ok') ?? 0).toBe(before)
  })

  it("refuses the Fetch standard's bad ports (SMTP, SSH, IRC, …) on public hosts, unless the host is allowed explicitly", async () => {
    await startWorker([createHttpHandler({ resolve: (_h, _o, cb) => cb(null, [{ address: '93.184.216.34', family: 4 }]) })])
    const jobs = await runAllToEnd(['http://mail.example.com:25/', 'http://93.184.216.34:22/', 'https://irc.example.com:6697/'].map((url) => ({ url })))
    for (const [i, port] of [25, 22, 6697].entries()) {
      expect(jobs[i]?.status).toBe('FAILED')
      expect(jobs[i]?.lastExecution?.attempt).toBe(1)
      expect(jobs[i]?.lastExecution?.error?.message).toContain(`port ${port} is on the Fetch standard's list of bad ports`)
    }
  })

  it('calls an internal target the allowlist admits, by address, by range and by name', async () => {
    const port = new URL(base).port
    for (const allow of ['127.0.0.1', '127.0.0.0/8', 'api.example.com']) {
      const worker = await startWorker([createHttpHandler({ allow, resolve })])
      const job = await runToEnd({ url: `http://${allow === 'api.example.com' ? 'api.example.com' : '127.0.0.1'}:${port}/ok` })
      expect(job.status, allow).toBe('COMPLETED')
      await worker.stop()
    }
  })

  it('is left out of a worker process with SCHEDULER_HTTP_HANDLER=off, with the webhook handler and dispatcher', async () => {
    for (const [setting, served] of [
      ['on', true],
      ['off', false],
    ] as const) {
      const config = loadConfig({ DATABASE_URL: t.url, SCHEDULER_HTTP_HANDLER: setting, SCHEDULER_WORKER_METRICS_PORT: 'off' }) as Parameters<
        typeof createWorkerSystem
      >[0]['config']
      const system = createWorkerSystem({ config, log: t.log, handlers: [] })
      expect(system.worker.types.includes('http'), setting).toBe(served)
      // webhooks go out through the http handler: no delivery handler, no dispatcher submitting deliveries
      expect(system.worker.types.includes('pgsched.webhook'), setting).toBe(served)
      expect(system.webhookDispatcher !== undefined, setting).toBe(served)
      await system.stop()
    }
  })
})
