/**
 * The image's entrypoint makes `scheduler` the container's first process (PID 1), which the kernel
 * gives no default action for SIGTERM or SIGINT: a command that does not handle them would ignore
 * `docker stop` until its SIGKILL. Run here in a PID namespace of its own, as in a container.
 */
import { spawn } from 'node:child_process'
import { once } from 'node:events'
import { readFileSync } from 'node:fs'
import pg from 'pg'
import { describe, expect, it } from 'vitest'
import { MIGRATE_LOCK_KEY } from '../../src/db/migrate.ts'
import { useTestDb } from '../db.ts'
import { waitFor } from '../wait-for.ts'

const t = useTestDb()

/** The first child of process `pid` (what `unshare --fork` runs), once it has one. */
function childOf(pid: number): number | undefined {
  const children = readFileSync(`/proc/${pid}/task/${pid}/children`, 'utf8').trim()
  return children === '' ? undefined : Number(children.split(' ')[0])
}

describe('scheduler as the first process of its PID namespace', () => {
  it('ends migrate on SIGTERM, exit code 143, while it waits for another migrate', { timeout: 60_000 }, async () => {
    // another migrate holds the lock: this one waits for it, as long as it takes
    const holder = new pg.Client({ connectionString: t.url })
    await holder.connect()
    await holder.query('select pg_advisory_lock($1::bigint)', [MIGRATE_LOCK_KEY])
    const launcher = spawn('unshare', ['--user', '--map-root-user', '--pid', '--fork', 'node', 'bin/scheduler', 'migrate'], {
      env: { ...process.env, DATABASE_URL: t.url, LOG_LEVEL: 'warn' },
      stdio: ['ignore', 'inherit', 'inherit'],
    })
    const exited = once(launcher, 'exit')
    try {
      await waitFor(
        async () =>
          (
            await holder.query(
              "select 1 from pg_stat_activity where datname = current_database() and application_name = 'pgsched-migrate' and wait_event_type = 'Lock'",
            )
          ).rowCount,
        { timeoutMs: 30_000, what: 'migrate waiting for the lock' },
      )
      const first = childOf(launcher.pid as number)
      expect(first).toBeDefined()
      process.kill(first as number, 'SIGTERM')
      const ended = await Promise.race([exited, new Promise((resolve) => setTimeout(() => resolve('still running'), 10_000))])
      expect(ended).toEqual([143, null])
    } finally {
      launcher.kill('SIGKILL')
      const first = launcher.exitCode === null ? childOf(launcher.pid as number) : undefined
      if (first !== undefined) process.kill(first, 'SIGKILL')
      await holder.end()
    }
  })
})
