import { sql } from 'kysely'
import { afterEach, describe, expect, it } from 'vitest'
import { waitForDatabase } from '../../src/db/wait-for-database.ts'
import { useTestDb } from '../db.ts'
import { waitFor } from '../wait-for.ts'
import { startTcpProxy, viaProxy, type TcpProxy } from '../worker/tcp-proxy.ts'
import { capturingLogger as captureLog } from '../log-capture.ts'

const t = useTestDb()

/** A logger whose lines are kept, parsed. */
const capturingLogger = () => captureLog<Record<string, unknown>>()

let proxy: TcpProxy | undefined
afterEach(async () => {
  await proxy?.close()
  proxy = undefined
})

describe('waitForDatabase', () => {
  it('returns at once, logging nothing, when the database answers', async () => {
    const { log, lines } = capturingLogger()
    expect(await waitForDatabase({ databaseUrl: t.url, log, signal: new AbortController().signal })).toBe(true)
    expect(lines).toEqual([])
  })

  it('retries an unreachable database with growing waits, logging each, until it answers', async () => {
    proxy = await startTcpProxy({ host: new URL(t.url).hostname, port: Number(new URL(t.url).port || 5432) })
    const url = viaProxy(t.url, proxy)
    await proxy.close() // the port now refuses connections
    const { log, lines } = capturingLogger()
    const waiting = waitForDatabase({ databaseUrl: url, log, signal: new AbortController().signal, firstDelayMs: 20, maxDelayMs: 200 })
    await waitFor(() => lines.length >= 4, { what: 'four waits logged' })
    await proxy.reopen()
    expect(await waiting).toBe(true)
    const waits = lines.filter((l) => l.msg === 'database unreachable at start-up; retrying')
    expect(waits.length).toBeGreaterThanOrEqual(4)
    expect(waits.map((l) => l.attempt)).toEqual(waits.map((_, i) => i + 1))
    const delays = waits.map((l) => l.retryInMs as number)
    expect(delays[0]).toBeLessThanOrEqual(24) // 20 ms ± 20 %
    expect(delays[3]).toBeGreaterThanOrEqual(128) // 160 ms ± 20 %
    for (const d of delays) expect(d).toBeLessThanOrEqual(240)
    expect(waits[0]).toMatchObject({ level: 40, err: expect.objectContaining({ code: 'ECONNREFUSED' }) })
    expect(lines.at(-1)).toMatchObject({ msg: 'database reachable', attempt: waits.length + 1 })
  })

  it('retries a database that takes connections but never answers (a host dropping packets), each attempt ending at its connect timeout', async () => {
    proxy = await startTcpProxy({ host: new URL(t.url).hostname, port: Number(new URL(t.url).port || 5432) })
    const url = viaProxy(t.url, proxy)
    proxy.blackhole()
    const { log, lines } = capturingLogger()
    const waiting = waitForDatabase({ databaseUrl: url, log, signal: new AbortController().signal, firstDelayMs: 20, maxDelayMs: 50, connectTimeoutMs: 200 })
    await waitFor(() => lines.length >= 2, { what: 'two waits logged' })
    proxy.heal()
    expect(await waiting).toBe(true)
    const waits = lines.filter((l) => l.msg === 'database unreachable at start-up; retrying')
    expect(waits.length).toBeGreaterThanOrEqual(2)
    expect(waits[0]).toMatchObject({ level: 40, err: expect.objectContaining({ message: 'timeout expired' }) })
    expect(lines.at(-1)).toMatchObject({ msg: 'database reachable' })
  })

  it('waits, for a worker, while the database takes no writes, and returns once it does; answers at once without `writable`', async () => {
    const name = new URL(t.url).pathname.slice(1)
    await sql.raw(`alter database ${name} set default_transaction_read_only = on`).execute(t.db)
    try {
      expect(await waitForDatabase({ databaseUrl: t.url, log: capturingLogger().log, signal: new AbortController().signal })).toBe(true)
      const { log, lines } = capturingLogger()
      const waiting = waitForDatabase({ databaseUrl: t.url, log, signal: new AbortController().signal, writable: true, firstDelayMs: 20, maxDelayMs: 50 })
      await waitFor(() => lines.length >= 2, { what: 'two waits logged' })
      expect(JSON.stringify(lines[0])).toContain('the database accepts no writes')
      await sql.raw(`alter database ${name} reset default_transaction_read_only`).execute(t.db)
      expect(await waiting).toBe(true)
    } finally {
      await sql.raw(`alter database ${name} reset default_transaction_read_only`).execute(t.db)
    }
  })

  it('returns false when the signal aborts the wait', async () => {
    const { log, lines } = capturingLogger()
    const abort = new AbortController()
    const waiting = waitForDatabase({ databaseUrl: 'postgres://nobody@127.0.0.1:1/none', log, signal: abort.signal, firstDelayMs: 60_000 })
    await waitFor(() => lines.length >= 1, { what: 'the first wait' })
    abort.abort()
    expect(await waiting).toBe(false)
  })

  it('fails at once when waiting cannot help (a database that does not exist)', async () => {
    const { log, lines } = capturingLogger()
    const url = new URL(t.url)
    url.pathname = '/no_such_database_here'
    await expect(waitForDatabase({ databaseUrl: url.toString(), log, signal: new AbortController().signal })).rejects.toMatchObject({ code: '3D000' })
    expect(lines).toEqual([])
  })
})
