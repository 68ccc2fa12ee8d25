/**
 * SQL for API keys. Only the SHA-256 of a key is stored (`key_hash`, 32
 * bytes) plus a short display prefix; the key itself never reaches the
 * database. Revoking keeps the row (and its tenant) for the audit trail.
 * `last_used_at` is written by the API's authenticator (api/key-use-recorder.ts),
 * throttled, never per request.
 */
import { sql, type Kysely, type Selectable } from 'kysely'
import type { ApiKeysTable, DB } from '../schema.ts'

/** An API key as listed: everything but the hash. */
export interface ApiKey {
  id: string
  tenant: string
  name: string | null
  /** First characters of the key, enough to recognise it, not to use it. */
  keyPrefix: string
  createdAt: Date
  revokedAt: Date | null
  /** May change queue settings and sees every queue's figures. */
  operator: boolean
  /**
   * When an API request last authenticated with the key, to within a minute (each API process
   * records a key's use at most once a minute); null when never recorded.
   */
  lastUsedAt: Date | null
}

function toApiKey(
  row: Pick<Selectable<ApiKeysTable>, 'id' | 'tenant' | 'name' | 'key_prefix' | 'created_at' | 'revoked_at' | 'operator' | 'last_used_at'>,
): ApiKey {
  return {
    id: row.id,
    tenant: row.tenant,
    name: row.name,
    keyPrefix: row.key_prefix,
    createdAt: row.created_at,
    revokedAt: row.revoked_at,
    operator: row.operator,
    lastUsedAt: row.last_used_at,
  }
}

const COLUMNS = ['id', 'tenant', 'name', 'key_prefix', 'created_at', 'revoked_at', 'operator', 'last_used_at'] as const

export interface ApiKeyInsertParams {
  tenant: string
  name: string | null
  keyPrefix: string
  /** SHA-256 of the key (32 bytes). */
  keyHash: Buffer
  operator?: boolean
}

/** Stores a new key's hash. */
export async function apiKeyInsert(db: Kysely<DB>, params: ApiKeyInsertParams): Promise<ApiKey> {
  const row = await db
    .insertInto('pgsched.api_keys')
    .values({ tenant: params.tenant, name: params.name, key_prefix: params.keyPrefix, key_hash: params.keyHash, operator: params.operator ?? false })
    .returning(COLUMNS)
    .executeTakeFirstOrThrow()
  return toApiKey(row)
}

export interface ApiKeyFindByHashParams {
  keyHash: Buffer
}

/** The key with this hash, revoked or not; undefined when there is none. */
export async function apiKeyFindByHash(db: Kysely<DB>, params: ApiKeyFindByHashParams): Promise<ApiKey | undefined> {
  const row = await db.selectFrom('pgsched.api_keys').select(COLUMNS).where('key_hash', '=', params.keyHash).executeTakeFirst()
  return row ? toApiKey(row) : undefined
}

export interface ApiKeyListParams {
  /** Only this tenant's keys. */
  tenant?: string
  /** Include revoked keys (default true). */
  includeRevoked?: boolean
}

/** Keys, oldest first. */
export async function apiKeyList(db: Kysely<DB>, params: ApiKeyListParams = {}): Promise<ApiKey[]> {
  let q = db.selectFrom('pgsched.api_keys').select(COLUMNS)
  if (params.tenant !== undefined) q = q.where('tenant', '=', params.tenant)
  if (params.includeRevoked === false) q = q.where('revoked_at', 'is', null)
  const rows = await q.orderBy('created_at').orderBy('id').execute()
  return rows.map(toApiKey)
}

export interface ApiKeyPageParams {
  /** Only this tenant's keys. */
  tenant?: string
  limit: number
  /** The position after which the page starts: `<created_at in µs since 1970>_<id>` (a page's `next`). */
  after?: string
}

/** The position of keys after which a page starts, as apiKeyPage reads it: `<µs>_<uuid>`. */
export const API_KEY_POSITION = /^\d{1,19}_[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/

/** A page of keys, oldest first (by creation, then id), revoked ones included; `next`: the position after it, null on the last. */
export async function apiKeyPage(db: Kysely<DB>, params: ApiKeyPageParams): Promise<{ items: ApiKey[]; next: string | null }> {
  const [us, id] = params.after === undefined ? [null, null] : params.after.split('_')
  const { rows } = await sql<Selectable<ApiKeysTable> & { created_us: string }>`
    select id, tenant, name, key_prefix, created_at, revoked_at, operator, last_used_at,
           (extract(epoch from created_at) * 1000000)::bigint::text as created_us
      from pgsched.api_keys
     where (${params.tenant ?? null}::text is null or tenant = ${params.tenant ?? null}::text)
       and (${us ?? null}::bigint is null
            or (created_at, id) > (timestamptz 'epoch' + ${us ?? null}::bigint * interval '1 microsecond', ${id ?? null}::uuid))
     order by created_at, id
     limit ${params.limit + 1}::int`.execute(db)
  const items = rows.slice(0, params.limit)
  const last = items[items.length - 1]
  return { items: items.map(toApiKey), next: rows.length > params.limit && last ? `${last.created_us}_${last.id}` : null }
}

export interface ApiKeyRevokeParams {
  id: string
}

/**
 * Revokes a key; revoking it again keeps the first revocation time.
 * Returns the key, or undefined when there is no such key.
 */
export async function apiKeyRevoke(db: Kysely<DB>, params: ApiKeyRevokeParams): Promise<ApiKey | undefined> {
  const row = await db
    .updateTable('pgsched.api_keys')
    .set((eb) => ({ revoked_at: eb.fn.coalesce('revoked_at', eb.fn<Date>('now', [])) }))
    .where('id', '=', params.id)
    .returning(COLUMNS)
    .executeTakeFirst()
  return row ? toApiKey(row) : undefined
}

export interface ApiKeyMarkUsedParams {
  id: string
  /** The time of use; null (production) takes the database's `now()`. */
  now?: Date | null
}

/**
 * Records that a request authenticated with the key: sets `last_used_at`, unless the key is
 * revoked or already shows a later use (another API process's). Returns whether the row was written.
 */
export async function apiKeyMarkUsed(db: Kysely<DB>, params: ApiKeyMarkUsedParams): Promise<boolean> {
  const { rows } = await sql<{ id: string }>`
    update pgsched.api_keys
       set last_used_at = coalesce(${params.now ?? null}::timestamptz, now())
     where id = ${params.id}::uuid
       and revoked_at is null  -- a revoked key still trusted from a key cache records nothing
       -- never back in time: another API process may have recorded a later use
       and (last_used_at is null or last_used_at < coalesce(${params.now ?? null}::timestamptz, now()))
    returning id`.execute(db)
  return rows.length > 0
}
