import { execFile, spawn } from 'node:child_process'
import { once } from 'node:events'
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { promisify } from 'node:util'
import { afterAll, describe, expect, it } from 'vitest'
import { useTestDb } from '../db.ts'
import { freePort } from '../faults/api-process.ts'
import { waitFor } from '../wait-for.ts'

const run = promisify(execFile)
const t = useTestDb()
const dir = mkdtempSync(join(tmpdir(), 'pgsched-health-'))
afterAll(() => rmSync(dir, { recursive: true, force: true }))

/** Runs the image's health check as if the container's first process had this command line. */
async function healthcheck(argv: string[], env: Record<string, string> = {}): Promise<number> {
  const file = join(dir, `cmdline-${Math.random().toString(36).slice(2)}`)
  writeFileSync(file, `${argv.join('\0')}\0`)
  const result = await run('node', ['docker/healthcheck.mjs', file], {
    env: { ...process.env, PORT: '', HOST: '', SCHEDULER_PORT: '', SCHEDULER_HOST: '', ...env },
  }).then(
    () => 0,
    (err: { code?: number }) => err.code ?? -1,
  )
  return result
}

describe('the Docker image', () => {
  it('checks /healthz for an api container, at --host, SCHEDULER_HOST or HOST and --port, SCHEDULER_PORT or PORT', async () => {
    const port = await freePort()
    const closed = await freePort()
    const child = spawn('node', ['bin/scheduler', 'api', '--host', '127.0.0.1', '--port', String(port)], {
      env: { ...process.env, LOG_LEVEL: 'info', DATABASE_URL: t.url },
      stdio: ['ignore', 'pipe', 'inherit'],
    })
    const exited = once(child, 'exit')
    let out = ''
    child.stdout.on('data', (c: Buffer) => {
      out += c.toString('utf8')
    })
    try {
      await waitFor(() => out.includes('"msg":"api listening"'), { timeoutMs: 30_000, what: 'api listening' })
      const node = ['node', '--max-semi-space-size=4', '/app/bin/scheduler']
      expect(await healthcheck([...node, 'api', '--port', String(port)])).toBe(0)
      expect(await healthcheck([...node, 'api', `--port=${port}`])).toBe(0)
      expect(await healthcheck([...node, 'api'], { PORT: String(port) })).toBe(0)
      expect(await healthcheck(['/sbin/docker-init', '--', '/app/bin/scheduler-api'], { PORT: String(port) })).toBe(0)
      expect(await healthcheck([...node, 'api', '--port', String(closed)])).toBe(1)
      // SCHEDULER_PORT and SCHEDULER_HOST win over PORT and HOST, as the api reads them
      expect(await healthcheck([...node, 'api'], { SCHEDULER_PORT: String(port), PORT: String(closed) })).toBe(0)
      expect(await healthcheck([...node, 'api'], { SCHEDULER_PORT: String(closed), PORT: String(port) })).toBe(1)
      expect(await healthcheck([...node, 'api', '--port', String(port)], { SCHEDULER_HOST: '127.0.0.2', HOST: '127.0.0.1' })).toBe(1)
      // at its --host or HOST (loopback when that is every address)
      expect(await healthcheck([...node, 'api', '--host', '127.0.0.1', '--port', String(port)])).toBe(0)
      expect(await healthcheck([...node, 'api', '--port', String(port)], { HOST: '0.0.0.0' })).toBe(0)
      expect(await healthcheck([...node, 'api', '--host', '127.0.0.2', '--port', String(port)])).toBe(1)
      expect(await healthcheck([...node, 'api', '--port', String(port)], { HOST: '127.0.0.2' })).toBe(1)
    } finally {
      child.kill('SIGTERM')
      await exited
    }
  })

  it('reports a worker or migrate container healthy while it runs (no HTTP to ask)', async () => {
    expect(await healthcheck(['node', '/app/bin/scheduler', 'worker', '--queues', 'api'])).toBe(0)
    expect(await healthcheck(['node', '/app/bin/scheduler-worker'])).toBe(0)
    expect(await healthcheck(['node', '/app/bin/scheduler', 'migrate'])).toBe(0)
  })

  it('builds in layers: dependencies before sources, a health check, the handler rule stated', () => {
    const dockerfile = readFileSync('Dockerfile', 'utf8')
    const order = ['COPY package.json package-lock.json', 'RUN npm ci', 'COPY src ./src'].map((s) => dockerfile.indexOf(s))
    expect(order.every((i) => i >= 0)).toBe(true)
    expect([...order].sort((a, b) => a - b)).toEqual(order)
    expect(dockerfile).toMatch(/^HEALTHCHECK .*docker\/healthcheck\.mjs/m)
    expect(dockerfile).toContain('COPY docker/healthcheck.mjs')
  })
})
