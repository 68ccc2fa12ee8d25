/**
 * Shared set-up for API tests: an app over this file's test database
 * (`useTestDb`), API keys per tenant, and authenticated `inject` calls.
 */
import { afterAll, beforeAll } from 'vitest'
import type { LightMyRequestResponse } from 'fastify'
import { buildApp, type App, type AppDeps } from '../../src/api/app.ts'
import { createApiKey } from '../../src/api/auth.ts'
import type { TestDb } from '../db.ts'

export interface TestApi {
  app: App
  /** A new key for `tenant`. */
  keyFor(tenant: string): Promise<string>
  /** An injected request with `Authorization: Bearer <key>`. */
  call(key: string, method: 'GET' | 'POST' | 'PATCH' | 'DELETE', url: string, body?: unknown, headers?: Record<string, string>): Promise<LightMyRequestResponse>
}

/** Builds the app once per file (after the database exists) and closes it at the end. */
export function useTestApi(t: TestDb, options: Partial<Omit<AppDeps, 'db' | 'log'>> = {}): TestApi {
  const api = {} as TestApi
  beforeAll(async () => {
    api.app = buildApp({ db: t.db, log: t.log, ...options })
    await api.app.ready()
  })
  afterAll(async () => {
    await api.app?.close()
  })
  api.keyFor = async (tenant) => (await createApiKey(t.db, { tenant })).key
  api.call = (key, method, url, body, headers = {}) =>
    api.app.inject({
      method,
      url,
      headers: { authorization: `Bearer ${key}`, ...headers },
      ...(body === undefined ? {} : { payload: body as object }),
    })
  return api
}
