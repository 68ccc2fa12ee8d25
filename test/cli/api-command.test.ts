import { execFile, spawn } from 'node:child_process'
import { mkdtempSync, rmSync } from 'node:fs'
import { networkInterfaces, tmpdir } from 'node:os'
import { join } from 'node:path'
import { once } from 'node:events'
import { connect, createServer, type AddressInfo } from 'node:net'
import { promisify } from 'node:util'
import { describe, expect, it, onTestFinished } from 'vitest'
import { useTestDb } from '../db.ts'
import { waitFor } from '../wait-for.ts'

const run = promisify(execFile)
const t = useTestDb()

function scheduler(args: string[]) {
  return run('node', ['bin/scheduler', ...args], { env: { ...process.env, LOG_LEVEL: 'warn', DATABASE_URL: t.url } })
}

describe('scheduler keys', () => {
  it('creates a key printed once, lists it without the secret, and revokes it', async () => {
    const created = await scheduler(['keys', 'create', '--tenant', 'acme', '--name', 'ci'])
    const key = created.stdout.trim()
    expect(key).toMatch(/^psk_[A-Za-z0-9_-]{43}$/)
    expect(created.stderr).toContain('for tenant "acme" created. It is shown only this once')
    const listed = await scheduler(['keys', 'list', '--json'])
    const keys = (JSON.parse(listed.stdout) as { items: Array<{ id: string; tenant: string; name: string; keyPrefix: string; revokedAt: string | null }> })
      .items
    expect(keys).toEqual([expect.objectContaining({ tenant: 'acme', name: 'ci', keyPrefix: key.slice(0, 12), revokedAt: null })])
    expect(listed.stdout).not.toContain(key)
    const table = await scheduler(['keys', 'list'])
    expect(table.stdout).toContain(keys[0]?.id)
    expect(table.stdout).not.toContain(key)
    const revoked = await scheduler(['keys', 'revoke', keys[0]?.id as string])
    expect(revoked.stdout).toContain(`revoked API key ${keys[0]?.id}`)
    const missing = await scheduler(['keys', 'revoke', '01900000-0000-7000-8000-000000000000']).catch((e: unknown) => e)
    expect(missing).toMatchObject({ code: 1 })
    expect((missing as { stderr: string }).stderr).toContain('no API key 01900000-0000-7000-8000-000000000000')
    // the prefix keys list shows is not the id: the refusal says which column to give
    const prefix = await scheduler(['keys', 'revoke', keys[0]?.keyPrefix as string]).catch((e: unknown) => e)
    expect(prefix).toMatchObject({ code: 2 })
    expect((prefix as { stderr: string }).stderr).toContain(
      `key id must be a UUID, got "${keys[0]?.keyPrefix}": that is a key or its prefix; give the key's ID, the first column of \`scheduler keys list\``,
    )
    const bad = await scheduler(['keys', 'create', '--tenant', 'no spaces']).catch((e: unknown) => e)
    expect(bad).toMatchObject({ code: 2 })
  })
})

describe('scheduler api', () => {
  it('exits 2 naming the setting when it cannot listen: a host that does not resolve, a port taken', async () => {
    const env = { ...process.env, DATABASE_URL: t.url, LOG_LEVEL: 'warn' }
    const api = (args: string[]) =>
      run('node', ['bin/scheduler-api', ...args], { env, timeout: 30_000, killSignal: 'SIGKILL' }).then(
        () => ({ code: 0, stderr: '' }),
        (err: { code: number; stderr: string }) => ({ code: err.code, stderr: err.stderr }),
      )
    const badHost = await api(['--host', 'no-such-host.invalid', '--port', '0'])
    expect(badHost.code).toBe(2)
    expect(badHost.stderr).toContain('cannot listen on no-such-host.invalid:0: the host "no-such-host.invalid" does not resolve (SCHEDULER_HOST / --host')
    const taken = createServer()
    await new Promise<void>((resolve) => taken.listen(0, '127.0.0.1', resolve))
    onTestFinished(() => new Promise<void>((resolve) => taken.close(() => resolve())))
    const port = (taken.address() as AddressInfo).port
    const busy = await api(['--host', '127.0.0.1', '--port', String(port)])
    expect(busy.code).toBe(2)
    expect(busy.stderr).toContain(`cannot listen on 127.0.0.1:${port}: port ${port} is taken on 127.0.0.1 (SCHEDULER_HOST / --host, SCHEDULER_PORT / --port)`)
  })

  it('serves the API on the given port and stops cleanly on SIGTERM', async () => {
    const key = (await scheduler(['keys', 'create', '--tenant', 'acme'])).stdout.trim()
    const child = spawn('node', ['bin/scheduler', 'api', '--port', '0', '--host', '127.0.0.1'], {
      env: { ...process.env, LOG_LEVEL: 'info', DATABASE_URL: t.url },
      stdio: ['ignore', 'pipe', 'inherit'],
    })
    const exited = once(child, 'exit')
    let output = ''
    const listening = new Promise<string>((resolve) => {
      child.stdout.on('data', (chunk: Buffer) => {
        output += chunk.toString('utf8')
        const match = /"url":"(http:\/\/[^"]+)","msg":"api listening"/.exec(output)
        if (match) resolve(match[1] as string)
      })
    })
    try {
      const url = await Promise.race([listening, exited.then(() => Promise.reject(new Error(`api exited early:\n${output}`)))])
      expect(url).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/)
      const submitted = await fetch(`${url}/v1/jobs`, {
        method: 'POST',
        headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
        body: JSON.stringify({ type: 'email.send', payload: { secret: 'do-not-log' } }),
      })
      expect(submitted.status).toBe(202)
      const job = (await submitted.json()) as { id: string }
      expect(submitted.headers.get('location')).toBe(`/v1/jobs/${job.id}`)
      expect((await fetch(`${url}/readyz`)).status).toBe(200)
      const unauthorized = await fetch(`${url}/v1/jobs`)
      expect(unauthorized.status).toBe(401)
    } finally {
      child.kill('SIGTERM')
    }
    const [code] = await exited
    expect(code).toBe(0)
    const entries = output
      .trim()
      .split('\n')
      .map((line) => JSON.parse(line) as Record<string, unknown>)
    expect(entries).toContainEqual(
      expect.objectContaining({ msg: 'request completed', tenant: 'acme', method: 'POST', route: '/v1/jobs', statusCode: 202, requestId: expect.any(String) }),
    )
    expect(entries).toContainEqual(expect.objectContaining({ msg: 'request completed', route: '/v1/jobs', statusCode: 401 }))
    expect(entries.map((e) => e.msg)).toContain('api stopped')
    // one line says where it listens (not Fastify's own as well)
    const listenLines = entries.filter((e) => /listening/i.test(String(e.msg)))
    expect(listenLines).toEqual([expect.objectContaining({ level: 30, msg: 'api listening', urls: [expect.stringMatching(/^http:\/\/127\.0\.0\.1:\d+$/)] })])
    expect(listenLines[0]?.urls).toEqual([listenLines[0]?.url])
    const log = output
    expect(log).not.toContain(key)
    expect(log).not.toContain('do-not-log')
  })

  it("answers requests the HTTP parser refuses in the API's error form and logs no byte of them, even at trace", async () => {
    const key = (await scheduler(['keys', 'create', '--tenant', 'acme'])).stdout.trim()
    const child = spawn('node', ['bin/scheduler', 'api', '--port', '0', '--host', '127.0.0.1'], {
      env: { ...process.env, LOG_LEVEL: 'trace', DATABASE_URL: t.url },
      stdio: ['ignore', 'pipe', 'inherit'],
    })
    const exited = once(child, 'exit')
    let output = ''
    const listening = new Promise<string>((resolve) => {
      child.stdout.on('data', (chunk: Buffer) => {
        output += chunk.toString('utf8')
        const match = /"url":"(http:\/\/[^"]+)","msg":"api listening"/.exec(output)
        if (match) resolve(match[1] as string)
      })
    })
    const raw = (port: number, request: string) =>
      new Promise<string>((resolve, reject) => {
        const socket = connect(port, '127.0.0.1', () => socket.end(request))
        let got = ''
        socket.on('data', (d: Buffer) => {
          got += d.toString('utf8')
        })
        socket.on('close', () => resolve(got))
        socket.on('error', reject)
      })
    const clientErrors = () => output.split('\n').filter((line) => line.includes('"msg":"client error"'))
    try {
      const url = new URL(await Promise.race([listening, exited.then(() => Promise.reject(new Error(`api exited early:\n${output}`)))]))
      const port = Number(url.port)
      const auth = `Authorization: Bearer ${key}\r\n`
      const answers = [
        // a header name with a space in it, after the key
        await raw(port, `POST /v1/jobs HTTP/1.1\r\nHost: x\r\n${auth}Bad Header: x\r\nContent-Length: 28\r\n\r\n{"payload":"do-not-log-raw"}`),
        // headers over the parser's limit
        await raw(port, `GET /v1/jobs HTTP/1.1\r\nHost: x\r\n${auth}X-Big: ${'b'.repeat(20_000)}\r\n\r\n`),
      ]
      const [bad, big] = answers.map((a) => ({ status: a.split('\r\n')[0], body: JSON.parse(a.slice(a.indexOf('\r\n\r\n') + 4)) as unknown }))
      expect(bad).toEqual({ status: 'HTTP/1.1 400 Bad Request', body: { statusCode: 400, error: 'Bad Request', message: 'the request is not valid HTTP/1.1' } })
      expect(big).toEqual({
        status: 'HTTP/1.1 431 Request Header Fields Too Large',
        body: { statusCode: 431, error: 'Request Header Fields Too Large', message: 'the request headers are larger than the server accepts (16 KB)' },
      })
      await waitFor(() => clientErrors().length >= 2, { what: `two client errors logged:\n${output.slice(-2000)}` })
    } finally {
      child.kill('SIGTERM')
    }
    await exited
    expect(clientErrors().map((line) => JSON.parse(line) as Record<string, unknown>)).toEqual([
      expect.objectContaining({ level: 20, code: 'HPE_INVALID_HEADER_TOKEN', reason: expect.any(String) }),
      expect.objectContaining({ level: 20, code: 'HPE_HEADER_OVERFLOW' }),
    ])
    // the log as text, with any Buffer written as {"type":"Buffer","data":[…]} read back as its bytes
    const decoded = output.replace(/\{"type":"Buffer","data":\[([0-9,]*)\]\}/g, (_m, bytes: string) =>
      Buffer.from(bytes === '' ? [] : bytes.split(',').map(Number)).toString('latin1'),
    )
    expect(decoded).not.toContain(key)
    expect(decoded).not.toContain('do-not-log-raw')
    expect(output).not.toContain('rawPacket')
  })

  it('logs once that it listens, on a wildcard host with every address of the machine', async () => {
    const child = spawn('node', ['bin/scheduler', 'api', '--port', '0', '--host', '0.0.0.0'], {
      env: { ...process.env, LOG_LEVEL: 'info', DATABASE_URL: t.url },
      stdio: ['ignore', 'pipe', 'inherit'],
    })
    const exited = once(child, 'exit')
    let output = ''
    const listening = new Promise<void>((resolve) => {
      child.stdout.on('data', (chunk: Buffer) => {
        output += chunk.toString('utf8')
        if (output.includes('"msg":"api listening"')) resolve()
      })
    })
    try {
      await Promise.race([listening, exited.then(() => Promise.reject(new Error(`api exited early:\n${output}`)))])
    } finally {
      child.kill('SIGTERM')
    }
    expect((await exited)[0]).toBe(0)
    const lines = output
      .trim()
      .split('\n')
      .map((line) => JSON.parse(line) as { msg: string; url?: string; urls?: string[] })
      .filter((e) => /listening/i.test(e.msg))
    expect(lines).toHaveLength(1)
    const port = new URL(lines[0]?.url as string).port
    const addresses = Object.values(networkInterfaces())
      .flatMap((list) => list ?? [])
      .filter((i) => i.family === 'IPv4')
    expect(lines[0]?.urls?.[0]).toBe(`http://127.0.0.1:${port}`)
    expect([...(lines[0]?.urls ?? [])].sort()).toEqual(addresses.map((i) => `http://${i.address}:${port}`).sort())
  })
})

describe('scheduler dev', () => {
  it('serves the API and prints a development key with a curl line that works', async () => {
    const dataDir = mkdtempSync(join(tmpdir(), 'pgsched-dev-'))
    onTestFinished(() => rmSync(dataDir, { recursive: true, force: true }))
    const child = spawn('node', ['bin/scheduler', 'dev'], {
      env: { ...process.env, LOG_LEVEL: 'warn', DATABASE_URL: t.url, PORT: '0', SCHEDULER_DEV_DATA_DIR: dataDir },
      stdio: ['ignore', 'pipe', 'inherit'],
    })
    const exited = once(child, 'exit')
    let output = ''
    const printed = new Promise<{ key: string; url: string; body: string }>((resolve) => {
      child.stdout.on('data', (chunk: Buffer) => {
        output += chunk.toString('utf8')
        const match = /curl -i -H 'Authorization: Bearer (psk_[A-Za-z0-9_-]{43})' -H 'Content-Type: application\/json' -d '([^']+)' (http:\/\/\S+)\n/.exec(
          output,
        )
        if (match) resolve({ key: match[1] as string, body: match[2] as string, url: match[3] as string })
      })
    })
    try {
      const { key, url, body } = await Promise.race([printed, exited.then(() => Promise.reject(new Error(`dev exited early:\n${output}`)))])
      expect(output).toContain(`development API key (tenant "dev"): ${key}`)
      const res = await fetch(url, { method: 'POST', headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' }, body })
      expect(res.status).toBe(202)
      expect(((await res.json()) as { tenant: string }).tenant).toBe('dev')
      expect(url).toMatch(/^http:\/\/127\.0\.0\.1:\d+\/v1\/jobs$/) // dev listens on 127.0.0.1 without HOST
    } finally {
      child.kill('SIGTERM')
    }
    expect((await exited)[0]).toBe(0)
  })
})
