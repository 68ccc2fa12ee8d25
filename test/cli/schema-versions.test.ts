/**
 * A database and a build that disagree on the migrations, as in an upgrade or a rollback: a worker
 * of a newer build than the schema refuses to start, naming what `scheduler migrate` would apply,
 * rather than running with statements the schema cannot take; `migrate` of an older build than the
 * schema applies nothing and says the schema is newer, rather than calling it corrupted.
 */
import { type ChildProcessByStdio, spawn } from 'node:child_process'
import { once } from 'node:events'
import { copyFileSync, mkdtempSync, readdirSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import type { Readable } from 'node:stream'
import pg from 'pg'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { loadConfig } from '../../src/config.ts'
import { migrate } from '../../src/db/migrate.ts'
import { InvalidStateError } from '../../src/errors.ts'
import { packageRoot } from '../../src/lib/package-root.ts'
import { createLogger } from '../../src/logger.ts'
import { createWorkerSystem } from '../../src/system.ts'
import { capturingLogger } from '../log-capture.ts'
import { adminQuery, urlFor } from '../db.ts'

const files = readdirSync(join(packageRoot(), 'migrations'))
  .filter((f) => f.endsWith('.sql'))
  .sort()
const names = files.map((f) => f.replace(/\.sql$/, ''))
const latest = names[names.length - 1] as string
const beforeLatest = names[names.length - 2] as string

/** A migrations folder holding every migration of this build but those named. */
function migrationsWithout(...left: string[]): string {
  const dir = mkdtempSync(join(tmpdir(), 'pgsched-migrations-'))
  for (const file of files) if (!left.includes(file.replace(/\.sql$/, ''))) copyFileSync(join(packageRoot(), 'migrations', file), join(dir, file))
  dirs.push(dir)
  return dir
}

const dirs: string[] = []
const older = `schema_older_${process.pid}`
const current = `schema_current_${process.pid}`

async function applied(url: string): Promise<string[]> {
  const client = new pg.Client({ connectionString: url })
  await client.connect()
  try {
    return (await client.query<{ name: string }>('select name from pgsched.kysely_migration order by name')).rows.map((r) => r.name)
  } finally {
    await client.end()
  }
}

beforeAll(async () => {
  await adminQuery(`create database ${older}`)
  await adminQuery(`create database ${current}`)
  // the schema of the build before this one: every migration but the latest
  await migrate({ databaseUrl: urlFor(older), migrationsDir: migrationsWithout(latest) })
  await migrate({ databaseUrl: urlFor(current) })
})
afterAll(async () => {
  await adminQuery(`drop database if exists ${older} with (force)`)
  await adminQuery(`drop database if exists ${current} with (force)`)
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true })
})

describe('a worker of a newer build than the schema', () => {
  it('ends scheduler worker with exit code 1 naming the pending migration, before it starts', { timeout: 30_000 }, async () => {
    const child: ChildProcessByStdio<null, Readable, Readable> = spawn('node', ['bin/scheduler-worker', '--metrics-port', 'off'], {
      env: { ...process.env, DATABASE_URL: urlFor(older), LOG_LEVEL: 'info' },
      stdio: ['ignore', 'pipe', 'pipe'],
    })
    let stdout = ''
    let stderr = ''
    child.stdout.on('data', (chunk: Buffer) => {
      stdout += chunk.toString('utf8')
    })
    child.stderr.on('data', (chunk: Buffer) => {
      stderr += chunk.toString('utf8')
    })
    // (a worker that started runs until it is stopped: give it a bound, then see why)
    const timer = setTimeout(() => child.kill('SIGKILL'), 15_000)
    const [code, signal] = await once(child, 'exit')
    clearTimeout(timer)
    expect({ code, signal }).toEqual({ code: 1, signal: null })
    expect(stderr).toBe(`scheduler: the database's pgsched schema is older than this version (migrations pending: ${latest}): run "scheduler migrate"\n`)
    expect(stdout).not.toContain('worker started')
  })

  it('makes an embedded worker system refuse to start, with an InvalidStateError', async () => {
    const config = loadConfig({ DATABASE_URL: urlFor(older), SCHEDULER_WORKER_METRICS_PORT: 'off' })
    const system = createWorkerSystem({ config, log: createLogger({ level: 'silent' }), handlers: [] })
    const failed = await system.start().catch((err: unknown) => err)
    expect(failed).toBeInstanceOf(InvalidStateError)
    expect((failed as Error).message).toContain(`migrations pending: ${latest}`)
  })

  it('starts once the schema is migrated', async () => {
    const config = loadConfig({ DATABASE_URL: urlFor(current), SCHEDULER_WORKER_METRICS_PORT: 'off' })
    const system = createWorkerSystem({ config, log: createLogger({ level: 'silent' }), handlers: [] })
    try {
      await system.start()
    } finally {
      await system.stop()
    }
  })
})

describe('migrate of an older build than the schema', () => {
  it('applies nothing, exits cleanly and names the migrations it does not know, with a warning', async () => {
    const { log, lines } = capturingLogger<{ level: number; msg: string; migrations?: string[] }>()
    const result = await migrate({ databaseUrl: urlFor(current), migrationsDir: migrationsWithout(latest), log })
    expect(result).toEqual({ applied: [], newer: [latest] })
    expect(lines.filter((l) => l.level === 40)).toMatchObject([{ migrations: [latest], msg: expect.stringMatching(/^the schema is newer than this version/) }])
    expect(await applied(urlFor(current))).toEqual(names)
  })

  it('refuses a schema that has a migration it does not know while it lacks one of its own, applying nothing', async () => {
    await expect(migrate({ databaseUrl: urlFor(older), migrationsDir: migrationsWithout(beforeLatest) })).rejects.toThrow(
      `the database has migrations this version does not know (${beforeLatest}) while it lacks some of this version's (${latest})`,
    )
    expect(await applied(urlFor(older))).toEqual(names.filter((n) => n !== latest))
  })
})
