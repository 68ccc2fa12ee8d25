import { execFile } from 'node:child_process'
import { randomBytes } from 'node:crypto'
import { promisify } from 'node:util'
import { afterAll, describe, expect, it } from 'vitest'
import { PARTITION_COUNT_DEFAULT } from '../../src/core/names.ts'
import { adminQuery, urlFor } from '../db.ts'

const run = promisify(execFile)
const name = `c_${randomBytes(6).toString('hex')}`
const eight = `c_${randomBytes(6).toString('hex')}`

afterAll(async () => {
  await adminQuery(`drop database if exists ${name} with (force)`)
  await adminQuery(`drop database if exists ${eight} with (force)`)
})

/** Runs the CLI; killed after 30 s, so a command that should have refused to start (an API, a worker) is not left running. */
function scheduler(args: string[], env: Record<string, string> = {}) {
  return run('node', ['bin/scheduler', ...args], { env: { ...process.env, LOG_LEVEL: 'warn', ...env }, timeout: 30_000, killSignal: 'SIGKILL' })
}

describe('scheduler migrate', () => {
  it('exits 0 in two concurrent runs and reports nothing to do on the next', async () => {
    await adminQuery(`create database ${name}`)
    const env = { DATABASE_URL: urlFor(name) }
    const [a, b] = await Promise.all([scheduler(['migrate'], env), scheduler(['migrate'], env)])
    const outputs = [a.stdout, b.stdout].sort()
    expect(outputs[0]).toMatch(/^applied \d+ migration\(s\): 0001_init, /)
    expect(outputs[1]).toBe('schema is up to date\n')
    const again = await scheduler(['migrate'], env)
    expect(again.stdout).toBe('schema is up to date\n')
  })

  it('exits 2 naming both counts when --partitions differs from the installed schema', async () => {
    // The first test above installed the schema with the default count.
    const env = { DATABASE_URL: urlFor(name) }
    const err = await scheduler(['migrate', '--partitions', '8'], env).catch((e: unknown) => e)
    expect(err).toMatchObject({ code: 2 })
    expect((err as { stderr: string }).stderr).toContain(`the schema is installed with ${PARTITION_COUNT_DEFAULT} partitions, but 8 were asked for`)
    const fromEnv = await scheduler(['migrate'], { ...env, SCHEDULER_PARTITIONS: '8' }).catch((e: unknown) => e)
    expect(fromEnv).toMatchObject({ code: 2 })
    expect((await scheduler(['migrate', '--partitions', String(PARTITION_COUNT_DEFAULT)], env)).stdout).toBe('schema is up to date\n')
  })

  it('takes an empty SCHEDULER_PARTITIONS as not set: the installed count, whatever it is', async () => {
    await adminQuery(`create database ${eight}`)
    const env = { DATABASE_URL: urlFor(eight) }
    expect((await scheduler(['migrate', '--partitions', '8'], env)).stdout).toMatch(/^applied \d+ migration\(s\)/)
    expect((await scheduler(['migrate'], { ...env, SCHEDULER_PARTITIONS: '' })).stdout).toBe('schema is up to date\n')
  })

  it('exits 2 with a message naming the variable when configuration is invalid', async () => {
    const err = await scheduler(['migrate'], { DATABASE_URL: 'mysql://nope', PORT: 'x' }).catch((e: unknown) => e)
    expect(err).toMatchObject({ code: 2 })
    expect((err as { stderr: string }).stderr).toContain('DATABASE_URL must be a postgres:// or postgresql:// URL')
    expect((err as { stderr: string }).stderr).toContain('PORT must be an integer from 0 to 65535')
  })

  it.each(['migrate', 'worker', 'api'])('%s exits 2 naming the problem when DATABASE_URL is malformed', async (command) => {
    const attrs = await scheduler([command], { DATABASE_URL: 'postgres://h1:5432,h2:5433/db?target_session_attrs=read-only' }).catch((e: unknown) => e)
    expect(attrs).toMatchObject({ code: 2 })
    expect((attrs as { stderr: string }).stderr).toContain('DATABASE_URL has target_session_attrs=read-only; pgsched writes')
    const malformed = await scheduler([command], { DATABASE_URL: 'postgres://h 1/db' }).catch((e: unknown) => e)
    expect(malformed).toMatchObject({ code: 2 })
    expect((malformed as { stderr: string }).stderr).toContain('DATABASE_URL is not a valid URL')
  })

  it('follows a multi-host DATABASE_URL past a host that does not answer', async () => {
    // The first run above created and migrated the database; port 1 has no server.
    const url = new URL(urlFor(name))
    const { stdout } = await scheduler(['migrate'], {
      DATABASE_URL: `postgres://${url.username}${url.password ? `:${url.password}` : ''}@127.0.0.1:1,${url.host}${url.pathname}?target_session_attrs=read-write`,
    })
    expect(stdout).toBe('schema is up to date\n')
  })
})
