/**
 * A database `scheduler migrate` was never run on: the worker ends (exit 1) rather than staying up
 * doing nothing, and the CLI, the API and the TypeScript client say to run migrate rather than answer
 * with a bare missing relation or a 500.
 */
import { type ChildProcessByStdio, execFile, spawn } from 'node:child_process'
import { once } from 'node:events'
import { mkdtemp, rm, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join, resolve } from 'node:path'
import { pathToFileURL } from 'node:url'
import type { Readable } from 'node:stream'
import { promisify } from 'node:util'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import net from 'node:net'
import { buildApp } from '../../src/api/app.ts'
import { loadConfig } from '../../src/config.ts'
import { createWorkerSystem } from '../../src/system.ts'
import { createDb } from '../../src/db/pool.ts'
import { createClient } from '../../src/client.ts'
import { createLogger } from '../../src/logger.ts'
import { adminQuery, urlFor } from '../db.ts'

const run = promisify(execFile)
const name = `unmigrated_${process.pid}`
const url = urlFor(name)
const HINT = 'the database\'s pgsched schema is missing or older than this version: run "scheduler migrate"'

beforeAll(async () => {
  await adminQuery(`create database ${name}`)
})
afterAll(async () => {
  await adminQuery(`drop database if exists ${name} with (force)`)
})

describe('a database without the pgsched schema', () => {
  it('ends scheduler worker with exit code 1 and the hint, rather than leaving it up doing nothing', { timeout: 30_000 }, async () => {
    const child: ChildProcessByStdio<null, Readable, Readable> = spawn('node', ['bin/scheduler-worker', '--metrics-port', 'off'], {
      env: { ...process.env, DATABASE_URL: url, LOG_LEVEL: 'warn' },
      stdio: ['ignore', 'pipe', 'pipe'],
    })
    let stderr = ''
    child.stderr.on('data', (chunk: Buffer) => {
      stderr += chunk.toString('utf8')
    })
    const timer = setTimeout(() => child.kill('SIGKILL'), 20_000)
    const [code, signal] = await once(child, 'exit')
    clearTimeout(timer)
    expect({ code, signal }).toEqual({ code: 1, signal: null })
    expect(stderr).toContain('scheduler: the database has no pgsched schema: run "scheduler migrate"')
  })

  it('ends scheduler worker with exit code 1 even when its handlers module keeps a timer open', { timeout: 30_000 }, async () => {
    const dir = await mkdtemp(join(tmpdir(), 'pgsched-handlers-'))
    const module = join(dir, 'handlers.mjs')
    // a handlers module that opens something at import (a pool, a client, a refresh timer)
    const index = pathToFileURL(resolve('dist/src/index.js')).href
    await writeFile(
      module,
      `import { defineHandler } from ${JSON.stringify(index)}\nsetInterval(() => {}, 60_000)\nexport const held = defineHandler('held', async () => 1)\n`,
    )
    try {
      const child = spawn('node', ['bin/scheduler', 'worker', '--handlers', module, '--metrics-port', 'off'], {
        env: { ...process.env, DATABASE_URL: url, LOG_LEVEL: 'warn' },
        stdio: ['ignore', 'pipe', 'pipe'],
      })
      let stderr = ''
      child.stderr.on('data', (chunk: Buffer) => {
        stderr += chunk.toString('utf8')
      })
      const timer = setTimeout(() => child.kill('SIGKILL'), 20_000)
      const [code, signal] = await once(child, 'exit')
      clearTimeout(timer)
      expect(stderr).toContain('the database has no pgsched schema')
      expect({ code, signal }).toEqual({ code: 1, signal: null })
    } finally {
      await rm(dir, { recursive: true, force: true })
    }
  })

  it('makes an embedded worker system release what it started when its start fails, and refuse a second start', async () => {
    // the documented embedding: loadConfig(env) as it is (its databaseUrl is optional in its type)
    const free = await new Promise<number>((resolve) => {
      const server = net.createServer().listen(0, '127.0.0.1', () => {
        const { port } = server.address() as net.AddressInfo
        server.close(() => resolve(port))
      })
    })
    const config = loadConfig({ DATABASE_URL: url, SCHEDULER_WORKER_METRICS_PORT: String(free), SCHEDULER_WORKER_METRICS_HOST: '127.0.0.1' })
    const system = createWorkerSystem({ config, log: createLogger({ level: 'silent' }), handlers: [] })
    await expect(system.start()).rejects.toThrow('the database has no pgsched schema: run "scheduler migrate"')
    // the metrics server it had opened is closed again, and its pools are gone
    const port = system.metricsPort()
    expect(port).toBe(free)
    const refused = await new Promise<string>((resolve) => {
      const socket = net.connect(port as number, '127.0.0.1', () => resolve('connected'))
      socket.on('error', (err: NodeJS.ErrnoException) => resolve(err.code ?? 'error'))
    })
    expect(refused).toBe('ECONNREFUSED')
    await expect(system.database.db.selectFrom('pgsched.jobs').selectAll().execute()).rejects.toThrow()
    await expect(system.start()).rejects.toThrow('this worker system was started already')
    await expect(system.start()).rejects.toMatchObject({ name: 'InvalidStateError', code: 'invalid_state' })
    expect(() => createWorkerSystem({ config: loadConfig({}), log: createLogger({ level: 'silent' }), handlers: [] })).toThrow(
      'createWorkerSystem: config.databaseUrl must be set',
    )
  })

  it('makes the CLI name the remedy', async () => {
    const failed = await run('node', ['bin/scheduler', 'jobs', 'list'], { env: { ...process.env, DATABASE_URL: url } }).catch((err: unknown) => err)
    expect(failed).toMatchObject({ code: 1, stderr: `scheduler: relation "pgsched.jobs" does not exist (${HINT})\n` })
  })

  it('makes the API answer 503 with the remedy, not 500', async () => {
    const database = createDb({ databaseUrl: url, poolSize: 2 })
    const app = buildApp({ db: database.db, log: createLogger({ level: 'silent' }) })
    try {
      const res = await app.inject({ method: 'GET', url: '/v1/jobs', headers: { authorization: `Bearer psk_${'a'.repeat(43)}` } })
      expect(res.statusCode).toBe(503)
      expect(res.json().message).toBe(HINT)
    } finally {
      await app.close()
      await database.db.destroy()
    }
  })

  it('makes the TypeScript client name the remedy, on its own pool and on a Kysely it is given, keeping the SQLSTATE', async () => {
    const own = createClient({ databaseUrl: url, poolSize: 1 })
    const database = createDb({ databaseUrl: url, poolSize: 1 })
    const given = createClient({ db: database.db })
    try {
      for (const client of [own, given]) {
        for (const call of [
          () => client.submitJob({ type: 'mail.send', payload: {} }),
          () => client.viewJob('0190d4a2-1111-7000-8000-000000000000'),
          () => client.queues.list(),
        ]) {
          const err = (await call().catch((e: unknown) => e)) as Error & { code?: string }
          expect(err).toBeInstanceOf(Error)
          expect(err.message).toMatch(/^relation "pgsched\.\w+" does not exist \(/)
          expect(err.message.endsWith(`(${HINT})`)).toBe(true)
          expect(err.code).toBe('42P01')
        }
      }
    } finally {
      await own.close()
      await database.db.destroy()
    }
  })
})
