/**
 * `scheduler dev` as a new user meets it: no DATABASE_URL (an embedded Postgres in a fresh data
 * folder), the printed curl line run as printed, a restart that keeps the key, and Ctrl-C sent to
 * the whole process group, as a terminal does. Ports are free ones, never the defaults.
 */
import { execFile, spawn } from 'node:child_process'
import { once } from 'node:events'
import { chmodSync, mkdtempSync, rmSync, statSync, writeFileSync } from 'node:fs'
import { createServer } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { pathToFileURL } from 'node:url'
import { promisify } from 'node:util'
import pg from 'pg'
import { afterAll, describe, expect, it } from 'vitest'
import { useTestDb } from '../db.ts'
import { waitFor } from '../wait-for.ts'

const run = promisify(execFile)
const t = useTestDb({ truncate: false })

async function freePort(): Promise<number> {
  const server = createServer()
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  const address = server.address()
  await new Promise<void>((resolve) => server.close(() => resolve()))
  if (typeof address !== 'object' || !address) throw new Error('no port')
  return address.port
}

/** Whether nothing listens on the port any more. */
async function portFree(port: number): Promise<boolean> {
  const server = createServer()
  const free = await new Promise<boolean>((resolve) => {
    server.once('error', () => resolve(false))
    server.listen(port, '127.0.0.1', () => resolve(true))
  })
  if (free) await new Promise<void>((resolve) => server.close(() => resolve()))
  return free
}

// As root the embedded server runs as the postgres user, which must be able to enter the folder.
const dataDir = mkdtempSync(join(tmpdir(), 'pgsched-dev-'))
chmodSync(dataDir, 0o711)
const children: number[] = []
afterAll(() => {
  for (const pid of children) {
    try {
      process.kill(-pid, 'SIGKILL')
    } catch {
      // already gone
    }
  }
  rmSync(dataDir, { recursive: true, force: true })
})

interface DevRun {
  output(): string
  ready: Promise<{ key: string; curl: string; apiUrl: string; databaseUrl: string }>
  /** Ctrl-C as a terminal sends it: SIGINT to the whole process group. */
  interrupt(): Promise<number | null>
}

/** `scheduler dev` with `args`; on the embedded Postgres unless `databaseUrl` names a database. */
function startDev(ports: { api: number; pg: number }, options: { args?: string[]; databaseUrl?: string; env?: NodeJS.ProcessEnv } = {}): DevRun {
  const env: NodeJS.ProcessEnv = {
    ...process.env,
    ...options.env,
    LOG_LEVEL: 'info',
    SCHEDULER_DEV_DATA_DIR: dataDir,
    SCHEDULER_DEV_PG_PORT: String(ports.pg),
    PORT: String(ports.api),
  }
  delete env.DATABASE_URL
  delete env.HOST
  delete env.SCHEDULER_HANDLERS
  if (options.databaseUrl) env.DATABASE_URL = options.databaseUrl
  const child = spawn('node', ['bin/scheduler', 'dev', ...(options.args ?? [])], { env, detached: true, stdio: ['ignore', 'pipe', 'pipe'] })
  children.push(child.pid as number)
  const exited = once(child, 'exit')
  let text = ''
  child.stdout.on('data', (chunk: Buffer) => {
    text += chunk.toString('utf8')
  })
  child.stderr.on('data', (chunk: Buffer) => {
    text += chunk.toString('utf8')
  })
  const ready = Promise.race([
    waitFor(
      () => {
        if (!text.includes('pgsched is ready')) return undefined
        const key = /development API key \(tenant "dev"\): (psk_\S+)/.exec(text)?.[1]
        const curl = /^ {2}(curl .*)$/m.exec(text)?.[1]
        const apiUrl = /^REST API: (http:\/\/\S+)/m.exec(text)?.[1]
        const databaseUrl = options.databaseUrl ?? /^embedded Postgres: (postgres:\/\/\S+)/m.exec(text)?.[1]
        return key && curl && apiUrl && databaseUrl ? { key, curl, apiUrl, databaseUrl } : undefined
      },
      { timeoutMs: 90_000, what: 'scheduler dev ready' },
    ),
    exited.then(() => Promise.reject(new Error(`scheduler dev exited early:\n${text}`))),
  ])
  return {
    output: () => text,
    ready,
    async interrupt() {
      process.kill(-(child.pid as number), 'SIGINT')
      return (await exited)[0] as number | null
    },
  }
}

/** Lines that would alarm a user at shutdown: warnings, errors, stacks, dumped objects. */
function alarming(output: string): string[] {
  return output.split('\n').filter((line) => {
    if (line.startsWith('{')) return (JSON.parse(line) as { level: number }).level >= 40
    return /warn|error|ECONNRESET|terminating connection|Client \{|^\s+at /i.test(line)
  })
}

/** The job's executions, as `state/attempt`. */
async function executions(databaseUrl: string, jobId: string): Promise<string[]> {
  const client = new pg.Client({ connectionString: databaseUrl })
  await client.connect()
  try {
    const { rows } = await client.query<{ state: string; attempt: number }>('select state, attempt from pgsched.executions where job_id = $1', [jobId])
    return rows.map((r) => `${r.state}/${r.attempt}`)
  } finally {
    await client.end()
  }
}

describe('scheduler dev without DATABASE_URL', () => {
  it('prints a curl line whose echo job succeeds offline at once, keeps its key across a restart, and stops quietly on Ctrl-C', {
    timeout: 240_000,
  }, async () => {
    const ports = { api: await freePort(), pg: await freePort() }
    const first = startDev(ports)
    const printed = await first.ready
    expect(printed.apiUrl).toBe(`http://127.0.0.1:${ports.api}`)
    expect(printed.curl).not.toContain('example.com')
    // Ready means listening: the printed line works the moment it is printed.
    const { stdout } = await run('sh', ['-c', `${printed.curl} --silent --show-error`])
    const jobId = (/"id":"([0-9a-f-]{36})"/.exec(stdout) as RegExpExecArray)[1] as string
    await waitFor(async () => (await executions(printed.databaseUrl, jobId)).join() === 'succeeded/1', { timeoutMs: 30_000, what: 'the echo job succeeded' })

    const keyFile = join(dataDir, 'dev-api-key')
    expect(statSync(keyFile).mode & 0o777).toBe(0o600)
    expect(await first.interrupt()).toBe(0)
    expect(alarming(first.output())).toEqual([])
    expect(first.output()).toContain('pgsched stopped')

    const second = startDev(ports)
    const again = await second.ready
    expect(again.key).toBe(printed.key)
    const res = await fetch(`${again.apiUrl}/v1/jobs/${jobId}`, { headers: { authorization: `Bearer ${printed.key}` } })
    expect(res.status).toBe(200)
    expect(await second.interrupt()).toBe(0)
    expect(alarming(second.output())).toEqual([])

    expect(await portFree(ports.api)).toBe(true)
    expect(await portFree(ports.pg)).toBe(true)
  })
})

describe('scheduler dev --handlers', () => {
  it("runs the named module's handlers beside the built-in ones", { timeout: 120_000 }, async () => {
    const module = join(dataDir, 'handlers.mjs')
    const index = pathToFileURL(join(process.cwd(), 'dist/src/index.js')).href
    writeFileSync(module, `import { defineHandler } from '${index}'\nexport const mine = defineHandler('mine.job', async (ctx) => ({ got: ctx.payload }))\n`)
    const dev = startDev({ api: await freePort(), pg: await freePort() }, { args: ['--handlers', module], databaseUrl: t.url })
    const printed = await dev.ready
    expect(dev.output()).toMatch(/^worker: queues default; handlers .*\bmine\.job\b/m)
    const res = await fetch(`${printed.apiUrl}/v1/jobs`, {
      method: 'POST',
      headers: { authorization: `Bearer ${printed.key}`, 'content-type': 'application/json' },
      body: JSON.stringify({ type: 'mine.job', payload: { n: 7 } }),
    })
    expect(res.status).toBe(202)
    const { id } = (await res.json()) as { id: string }
    await waitFor(async () => (await executions(t.url, id)).join() === 'succeeded/1', { timeoutMs: 30_000, what: 'the job of the named module to succeed' })
    expect(await dev.interrupt()).toBe(0)
  })

  it('says so on a schema newer than this version, and takes an empty SCHEDULER_WORKER_METRICS_HOST as none', { timeout: 120_000 }, async () => {
    const later = '9999_from_a_later_version'
    const client = new pg.Client({ connectionString: t.url })
    await client.connect()
    try {
      await client.query('insert into pgsched.kysely_migration (name, timestamp) values ($1, now())', [later])
      const dev = startDev({ api: await freePort(), pg: await freePort() }, { databaseUrl: t.url, env: { SCHEDULER_WORKER_METRICS_HOST: '' } })
      await dev.ready
      expect(dev.output()).toContain(`schema: newer than this version (it has ${later}, which this version does not know); nothing applied`)
      expect(dev.output()).not.toContain('schema: up to date')
      expect(await dev.interrupt()).toBe(0)
    } finally {
      await client.query('delete from pgsched.kysely_migration where name = $1', [later])
      await client.end()
    }
  })
})
