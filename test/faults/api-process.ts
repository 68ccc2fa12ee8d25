/**
 * A real `scheduler api` process for tests: spawned from the compiled CLI
 * (npm test builds first) on a fixed loopback port, so a restarted process
 * answers at the same address. Its stdout and stderr are kept, so tests can
 * read what it logged (and check that no API key is in there).
 */
import { spawn, execFile, type ChildProcess } from 'node:child_process'
import { createServer } from 'node:net'
import { promisify } from 'node:util'

const run = promisify(execFile)

export interface ApiProcess {
  pid: number
  child: ChildProcess
  /** http://127.0.0.1:<port> */
  url: string
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>
  /** Everything it wrote to stdout and stderr. */
  output(): string
  alive(): boolean
}

/** A loopback port that was free a moment ago. */
export async function freePort(): Promise<number> {
  const server = createServer()
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  const address = server.address()
  await new Promise<void>((resolve) => server.close(() => resolve()))
  if (typeof address !== 'object' || !address) throw new Error('no port')
  return address.port
}

/** Starts `scheduler api --host 127.0.0.1 --port <port>` and resolves once it listens. */
export async function startApiProcess(params: { databaseUrl: string; port: number; env?: Record<string, string> }): Promise<ApiProcess> {
  const child = spawn('node', ['bin/scheduler', 'api', '--host', '127.0.0.1', '--port', String(params.port)], {
    env: { ...process.env, DATABASE_URL: params.databaseUrl, LOG_LEVEL: 'info', SCHEDULER_DB_POOL_SIZE: '6', ...params.env },
    stdio: ['ignore', 'pipe', 'pipe'],
  })
  let text = ''
  let exitedFlag = false
  let markListening!: () => void
  const listening = new Promise<void>((resolve) => (markListening = resolve))
  child.stdout?.on('data', (chunk: Buffer) => {
    text += chunk.toString('utf8')
    if (text.includes('"msg":"api listening"')) markListening()
  })
  child.stderr?.on('data', (chunk: Buffer) => (text += chunk.toString('utf8')))
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
    child.on('exit', (code, signal) => {
      exitedFlag = true
      resolve({ code, signal })
    }),
  )
  await Promise.race([
    listening,
    exited.then(() => {
      throw new Error(`api exited before listening:\n${text}`)
    }),
  ])
  return {
    pid: child.pid as number,
    child,
    url: `http://127.0.0.1:${params.port}`,
    exited,
    output: () => text,
    alive: () => !exitedFlag,
  }
}

/** Runs `scheduler <args>` to completion against `databaseUrl`; returns stdout. */
export async function schedulerCli(databaseUrl: string, args: string[]): Promise<string> {
  const { stdout } = await run('node', ['bin/scheduler', ...args], { env: { ...process.env, LOG_LEVEL: 'warn', DATABASE_URL: databaseUrl } })
  return stdout
}
