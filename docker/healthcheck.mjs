// The Docker image's HEALTHCHECK (plain Node, no dependencies). A container runs one scheduler
// command, read from the command line of its first process (/proc/1/cmdline, or the file given as
// the first argument). For `scheduler api` (or `scheduler-api`) it asks GET /healthz at --host,
// else SCHEDULER_HOST, else HOST (127.0.0.1 when that is every address, the default), at --port, else SCHEDULER_PORT, else PORT, else 8080, and is healthy only on a 200 within 3 s. Any other command
// (worker, migrate) serves no HTTP: the process being alive is its health, so it reports healthy.
import { readFileSync } from 'node:fs'

const TIMEOUT_MS = 3000

/** The scheduler command and its arguments in a process's argument list, if there is one. */
function schedulerCommand(argv) {
  const i = argv.findIndex((arg) => /(^|\/)scheduler(-api|-worker)?$/.test(arg))
  if (i < 0) return undefined
  if (argv[i].endsWith('scheduler-api')) return { command: 'api', args: argv.slice(i + 1) }
  if (argv[i].endsWith('scheduler-worker')) return { command: 'worker', args: argv.slice(i + 1) }
  return { command: argv[i + 1], args: argv.slice(i + 2) }
}

/** The value of `--name <v>` or `--name=<v>` in `args`, if given. */
function flag(args, name) {
  for (let i = 0; i < args.length; i++) {
    if (args[i] === name && args[i + 1] !== undefined) return args[i + 1]
    if (args[i].startsWith(`${name}=`)) return args[i].slice(name.length + 1)
  }
  return undefined
}

/** The port `scheduler api` listens on for these arguments and environment. */
function apiPort(args, env) {
  const port = flag(args, '--port') ?? (env.SCHEDULER_PORT || env.PORT)
  return port ? Number(port) : 8080
}

/** Where to reach it: its --host/SCHEDULER_HOST/HOST, or loopback when it listens on every address (the default). */
function apiHost(args, env) {
  const host = flag(args, '--host') ?? (env.SCHEDULER_HOST || env.HOST)
  if (!host || host === '0.0.0.0' || host === '::') return '127.0.0.1'
  return host.includes(':') ? `[${host}]` : host
}

async function check(cmdlineFile) {
  const argv = readFileSync(cmdlineFile, 'utf8').split('\0').filter(Boolean)
  const found = schedulerCommand(argv)
  if (found?.command !== 'api') return true
  const res = await fetch(`http://${apiHost(found.args, process.env)}:${apiPort(found.args, process.env)}/healthz`, { signal: AbortSignal.timeout(TIMEOUT_MS) })
  return res.status === 200
}

check(process.argv[2] ?? '/proc/1/cmdline').then(
  (healthy) => process.exit(healthy ? 0 : 1),
  (err) => {
    process.stderr.write(`unhealthy: ${err instanceof Error ? err.message : String(err)}\n`)
    process.exit(1)
  },
)
