/**
 * The `scheduler` command line: parses arguments (commander), loads the
 * configuration, runs one command and maps failures to exit codes
 * (1 = runtime failure, 2 = bad configuration or usage: a setting, flag or argument refused).
 * Commands live in src/cli/commands/*.ts; this file only wires them.
 */
import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import { Command, CommanderError, Help } from 'commander'
import { ConfigError, ValidationError } from '../errors.ts'
import { isSchemaMissing, SCHEMA_MISSING_MESSAGE } from '../db/outage.ts'
import { packageRoot } from '../lib/package-root.ts'
import { exitOnSignals, shutdownInProgress } from './signals.ts'

type Register = (program: Command) => void

interface CommandEntry {
  /** As the command's own module describes it (a test keeps the two equal). */
  summary: string
  /** Whether the command takes options (shown as "[options]" in the overview). */
  options: boolean
  load: () => Promise<Register>
}

/**
 * Each command's module, loaded only when that command runs or its own help is asked for: a worker
 * process then never loads the HTTP server, the benchmark's load generator or the embedded Postgres,
 * which keeps its memory down, and `scheduler --help` loads none (loading all took 0.7–9 s).
 */
export const COMMANDS: Readonly<Record<string, CommandEntry>> = {
  migrate: {
    summary: 'apply pending migrations (safe to run repeatedly and concurrently)',
    options: true,
    load: async () => (await import('./commands/migrate.ts')).registerMigrate,
  },
  dev: {
    summary: 'run everything in one process (embedded Postgres in ./.pgsched when DATABASE_URL is unset)',
    options: true,
    load: async () => (await import('./commands/dev.ts')).registerDev,
  },
  worker: {
    summary: 'claim and run jobs (handlers from --handlers; the built-in "http" handler too, unless SCHEDULER_HTTP_HANDLER=off)',
    options: true,
    load: async () => (await import('./commands/worker.ts')).registerWorker,
  },
  bench: {
    summary: 'measure throughput, latency, priority, scale and memory on a scratch database',
    options: true,
    load: async () => (await import('./commands/bench.ts')).registerBench,
  },
  api: {
    summary: 'serve the REST API (OpenAPI document at /openapi.json, UI at /docs) and the dashboard at /ui',
    options: true,
    load: async () => (await import('./commands/api.ts')).registerApi,
  },
  keys: { summary: 'manage API keys (each key acts for one tenant)', options: false, load: async () => (await import('./commands/keys.ts')).registerKeys },
  jobs: {
    summary: 'submit, list, view, cancel, retry, rerun and delete jobs, one or many at a time',
    options: false,
    load: async () => (await import('./commands/jobs.ts')).registerJobs,
  },
  workers: {
    summary: 'see the workers: alive, stale or stopped, and what they run',
    options: false,
    load: async () => (await import('./commands/workers.ts')).registerWorkers,
  },
  queues: {
    summary: 'see and change queues: pause, resume, limits, fair share (for every tenant)',
    options: false,
    load: async () => (await import('./commands/queues.ts')).registerQueues,
  },
  tenants: {
    summary: "see and change tenants' fair-share weights and admission quotas",
    options: false,
    load: async () => (await import('./commands/tenants.ts')).registerTenants,
  },
  webhooks: {
    summary: "a tenant's webhook subscriptions (events POSTed, signed, to a URL) and their deliveries",
    options: false,
    load: async () => (await import('./commands/webhooks.ts')).registerWebhooks,
  },
}

/** The installed package's version (package.json). */
export function packageVersion(): string {
  return (JSON.parse(readFileSync(join(packageRoot(), 'package.json'), 'utf8')) as { version: string }).version
}

/** The command `argv` runs (`scheduler <name> …` or `scheduler help <name>`), if it is one of ours. */
function commandNamed(argv: readonly string[]): string | undefined {
  const name = argv[2] === 'help' ? argv[3] : argv[2]
  return name !== undefined && Object.hasOwn(COMMANDS, name) ? name : undefined
}

export async function main(argv: string[]): Promise<void> {
  await runCommand(argv)
  // A command that failed ends the process here, whatever its modules keep open (a handlers module's
  // timer or connection would keep a worker whose start failed alive, doing nothing, for ever).
  // Standard output and error are written synchronously here (files, pipes and terminals on Linux).
  // (a signal's graceful stop still running ends the process itself, once done)
  if (process.exitCode !== undefined && process.exitCode !== 0 && !shutdownInProgress()) process.exit()
}

async function runCommand(argv: string[]): Promise<void> {
  // (the image runs this as PID 1, where SIGTERM would otherwise be ignored until a command takes it over)
  exitOnSignals()
  // a reader that closes standard output early (`| head`) ends the command quietly, as a pipe's end
  // ends any command: not with an unhandled EPIPE and its stack trace
  process.stdout.on('error', (err: NodeJS.ErrnoException) => {
    if (err.code === 'EPIPE') process.exit(process.exitCode ?? 0)
    throw err
  })
  const program = new Command()
    .name('scheduler')
    .description('pgsched: a distributed job scheduler on PostgreSQL')
    .version(packageVersion(), '-V, --version', 'print the version')
    .showHelpAfterError()
    .exitOverride()
  const name = commandNamed(argv)
  if (name !== undefined) {
    ;(await (COMMANDS[name] as CommandEntry).load())(program)
  } else {
    // The overview, a usage error or an unknown command: placeholders that only describe.
    for (const [n, entry] of Object.entries(COMMANDS)) program.command(n).description(entry.summary)
    const help = new Help()
    program.configureHelp({
      subcommandTerm: (cmd) =>
        Object.hasOwn(COMMANDS, cmd.name()) ? `${cmd.name()}${COMMANDS[cmd.name()]?.options ? ' [options]' : ''}` : help.subcommandTerm(cmd),
    })
  }
  try {
    await program.parseAsync(argv)
  } catch (err: unknown) {
    if (err instanceof CommanderError) {
      process.exitCode = err.exitCode === 0 ? 0 : 2
      return
    }
    if (err instanceof ConfigError || err instanceof ValidationError) {
      // a setting, a flag or an argument the command cannot take: usage, not a failure of the run
      process.stderr.write(`scheduler: ${err.message}\n`)
      process.exitCode = 2
      return
    }
    const message = err instanceof Error ? err.message : String(err)
    process.stderr.write(`scheduler: ${message}${isSchemaMissing(err) && !message.includes(SCHEMA_MISSING_MESSAGE) ? ` (${SCHEMA_MISSING_MESSAGE})` : ''}\n`)
    process.exitCode = 1
  }
}
