/**
 * Multi-host database URLs (hosts.ts): the hosts are tried in order, a host that does not answer is
 * passed over, and once the host in use is lost the next connections search again and land on the
 * next host that answers. Two loopback TCP proxies in front of the test server stand for two hosts;
 * read-only standbys are skipped in the failover system test, on a real pg_auto_failover formation.
 */
import { createServer, type Server, type Socket } from 'node:net'
import { afterEach, describe, expect, it } from 'vitest'
import { parseDatabaseUrl } from '../../src/db/database-url.ts'
import { createDb, type Database } from '../../src/db/pool.ts'
import { startTcpProxy, type TcpProxy } from '../worker/tcp-proxy.ts'
import { useTestDb } from '../db.ts'
import { waitFor } from '../wait-for.ts'

const t = useTestDb()
const opened: Array<Database | TcpProxy> = []

afterEach(async () => {
  for (const o of opened.splice(0).reverse()) await ('db' in o ? o.db.destroy() : o.close())
})

/** `t.url` with its authority replaced by `hosts` and `query` appended. */
function withHosts(hosts: string, query = ''): string {
  const u = new URL(t.url)
  const auth = u.password ? `${u.username}:${u.password}` : u.username
  return `postgres://${auth}@${hosts}${u.pathname}${query}`
}

describe('parseDatabaseUrl', () => {
  it('splits the hosts, keeps user, database and parameters for each, and defaults to read-write with several hosts', () => {
    const p = parseDatabaseUrl('postgres://u:p%40ss@h1,h2:6432,[::1]:7/db?sslmode=disable&target_session_attrs=read-write')
    expect(p.hosts).toEqual([
      { host: 'h1', port: null, raw: 'h1' }, // the driver's default port
      { host: 'h2', port: 6432, raw: 'h2:6432' },
      { host: '::1', port: 7, raw: '[::1]:7' },
    ])
    expect(p.readWrite).toBe(true)
    expect(p.urlFor(1)).toBe('postgres://u:p%40ss@h2:6432/db?sslmode=disable')
    expect(p.urlFor(2)).toBe('postgres://u:p%40ss@[::1]:7/db?sslmode=disable')
    expect(parseDatabaseUrl('postgres://h1,h2/db').readWrite).toBe(true)
    expect(parseDatabaseUrl('postgres://h1,h2/db?target_session_attrs=any').readWrite).toBe(false)
    expect(parseDatabaseUrl('postgres://h1/db').readWrite).toBe(false)
    expect(parseDatabaseUrl('postgres://h1/db?target_session_attrs=primary').readWrite).toBe(true)
  })

  it('keeps a percent-encoded socket directory as the host, as the driver takes it', () => {
    const p = parseDatabaseUrl('postgres://u@%2Fvar%2Frun%2Fpostgresql/db')
    expect(p.hosts).toEqual([{ host: '/var/run/postgresql', port: null, raw: '%2Fvar%2Frun%2Fpostgresql' }])
    expect(p.urlFor(0)).toBe('postgres://u@%2Fvar%2Frun%2Fpostgresql/db')
  })
})

/** A host that accepts connections and never answers (a frozen server): only a timeout ends a wait for it. */
async function silentHost(): Promise<{ port: number; close(): Promise<void> }> {
  const sockets = new Set<Socket>()
  const server: Server = createServer((socket) => {
    sockets.add(socket)
    socket.on('error', () => undefined)
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  const port = (server.address() as { port: number }).port
  return {
    port,
    close: () =>
      new Promise<void>((resolve) => {
        for (const socket of sockets) socket.destroy()
        server.close(() => resolve())
      }),
  }
}

describe('a multi-host DATABASE_URL', () => {
  it('asks every host at once: two frozen hosts before the live one cost one probe timeout (5 s), not two', async () => {
    const frozen = [await silentHost(), await silentHost()]
    try {
      const server = new URL(t.url)
      const d = createDb({ databaseUrl: withHosts(`127.0.0.1:${frozen[0]?.port},127.0.0.1:${frozen[1]?.port},${server.host}`), poolSize: 4 })
      opened.push(d)
      const startedAt = performance.now()
      // four connections at once share one search
      const ports = await Promise.all([1, 2, 3, 4].map(() => d.pool.query<{ port: number }>('select inet_server_port() as port')))
      const tookMs = performance.now() - startedAt
      expect(ports.map((r) => r.rows[0]?.port)).toEqual([1, 2, 3, 4].map(() => Number(server.port || 5432)))
      expect(tookMs).toBeGreaterThan(4_500) // the live host is taken only once the frozen ones before it timed out
      expect(tookMs).toBeLessThan(8_000)
    } finally {
      for (const f of frozen) await f.close()
    }
  })

  it('passes over a host that does not answer', async () => {
    const server = new URL(t.url)
    const d = createDb({ databaseUrl: withHosts(`127.0.0.1:1,${server.host}`), poolSize: 2 })
    opened.push(d)
    const { rows } = await d.pool.query<{ port: number }>('select inet_server_port() as port')
    expect(rows[0]?.port).toBe(Number(server.port || 5432))
  })

  it('fails with a 08001 error naming every host when none answers', async () => {
    const d = createDb({ databaseUrl: withHosts('127.0.0.1:1,127.0.0.1:2'), poolSize: 1 })
    opened.push(d)
    const err = await d.pool.query('select 1').catch((e: unknown) => e)
    expect(err).toMatchObject({ code: '08001' })
    expect((err as Error).message).toMatch(/no host of the database URL accepts writes \(127\.0\.0\.1:1: .*; 127\.0\.0\.1:2: /)
  })

  it('follows the loss of the host in use: the next connections go to the next host', async () => {
    const server = new URL(t.url)
    const target = { host: server.hostname, port: Number(server.port || 5432) }
    const a = await startTcpProxy(target)
    const b = await startTcpProxy(target)
    opened.push(a, b)
    const d = createDb({ databaseUrl: withHosts(`127.0.0.1:${a.port},127.0.0.1:${b.port}`), poolSize: 2 })
    opened.push(d)
    await d.pool.query('select 1')
    expect(a.connectionCount()).toBeGreaterThan(0)
    // every host is probed at once and the first in the URL's order taken: B's probe connection
    // ends on its own, and no session stays there
    await waitFor(() => b.connectionCount() === 0, { what: "host B's probe connection to end", timeoutMs: 5_000 })
    await a.close() // host A is gone: its connections break, and it refuses new ones
    await waitFor(
      async () => {
        try {
          await d.pool.query('select 1')
          return true
        } catch {
          return false // the connection that was in use when A went away
        }
      },
      { what: 'a query through host B', timeoutMs: 10_000 },
    )
    expect(b.connectionCount()).toBeGreaterThan(0)
  })
})
