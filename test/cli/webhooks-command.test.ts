/**
 * `scheduler webhooks`, run as the real bin against this file's database: create checks the URL
 * against SCHEDULER_HTTP_ALLOW from its environment (the workers' rules), as the REST API does.
 */
import { execFile } from 'node:child_process'
import { promisify } from 'node:util'
import { describe, expect, it } from 'vitest'
import { useTestDb } from '../db.ts'

const exec = promisify(execFile)
const t = useTestDb()

const scheduler = (env: Record<string, string>, ...args: string[]) =>
  exec('node', ['bin/scheduler', ...args], { env: { ...process.env, DATABASE_URL: t.url, SCHEDULER_HTTP_ALLOW: '', ...env } })

describe('scheduler webhooks create', () => {
  it('refuses a URL every delivery would be refused, unless SCHEDULER_HTTP_ALLOW admits it', async () => {
    const refused = await scheduler({}, 'webhooks', 'create', 'http://127.0.0.1:9/hook', '--tenant', 'acme').then(
      () => undefined,
      (err: { code: number; stderr: string }) => err,
    )
    expect(refused?.code).toBe(2)
    expect(refused?.stderr).toContain('url: 127.0.0.1 is a loopback address, to which deliveries are refused unless SCHEDULER_HTTP_ALLOW admits it')
    const { rows } = await t.pool.query('select count(*)::int as n from pgsched.webhook_subscriptions')
    expect(rows[0].n).toBe(0)

    const created = JSON.parse(
      (await scheduler({ SCHEDULER_HTTP_ALLOW: '127.0.0.1' }, 'webhooks', 'create', 'http://127.0.0.1:9/hook', '--tenant', 'acme')).stdout,
    )
    expect(created).toMatchObject({ url: 'http://127.0.0.1:9/hook', secret: expect.any(String) })
    const listed = JSON.parse((await scheduler({}, 'webhooks', 'list', '--tenant', 'acme', '--json')).stdout)
    // the REST API's shape, as --json says: GET /v1/webhooks answers {items}
    expect(Object.keys(listed)).toEqual(['items'])
    expect(listed.items.map((w: { id: string }) => w.id)).toEqual([created.id])
  })
})
