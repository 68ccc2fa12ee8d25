/**
 * A value read from the database at most once per `ttlMs` per database handle (a WeakMap keyed by
 * the Kysely instance, so each pool has its own and a destroyed one is forgotten with it).
 */
import type { Kysely } from 'kysely'
import type { DB } from '../schema.ts'

export interface PerDbCache<T> {
  get(db: Kysely<DB>): Promise<T>
  /** Reads afresh next time (after this process changed what is cached). */
  forget(db: Kysely<DB>): void
}

export function perDbCache<T>(ttlMs: number, read: (db: Kysely<DB>) => Promise<T>): PerDbCache<T> {
  const cache = new WeakMap<Kysely<DB>, { value: T; readAtMs: number }>()
  return {
    async get(db) {
      const c = cache.get(db)
      if (c && performance.now() - c.readAtMs < ttlMs) return c.value
      const value = await read(db)
      cache.set(db, { value, readAtMs: performance.now() })
      return value
    },
    forget: (db) => void cache.delete(db),
  }
}
