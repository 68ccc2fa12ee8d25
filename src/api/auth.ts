/**
 * API keys and request authentication. A key is `psk_` followed by 43
 * base64url characters (32 random bytes); only its SHA-256 is stored, and
 * it is shown once, when created. Each key belongs to one tenant: every
 * request made with it acts for that tenant only (another tenant's job is a
 * 404 through the client's tenant filter). Missing, malformed, unknown or
 * revoked keys are a 401. Valid keys are cached for `cacheMs`, so a
 * revocation takes effect within that time. Each accepted request, cached or
 * not, is noted to the key-use recorder (key-use-recorder.ts), which writes
 * api_keys.last_used_at at most once a minute per key.
 */
import { createHash, randomBytes } from 'node:crypto'
import type { Kysely } from 'kysely'
import type { DB } from '../db/schema.ts'
import { apiKeyFindByHash, apiKeyInsert, type ApiKey } from '../db/queries/api-keys.ts'
import { SchedulerError, ValidationError } from '../errors.ts'
import { TENANT_RULE, isTenantName } from '../core/names.ts'
import type { KeyUseRecorder } from './key-use-recorder.ts'

/** Who a request acts for. */
export interface ApiIdentity {
  tenant: string
  keyId: string
  /** An operator key: may change queue settings and sees every queue's figures. */
  operator: boolean
}

declare module 'fastify' {
  interface FastifyRequest {
    /** Set by the authentication hook on /v1 routes; null elsewhere. */
    identity: ApiIdentity | null
  }
}

/** The shape of every key: `psk_` + base64url of 32 random bytes. */
export const API_KEY_PATTERN = /^psk_[A-Za-z0-9_-]{43}$/
/** Shown in listings: `psk_` and 8 characters (48 of the 256 random bits). */
const DISPLAY_PREFIX_LENGTH = 12
const CACHE_MAX_ENTRIES = 10_000

/** A new random key. */
export function generateApiKey(): string {
  return `psk_${randomBytes(32).toString('base64url')}`
}

/** SHA-256 of a key, as stored in api_keys.key_hash. */
export function hashApiKey(key: string): Buffer {
  return createHash('sha256').update(key, 'utf8').digest()
}

export interface CreateApiKeyParams {
  tenant: string
  name?: string | null
  /** An operator key (see ApiIdentity.operator). */
  operator?: boolean
}

/** A created key: `key` is the secret, returned this once. */
export interface CreatedApiKey extends ApiKey {
  key: string
}

/**
 * Creates a key for a tenant and returns it with its secret.
 * @throws ValidationError for a tenant name that breaks TENANT_RULE (core/names.ts)
 */
export async function createApiKey(db: Kysely<DB>, params: CreateApiKeyParams): Promise<CreatedApiKey> {
  if (!isTenantName(params.tenant)) {
    throw new ValidationError(`tenant must be ${TENANT_RULE}`, [{ path: 'tenant', message: `tenant must be ${TENANT_RULE}` }])
  }
  const name = params.name ?? null
  if (name !== null && (name.length < 1 || name.length > 200)) {
    throw new ValidationError('name must be 1 to 200 characters', [{ path: 'name', message: 'name must be 1 to 200 characters' }])
  }
  const key = generateApiKey()
  const stored = await apiKeyInsert(db, {
    tenant: params.tenant,
    name,
    keyPrefix: key.slice(0, DISPLAY_PREFIX_LENGTH),
    keyHash: hashApiKey(key),
    operator: params.operator ?? false,
  })
  return { ...stored, key }
}

const unauthorized = (message: string) => new SchedulerError('unauthorized', message)

export interface Authenticator {
  /**
   * The identity behind an Authorization header value.
   * `fresh`: look the key up even if its validity is cached (a long-lived stream's periodic check).
   * @throws SchedulerError `unauthorized` (401) when missing, malformed, unknown or revoked.
   */
  authenticate(authorization: string | undefined, options?: { fresh?: boolean }): Promise<ApiIdentity>
  /** Drops the key `keyId` from the cache: its next request is looked up (after a revocation). */
  forget(keyId: string): void
}

/**
 * Authenticates Bearer keys against api_keys.
 * @param options.cacheMs how long a valid key is trusted without a lookup (0 = always look up).
 * @param options.keyUses told the key id of every accepted request (it records last_used_at); default none.
 */
export function createAuthenticator(db: Kysely<DB>, options: { cacheMs: number; keyUses?: KeyUseRecorder }): Authenticator {
  const cache = new Map<string, { identity: ApiIdentity; expiresAtMs: number }>()
  /**
   * Keys revoked through this process (forget), by id, with when (performance.now()): a lookup that
   * began before then may have read the key still valid, and is not cached (it would make the key
   * work again for the cache period). Kept for a minute: longer than any lookup.
   */
  const forgotten = new Map<string, number>()
  const FORGOTTEN_KEEP_MS = 60_000
  return {
    async authenticate(authorization, authOptions) {
      if (authorization === undefined || authorization === '') {
        throw unauthorized('missing API key; send Authorization: Bearer <api key>')
      }
      const match = /^Bearer +(\S+) *$/i.exec(authorization)
      if (!match) throw unauthorized('Authorization header must be "Bearer <api key>"')
      const key = match[1] as string
      if (!API_KEY_PATTERN.test(key)) throw unauthorized('API key is malformed; keys look like psk_ followed by 43 characters')
      const hash = hashApiKey(key)
      const cacheKey = hash.toString('hex')
      // Process-local expiry, not a scheduling decision: the wall clock is fine here.
      const cached = cache.get(cacheKey)
      if (cached && cached.expiresAtMs > Date.now() && authOptions?.fresh !== true) {
        options.keyUses?.record(cached.identity.keyId)
        return cached.identity
      }
      const lookedUpAt = performance.now()
      const found = await apiKeyFindByHash(db, { keyHash: hash })
      if (!found) {
        cache.delete(cacheKey)
        throw unauthorized('API key is not valid')
      }
      if (found.revokedAt) {
        cache.delete(cacheKey)
        throw unauthorized('API key has been revoked')
      }
      const identity = { tenant: found.tenant, keyId: found.id, operator: found.operator }
      const revokedAt = forgotten.get(found.id)
      if (options.cacheMs > 0 && (revokedAt === undefined || revokedAt < lookedUpAt)) {
        if (cache.size >= CACHE_MAX_ENTRIES) cache.clear()
        cache.set(cacheKey, { identity, expiresAtMs: Date.now() + options.cacheMs })
      }
      options.keyUses?.record(identity.keyId)
      return identity
    },
    forget(keyId) {
      const now = performance.now()
      for (const [id, at] of forgotten) if (now - at > FORGOTTEN_KEEP_MS) forgotten.delete(id)
      forgotten.set(keyId, now)
      for (const [k, v] of cache) if (v.identity.keyId === keyId) cache.delete(k)
    },
  }
}
