/**
 * The development API key of `scheduler dev`: made once, kept in `<dataDir>/dev-api-key`
 * (file mode 0600) and used again at every start while the database still holds it, so a
 * `KEY` exported in a shell keeps working across restarts. The database stores only the key's
 * hash, as for every key. A key file whose key the database does not know (a new database, a
 * revoked key) is replaced by a fresh key, and the earlier keys of that file, whose secret is lost,
 * are revoked: each key is named after its file (`scheduler dev <path>`), so a start in another
 * folder, or on the same database spelt another way (another file), leaves the keys it holds alone.
 * With a database of the user's (DATABASE_URL) the file is that database's own,
 * `dev-api-key.<12 hex digits>` (a hash of its URL without the password), so that a run on it does not
 * replace the embedded database's key, nor the other way round.
 */
import { createHash } from 'node:crypto'
import { chmod, mkdir, readFile, rename, writeFile } from 'node:fs/promises'
import { basename, join, resolve } from 'node:path'
import type { Kysely } from 'kysely'
import type { DB } from '../../db/schema.ts'
import { apiKeyFindByHash, apiKeyList, apiKeyRevoke } from '../../db/queries/api-keys.ts'
import { API_KEY_PATTERN, createApiKey, hashApiKey } from '../../api/auth.ts'

/** The key file's name in the dev data folder. */
export const DEV_KEY_FILE = 'dev-api-key'
const DEV_TENANT = 'dev'
/** Most characters of a key's name (as POST /v1/keys holds them). */
const KEY_NAME_MAX = 200

/** The name of the dev keys kept in `file`: `scheduler dev <file>`, the path cut from its start to fit. */
export function devKeyName(file: string): string {
  const prefix = 'scheduler dev '
  const room = KEY_NAME_MAX - prefix.length
  return prefix + (file.length <= room ? file : `…${file.slice(file.length - room + 1)}`)
}

export interface DevApiKey {
  key: string
  /** Made now (the file was absent or its key unknown to the database). */
  created: boolean
  /** Where the key is kept. */
  file: string
}

/**
 * The key file of a database: DEV_KEY_FILE for the embedded one (`databaseUrl` undefined), else
 * DEV_KEY_FILE and a hash of the URL without its password (the same database under another password
 * keeps its key).
 */
export function devKeyFileName(databaseUrl?: string): string {
  if (databaseUrl === undefined) return DEV_KEY_FILE
  let identity = databaseUrl
  try {
    const url = new URL(databaseUrl)
    url.password = ''
    identity = url.href
  } catch {
    // not a URL (a libpq keyword string): hashed as it is
  }
  return `${DEV_KEY_FILE}.${createHash('sha256').update(identity).digest('hex').slice(0, 12)}`
}

/**
 * The key kept in `dataDir` when the database still accepts it; else a new one, saved there.
 * `databaseUrl`: the user's database (DATABASE_URL), whose key has a file of its own; undefined for
 * the embedded one.
 */
export async function devApiKey(db: Kysely<DB>, params: { dataDir: string; databaseUrl?: string }): Promise<DevApiKey> {
  const file = resolve(join(params.dataDir, devKeyFileName(params.databaseUrl)))
  const saved = (await readFile(file, 'utf8').catch(() => '')).trim()
  if (API_KEY_PATTERN.test(saved)) {
    const stored = await apiKeyFindByHash(db, { keyHash: hashApiKey(saved) })
    if (stored && stored.revokedAt === null && stored.tenant === DEV_TENANT) {
      await chmod(file, 0o600)
      return { key: saved, created: false, file }
    }
  }
  const name = devKeyName(file)
  for (const old of await apiKeyList(db, { tenant: DEV_TENANT, includeRevoked: false })) {
    if (old.name === name) await apiKeyRevoke(db, { id: old.id })
  }
  const { key } = await createApiKey(db, { tenant: DEV_TENANT, name })
  await mkdir(params.dataDir, { recursive: true })
  // Written whole, then renamed: a reader never sees half a key, and the secret is never world-readable.
  const partial = `${file}.${process.pid}.partial`
  await writeFile(partial, `${key}\n`, { mode: 0o600 })
  await chmod(partial, 0o600)
  await rename(partial, file)
  return { key, created: true, file }
}

/**
 * Makes `dataDir` (if missing) with a `.gitignore` in it naming what `scheduler dev` writes there
 * (the key files and the embedded database), so that they are not added to the project's
 * repository, whatever the project's own .gitignore says. Only in a folder this call made, or one
 * named `.pgsched` (the default's name): a data folder set to a folder of the project's own is left
 * as it is. A `.gitignore` already there is left as it is.
 */
export async function keepOutOfGit(dataDir: string): Promise<void> {
  const made = (await mkdir(dataDir, { recursive: true })) !== undefined
  if (!made && basename(resolve(dataDir)) !== '.pgsched') return
  const text = `# made by scheduler dev: its API key files and embedded database stay out of git\n/${DEV_KEY_FILE}*\n/pg/\n`
  await writeFile(join(dataDir, '.gitignore'), text, { flag: 'wx' }).catch((err: NodeJS.ErrnoException) => {
    if (err.code !== 'EEXIST') throw err
  })
}

/** The request body of the printed example: a job of the built-in `echo` type, which needs no network. */
export const DEV_EXAMPLE_BODY = JSON.stringify({ type: 'echo', payload: { hello: 'world' } })

/** A ready-to-paste curl line that submits the example job. */
export function devCurl(apiUrl: string, key: string): string {
  return `curl -i -H 'Authorization: Bearer ${key}' -H 'Content-Type: application/json' -d '${DEV_EXAMPLE_BODY}' ${apiUrl}/v1/jobs`
}
