import { type ChildProcessByStdio, spawn } from 'node:child_process'
import { once } from 'node:events'
import type { Readable } from 'node:stream'
import { afterEach, describe, expect, it } from 'vitest'
import { useTestDb } from '../db.ts'
import { waitFor } from '../wait-for.ts'
import { startTcpProxy, viaProxy, type TcpProxy } from '../worker/tcp-proxy.ts'

const t = useTestDb()

let proxy: TcpProxy | undefined
let child: ChildProcessByStdio<null, Readable, Readable> | undefined
afterEach(async () => {
  if (child && child.exitCode === null && child.signalCode === null) {
    const exited = once(child, 'exit')
    child.kill('SIGKILL')
    await exited
  }
  child = undefined
  await proxy?.close()
  proxy = undefined
})

/** Starts `scheduler <args>` on a DATABASE_URL whose port refuses connections until `proxy.reopen()`. */
async function startBeforeTheDatabase(args: string[]) {
  proxy = await startTcpProxy({ host: new URL(t.url).hostname, port: Number(new URL(t.url).port || 5432) })
  const databaseUrl = viaProxy(t.url, proxy)
  await proxy.close()
  const started = spawn('node', ['bin/scheduler', ...args], {
    env: { ...process.env, LOG_LEVEL: 'info', DATABASE_URL: databaseUrl },
    stdio: ['ignore', 'pipe', 'pipe'],
  })
  child = started
  const out = { text: '' }
  started.stdout.on('data', (chunk: Buffer) => {
    out.text += chunk.toString('utf8')
  })
  started.stderr.on('data', (chunk: Buffer) => {
    out.text += chunk.toString('utf8')
  })
  const entries = () =>
    out.text
      .split('\n')
      .filter((l) => l.startsWith('{'))
      .map((l) => JSON.parse(l) as Record<string, unknown>)
  return { child: started, out, entries, exited: once(started, 'exit') }
}

const WAIT = 'database unreachable at start-up; retrying'

describe('start-up before the database answers', () => {
  it('scheduler api waits with backoff, logging each wait, then listens', { timeout: 60_000 }, async () => {
    const p = await startBeforeTheDatabase(['api', '--port', '0', '--host', '127.0.0.1'])
    await waitFor(() => p.entries().filter((e) => e.msg === WAIT).length >= 2, { timeoutMs: 30_000, what: `two waits:\n${p.out.text}` })
    expect(p.entries().some((e) => e.msg === 'api listening')).toBe(false)
    await proxy?.reopen()
    const listening = await waitFor(() => p.entries().find((e) => e.msg === 'api listening'), { timeoutMs: 30_000, what: 'api listening' })
    // ready once its first connection is made and the checks pass (each within 2 s: on a loaded
    // machine the first, through the proxy, can take longer and answer 503)
    await waitFor(async () => (await fetch(`${listening.url as string}/readyz`)).status === 200, { timeoutMs: 20_000, what: '/readyz 200' })
    expect(p.entries().find((e) => e.msg === 'database reachable')).toBeDefined()
    p.child.kill('SIGTERM')
    expect((await p.exited)[0]).toBe(0)
  })

  it('scheduler worker waits, then starts; SIGTERM during a wait exits 0', { timeout: 60_000 }, async () => {
    const p = await startBeforeTheDatabase(['worker'])
    await waitFor(() => p.entries().some((e) => e.msg === WAIT), { timeoutMs: 30_000, what: `a wait:\n${p.out.text}` })
    await proxy?.reopen()
    await waitFor(() => p.entries().some((e) => e.msg === 'worker started'), { timeoutMs: 30_000, what: 'worker started' })
    p.child.kill('SIGTERM')
    expect((await p.exited)[0]).toBe(0)

    await proxy?.close()
    const q = await startBeforeTheDatabase(['worker'])
    await waitFor(() => q.entries().some((e) => e.msg === WAIT), { timeoutMs: 30_000, what: 'a wait' })
    q.child.kill('SIGTERM')
    expect((await q.exited)[0]).toBe(0)
    expect(q.entries().some((e) => e.msg === 'worker started')).toBe(false)
  })
})
