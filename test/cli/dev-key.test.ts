import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import type { Kysely } from 'kysely'
import { afterAll, describe, expect, inject, it } from 'vitest'
import { DEV_KEY_FILE, devApiKey, devKeyFileName, keepOutOfGit } from '../../src/cli/commands/dev-key.ts'
import { apiKeyFindByHash, apiKeyList } from '../../src/db/queries/api-keys.ts'
import { hashApiKey } from '../../src/api/auth.ts'
import { createDb } from '../../src/db/pool.ts'
import type { DB } from '../../src/db/schema.ts'
import { adminQuery, createFromTemplate, urlFor, useTestDb } from '../db.ts'

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

  it('keeps what it writes out of git with a .gitignore in a data folder it made, or in .pgsched, and in no folder of the project', async () => {
    const dir = dataDir()
    await keepOutOfGit(dir)
    expect(readFileSync(join(dir, '.gitignore'), 'utf8')).toMatch(/\n\/dev-api-key\*\n\/pg\/\n$/)
    // one already there stays as it is
    writeFileSync(join(dir, '.gitignore'), 'pg/\n')
    await keepOutOfGit(dir)
    expect(readFileSync(join(dir, '.gitignore'), 'utf8')).toBe('pg/\n')
    // an existing .pgsched (made by an earlier version) gets one
    const pgsched = join(dataDir(), '.pgsched')
    mkdirSync(pgsched, { recursive: true })
    await keepOutOfGit(pgsched)
    expect(existsSync(join(pgsched, '.gitignore'))).toBe(true)
    // a folder of the project's own set as the data folder: nothing written there
    const project = mkdtempSync(join(tmpdir(), 'pgsched-project-'))
    dirs.push(project)
    await keepOutOfGit(project)
    expect(existsSync(join(project, '.gitignore'))).toBe(false)
  })

  it('leaves the key another folder holds, and the key of the same database spelt another way, working', async () => {
    const first = await devApiKey(t.db, { dataDir: dataDir(), databaseUrl: t.url })
    // another project folder on the same database: its own key, the first one's untouched
    const second = await devApiKey(t.db, { dataDir: dataDir(), databaseUrl: t.url })
    expect(second.created).toBe(true)
    expect((await apiKeyFindByHash(t.db, { keyHash: hashApiKey(first.key) }))?.revokedAt).toBeNull()
    // the same folder, the database named by localhost instead of 127.0.0.1: another file, another key
    const dir = dataDir()
    const byAddress = await devApiKey(t.db, { dataDir: dir, databaseUrl: t.url })
    await devApiKey(t.db, { dataDir: dir, databaseUrl: t.url.replace('127.0.0.1', 'localhost') })
    expect((await apiKeyFindByHash(t.db, { keyHash: hashApiKey(byAddress.key) }))?.revokedAt).toBeNull()
    // each key is named after its file
    const named = (await apiKeyList(t.db, { tenant: 'dev' })).find((k) => k.keyPrefix === second.key.slice(0, 12))
    expect(named?.name).toBe(`scheduler dev ${second.file}`)
  })

  it("keeps a user's database's key in a file of its own, so that neither run replaces the other's key", async () => {
    const dir = dataDir()
    // the user's database: another database than the embedded one (t.db here)
    const name = `devkey_${process.pid}`
    await createFromTemplate(name, inject('templateDb'))
    const url = urlFor(name).replace('//postgres@', '//postgres:secret@')
    const other = createDb({ databaseUrl: url, poolSize: 1 })
    try {
      await checkDevKeys(dir, url, other.db)
    } finally {
      await other.db.destroy()
      await adminQuery(`drop database if exists ${name} with (force)`)
    }
  })
})

/** Keys made in turn for the embedded database (t.db) and the user's (`userDb` at `url`), kept in `dir`. */
async function checkDevKeys(dir: string, url: string, userDb: Kysely<DB>): Promise<void> {
  const embedded = await devApiKey(t.db, { dataDir: dir })
  const external = await devApiKey(userDb, { dataDir: dir, databaseUrl: url })
  expect(external.created).toBe(true)
  expect(external.file).toBe(join(dir, devKeyFileName(url)))
  expect(external.file).toMatch(/dev-api-key\.[0-9a-f]{12}$/)
  expect(external.file).not.toContain('secret')
  // the two are kept side by side; each run finds its own again
  expect(await devApiKey(t.db, { dataDir: dir })).toEqual({ ...embedded, created: false })
  expect(await devApiKey(userDb, { dataDir: dir, databaseUrl: url })).toEqual({ ...external, created: false })
  // another password, the same database: the same file
  expect(devKeyFileName('postgres://app:rotated@db.example:5433/jobs')).toBe(devKeyFileName('postgres://app:secret@db.example:5433/jobs'))
  expect(devKeyFileName('postgres://app:secret@db.example:5433/other')).not.toBe(devKeyFileName('postgres://app:secret@db.example:5433/jobs'))
  expect(devKeyFileName()).toBe(DEV_KEY_FILE)
}
