import { describe, expect, it } from 'vitest'
import { ENV_MAP, listenSettingsBut, loadConfig, unknownVariables } from '../src/config.ts'
import { ConfigError } from '../src/errors.ts'
import { parseOutputStoreSetting } from '../src/core/output-uri.ts'

function errorOf(fn: () => unknown): ConfigError {
  try {
    fn()
  } catch (err: unknown) {
    if (err instanceof ConfigError) return err
    throw err
  }
  throw new Error('expected a ConfigError')
}

describe('loadConfig', () => {
  it('applies defaults when the environment is empty', () => {
    const config = loadConfig({})
    expect(config.databaseUrl).toBeUndefined()
    expect(config.db.poolSize).toBe(10)
    expect(config.worker).toMatchObject({ queues: ['default'], concurrency: 10, leaseMs: 30_000, heartbeatMs: 5_000 })
    expect(config.api.port).toBe(8080)
    expect(Object.isFrozen(config.worker)).toBe(true)
  })

  it('reads and converts environment variables', () => {
    const config = loadConfig({
      DATABASE_URL: 'postgres://u@h/db',
      SCHEDULER_WORKER_CONCURRENCY: '25',
      SCHEDULER_QUEUES: 'emails, reports',
      PORT: '3000',
      LOG_LEVEL: 'debug',
    })
    expect(config).toMatchObject({ databaseUrl: 'postgres://u@h/db', logLevel: 'debug' })
    expect(config.worker.concurrency).toBe(25)
    expect(config.worker.queues).toEqual(['emails', 'reports'])
    expect(config.api.port).toBe(3000)
  })

  it('reads SCHEDULER_PORT, SCHEDULER_HOST and SCHEDULER_LOG_LEVEL before the generic PORT, HOST and LOG_LEVEL another program may have set', () => {
    const both = loadConfig({
      PORT: '3000',
      SCHEDULER_PORT: '4000',
      HOST: '10.0.0.1',
      SCHEDULER_HOST: '127.0.0.1',
      LOG_LEVEL: 'debug',
      SCHEDULER_LOG_LEVEL: 'warn',
    })
    expect([both.api.port, both.api.host, both.logLevel]).toEqual([4000, '127.0.0.1', 'warn'])
    const generic = loadConfig({ PORT: '3000', HOST: '10.0.0.1', LOG_LEVEL: 'debug' })
    expect([generic.api.port, generic.api.host, generic.logLevel]).toEqual([3000, '10.0.0.1', 'debug'])
    expect(errorOf(() => loadConfig({ PORT: '3000', SCHEDULER_PORT: 'x' })).message).toContain('SCHEDULER_PORT must be an integer from 0 to 65535 (got "x")')
  })

  it('refuses a misfire threshold under 1 s, which would count ordinary dispatcher passes as missed', () => {
    expect(errorOf(() => loadConfig({ SCHEDULER_MISFIRE_THRESHOLD_MS: '0' })).message).toMatch(/SCHEDULER_MISFIRE_THRESHOLD_MS/)
    expect(errorOf(() => loadConfig({ SCHEDULER_MISFIRE_THRESHOLD_MS: '999' })).message).toMatch(/SCHEDULER_MISFIRE_THRESHOLD_MS/)
    expect(loadConfig({ SCHEDULER_MISFIRE_THRESHOLD_MS: '1000' }).worker.misfireThresholdMs).toBe(1000)
  })

  it('reads the output store settings: Postgres by default, files and S3 when named', () => {
    expect(loadConfig({}).output).toEqual({ store: 'postgres', dir: '.pgsched/output', maxBytes: 1_048_576 })
    const s3 = loadConfig({
      SCHEDULER_OUTPUT_STORE: 's3://logs/pgsched/prod',
      SCHEDULER_OUTPUT_MAX_BYTES: '4096',
      SCHEDULER_OUTPUT_S3_ENDPOINT: 'http://127.0.0.1:9000',
      SCHEDULER_OUTPUT_S3_REGION: 'eu-west-1',
    }).output
    expect(s3).toMatchObject({ store: 's3://logs/pgsched/prod', maxBytes: 4096, s3Endpoint: 'http://127.0.0.1:9000', s3Region: 'eu-west-1' })
    expect(parseOutputStoreSetting(s3.store, s3.dir)).toEqual({ kind: 's3', bucket: 'logs', keyPrefix: 'pgsched/prod/' })
    expect(parseOutputStoreSetting('s3://logs', '.')).toEqual({ kind: 's3', bucket: 'logs', keyPrefix: '' })
    expect(parseOutputStoreSetting('file', 'out')).toEqual({ kind: 'file', dir: 'out' })
    expect(parseOutputStoreSetting('file:///var/lib/pgsched%20out', 'out')).toEqual({ kind: 'file', dir: '/var/lib/pgsched out' })
    expect(parseOutputStoreSetting('file://localhost/srv/out', 'out')).toEqual({ kind: 'file', dir: '/srv/out' })
    // a relative path in a file: URL is refused, not read as a folder at the root
    for (const relative of ['file:relative/out', 'file:./out', 'file:/abs-without-slashes', 'file://relative/out']) {
      expect(() => parseOutputStoreSetting(relative, 'out'), relative).toThrow(
        `must be postgres, file, file:///absolute/dir or s3://bucket/prefix (got ${JSON.stringify(relative)})`,
      )
    }
    const err = errorOf(() => loadConfig({ SCHEDULER_OUTPUT_STORE: 'ftp://x', SCHEDULER_OUTPUT_MAX_BYTES: '10', SCHEDULER_OUTPUT_S3_ENDPOINT: 'minio:9000' }))
    expect(err.message).toContain('SCHEDULER_OUTPUT_MAX_BYTES must be an integer from 1024 to 1073741824 (got 10)')
    expect(err.message).toContain('SCHEDULER_OUTPUT_S3_ENDPOINT must be an http:// or https:// URL (got "minio:9000")')
    expect(errorOf(() => loadConfig({ SCHEDULER_OUTPUT_STORE: 'ftp://x' })).message).toContain(
      'SCHEDULER_OUTPUT_STORE must be postgres, file, file:///absolute/dir or s3://bucket/prefix (got "ftp://x")',
    )
  })

  it('lets flags override the environment', () => {
    const config = loadConfig({ SCHEDULER_WORKER_CONCURRENCY: '25' }, { 'worker.concurrency': '7' })
    expect(config.worker.concurrency).toBe(7)
  })

  it('refuses a flag that names no setting, rather than running with the default', () => {
    // a misspelt path would leave the concurrency at its default
    const err = errorOf(() => loadConfig({}, { 'worker.concurency': '7', worker: '7', 'api.port': '3000' }))
    expect(err.details).toEqual([
      { path: 'worker.concurency', message: 'flag "worker.concurency" names no setting (flags are config paths, such as worker.concurrency)' },
      { path: 'worker', message: 'flag "worker" names no setting (flags are config paths, such as worker.concurrency)' },
    ])
    // every setting a variable names is a flag's too
    for (const path of new Set(Object.values(ENV_MAP))) expect(() => loadConfig({}, { [path]: 'x' }), path).not.toThrow(/names no setting/)
    // a flag left undefined (not given on the command line) is none
    expect(loadConfig({}, { 'worker.concurency': undefined, 'worker.queues': ['a', 'b'] }).worker.queues).toEqual(['a', 'b'])
  })

  it('names every invalid variable and the values it accepts', () => {
    const err = errorOf(() => loadConfig({ PORT: '99999', LOG_LEVEL: 'loud', SCHEDULER_WORKER_CONCURRENCY: 'many', DATABASE_URL: 'mysql://x' }))
    expect(err.message).toContain('PORT must be an integer from 0 to 65535 (got 99999)')
    expect(err.message).toContain('LOG_LEVEL must be one of "fatal", "error", "warn", "info", "debug", "trace", "silent"')
    expect(err.message).toContain('SCHEDULER_WORKER_CONCURRENCY must be an integer from 1 to 10000 (got "many")')
    expect(err.message).toContain('DATABASE_URL must be a postgres:// or postgresql:// URL')
    expect(err.details).toHaveLength(4)
  })

  it('reads the http handler settings and names a bad allowlist entry or switch', () => {
    expect(loadConfig({}).worker).toMatchObject({ httpAllow: '', httpHandler: 'on' })
    expect(loadConfig({ SCHEDULER_HTTP_ALLOW: '127.0.0.1, 10.0.0.0/8, internal.example', SCHEDULER_HTTP_HANDLER: 'off' }).worker).toMatchObject({
      httpAllow: '127.0.0.1, 10.0.0.0/8, internal.example',
      httpHandler: 'off',
    })
    expect(errorOf(() => loadConfig({ SCHEDULER_HTTP_ALLOW: '10.0.0.0/33' })).message).toContain(
      'SCHEDULER_HTTP_ALLOW: "10.0.0.0/33" is not a valid CIDR range (the prefix must be 0 to 32)',
    )
    expect(errorOf(() => loadConfig({ SCHEDULER_HTTP_ALLOW: 'http://x' })).message).toContain(
      'SCHEDULER_HTTP_ALLOW: "http://x" is neither a host name, an IP address nor a CIDR range',
    )
    expect(errorOf(() => loadConfig({ SCHEDULER_HTTP_HANDLER: 'no' })).message).toContain('SCHEDULER_HTTP_HANDLER must be one of "on", "off"')
  })

  it('reads whether submits need a synchronous standby (off by default)', () => {
    expect(loadConfig({}).api.requireSyncStandby).toBe('off')
    expect(loadConfig({ SCHEDULER_REQUIRE_SYNC_STANDBY: 'on' }).api.requireSyncStandby).toBe('on')
    expect(errorOf(() => loadConfig({ SCHEDULER_REQUIRE_SYNC_STANDBY: 'yes' })).message).toContain('SCHEDULER_REQUIRE_SYNC_STANDBY must be one of "on", "off"')
  })

  it('reads the sandbox settings and names a bad one', () => {
    expect(loadConfig({}).worker).toMatchObject({ sandboxGraceMs: 500 })
    expect(loadConfig({}).worker.sandbox).toBeUndefined()
    expect(loadConfig({ SCHEDULER_SANDBOX: 'process', SCHEDULER_SANDBOX_MEMORY_MB: '64', SCHEDULER_SANDBOX_GRACE_MS: '200' }).worker).toMatchObject({
      sandbox: 'process',
      sandboxMemoryMb: 64,
      sandboxGraceMs: 200,
    })
    expect(errorOf(() => loadConfig({ SCHEDULER_SANDBOX: 'vm' })).message).toContain('SCHEDULER_SANDBOX must be one of "none", "thread", "process"')
    expect(errorOf(() => loadConfig({}, { 'worker.sandboxMemoryMb': '8' })).message).toContain(
      '--sandbox-memory-mb must be an integer from 16 to 65536 (got 8)',
    )
  })

  it('refuses a number not written in decimal digits rather than reading part of it (1e2 is not 1, 2.9 not 2, 0x10 not 16)', () => {
    for (const [name, given] of [
      ['SCHEDULER_WORKER_CONCURRENCY', '1e2'],
      ['SCHEDULER_WORKER_CONCURRENCY', '2.9'],
      ['SCHEDULER_DB_POOL_SIZE', '0x10'],
      ['SCHEDULER_LEASE_MS', '6e4'],
    ] as const) {
      const err = errorOf(() => loadConfig({ [name]: given }))
      expect(err.message, `${name}=${given}`).toMatch(new RegExp(`${name} must be an integer from \\d+ to \\d+ \\(got "${given.replace('.', '\\.')}"\\)`))
      expect(err.details, `${name}=${given}`).toHaveLength(1)
    }
    expect(errorOf(() => loadConfig({}, { 'worker.concurrency': '1e2' })).message).toContain('--concurrency must be an integer from 1 to 10000 (got "1e2")')
    expect(loadConfig({ SCHEDULER_WORKER_CONCURRENCY: ' 12 ' }).worker.concurrency).toBe(12)
  })

  it('names the flag when a flag is invalid', () => {
    const err = errorOf(() => loadConfig({}, { 'worker.concurrency': '0' }))
    expect(err.message).toContain('--concurrency must be an integer from 1 to 10000 (got 0)')
  })

  it('rejects a lease not longer than three heartbeats', () => {
    const err = errorOf(() => loadConfig({ SCHEDULER_LEASE_MS: '10000', SCHEDULER_HEARTBEAT_MS: '5000' }))
    expect(err.message).toContain('SCHEDULER_LEASE_MS (10000) must be more than 3 × SCHEDULER_HEARTBEAT_MS (5000)')
    // given as flags, named as flags
    const flags = errorOf(() => loadConfig({}, { 'worker.leaseMs': '10000', 'worker.heartbeatMs': '5000' }))
    expect(flags.message).toContain('--lease-ms (10000) must be more than 3 × --heartbeat-ms (5000)')
  })

  it('names every problem at once, those across settings too, and checks none across a setting that is itself invalid', () => {
    const err = errorOf(() =>
      loadConfig({ SCHEDULER_LEASE_MS: '15000', SCHEDULER_WORKER_PREFETCH: '1e2', SCHEDULER_HTTP_ALLOW: 'nonsense/99', SCHEDULER_PORT: 'x' }),
    )
    expect(err.details?.map((d) => d.path).sort()).toEqual(['api.port', 'worker.httpAllow', 'worker.leaseMs', 'worker.prefetch'])
    expect(err.message).toContain('SCHEDULER_LEASE_MS (15000) must be more than 3 × SCHEDULER_HEARTBEAT_MS (5000)')
    // an invalid heartbeat is named once, not also compared with the lease
    const invalid = errorOf(() => loadConfig({ SCHEDULER_LEASE_MS: '15000', SCHEDULER_HEARTBEAT_MS: '-1' }))
    expect(invalid.details?.map((d) => d.path)).toEqual(['worker.heartbeatMs'])
  })

  it('never shows the password of a database URL it refuses, and says when a password is not percent-encoded', () => {
    for (const [url, shown] of [
      [
        'postgresql+psycopg://app:Sup3rS3cret@db.example.com/app',
        'DATABASE_URL must be a postgres:// or postgresql:// URL (got "postgresql+psycopg://app:***@db.example.com/app")',
      ],
      [
        ' postgres://postgres:Sup3rS3cret@127.0.0.1:5432/app',
        'DATABASE_URL must be a postgres:// or postgresql:// URL (got " postgres://postgres:***@127.0.0.1:5432/app")',
      ],
      ['postgres://app:Sup3r#S3cret@db.example.com/app', 'DATABASE_URL has a user name or password that is not percent-encoded'],
      ['postgres://app:Sup3r/S3cret@db.example.com/app', 'DATABASE_URL has a user name or password that is not percent-encoded'],
    ]) {
      const err = errorOf(() => loadConfig({ DATABASE_URL: url as string }))
      expect(err.message).toContain(shown)
      expect(err.message).not.toContain('S3cret')
    }
  })

  it('accepts a database URL with several hosts, and rejects one that does not parse or cannot write', () => {
    expect(loadConfig({ DATABASE_URL: 'postgres://u:p,w@h1,h2:6432/db' }).databaseUrl).toBe('postgres://u:p,w@h1,h2:6432/db')
    expect(errorOf(() => loadConfig({ DATABASE_URL: 'postgres://h1:5432,:6432/db' })).message).toContain(
      'DATABASE_URL has a host ":6432" that is not host[:port] (hosts: h1:5432,:6432)',
    )
    expect(errorOf(() => loadConfig({ DATABASE_URL: 'postgres://h1,h2/db?target_session_attrs=standby' })).message).toContain(
      'DATABASE_URL has target_session_attrs=standby; pgsched writes',
    )
    expect(errorOf(() => loadConfig({ DATABASE_URL: 'postgresql://[::1/db' })).message).toContain('DATABASE_URL has a host')
    expect(errorOf(() => loadConfig({ DATABASE_URL: 'postgresql://h 1/db' })).message).toContain('DATABASE_URL is not a valid URL')
    expect(loadConfig({ DATABASE_URL: 'postgres://u:p,w@h1:5432/db' }).databaseUrl).toBe('postgres://u:p,w@h1:5432/db')
  })

  it('rejects a malformed queue list', () => {
    const err = errorOf(() => loadConfig({ SCHEDULER_QUEUES: 'ok,bad queue' }))
    expect(err.message).toContain('SCHEDULER_QUEUES must be a comma-separated list')
  })
})

/** Variables Kubernetes sets in every pod of a namespace with a Service named `scheduler` (and one named `scheduler-api`). */
const SERVICE_LINKS = {
  SCHEDULER_SERVICE_HOST: '10.0.0.1',
  SCHEDULER_SERVICE_PORT: '8080',
  SCHEDULER_SERVICE_PORT_HTTP: '8080',
  SCHEDULER_SERVICE_PORT_METRICS_HTTP: '9464',
  SCHEDULER_PORT_8080_TCP: 'tcp://10.0.0.1:8080',
  SCHEDULER_PORT_8080_TCP_ADDR: '10.0.0.1',
  SCHEDULER_PORT_8080_TCP_PORT: '8080',
  SCHEDULER_PORT_8080_TCP_PROTO: 'tcp',
  SCHEDULER_PORT_53_UDP: 'udp://10.0.0.1:53',
  SCHEDULER_PORT_9000_SCTP_PROTO: 'sctp',
  SCHEDULER_API_SERVICE_HOST: '10.0.0.2',
  SCHEDULER_API_SERVICE_PORT: '80',
  SCHEDULER_API_PORT: 'tcp://10.0.0.2:80',
  SCHEDULER_API_PORT_80_TCP_ADDR: '10.0.0.2',
}

describe('unknownVariables', () => {
  it('is exported by the package, for an application that embeds workers and warns itself', async () => {
    const pkg = await import('../src/index.ts')
    expect(pkg.unknownVariables({ SCHEDULER_WORKER_CONCURENCY: '50' })[0]?.suggestion).toBe('SCHEDULER_WORKER_CONCURRENCY')
  })

  it('names a SCHEDULER_ variable that is no setting, with the one it was probably meant to be', () => {
    expect(unknownVariables({ SCHEDULER_WORKER_CONCURENCY: '50' })).toEqual([
      {
        name: 'SCHEDULER_WORKER_CONCURENCY',
        suggestion: 'SCHEDULER_WORKER_CONCURRENCY',
        message: 'SCHEDULER_WORKER_CONCURENCY is not a setting pgsched knows; did you mean SCHEDULER_WORKER_CONCURRENCY?',
      },
    ])
    const suggested = (name: string) => unknownVariables({ [name]: '1' })[0]?.suggestion
    expect(suggested('SCHEDULER_WORKER_CONCURRNECY')).toBe('SCHEDULER_WORKER_CONCURRENCY') // two letters swapped
    expect(suggested('SCHEDULER_LEASE_M')).toBe('SCHEDULER_LEASE_MS')
    expect(suggested('SCHEDULER_HEARTBEAT_MS_')).toBe('SCHEDULER_HEARTBEAT_MS')
    expect(suggested('SCHEDULER_CONCURRENCY')).toBe('SCHEDULER_WORKER_CONCURRENCY') // words left out
    expect(suggested('SCHEDULER_METRICS_PORT')).toBe('SCHEDULER_WORKER_METRICS_PORT')
    expect(suggested('SCHEDULER_DISPATCHER')).toBeUndefined() // several settings begin so
    expect(unknownVariables({ SCHEDULER_FROBNICATE: 'on' })).toEqual([
      { name: 'SCHEDULER_FROBNICATE', message: 'SCHEDULER_FROBNICATE is not a setting pgsched knows (it is ignored)' },
    ])
  })

  it("names each unknown variable once, in name order, and no setting, other program's variable or Kubernetes service link", () => {
    const settings = Object.fromEntries(Object.keys(ENV_MAP).map((name) => [name, '1']))
    const env = {
      ...settings,
      ...SERVICE_LINKS,
      SCHEDULER_PORT: 'tcp://10.0.0.1:8080',
      PATH: '/bin',
      SCHEDULERX: '1',
      SCHEDULER_QUEUS: 'a',
      SCHEDULER_HANDLER: 'h.js',
    }
    expect(unknownVariables(env).map((u) => [u.name, u.suggestion])).toEqual([
      ['SCHEDULER_HANDLER', 'SCHEDULER_HANDLERS'],
      ['SCHEDULER_QUEUS', 'SCHEDULER_QUEUES'],
    ])
    // a _PORT variable without a service link's value is not one
    expect(unknownVariables({ SCHEDULER_API_PORT: '8080' }).map((u) => u.name)).toEqual(['SCHEDULER_API_PORT'])
  })

  it('is noted in a refusal of the configuration: the misspelt variable may be why a setting is refused', () => {
    const err = errorOf(() => loadConfig({ SCHEDULER_LEASE_MS: '10000', SCHEDULER_HEARTBEAT: '3000' }))
    expect(err.message).toContain('SCHEDULER_LEASE_MS (10000) must be more than 3 × SCHEDULER_HEARTBEAT_MS (5000)')
    expect(err.message).toContain('(SCHEDULER_HEARTBEAT is not a setting pgsched knows; did you mean SCHEDULER_HEARTBEAT_MS?)')
    expect(err.details).toHaveLength(1)
  })
})

describe('a Kubernetes service link in a port setting', () => {
  it('is refused with what it is and how to set the port', () => {
    const err = errorOf(() => loadConfig({ ...SERVICE_LINKS, SCHEDULER_PORT: 'tcp://10.0.0.1:8080' }))
    expect(err.details).toHaveLength(1)
    expect(err.message).toContain(
      'SCHEDULER_PORT must be an integer from 0 to 65535 (got "tcp://10.0.0.1:8080"); this looks like a Kubernetes service link, set in every pod of the namespace because a Service is named "scheduler":' +
        " set SCHEDULER_PORT explicitly in the container's env (it wins over the link), or set enableServiceLinks: false in the pod spec",
    )
    const metrics = errorOf(() => loadConfig({ SCHEDULER_WORKER_METRICS_PORT: 'tcp://10.0.0.3:9464' }))
    expect(metrics.message).toContain('a Service is named "scheduler-worker-metrics": set SCHEDULER_WORKER_METRICS_PORT explicitly')
    // any other bad value is only refused
    expect(errorOf(() => loadConfig({ SCHEDULER_PORT: 'http://x' })).message).not.toContain('Kubernetes')
    // set explicitly, it is read
    expect(loadConfig({ ...SERVICE_LINKS, SCHEDULER_PORT: '8080' }).api.port).toBe(8080)
  })

  it('is not read by a command that does not listen there: the setting keeps its default', () => {
    const links = { ...SERVICE_LINKS, SCHEDULER_PORT: 'tcp://10.0.0.1:8080', PORT: 'x', HOST: '', SCHEDULER_WORKER_METRICS_PORT: 'tcp://10.0.0.3:9464' }
    const worker = loadConfig({ ...links, SCHEDULER_WORKER_METRICS_PORT: '9500' }, {}, { unread: listenSettingsBut('worker') })
    expect([worker.api.port, worker.worker.metricsPort]).toEqual([8080, 9500])
    const api = loadConfig({ ...links, SCHEDULER_PORT: '9000' }, {}, { unread: listenSettingsBut('api') })
    expect([api.api.port, api.worker.metricsPort]).toEqual([9000, 9464])
    const admin = loadConfig(links, {}, { unread: listenSettingsBut() })
    expect([admin.api.port, admin.worker.metricsPort]).toEqual([8080, 9464])
    // each still refuses the link in its own port
    expect(errorOf(() => loadConfig(links, {}, { unread: listenSettingsBut('worker') })).message).toContain('SCHEDULER_WORKER_METRICS_PORT must be')
    expect(errorOf(() => loadConfig(links, {}, { unread: listenSettingsBut('api') })).message).toContain('SCHEDULER_PORT must be')
    // a flag is checked whatever the command reads
    expect(errorOf(() => loadConfig({}, { 'api.port': 'x' }, { unread: listenSettingsBut() })).message).toContain('--port must be')
  })
})
