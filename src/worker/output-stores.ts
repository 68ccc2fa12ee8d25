/**
 * Builds the worker's output store from its settings (config.output, cut by
 * system.ts): postgres (default), file, or s3. Callers that start a worker
 * programmatically select it through the same settings, or pass their own
 * OutputStore.
 */
import type { Kysely } from 'kysely'
import { assertKnownFields, type FieldSet } from '../core/known-fields.ts'
import { parseOutputStoreSetting } from '../core/output-uri.ts'
import type { DB } from '../db/schema.ts'
import { ConfigError } from '../errors.ts'
import type { Logger } from '../logger.ts'
import { createFileOutputBackend } from './output-file.ts'
import { createPostgresOutputBackend } from './output-postgres.ts'
import { createS3OutputBackend } from './output-s3.ts'
import type { S3Credentials } from '../lib/s3.ts'
import { BufferedOutputStore, type OutputStore } from './output-store.ts'

/** config.output. */
export interface OutputSettings {
  /** postgres | file | file:///dir | s3://bucket/prefix. */
  store: string
  /** The `file` store's directory. */
  dir: string
  /** Per attempt. */
  maxBytes: number
  s3Endpoint?: string
  s3Region?: string
  /** Absent: the AWS SDK's usual sources (AWS_ACCESS_KEY_ID, …). Programmatic only. */
  s3Credentials?: S3Credentials
}

export interface CreateOutputStoreParams {
  settings: OutputSettings
  /** The worker's pool: Postgres chunks, and output_uri of running executions for every store (required for postgres). */
  db?: Kysely<DB>
  log: Logger
}

/** Any other parameter is refused: a misspelt `dB` would leave the running executions' output unnamed. */
const PARAMS_FIELDS: FieldSet<CreateOutputStoreParams> = { settings: true, db: true, log: true }
/** Any other setting is refused: a misspelt `s3Regoin` would send the output to the default region. */
const SETTINGS_FIELDS: FieldSet<OutputSettings> = { store: true, dir: true, maxBytes: true, s3Endpoint: true, s3Region: true, s3Credentials: true }
/** Any other credential is refused: a misspelt `sessionTokn` would sign with the key alone, refused by S3 at the first write. */
const S3_CREDENTIALS_FIELDS: FieldSet<S3Credentials> = { accessKeyId: true, secretAccessKey: true, sessionToken: true }

/**
 * The store the settings name.
 * @throws ValidationError naming a parameter, setting or credential it does not know (from JavaScript); ConfigError
 *   without a db for postgres; Error for a store setting that does not parse (loadConfig checked it).
 */
export function createOutputStore(params: CreateOutputStoreParams): OutputStore {
  assertKnownFields(params, PARAMS_FIELDS, 'createOutputStore params')
  assertKnownFields(params.settings, SETTINGS_FIELDS, 'createOutputStore settings', 'settings.')
  if (params.settings.s3Credentials != null) {
    assertKnownFields(params.settings.s3Credentials, S3_CREDENTIALS_FIELDS, 'createOutputStore settings.s3Credentials', 'settings.s3Credentials.')
  }
  const { settings } = params
  const { db } = params
  const setting = parseOutputStoreSetting(settings.store, settings.dir)
  if (setting.kind === 'postgres' && !db) throw new ConfigError('the postgres output store needs a database (db)')
  const backend =
    setting.kind === 'postgres'
      ? createPostgresOutputBackend(db as Kysely<DB>)
      : setting.kind === 'file'
        ? createFileOutputBackend(setting.dir)
        : createS3OutputBackend({
            bucket: setting.bucket,
            keyPrefix: setting.keyPrefix,
            endpoint: settings.s3Endpoint,
            region: settings.s3Region,
            credentials: settings.s3Credentials,
          })
  return new BufferedOutputStore({ backend, db, log: params.log.child({ component: 'output' }), maxBytes: settings.maxBytes })
}
