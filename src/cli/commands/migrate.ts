/** `scheduler migrate [--partitions N]`: bring the schema up to date. */
import type { Command } from 'commander'
import { loadConfig } from '../../config.ts'
import { ConfigError } from '../../errors.ts'
import { createLogger } from '../../logger.ts'
import { migrate } from '../../db/migrate.ts'
import { PARTITION_COUNT_DEFAULT } from '../../core/names.ts'

export function registerMigrate(program: Command): void {
  program
    .command('migrate')
    .description('apply pending migrations (safe to run repeatedly and concurrently)')
    .option('--partitions <n>', `partition count for new installs (default ${PARTITION_COUNT_DEFAULT}; fixed after the first run)`)
    .action(async (opts: { partitions?: string }) => {
      const config = loadConfig(process.env, { 'db.partitions': opts.partitions })
      if (!config.databaseUrl) throw new ConfigError('DATABASE_URL must be set (a postgres:// URL)')
      const log = createLogger({ level: config.logLevel })
      const { applied } = await migrate({ databaseUrl: config.databaseUrl, partitions: config.db.partitions, log })
      process.stdout.write(applied.length === 0 ? 'schema is up to date\n' : `applied ${applied.length} migration(s): ${applied.join(', ')}\n`)
    })
}
