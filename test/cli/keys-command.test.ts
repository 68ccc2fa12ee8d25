/**
 * `scheduler keys list`, run as the real bin against this file's database: each key with when it
 * was last used (api_keys.last_used_at), in the table and in --json, so a rotation can tell whether
 * the old key still serves.
 */
import { execFile } from 'node:child_process'
import { promisify } from 'node:util'
import { describe, expect, it } from 'vitest'
import { createApiKey } from '../../src/api/auth.ts'
import { apiKeyMarkUsed } from '../../src/db/queries/api-keys.ts'
import { useTestDb } from '../db.ts'

const exec = promisify(execFile)
const t = useTestDb()

const scheduler = async (...args: string[]) => (await exec('node', ['bin/scheduler', ...args], { env: { ...process.env, DATABASE_URL: t.url } })).stdout

describe('scheduler keys list', () => {
  it('shows when each key was last used, and "-" for a key never used', async () => {
    const old = await createApiKey(t.db, { tenant: 'acme', name: 'old' })
    const fresh = await createApiKey(t.db, { tenant: 'acme', name: 'new' })
    const usedAt = new Date('2030-01-02T03:04:05.000Z')
    expect(await apiKeyMarkUsed(t.db, { id: old.id, now: usedAt })).toBe(true)

    const { items: listed } = JSON.parse(await scheduler('keys', 'list', '--tenant', 'acme', '--json')) as {
      items: Array<{ id: string; lastUsedAt: string | null }>
    }
    expect(listed.map((k) => [k.id, k.lastUsedAt])).toEqual([
      [old.id, usedAt.toISOString()],
      [fresh.id, null],
    ])

    const [header, ...rows] = (await scheduler('keys', 'list', '--tenant', 'acme')).trimEnd().split('\n')
    const column = (header ?? '').indexOf('LAST USED')
    expect(column).toBeGreaterThan(0)
    const lastUsed = (row: string | undefined) => (row ?? '').slice(column).split(/ {2,}/)[0]
    expect(rows.map(lastUsed)).toEqual([usedAt.toISOString(), '-'])
  })

  it('refuses a --tenant no tenant can have, rather than listing no keys', async () => {
    const failed = await exec('node', ['bin/scheduler', 'keys', 'list', '--tenant', 'bad t'], { env: { ...process.env, DATABASE_URL: t.url } }).then(
      () => undefined,
      (err: { code?: number; stderr?: string; stdout?: string }) => err,
    )
    expect(failed?.code).toBe(2)
    expect(failed?.stderr).toContain('--tenant: not a tenant name: "bad t"')
    expect(failed?.stdout).toBe('')
  })
})
