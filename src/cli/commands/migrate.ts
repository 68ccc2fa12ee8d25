/**
 * `scheduler migrate [--partitions N] [--lock-timeout-ms MS] [--attempts N]`: bring the schema up to
 * date. A count given (flag or SCHEDULER_PARTITIONS) for a schema installed with another one stops it
 * with exit code 2. A schema newer than this version (a rollback) is left as it is, exit code 0,
 * saying so. A migration that timed out waiting for a lock in each of its tries stops it with exit
 * code 1, naming the lock and who holds it. Its stdout is log lines only (JSON): the summary is one
 * of them (`schema migrated` or `schema is up to date`), so that a log collector reads all of it.
 */
import type { Command } from 'commander'
import { listenSettingsBut, loadConfig } from '../../config.ts'
import { warnOfUnknownVariables } from '../shared.ts'
import { ConfigError } from '../../errors.ts'
import { createLogger } from '../../logger.ts'
import { migrate } from '../../db/migrate.ts'
import { PARTITION_COUNT_DEFAULT } from '../../core/names.ts'
import { MIGRATE_ATTEMPTS_DEFAULT, MIGRATE_LOCK_TIMEOUT_MS_DEFAULT } from '../../core/migrate-retry.ts'

export function registerMigrate(program: Command): void {
  program
    .command('migrate')
    .description('apply pending migrations (safe to run repeatedly and concurrently)')
    .option('--partitions <n>', `partition count for new installs (default ${PARTITION_COUNT_DEFAULT}; fixed by the first run, must match after it)`)
    .option(
      '--lock-timeout-ms <ms>',
      `longest wait of a migration for a table lock, then it is rolled back and retried (default ${MIGRATE_LOCK_TIMEOUT_MS_DEFAULT}, or SCHEDULER_MIGRATE_LOCK_TIMEOUT_MS; 0: no bound)`,
    )
    .option('--attempts <n>', `tries of a migration that timed out waiting for a lock (default ${MIGRATE_ATTEMPTS_DEFAULT}, or SCHEDULER_MIGRATE_ATTEMPTS)`)
    .action(async (opts: { partitions?: string; lockTimeoutMs?: string; attempts?: string }) => {
      const config = loadConfig(
        process.env,
        {
          'db.partitions': opts.partitions,
          'migrate.lockTimeoutMs': opts.lockTimeoutMs,
          'migrate.attempts': opts.attempts,
        },
        { unread: listenSettingsBut() },
      )
      if (!config.databaseUrl) throw new ConfigError('DATABASE_URL must be set (a postgres:// URL)')
      const log = createLogger({ level: config.logLevel })
      warnOfUnknownVariables(log)
      // Only a count that was asked for is checked against an installed schema, not the default.
      const asked = opts.partitions !== undefined || (process.env.SCHEDULER_PARTITIONS ?? '') !== ''
      const { applied, newer } = await migrate({
        databaseUrl: config.databaseUrl,
        partitions: asked ? config.db.partitions : undefined,
        lockTimeoutMs: config.migrate.lockTimeoutMs,
        attempts: config.migrate.attempts,
        log,
      })
      // (a newer schema: migrate() has logged its warning, naming the migrations this version does not know)
      if (newer) return
      if (applied.length === 0) log.info({ count: 0 }, 'schema is up to date')
      else log.info({ count: applied.length, migrations: applied }, 'schema migrated')
    })
}
