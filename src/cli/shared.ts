/**
 * What the commands share: the configuration of a command and the warning of variables that name no
 * setting (every command that reads the environment), a short-lived database pool and table output
 * (keys, queues).
 */
import { listenSettingsBut, loadConfig, unknownVariables, type Config, type ConfigFlags } from '../config.ts'
import { createDb, type Database } from '../db/pool.ts'
import { ConfigError, ValidationError } from '../errors.ts'
import type { Logger } from '../logger.ts'

/**
 * Warns of each SCHEDULER_ variable of the environment that names no setting, with the one it was
 * probably meant to be: the command runs on (a misspelt variable is ignored), but not silently. A
 * process with a log (worker, api, dev, migrate) warns there; a command without one (the admin
 * commands, bench) writes a line to stderr, so that what it prints on stdout (JSON, CSV, a table)
 * stays whole.
 */
export function warnOfUnknownVariables(log?: Logger): void {
  for (const unknown of unknownVariables(process.env)) {
    if (log) log.warn({ variable: unknown.name, suggestion: unknown.suggestion }, unknown.message)
    else process.stderr.write(`scheduler: warning: ${unknown.message}\n`)
  }
}

/**
 * The configuration of a command without a log of its own (the admin commands, bench): the
 * environment's, with `flags` over it, then a warning on stderr of each variable that names no
 * setting. Throws ConfigError as loadConfig does (its message names those variables too).
 */
export function commandConfig(flags: ConfigFlags = {}): Config {
  // no admin command listens: a port a Kubernetes Service link set for the API or a worker is not read
  const config = loadConfig(process.env, flags, { unread: listenSettingsBut() })
  warnOfUnknownVariables()
  return config
}

/**
 * Runs `fn` with a one-connection pool on DATABASE_URL, closed afterwards, and the command's
 * configuration (commandConfig: read, and warned of, once).
 */
export async function withDatabase<T>(applicationName: string, fn: (database: Database, config: Config) => Promise<T>): Promise<T> {
  const config = commandConfig()
  if (!config.databaseUrl) throw new ConfigError('DATABASE_URL must be set (a postgres:// URL)')
  const database = createDb({ databaseUrl: config.databaseUrl, poolSize: 1, applicationName })
  try {
    return await fn(database, config)
  } finally {
    await database.db.destroy()
  }
}

/** Rows (the first is the header) as aligned columns. */
export function formatTable(rows: readonly (readonly string[])[]): string {
  const widths = rows[0]?.map((_, i) => Math.max(...rows.map((r) => (r[i] ?? '').length))) ?? []
  return rows
    .map((r) =>
      r
        .map((cell, i) => cell.padEnd(widths[i] ?? 0))
        .join('  ')
        .trimEnd(),
    )
    .join('\n')
}

/**
 * Runs `fn`, and words a ValidationError it throws as the command line does: each field named by the
 * flag or argument that gave it (`names`: field → flag), and `null` (no limit, no quota) as `"none"`,
 * which is what the command takes.
 */
export async function inCliWords<T>(names: Readonly<Record<string, string>>, fn: () => Promise<T>): Promise<T> {
  try {
    return await fn()
  } catch (err: unknown) {
    if (!(err instanceof ValidationError)) throw err
    const word = (text: string) => {
      let out = text.replaceAll(', or null for ', ', or "none" for ')
      for (const [field, flag] of Object.entries(names)) out = out.replace(new RegExp(`(^|; )${field.replaceAll('.', '\\.')}(?= )`, 'g'), `$1${flag}`)
      return out
    }
    throw new ValidationError(
      word(err.message),
      err.details?.map((d) => ({ ...d, message: word(d.message) })),
    )
  }
}
