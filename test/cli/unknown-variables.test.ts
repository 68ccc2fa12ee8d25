/**
 * The processes warn of a SCHEDULER_ variable that names no setting (a misspelt one would otherwise
 * leave its setting at the default without a word), and of none Kubernetes sets for a Service named
 * `scheduler`. On a database that does not answer: the warning comes before any connection. The
 * admin commands and bench warn too, on stderr, against this file's database: what they print on
 * stdout (JSON, CSV) stays whole.
 */
import { execFile, spawn } from 'node:child_process'
import { once } from 'node:events'
import { promisify } from 'node:util'
import { afterEach, describe, expect, it } from 'vitest'
import { useTestDb } from '../db.ts'
import { waitFor } from '../wait-for.ts'

const run = promisify(execFile)
const t = useTestDb()

/** Nothing listens on port 1: a worker or an API waits for the database, migrate and dev fail. */
const UNREACHABLE = 'postgres://postgres@127.0.0.1:1/none'

/** What Kubernetes sets in every pod of the namespace for a Service named `scheduler` (but SCHEDULER_PORT). */
const SERVICE_LINKS = {
  SCHEDULER_SERVICE_HOST: '10.0.0.1',
  SCHEDULER_SERVICE_PORT: '8080',
  SCHEDULER_SERVICE_PORT_HTTP: '8080',
  SCHEDULER_PORT_8080_TCP: 'tcp://10.0.0.1:8080',
  SCHEDULER_PORT_8080_TCP_ADDR: '10.0.0.1',
  SCHEDULER_PORT_8080_TCP_PORT: '8080',
  SCHEDULER_PORT_8080_TCP_PROTO: 'tcp',
}

/** The test process's environment without its own SCHEDULER_ variables, plus `env`. */
function environment(env: Record<string, string>): NodeJS.ProcessEnv {
  const own = Object.fromEntries(Object.entries(process.env).filter(([name]) => !name.startsWith('SCHEDULER_')))
  return { ...own, LOG_LEVEL: 'warn', SCHEDULER_WORKER_METRICS_PORT: 'off', DATABASE_URL: UNREACHABLE, ...env }
}

const children: ReturnType<typeof spawn>[] = []
afterEach(async () => {
  for (const child of children.splice(0)) {
    if (child.exitCode !== null || child.signalCode !== null) continue
    const exited = once(child, 'exit')
    child.kill('SIGKILL')
    await exited
  }
})

describe('a SCHEDULER_ variable that names no setting', () => {
  it.each(['worker', 'api', 'migrate', 'dev'])(
    'scheduler %s warns of it once, naming the setting meant, and of no Kubernetes service link',
    async (command) => {
      const child = spawn('node', ['bin/scheduler', command], {
        env: environment({ ...SERVICE_LINKS, SCHEDULER_WORKER_CONCURENCY: '50', SCHEDULER_FROBNICATE: 'on' }),
        stdio: ['ignore', 'pipe', 'pipe'],
      })
      children.push(child)
      let text = ''
      child.stdout.on('data', (chunk: Buffer) => {
        text += chunk.toString('utf8')
      })
      child.stderr.on('data', (chunk: Buffer) => {
        text += chunk.toString('utf8')
      })
      const exited = once(child, 'exit')
      const warnings = () =>
        text
          .split('\n')
          .filter((line) => line.startsWith('{'))
          .map((line) => JSON.parse(line) as Record<string, unknown>)
          .filter((entry) => typeof entry.variable === 'string')
      await waitFor(() => warnings().length >= 2, { timeoutMs: 30_000, what: `two warnings:\n${text}` })
      if (child.exitCode === null) child.kill('SIGTERM')
      await exited
      expect(warnings()).toEqual([
        expect.objectContaining({ level: 40, variable: 'SCHEDULER_FROBNICATE', msg: 'SCHEDULER_FROBNICATE is not a setting pgsched knows (it is ignored)' }),
        expect.objectContaining({
          level: 40,
          variable: 'SCHEDULER_WORKER_CONCURENCY',
          suggestion: 'SCHEDULER_WORKER_CONCURRENCY',
          msg: 'SCHEDULER_WORKER_CONCURENCY is not a setting pgsched knows; did you mean SCHEDULER_WORKER_CONCURRENCY?',
        }),
      ])
    },
  )

  it.each([
    ['api', 'SCHEDULER_PORT', 'tcp://10.0.0.1:8080', 'an integer from 0 to 65535'],
    ['worker', 'SCHEDULER_WORKER_METRICS_PORT', 'tcp://10.0.0.3:9464', 'an integer from 0 to 65535'],
  ])('scheduler %s refuses a Kubernetes service link as %s, its own port, saying what it is and how to set the port', async (command, name, link, accepted) => {
    const err = await run('node', ['bin/scheduler', command], {
      env: environment({ ...SERVICE_LINKS, [name]: link }),
      timeout: 30_000,
      killSignal: 'SIGKILL',
    }).catch((e: unknown) => e)
    expect(err).toMatchObject({ code: 2 })
    const stderr = (err as { stderr: string }).stderr
    expect(stderr).toContain(`${name} must be ${accepted} (got "${link}"); this looks like a Kubernetes service link`)
    expect(stderr).toContain('enableServiceLinks: false')
    expect(stderr).not.toContain('SCHEDULER_SERVICE_HOST')
  })

  // the links of Services named scheduler (the API) and scheduler-worker-metrics, in every pod of the namespace
  const OTHERS_PORTS = { ...SERVICE_LINKS, SCHEDULER_PORT: 'tcp://10.0.0.1:8080', SCHEDULER_WORKER_METRICS_PORT: 'tcp://10.0.0.3:9464' }

  it.each([
    ['worker', { ...OTHERS_PORTS, SCHEDULER_WORKER_METRICS_PORT: 'off' }],
    ['api', { ...OTHERS_PORTS, SCHEDULER_PORT: '0' }],
  ])("scheduler %s does not read another process's port: a service link there leaves it running", async (command, env) => {
    const child = spawn('node', ['bin/scheduler', command], { env: environment(env), stdio: ['ignore', 'pipe', 'pipe'] })
    children.push(child)
    let text = ''
    for (const stream of [child.stdout, child.stderr]) stream.on('data', (chunk: Buffer) => (text += chunk.toString('utf8')))
    // it got past its configuration: it waits for the database, which does not answer
    await waitFor(() => text.includes('database unreachable at start-up; retrying'), { timeoutMs: 30_000, what: `a wait:\n${text}` })
    expect(child.exitCode).toBeNull()
    expect(text).not.toContain('invalid configuration')
  })

  it('scheduler migrate and the admin commands, which listen nowhere, read neither port', async () => {
    const env = environment({ ...OTHERS_PORTS, DATABASE_URL: t.url })
    await run('node', ['bin/scheduler', 'migrate'], { env, timeout: 60_000 })
    const { stdout, stderr } = await run('node', ['bin/scheduler', 'keys', 'list', '--json'], { env, timeout: 30_000 })
    expect(JSON.parse(stdout)).toEqual({ items: [], nextCursor: null })
    expect(stderr).toBe('')
  })
})

describe('a SCHEDULER_ variable that names no setting, set for a command without a log', () => {
  const warnings = [
    'scheduler: warning: SCHEDULER_FROBNICATE is not a setting pgsched knows (it is ignored)',
    'scheduler: warning: SCHEDULER_WORKER_CONCURENCY is not a setting pgsched knows; did you mean SCHEDULER_WORKER_CONCURRENCY?',
  ]
  const misspelt = { ...SERVICE_LINKS, SCHEDULER_WORKER_CONCURENCY: '50', SCHEDULER_FROBNICATE: 'on' }

  const none = { items: [] }
  it.each([
    { command: 'keys list --json', json: { ...none, nextCursor: null } },
    { command: 'queues list --json', json: none },
    { command: 'tenants list --json', json: none },
    { command: 'workers list --json', json: none },
    { command: 'jobs list --json', json: { ...none, nextCursor: null } },
    { command: 'webhooks list --tenant acme --json', json: none },
  ])('scheduler $command warns of it once on stderr, naming the setting meant, and prints only JSON on stdout', async ({ command, json }) => {
    const { stdout, stderr } = await run('node', ['bin/scheduler', ...command.split(' ')], {
      env: environment({ ...misspelt, DATABASE_URL: t.url }),
      timeout: 30_000,
    })
    expect(stderr.split('\n')).toEqual([...warnings, ''])
    expect(JSON.parse(stdout)).toEqual(json)
  })

  it('scheduler jobs export warns on stderr beside its count, its CSV on stdout untouched', async () => {
    const { stdout, stderr } = await run('node', ['bin/scheduler', 'jobs', 'export', '--tenant', 'acme', '--format', 'csv'], {
      env: environment({ ...misspelt, DATABASE_URL: t.url }),
      timeout: 30_000,
    })
    expect(stderr.split('\n')).toEqual([...warnings, 'exported 0 jobs', ''])
    expect(stdout).toMatch(/^id,tenant,type,queue,status,[^\n]*\r\n$/)
  })

  it('scheduler bench warns of it on stderr before it connects', async () => {
    const err = await run('node', ['bin/scheduler', 'bench', '--quick'], { env: environment(misspelt), timeout: 30_000, killSignal: 'SIGKILL' }).catch(
      (e: unknown) => e,
    )
    expect(err).toMatchObject({ code: 1, stdout: '' })
    const lines = (err as { stderr: string }).stderr.split('\n')
    expect(lines.slice(0, 2)).toEqual(warnings)
    expect(lines[2]).toContain('ECONNREFUSED')
  })
})
