import { mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, describe, expect, it } from 'vitest'
import { DEV_KEY_FILE, devApiKey } from '../../src/cli/commands/dev-key.ts'
import { apiKeyFindByHash, apiKeyList } from '../../src/db/queries/api-keys.ts'
import { hashApiKey } from '../../src/api/auth.ts'
import { useTestDb } from '../db.ts'

const t = useTestDb()
const dirs: string[] = []
afterAll(() => {
  for (const d of dirs) rmSync(d, { recursive: true, force: true })
})
function dataDir(): string {
  const d = mkdtempSync(join(tmpdir(), 'pgsched-devkey-'))
  dirs.push(d)
  return join(d, 'nested')
}

describe('devApiKey', () => {
  it('makes a key once, keeps it in the data folder (mode 0600, the database holds only its hash) and returns it again', async () => {
    const dir = dataDir()
    const made = await devApiKey(t.db, { dataDir: dir })
    expect(made.created).toBe(true)
    expect(readFileSync(join(dir, DEV_KEY_FILE), 'utf8')).toBe(`${made.key}\n`)
    expect(statSync(join(dir, DEV_KEY_FILE)).mode & 0o777).toBe(0o600)
    expect(await apiKeyFindByHash(t.db, { keyHash: hashApiKey(made.key) })).toMatchObject({ tenant: 'dev', revokedAt: null })
    const again = await devApiKey(t.db, { dataDir: dir })
    expect(again).toEqual({ ...made, created: false })
  })

  it('replaces a kept key the database does not accept, and revokes the dev keys whose secret is lost', async () => {
    const dir = dataDir()
    const first = await devApiKey(t.db, { dataDir: dir })
    rmSync(join(dir, DEV_KEY_FILE))
    const second = await devApiKey(t.db, { dataDir: dir })
    expect(second.created).toBe(true)
    expect(second.key).not.toBe(first.key)
    expect((await apiKeyFindByHash(t.db, { keyHash: hashApiKey(first.key) }))?.revokedAt).not.toBeNull()
    writeFileSync(join(dir, DEV_KEY_FILE), 'psk_not-a-key-the-database-knows-about-at-all-00\n', { mode: 0o644 })
    const third = await devApiKey(t.db, { dataDir: dir })
    expect(third.created).toBe(true)
    expect(statSync(join(dir, DEV_KEY_FILE)).mode & 0o777).toBe(0o600)
    expect((await apiKeyList(t.db, { tenant: 'dev', includeRevoked: false })).map((k) => k.keyPrefix)).toEqual([third.key.slice(0, 12)])
  })
})
