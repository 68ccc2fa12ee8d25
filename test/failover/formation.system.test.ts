/**
 * The pg_auto_failover formation of formation.ts, checked on its own: one primary and one
 * synchronous secondary; a planned failover; the loss of the primary (its postmaster and its
 * pg_autoctl killed with SIGKILL), after which the monitor promotes the other node; a committed row
 * survives both; a client that requires a synchronous standby (requireSyncStandby) submits while
 * the primary has one and is refused once it has none; and nothing is left once the formation is
 * destroyed.
 */
import { execFileSync } from 'node:child_process'
import { existsSync } from 'node:fs'
import pg from 'pg'
import { afterAll, describe, expect, it } from 'vitest'
import { createClient } from '../../src/client.ts'
import { migrate } from '../../src/db/migrate.ts'
import { UnreplicatedError } from '../../src/errors.ts'
import { alive, createFormation, type Formation } from './formation.ts'

let formation: Formation | undefined

afterAll(async () => {
  await formation?.destroy()
}, 60_000)

/** Runs one statement on a connection of its own (an application's URL may pick another host each time). */
async function rowsOf<R extends pg.QueryResultRow>(url: string, text: string, values: unknown[] = []): Promise<R[]> {
  const client = new pg.Client({ connectionString: url, connectionTimeoutMillis: 5_000 })
  await client.connect()
  try {
    return (await client.query<R>(text, values)).rows
  } finally {
    await client.end()
  }
}

/**
 * What target_session_attrs=read-write does in libpq, for the `pg` driver (one host per URL): the
 * URL of the first host of `url` that answers and is not in recovery.
 */
async function readWriteHost(url: string): Promise<string> {
  const shape = /^postgres:\/\/([^@/]*@)?([^/?]*)(\/[^?]*)\?(.*)$/.exec(url)
  expect(shape).not.toBeNull()
  const [, user = '', hosts = '', path = '', query = ''] = shape as RegExpExecArray
  const params = new URLSearchParams(query)
  expect(params.get('target_session_attrs')).toBe('read-write')
  params.delete('target_session_attrs')
  for (const host of hosts.split(',')) {
    const hostUrl = `postgres://${user}${host}${path}?${params}`
    try {
      const [row] = await rowsOf<{ recovery: boolean }>(hostUrl, 'select pg_is_in_recovery() as recovery')
      if (row?.recovery === false) return hostUrl
    } catch {
      // down: the next host
    }
  }
  throw new Error(`no host of ${url} takes writes`)
}

async function one<R extends pg.QueryResultRow>(url: string, text: string, values: unknown[] = []): Promise<R> {
  const rows = await rowsOf<R>(url, text, values)
  expect(rows).toHaveLength(1)
  return rows[0] as R
}

describe('a pg_auto_failover formation', () => {
  it('fails over on request and when the primary dies, keeping committed rows; destroy leaves nothing', { timeout: 180_000 }, async () => {
    const createdAt = Date.now()
    const f = await createFormation({ dbname: 'pgsched' })
    formation = f
    const createMs = Date.now() - createdAt
    const [port1, port2] = f.ports

    // One primary, one secondary; the primary waits for the standby at commit.
    const states = await f.states()
    expect(states.map((s) => [s.port, s.reportedState, s.goalState])).toEqual([
      [port1, 'primary', 'primary'],
      [port2, 'secondary', 'secondary'],
    ])
    expect(await f.primary()).toBe(port1)
    const onPrimary = await one<{ names: string; recovery: boolean; standby: string }>(
      f.node(port1).url,
      `select current_setting('synchronous_standby_names') as names, pg_is_in_recovery() as recovery,
              (select string_agg(state || ' ' || sync_state, ', ') from pg_stat_replication) as standby`,
    )
    expect(onPrimary.recovery).toBe(false)
    expect(onPrimary.names).toMatch(/^ANY 1 \(pgautofailover_standby_\d+\)$/)
    expect(onPrimary.standby).toBe('streaming quorum')
    // A plain psql as root reaches the primary as user postgres, without a password.
    const psql = execFileSync('psql', [f.node(port1).url.replace('?sslmode=disable', ''), '-XAtc', 'select current_user'], { encoding: 'utf8' })
    expect(psql.trim()).toBe('postgres')
    expect((await one<{ recovery: boolean }>(f.node(port2).url, 'select pg_is_in_recovery() as recovery')).recovery).toBe(true)
    expect(f.url).toBe(`postgres://postgres@127.0.0.1:${port1},127.0.0.1:${port2}/pgsched?target_session_attrs=read-write&sslmode=disable`)

    // Through the application URL: lands on the primary.
    let app = await readWriteHost(f.url)
    expect(app).toBe(f.node(port1).url)
    await rowsOf(app, 'create table failover_check (id int primary key, note text not null)')
    await one(app, `insert into failover_check values (1, 'before any failover') returning id`)

    // A planned failover: node2 is primary, node1 its synchronous secondary.
    const failover = await f.performFailover()
    expect(failover).toMatchObject({ from: port1, to: port2 })
    expect(await f.primary()).toBe(port2)
    app = await readWriteHost(f.url)
    expect(app).toBe(f.node(port2).url)
    expect((await one<{ note: string }>(app, 'select note from failover_check where id = 1')).note).toBe('before any failover')
    await one(app, `insert into failover_check values (2, 'after the planned failover') returning id`)
    // A primary with a synchronous standby acknowledges a client that requires one.
    await migrate({ databaseUrl: f.url })
    const strict = createClient({ databaseUrl: f.url, tenant: 'strict', requireSyncStandby: true })
    const loose = createClient({ databaseUrl: f.url, tenant: 'strict' })
    const replicated = await strict.submitJob({ type: 'check', idempotencyKey: 'with-standby' })
    expect(replicated.created).toBe(true)
    expect(await strict.submitJobs([{ type: 'check' }, { type: 'check' }])).toHaveLength(2)

    // The primary is lost: the monitor promotes node1.
    const before = f.processes()
    const killed = await f.killPrimaryPostmaster()
    expect(killed.port).toBe(port2)
    const promoted = await f.waitForPrimary(port2)
    const killToPrimaryMs = Date.now() - killed.at
    expect(promoted).toBe(port1)
    expect(f.node(port2).running()).toBe(false)
    app = await readWriteHost(f.url)
    expect(app).toBe(f.node(port1).url)
    expect(await rowsOf(app, 'select id, note from failover_check order by id')).toEqual([
      { id: 1, note: 'before any failover' },
      { id: 2, note: 'after the planned failover' },
    ])
    // Without a standby the new primary no longer waits for one (wait_primary).
    expect((await one<{ names: string }>(app, `select current_setting('synchronous_standby_names') as names`)).names).toBe('')
    expect((await f.states()).find((s) => s.port === port1)?.reportedState).toBe('wait_primary')
    // Such a primary acknowledges what a failover would lose: a client that requires a synchronous
    // standby is refused (the job may be written; a retry with the key replays it once a standby is back).
    await expect(strict.submitJob({ type: 'check', idempotencyKey: 'alone' })).rejects.toThrow(UnreplicatedError)
    await expect(strict.submitJobs([{ type: 'check' }])).rejects.toThrow(/no synchronous standby now/)
    expect((await strict.viewJob(replicated.job.id)).id).toBe(replicated.job.id)
    expect((await loose.submitJob({ type: 'check' })).created).toBe(true)
    await strict.close()
    await loose.close()

    console.info(
      `formation: created in ${createMs} ms; pg_autoctl perform failover → new primary and old one secondary in ${failover.ms} ms; ` +
        `SIGKILL of the primary → new primary out of recovery in ${killToPrimaryMs} ms`,
    )
    expect(failover.ms).toBeLessThan(30_000)
    expect(killToPrimaryMs).toBeLessThan(30_000)

    // Destroy: the folder and every process of the formation are gone; a second call is harmless.
    const pids = [...new Set([...before, ...f.processes()])]
    expect(pids.length).toBeGreaterThan(10)
    await f.destroy()
    await f.destroy()
    expect(existsSync(f.dir)).toBe(false)
    expect(f.processes()).toEqual([])
    expect(pids.filter(alive)).toEqual([])
  })
})
