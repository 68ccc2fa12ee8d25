/**
 * The only reader of the environment. `loadConfig(env, flags)` maps variables
 * (table ENV_MAP) and command-line flags onto one object, applies defaults,
 * converts strings, validates everything against ConfigSchema and throws a
 * ConfigError naming every bad variable and the values it accepts, and every
 * flag that names no setting. Flags win over the environment. The result is frozen.
 * `unknownVariables(env)` names the SCHEDULER_ variables that are no setting (a misspelt one is
 * otherwise ignored), for the processes to warn of.
 */
import { parseAddressPolicy } from './lib/address-policy.ts'
import { parseOutputStoreSetting } from './core/output-uri.ts'
import { Type, type Static, type TSchema } from '@sinclair/typebox'
import { Value } from '@sinclair/typebox/value'
import { ConfigError, type ErrorDetail } from './errors.ts'
import { assertKnownFields, unknownFields } from './core/known-fields.ts'
import { databaseUrlProblem, redactDatabaseUrl } from './db/database-url.ts'
import { BODY_LIMIT_BYTES_DEFAULT, PARTITION_COUNT, PARTITION_COUNT_DEFAULT, QUEUE_PATTERN } from './core/names.ts'
import { MISFIRE_THRESHOLD_DEFAULT_MS } from './core/fire-times.ts'
import { WEBHOOK_DISABLE_DEFAULT, WEBHOOK_MAX_PER_TENANT_DEFAULT } from './core/events.ts'
import { MIGRATE_ATTEMPTS_DEFAULT, MIGRATE_LOCK_TIMEOUT_MS_DEFAULT } from './core/migrate-retry.ts'
import { STREAMS_PER_TENANT_DEFAULT } from './api/stream-slots.ts'

const Ms = (def: number, min: number, max: number) => Type.Integer({ default: def, minimum: min, maximum: max })

export const ConfigSchema = Type.Object({
  /** postgres://… ; absent means "embedded Postgres" for `scheduler dev`, an error elsewhere. */
  databaseUrl: Type.Optional(Type.String({ pattern: '^postgres(ql)?://' })),
  logLevel: Type.Union(
    ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'].map((l) => Type.Literal(l)),
    { default: 'info' },
  ),
  db: Type.Object(
    {
      poolSize: Type.Integer({ default: 10, minimum: 1, maximum: 1000 }),
      partitions: Type.Integer({ default: PARTITION_COUNT_DEFAULT, minimum: PARTITION_COUNT.min, maximum: PARTITION_COUNT.max }),
    },
    { default: {} },
  ),
  migrate: Type.Object(
    {
      /** Longest wait of a migration's statement for a lock (0: no bound); submits and claims queue behind it meanwhile. */
      lockTimeoutMs: Ms(MIGRATE_LOCK_TIMEOUT_MS_DEFAULT, 0, 3_600_000),
      /** Tries of a migration that timed out waiting for a lock, the first included. */
      attempts: Type.Integer({ default: MIGRATE_ATTEMPTS_DEFAULT, minimum: 1, maximum: 100 }),
    },
    { default: {} },
  ),
  worker: Type.Object(
    {
      handlers: Type.Optional(Type.String({ minLength: 1 })),
      queues: Type.Array(Type.String({ pattern: QUEUE_PATTERN }), {
        default: ['default'],
        minItems: 1,
      }),
      concurrency: Type.Integer({ default: 10, minimum: 1, maximum: 10000 }),
      /** Most executions claimed ahead of free slots while handlers are short (0 = off). */
      prefetch: Type.Integer({ default: 1000, minimum: 0, maximum: 10000 }),
      leaseMs: Ms(30_000, 1_000, 3_600_000),
      heartbeatMs: Ms(5_000, 100, 600_000),
      pollIntervalMs: Ms(1_000, 10, 600_000),
      shutdownGraceMs: Ms(30_000, 0, 3_600_000),
      reaperIntervalMs: Ms(5_000, 100, 3_600_000),
      reaperBatchSize: Type.Integer({ default: 1000, minimum: 1, maximum: 100000 }),
      dispatcherIntervalMs: Ms(1_000, 50, 3_600_000),
      /** Fire times due within this many ms after the earliest next one share its dispatcher pass. */
      dispatcherWindowMs: Ms(50, 0, 1_000),
      /** Executions of recurring jobs (overlap policy allow) are created up to this many ms before their fire time, due at it. */
      dispatcherAheadMs: Ms(1_000, 0, 60_000),
      dispatcherBatchSize: Type.Integer({ default: 500, minimum: 1, maximum: 100000 }),
      /**
       * A fire time handled later than this after it was due counts as missed (misfire policy applies).
       * At least 1 s: a pass runs a few ms after its fire time, and up to the dispatcher window later,
       * so a smaller threshold would count ordinary passes as missed (a `skip` job would never run).
       */
      misfireThresholdMs: Ms(MISFIRE_THRESHOLD_DEFAULT_MS, 1_000, 600_000),
      retentionMs: Ms(7 * 86_400_000, 60_000, 3650 * 86_400_000),
      pruneIntervalMs: Ms(60_000, 1_000, 86_400_000),
      pruneBatchSize: Type.Integer({ default: 5000, minimum: 1, maximum: 1000000 }),
      /** Runs every handler loaded from a module in this sandbox; unset: each handler's own choice. */
      sandbox: Type.Optional(Type.Union([Type.Literal('none'), Type.Literal('thread'), Type.Literal('process')])),
      /** A sandbox's JavaScript heap limit in MB, for handlers that set none. */
      sandboxMemoryMb: Type.Optional(Type.Integer({ minimum: 16, maximum: 65_536 })),
      /** How long an aborted sandboxed handler gets to end by itself before its sandbox is ended. */
      sandboxGraceMs: Ms(500, 0, 60_000),
      /** Host names and CIDR ranges the built-in `http` handler may call although they are internal. */
      httpAllow: Type.String({ default: '' }),
      /** off: the worker has no built-in `http` handler. */
      httpHandler: Type.Union([Type.Literal('on'), Type.Literal('off')], { default: 'on' }),
      /** A webhook subscription whose delivery attempts have failed, none succeeding, for this long… */
      webhookDisableAfterMs: Ms(WEBHOOK_DISABLE_DEFAULT.afterMs, 0, 30 * 86_400_000),
      /** …with at least this many failed attempts is disabled; 0: never. */
      webhookDisableAfterFailures: Type.Integer({ default: WEBHOOK_DISABLE_DEFAULT.afterFailures, minimum: 0, maximum: 1_000_000 }),
      /** Port of the worker process's Prometheus `/metrics` (0, or `off` in the environment: none). One per process: several workers on a host need distinct ports. */
      metricsPort: Type.Integer({ default: 9464, minimum: 0, maximum: 65535 }),
      /** Address the metrics port listens on. */
      metricsHost: Type.String({ default: '0.0.0.0', minLength: 1 }),
    },
    { default: {} },
  ),
  output: Type.Object(
    {
      /** Where workers keep ctx.output: postgres, file, file:///dir or s3://bucket/prefix (core/output-uri.ts). */
      store: Type.String({ default: 'postgres', minLength: 1 }),
      /** The directory of the `file` store (relative to the working directory). */
      dir: Type.String({ default: '.pgsched/output', minLength: 1 }),
      /** Output kept per attempt; then a truncation marker, and the rest is discarded. */
      maxBytes: Type.Integer({ default: 1_048_576, minimum: 1024, maximum: 1_073_741_824 }),
      /** An S3-compatible server's URL (path-style addressing); absent: AWS S3. */
      s3Endpoint: Type.Optional(Type.String({ pattern: '^https?://' })),
      /** Absent: the AWS SDK's own lookup (AWS_REGION, the profile), else us-east-1 with an endpoint. */
      s3Region: Type.Optional(Type.String({ minLength: 1 })),
    },
    { default: {} },
  ),
  events: Type.Object(
    {
      /** Events are kept this long, and captured this long after a stream disconnects (its reconnect window). */
      retentionMs: Ms(3_600_000, 10_000, 7 * 86_400_000),
    },
    { default: {} },
  ),
  api: Type.Object(
    {
      port: Type.Integer({ default: 8080, minimum: 0, maximum: 65535 }),
      host: Type.String({ default: '0.0.0.0', minLength: 1 }),
      bodyLimitBytes: Type.Integer({ default: BODY_LIMIT_BYTES_DEFAULT, minimum: 1024, maximum: 104_857_600 }),
      /**
       * `on`: a submit is acknowledged only by a primary that replicates synchronously (its
       * synchronous_standby_names set): otherwise a 503, even though it may have been written.
       */
      requireSyncStandby: Type.Union([Type.Literal('on'), Type.Literal('off')], { default: 'off' }),
      /** Most webhook subscriptions one tenant may have; a creation beyond is refused (409). Read by the API and the CLI. */
      webhookMaxPerTenant: Type.Integer({ default: WEBHOOK_MAX_PER_TENANT_DEFAULT, minimum: 1, maximum: 100_000 }),
      /** Event streams and output follows one tenant may hold open on one API process; a request beyond gets 429. */
      maxStreamsPerTenant: Type.Integer({ default: STREAMS_PER_TENANT_DEFAULT, minimum: 1, maximum: 100_000 }),
    },
    { default: {} },
  ),
  dev: Type.Object(
    {
      dataDir: Type.String({ default: '.pgsched', minLength: 1 }),
      pgPort: Type.Integer({ default: 54329, minimum: 1, maximum: 65535 }),
    },
    { default: {} },
  ),
})

export type Config = Static<typeof ConfigSchema>

/**
 * Environment variable → dotted config path. Where two name one path, the later wins: the generic
 * PORT, HOST and LOG_LEVEL (which platforms and other programs set too) give way to
 * SCHEDULER_PORT, SCHEDULER_HOST and SCHEDULER_LOG_LEVEL.
 */
export const ENV_MAP: Readonly<Record<string, string>> = {
  DATABASE_URL: 'databaseUrl',
  LOG_LEVEL: 'logLevel',
  SCHEDULER_LOG_LEVEL: 'logLevel',
  SCHEDULER_DB_POOL_SIZE: 'db.poolSize',
  SCHEDULER_PARTITIONS: 'db.partitions',
  SCHEDULER_MIGRATE_LOCK_TIMEOUT_MS: 'migrate.lockTimeoutMs',
  SCHEDULER_MIGRATE_ATTEMPTS: 'migrate.attempts',
  SCHEDULER_HANDLERS: 'worker.handlers',
  SCHEDULER_QUEUES: 'worker.queues',
  SCHEDULER_WORKER_CONCURRENCY: 'worker.concurrency',
  SCHEDULER_WORKER_PREFETCH: 'worker.prefetch',
  SCHEDULER_LEASE_MS: 'worker.leaseMs',
  SCHEDULER_HEARTBEAT_MS: 'worker.heartbeatMs',
  SCHEDULER_POLL_INTERVAL_MS: 'worker.pollIntervalMs',
  SCHEDULER_SHUTDOWN_GRACE_MS: 'worker.shutdownGraceMs',
  SCHEDULER_REAPER_INTERVAL_MS: 'worker.reaperIntervalMs',
  SCHEDULER_DISPATCHER_INTERVAL_MS: 'worker.dispatcherIntervalMs',
  SCHEDULER_DISPATCHER_WINDOW_MS: 'worker.dispatcherWindowMs',
  SCHEDULER_DISPATCHER_AHEAD_MS: 'worker.dispatcherAheadMs',
  SCHEDULER_MISFIRE_THRESHOLD_MS: 'worker.misfireThresholdMs',
  SCHEDULER_RETENTION_MS: 'worker.retentionMs',
  SCHEDULER_PRUNE_INTERVAL_MS: 'worker.pruneIntervalMs',
  SCHEDULER_OUTPUT_STORE: 'output.store',
  SCHEDULER_OUTPUT_DIR: 'output.dir',
  SCHEDULER_OUTPUT_MAX_BYTES: 'output.maxBytes',
  SCHEDULER_OUTPUT_S3_ENDPOINT: 'output.s3Endpoint',
  SCHEDULER_OUTPUT_S3_REGION: 'output.s3Region',
  SCHEDULER_SANDBOX: 'worker.sandbox',
  SCHEDULER_SANDBOX_MEMORY_MB: 'worker.sandboxMemoryMb',
  SCHEDULER_SANDBOX_GRACE_MS: 'worker.sandboxGraceMs',
  SCHEDULER_HTTP_ALLOW: 'worker.httpAllow',
  SCHEDULER_HTTP_HANDLER: 'worker.httpHandler',
  SCHEDULER_WEBHOOK_DISABLE_AFTER_MS: 'worker.webhookDisableAfterMs',
  SCHEDULER_WEBHOOK_DISABLE_AFTER_FAILURES: 'worker.webhookDisableAfterFailures',
  SCHEDULER_WORKER_METRICS_PORT: 'worker.metricsPort',
  SCHEDULER_WORKER_METRICS_HOST: 'worker.metricsHost',
  SCHEDULER_EVENTS_RETENTION_MS: 'events.retentionMs',
  PORT: 'api.port',
  HOST: 'api.host',
  SCHEDULER_PORT: 'api.port',
  SCHEDULER_HOST: 'api.host',
  SCHEDULER_BODY_LIMIT_BYTES: 'api.bodyLimitBytes',
  SCHEDULER_WEBHOOK_MAX_PER_TENANT: 'api.webhookMaxPerTenant',
  SCHEDULER_MAX_STREAMS_PER_TENANT: 'api.maxStreamsPerTenant',
  SCHEDULER_REQUIRE_SYNC_STANDBY: 'api.requireSyncStandby',
  SCHEDULER_DEV_DATA_DIR: 'dev.dataDir',
  SCHEDULER_DEV_PG_PORT: 'dev.pgPort',
}

const PATH_TO_ENV: Record<string, string> = Object.fromEntries(Object.entries(ENV_MAP).map(([env, path]) => [path, env]))

/** Flags as parsed by the CLI: dotted config path → raw value. */
export type ConfigFlags = Readonly<Record<string, unknown>>

function setPath(target: Record<string, unknown>, path: string, value: unknown): void {
  const parts = path.split('.')
  let node = target
  for (const part of parts.slice(0, -1)) {
    const next = node[part]
    if (typeof next === 'object' && next !== null) node = next as Record<string, unknown>
    else node = node[part] = {}
  }
  node[parts[parts.length - 1] as string] = value
}

/** The value at a dotted path of `target` (undefined when absent). */
function getPath(target: Record<string, unknown>, path: string): unknown {
  let node: unknown = target
  for (const part of path.split('.')) node = typeof node === 'object' && node !== null ? (node as Record<string, unknown>)[part] : undefined
  return node
}

/** Removes the value at a dotted path of `target`. */
function deletePath(target: Record<string, unknown>, path: string): void {
  const parts = path.split('.')
  const parent = getPath(target, parts.slice(0, -1).join('.'))
  if (parts.length === 1) delete target[path]
  else if (typeof parent === 'object' && parent !== null) delete (parent as Record<string, unknown>)[parts[parts.length - 1] as string]
}

function schemaAt(path: string): TSchema | undefined {
  let node: TSchema | undefined = ConfigSchema
  for (const part of path.split('.')) node = node?.properties?.[part] as TSchema | undefined
  return node
}

/** What a config path accepts, in words, for error messages. */
function describeAccepted(schema: TSchema | undefined): string {
  if (!schema) return ''
  if (schema.anyOf) return `one of ${schema.anyOf.map((s: TSchema) => JSON.stringify(s.const)).join(', ')}`
  if (schema.type === 'integer') return `an integer from ${schema.minimum} to ${schema.maximum}`
  if (schema.type === 'array') return 'a comma-separated list of names (letters, digits, _ . : / -)'
  if (schema.pattern === '^postgres(ql)?://') return 'a postgres:// or postgresql:// URL'
  if (schema.pattern === '^https?://') return 'an http:// or https:// URL'
  return 'a non-empty string'
}

/**
 * A Kubernetes service link's `<SERVICE>_PORT` value (`tcp://10.0.0.1:8080`): Kubernetes sets one in
 * every pod of a namespace for each Service in it (unless the pod has `enableServiceLinks: false`),
 * so a Service named `scheduler` sets SCHEDULER_PORT, which pgsched reads as the API's port.
 */
const SERVICE_LINK_VALUE = /^(tcp|udp|sctp):\/\/[^\s/]+:\d+$/i

/** What to say of a setting's value that is a Kubernetes service link (`name` is its variable). */
function serviceLinkHint(name: string, value: unknown): string {
  if (typeof value !== 'string' || !SERVICE_LINK_VALUE.test(value.trim()) || !name.endsWith('_PORT')) return ''
  const service = name.slice(0, -'_PORT'.length).toLowerCase().replaceAll('_', '-')
  return (
    `; this looks like a Kubernetes service link, set in every pod of the namespace because a Service is named "${service}":` +
    ` set ${name} explicitly in the container's env (it wins over the link), or set enableServiceLinks: false in the pod spec`
  )
}

/**
 * Names of the variables Kubernetes sets for a Service whose name makes them start with SCHEDULER_
 * (`scheduler`, `scheduler-api`, …): `<SERVICE>_SERVICE_HOST`, `<SERVICE>_SERVICE_PORT`,
 * `<SERVICE>_SERVICE_PORT_<port name>` and `<SERVICE>_PORT_<n>_<TCP|UDP|SCTP>[_ADDR|_PORT|_PROTO]`.
 * (`<SERVICE>_PORT` itself is told by its value: SERVICE_LINK_VALUE.)
 */
const SERVICE_LINK_NAME = /^SCHEDULER(_[A-Z0-9_]+)?_(SERVICE_HOST|SERVICE_PORT(_[A-Z0-9_]+)?|PORT_\d+_(TCP|UDP|SCTP)(_(ADDR|PORT|PROTO))?)$/

/** The SCHEDULER_ variables pgsched reads. */
const SETTING_VARIABLES = Object.keys(ENV_MAP).filter((name) => name.startsWith('SCHEDULER_'))

/** Edit distance of `a` and `b` counting a swap of two neighbouring characters as one edit (optimal string alignment). */
function editDistance(a: string, b: string): number {
  const d: number[][] = Array.from({ length: a.length + 1 }, (_, i) => Array.from({ length: b.length + 1 }, (_, j) => (i === 0 ? j : j === 0 ? i : 0)))
  for (let i = 1; i <= a.length; i++) {
    for (let j = 1; j <= b.length; j++) {
      const row = d[i] as number[]
      const up = d[i - 1] as number[]
      row[j] = Math.min((up[j] as number) + 1, (row[j - 1] as number) + 1, (up[j - 1] as number) + (a[i - 1] === b[j - 1] ? 0 : 1))
      if (i > 1 && j > 1 && a[i - 1] === b[j - 2] && a[i - 2] === b[j - 1]) row[j] = Math.min(row[j] as number, ((d[i - 2] as number[])[j - 2] as number) + 1)
    }
  }
  return (d[a.length] as number[])[b.length] as number
}

/**
 * The setting variable `name` was probably meant to be: the nearest within two edits (SCHEDULER_WORKER_CONCURENCY),
 * else the only one that is `name` with words added (SCHEDULER_CONCURRENCY: SCHEDULER_WORKER_CONCURRENCY).
 */
function nearestSetting(name: string): string | undefined {
  let best: string | undefined
  let bestDistance = 3
  for (const known of SETTING_VARIABLES) {
    const distance = editDistance(name, known)
    if (distance < bestDistance) [best, bestDistance] = [known, distance]
  }
  if (best !== undefined) return best
  const words = name.slice('SCHEDULER_'.length)
  if (words === '') return undefined
  const wider = SETTING_VARIABLES.filter((known) => known.endsWith(`_${words}`) || known.startsWith(`${name}_`))
  return wider.length === 1 ? wider[0] : undefined
}

export interface UnknownVariable {
  /** The variable, as set. */
  name: string
  /** The setting's variable it was probably meant to be. */
  suggestion?: string
  /** One line saying so. */
  message: string
}

/**
 * The variables of `env` that start with SCHEDULER_ but name no setting, in name order, each with
 * the setting it was probably meant to be: loadConfig ignores them, so a misspelt
 * SCHEDULER_WORKER_CONCURENCY would leave the concurrency at its default without a word. Variables
 * Kubernetes sets for a Service named `scheduler` (or `scheduler-…`) are not counted.
 */
export function unknownVariables(env: Readonly<Record<string, string | undefined>>): UnknownVariable[] {
  const unknown: UnknownVariable[] = []
  for (const name of Object.keys(env).sort()) {
    if (!name.startsWith('SCHEDULER_') || Object.hasOwn(ENV_MAP, name) || SERVICE_LINK_NAME.test(name)) continue
    if (name.endsWith('_PORT') && SERVICE_LINK_VALUE.test((env[name] ?? '').trim())) continue
    const suggestion = nearestSetting(name)
    const message = `${name} is not a setting pgsched knows${suggestion ? `; did you mean ${suggestion}?` : ' (it is ignored)'}`
    unknown.push(suggestion ? { name, suggestion, message } : { name, message })
  }
  return unknown
}

/** A port setting's `off` is 0 (no port). */
const offAsZero = (value: unknown): unknown => (typeof value === 'string' && value.trim().toLowerCase() === 'off' ? 0 : value)

/** The dotted path of every setting (a leaf of ConfigSchema): what a flag may name. */
function settingPaths(schema: TSchema, path: string): string[] {
  if (schema.type !== 'object' || !schema.properties) return [path]
  return Object.entries(schema.properties as Record<string, TSchema>).flatMap(([key, child]) => settingPaths(child, path === '' ? key : `${path}.${key}`))
}
const SETTING_PATHS: Readonly<Record<string, true>> = Object.fromEntries(settingPaths(ConfigSchema, '').map((path) => [path, true]))

/**
 * The addresses a process listens on, by the command that listens: the settings whose variables a
 * Kubernetes Service can set by its name alone (`scheduler` sets SCHEDULER_PORT to
 * `tcp://10.0.0.1:8080`, `scheduler-worker-metrics` SCHEDULER_WORKER_METRICS_PORT). A command that
 * does not listen there does not read them (`loadConfig`'s `unread`), so such a link stops only the
 * process it concerns, with a message saying what it is.
 */
export const LISTEN_SETTINGS = {
  api: ['api.port', 'api.host'],
  worker: ['worker.metricsPort', 'worker.metricsHost'],
  dev: ['dev.pgPort'],
} as const satisfies Record<string, readonly string[]>

/** The listen settings of every command but `reading`'s: what a command passes as `unread`. */
export function listenSettingsBut(...reading: Array<keyof typeof LISTEN_SETTINGS>): string[] {
  return Object.entries(LISTEN_SETTINGS).flatMap(([command, paths]) => (reading.includes(command as keyof typeof LISTEN_SETTINGS) ? [] : [...paths]))
}

export interface LoadConfigOptions {
  /**
   * Settings the command does not read (dotted paths): their variables are neither checked nor
   * used, and the settings keep their defaults. Flags are checked whatever this says.
   */
  unread?: readonly string[]
}

/**
 * Builds the configuration from environment variables and flags.
 * @throws ConfigError listing every invalid variable/flag with what it accepts, and every flag that
 *   names no setting (a misspelt path would otherwise leave the setting at its default).
 */
export function loadConfig(env: Readonly<Record<string, string | undefined>>, flags: ConfigFlags = {}, options: LoadConfigOptions = {}): Config {
  const raw: Record<string, unknown> = {}
  const sourceOf: Record<string, string> = {}
  const unread = new Set(options.unread ?? [])
  for (const [name, path] of Object.entries(ENV_MAP)) {
    const value = env[name]
    if (value === undefined || value === '' || unread.has(path)) continue
    setPath(raw, path, path === 'worker.queues' ? value.split(',').map((q) => q.trim()) : path === 'worker.metricsPort' ? offAsZero(value) : value)
    sourceOf[path] = name
  }
  // the environment holds any variable; flags name settings only
  const unknownFlags = unknownFields(flags, SETTING_PATHS).map((d) => ({
    path: d.path,
    message: `flag "${d.path}" names no setting (flags are config paths, such as worker.concurrency)`,
  }))
  for (const [path, value] of Object.entries(flags)) {
    if (value === undefined || !Object.hasOwn(SETTING_PATHS, path)) continue
    setPath(raw, path, path === 'worker.metricsPort' ? offAsZero(value) : value)
    sourceOf[path] = `--${path
      .split('.')
      .pop()
      ?.replace(/[A-Z]/g, (c) => `-${c.toLowerCase()}`)}`
  }
  const details: ErrorDetail[] = [...unknownFlags]
  // a number is written in decimal digits: Value.Convert would read "1e2" as 1 and "2.9" as 2 for an
  // integer (and "0x10" as 16), and the process would run with a setting no one gave
  for (const [path, source] of Object.entries(sourceOf)) {
    const given = getPath(raw, path)
    const type = schemaAt(path)?.type
    if (typeof given !== 'string' || (type !== 'integer' && type !== 'number')) continue
    if (type === 'integer' ? /^\s*-?\d+\s*$/.test(given) : /^\s*-?\d+(\.\d+)?\s*$/.test(given)) continue
    details.push({ path, message: `${source} must be ${describeAccepted(schemaAt(path))} (got ${JSON.stringify(given)})${serviceLinkHint(source, given)}` })
    deletePath(raw, path)
  }
  const value = Value.Convert(ConfigSchema, Value.Default(ConfigSchema, raw))
  for (const error of Value.Errors(ConfigSchema, value)) {
    const path = error.path
      .replace(/^\//, '')
      .replace(/\/\d+$/, '')
      .replaceAll('/', '.')
    if (details.some((d) => d.path === path)) continue
    const source = sourceOf[path] ?? PATH_TO_ENV[path] ?? path
    // a database URL is shown with its password masked: the message goes to the process's log
    const got = JSON.stringify(path === 'databaseUrl' && typeof error.value === 'string' ? redactDatabaseUrl(error.value) : error.value)
    details.push({ path, message: `${source} must be ${describeAccepted(schemaAt(path))} (got ${got})` })
  }
  const urlProblem = typeof (value as Config).databaseUrl === 'string' ? databaseUrlProblem((value as Config).databaseUrl as string) : undefined
  if (urlProblem && !details.some((d) => d.path === 'databaseUrl'))
    details.push({ path: 'databaseUrl', message: `${sourceOf.databaseUrl ?? 'DATABASE_URL'} ${urlProblem}` })
  // The checks across settings, each once the settings it reads are valid themselves: a
  // configuration with several problems is refused naming all of them, not one per try.
  const config = value as Config
  const valid = (...paths: string[]) => !details.some((d) => paths.includes(d.path))
  if (valid('worker.httpAllow')) {
    try {
      parseAddressPolicy(config.worker.httpAllow)
    } catch (err: unknown) {
      details.push({ path: 'worker.httpAllow', message: `${sourceOf['worker.httpAllow'] ?? 'SCHEDULER_HTTP_ALLOW'}: ${(err as Error).message}` })
    }
  }
  if (valid('output.store', 'output.dir')) {
    try {
      parseOutputStoreSetting(config.output.store, config.output.dir)
    } catch (err: unknown) {
      details.push({ path: 'output.store', message: `${sourceOf['output.store'] ?? 'SCHEDULER_OUTPUT_STORE'} ${(err as Error).message}` })
    }
  }
  if (valid('worker.leaseMs', 'worker.heartbeatMs') && config.worker.leaseMs <= 3 * config.worker.heartbeatMs) {
    const lease = sourceOf['worker.leaseMs'] ?? 'SCHEDULER_LEASE_MS'
    const heartbeat = sourceOf['worker.heartbeatMs'] ?? 'SCHEDULER_HEARTBEAT_MS'
    details.push({
      path: 'worker.leaseMs',
      message: `${lease} (${config.worker.leaseMs}) must be more than 3 × ${heartbeat} (${config.worker.heartbeatMs}), so a worker aborts its handlers before its lease can expire`,
    })
  }
  if (details.length > 0) {
    // a misspelt variable left a setting at its default, which may be what is refused
    const notes = unknownVariables(env).map((u) => `\n  (${u.message})`)
    throw new ConfigError(`invalid configuration:\n  ${details.map((d) => d.message).join('\n  ')}${notes.join('')}`, details)
  }
  return deepFreeze(value as Config)
}

/**
 * Keys a section takes from JavaScript only, by the section's path prefix: `output` is the output
 * store's settings (createOutputStore), whose S3 credentials no variable sets.
 */
const PROGRAMMATIC_FIELDS: Record<string, Record<string, true>> = { 'output.': { s3Credentials: true } }

/** The keys of an object schema, each `true`: what assertKnownFields takes. */
const keysOf = (schema: TSchema): Record<string, true> => Object.fromEntries(Object.keys(schema.properties ?? {}).map((key) => [key, true as const]))

/**
 * Refuses a key ConfigSchema does not have, at the top of `config` or in one of its sections, in a
 * config built or changed by hand (from JavaScript, or with a cast): loadConfig's result has none, but
 * `{ ...config, worker: { ...config.worker, concurency: 5 } }` would run with the default concurrency.
 * `what` names it (`createWorkerSystem config`); `prefix` leads each path (`config.`).
 */
export function assertConfigFields(config: unknown, what: string, prefix = '', schema: TSchema = ConfigSchema, at = ''): void {
  assertKnownFields(config, { ...keysOf(schema), ...(PROGRAMMATIC_FIELDS[at] ?? {}) }, what, prefix)
  for (const [key, child] of Object.entries(schema.properties as Record<string, TSchema>)) {
    const section = (config as Record<string, unknown>)[key]
    if (child.type === 'object' && child.properties && section !== undefined)
      assertConfigFields(section, `${what}.${key}`, `${prefix}${key}.`, child, `${at}${key}.`)
  }
}

function deepFreeze<T>(value: T): T {
  if (typeof value === 'object' && value !== null) {
    for (const child of Object.values(value)) deepFreeze(child)
    Object.freeze(value)
  }
  return value
}
