/**
 * `scheduler migrate [--partitions N]`: bring the schema up to date. A count given (flag or
 * SCHEDULER_PARTITIONS) for a schema installed with another one stops it with exit code 2. A schema
 * newer than this version (a rollback) is left as it is, exit code 0, saying so.
 */
import type { Command } from 'commander'
import { loadConfig } from '../../config.ts'
import { warnOfUnknownVariables } from '../shared.ts'
import { ConfigError } from '../../errors.ts'
import { createLogger } from '../../logger.ts'
import { migrate } from '../../db/migrate.ts'
import { PARTITION_COUNT_DEFAULT } from '../../core/names.ts'

export function registerMigrate(program: Command): void {
  program
    .command('migrate')
    .description('apply pending migrations (safe to run repeatedly and concurrently)')
    .option('--partitions <n>', `partition count for new installs (default ${PARTITION_COUNT_DEFAULT}; fixed by the first run, must match after it)`)
    .action(async (opts: { partitions?: string }) => {
      const config = loadConfig(process.env, { 'db.partitions': opts.partitions })
      if (!config.databaseUrl) throw new ConfigError('DATABASE_URL must be set (a postgres:// URL)')
      const log = createLogger({ level: config.logLevel })
      warnOfUnknownVariables(log)
      // Only a count that was asked for is checked against an installed schema, not the default.
      const asked = opts.partitions !== undefined || (process.env.SCHEDULER_PARTITIONS ?? '') !== ''
      const { applied, newer } = await migrate({ databaseUrl: config.databaseUrl, partitions: asked ? config.db.partitions : undefined, log })
      if (newer) process.stdout.write(`schema is newer than this version (it has ${newer.join(', ')}); nothing to apply\n`)
      else process.stdout.write(applied.length === 0 ? 'schema is up to date\n' : `applied ${applied.length} migration(s): ${applied.join(', ')}\n`)
    })
}
