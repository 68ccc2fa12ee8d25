/**
 * Connection pools. `createDb` returns a Kysely instance over a pg Pool; the
 * caller owns both and must `destroy()` the Kysely instance. A pool error on an
 * idle client (server restart, pg_terminate_backend) is logged, not thrown:
 * pg discards the client and the next query opens a new connection.
 */
import pg from 'pg'
import { Kysely, PostgresDialect } from 'kysely'
import type { DB } from './schema.ts'
import type { Logger } from '../logger.ts'

export interface CreateDbParams {
  databaseUrl: string
  poolSize: number
  applicationName?: string
  log?: Logger
}

export interface Database {
  db: Kysely<DB>
  pool: pg.Pool
}

export function createDb(params: CreateDbParams): Database {
  const pool = new pg.Pool({
    connectionString: params.databaseUrl,
    max: params.poolSize,
    application_name: params.applicationName ?? 'pgsched',
    connectionTimeoutMillis: 10_000,
    idleTimeoutMillis: 30_000,
  })
  pool.on('error', (err) => params.log?.warn({ err }, 'idle database connection lost'))
  // pg-pool listens for errors only on idle clients. A connection terminated in the instant
  // between a query's end and its release would emit an unhandled 'error' and crash the
  // process; this listener keeps it alive, and the pool discards the broken client on release.
  pool.on('connect', (client) => {
    client.on('error', (err) => params.log?.warn({ err }, 'database connection lost'))
  })
  const db = new Kysely<DB>({ dialect: new PostgresDialect({ pool }) })
  return { db, pool }
}
