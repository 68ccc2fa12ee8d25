// The Docker image's HEALTHCHECK (plain Node, no dependencies). A container runs one scheduler
// command, read from the command line of its first process (/proc/1/cmdline, or the file given as
// the first argument). For `scheduler api` (or `scheduler-api`) it asks GET /healthz on 127.0.0.1
// at --port, else PORT, else 8080, and is healthy only on a 200 within 3 s. Any other command
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

/** The port `scheduler api` listens on for these arguments and environment. */
function apiPort(args, env) {
  for (let i = 0; i < args.length; i++) {
    if (args[i] === '--port' && args[i + 1] !== undefined) return Number(args[i + 1])
    if (args[i].startsWith('--port=')) return Number(args[i].slice('--port='.length))
  }
  return env.PORT ? Number(env.PORT) : 8080
}

async function check(cmdlineFile) {
  const argv = readFileSync(cmdlineFile, 'utf8').split('\0').filter(Boolean)
  const found = schedulerCommand(argv)
  if (found?.command !== 'api') return true
  const res = await fetch(`http://127.0.0.1:${apiPort(found.args, process.env)}/healthz`, { signal: AbortSignal.timeout(TIMEOUT_MS) })
  return res.status === 200
}

check(process.argv[2] ?? '/proc/1/cmdline').then(
  (healthy) => process.exit(healthy ? 0 : 1),
  (err) => {
    process.stderr.write(`unhealthy: ${err instanceof Error ? err.message : String(err)}\n`)
    process.exit(1)
  },
)
