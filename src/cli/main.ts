/**
 * The `scheduler` command line: parses arguments (commander), loads the
 * configuration, runs one command and maps failures to exit codes
 * (1 = runtime failure, 2 = bad configuration or usage).
 * Commands live in src/cli/commands/*.ts; this file only wires them.
 */
import { Command, CommanderError } from 'commander'
import { ConfigError } from '../errors.ts'

type Register = (program: Command) => void

/**
 * Each command's module, loaded only when that command runs (or for help):
 * a worker process then never loads the HTTP server, the benchmark's load
 * generator or the embedded Postgres, which keeps its memory down.
 */
const COMMANDS: Record<string, () => Promise<Register>> = {
  migrate: async () => (await import('./commands/migrate.ts')).registerMigrate,
  dev: async () => (await import('./commands/dev.ts')).registerDev,
  worker: async () => (await import('./commands/worker.ts')).registerWorker,
  bench: async () => (await import('./commands/bench.ts')).registerBench,
  api: async () => (await import('./commands/api.ts')).registerApi,
  keys: async () => (await import('./commands/keys.ts')).registerKeys,
  queues: async () => (await import('./commands/queues.ts')).registerQueues,
  tenants: async () => (await import('./commands/tenants.ts')).registerTenants,
  webhooks: async () => (await import('./commands/webhooks.ts')).registerWebhooks,
}

export async function main(argv: string[]): Promise<void> {
  const program = new Command().name('scheduler').description('pgsched: a distributed job scheduler on PostgreSQL').showHelpAfterError().exitOverride()
  const name = argv[2]
  const wanted = name !== undefined && Object.hasOwn(COMMANDS, name) ? [name] : Object.keys(COMMANDS)
  for (const register of await Promise.all(wanted.map((n) => (COMMANDS[n] as () => Promise<Register>)()))) register(program)
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
