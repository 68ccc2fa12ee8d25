/**
 * The `scheduler` command line: parses arguments (commander), loads the
 * configuration, runs one command and maps failures to exit codes
 * (1 = runtime failure, 2 = bad configuration or usage).
 * Commands live in src/cli/commands/*.ts; this file only wires them.
 */
import { Command, CommanderError } from 'commander'
import { ConfigError } from '../errors.ts'
import { registerMigrate } from './commands/migrate.ts'
import { registerDev } from './commands/dev.ts'
import { registerWorker } from './commands/worker.ts'
import { registerBench } from './commands/bench.ts'
import { registerApi } from './commands/api.ts'
import { registerKeys } from './commands/keys.ts'

export async function main(argv: string[]): Promise<void> {
  const program = new Command()
    .name('scheduler')
    .description('pgsched: a distributed job scheduler on PostgreSQL')
    .showHelpAfterError()
    .exitOverride()
  registerMigrate(program)
  registerDev(program)
  registerWorker(program)
  registerBench(program)
  registerApi(program)
  registerKeys(program)
  try {
    await program.parseAsync(argv)
  } catch (err: unknown) {
    if (err instanceof CommanderError) {
      process.exitCode = err.exitCode === 0 ? 0 : 2
      return
    }
    if (err instanceof ConfigError) {
      process.stderr.write(`scheduler: ${err.message}\n`)
      process.exitCode = 2
      return
    }
    process.stderr.write(`scheduler: ${err instanceof Error ? err.message : String(err)}\n`)
    process.exitCode = 1
  }
}
