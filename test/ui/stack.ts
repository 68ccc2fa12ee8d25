/**
 * What the dashboard's browser tests run against: a real `scheduler api` process, a real
 * `scheduler worker` process (test/fixtures/handlers.js) and Debian's Chromium driven by
 * playwright-core (no browser download: CHROMIUM_PATH or /usr/bin/chromium). Started once per
 * file and stopped after it. `transferredBytes` sums the bodies the page received.
 */
import { spawn, type ChildProcess } from 'node:child_process'
import { existsSync } from 'node:fs'
import { chromium, type Browser, type BrowserContext, type Page, type Request } from 'playwright-core'
import { freePort, startApiProcess, type ApiProcess } from '../faults/api-process.ts'
import { waitFor } from '../wait-for.ts'

export const CHROMIUM_PATH = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium'

export interface WorkerProcess {
  child: ChildProcess
  output(): string
  stop(): Promise<void>
}

/** Starts `scheduler worker` on `queues` (with `env` added) and resolves once it logged that it started. */
export async function startWorkerProcess(databaseUrl: string, queues: string[], env: Record<string, string> = {}): Promise<WorkerProcess> {
  const child = spawn('node', ['bin/scheduler', 'worker', '--handlers', 'test/fixtures/handlers.js', '--concurrency', '20'], {
    env: {
      ...process.env,
      DATABASE_URL: databaseUrl,
      LEDGER_DATABASE_URL: databaseUrl,
      LOG_LEVEL: 'info',
      SCHEDULER_QUEUES: queues.join(','),
      SCHEDULER_WORKER_METRICS_PORT: 'off',
      ...env,
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  })
  let text = ''
  const exited = new Promise<void>((resolve) => child.on('exit', () => resolve()))
  const started = new Promise<void>((resolve) => {
    child.stdout?.on('data', (chunk: Buffer) => {
      text += chunk.toString()
      if (text.includes('"msg":"worker started"')) resolve()
    })
  })
  child.stderr?.on('data', (chunk: Buffer) => (text += chunk.toString()))
  await Promise.race([
    started,
    exited.then(() => {
      throw new Error(`worker exited before starting:\n${text}`)
    }),
  ])
  return {
    child,
    output: () => text,
    async stop() {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGTERM')
      await exited
    },
  }
}

export async function startApi(databaseUrl: string, env: Record<string, string> = {}): Promise<ApiProcess> {
  return startApiProcess({ databaseUrl, port: await freePort(), env })
}

export async function stopApi(api: ApiProcess | undefined): Promise<void> {
  if (!api?.alive()) return
  api.child.kill('SIGTERM')
  await api.exited
}

export async function launchBrowser(): Promise<Browser> {
  if (!existsSync(CHROMIUM_PATH)) {
    throw new Error(`Chromium is not installed at ${CHROMIUM_PATH}: apt-get install -y chromium (see CONTRIBUTING.md), or set CHROMIUM_PATH`)
  }
  // --no-sandbox: CI runs as root, where Chromium's sandbox refuses to start.
  return chromium.launch({ executablePath: CHROMIUM_PATH, headless: true, args: ['--no-sandbox', '--disable-dev-shm-usage'] })
}

/** What Chromium reported as refused by the dashboard's Content-Security-Policy, on any page opened here. */
export const cspViolations: string[] = []

/**
 * A page at `width` px that counts what it receives: `transferredBytes()` waits until every
 * request but the endless event stream has finished, then sums their header and body sizes.
 * `timezoneId`: the browser's time zone (IANA), the system's when absent.
 */
export async function openPage(
  browser: Browser,
  width: number,
  options: { timezoneId?: string; locale?: string } = {},
): Promise<{ context: BrowserContext; page: Page; transferredBytes(): Promise<number> }> {
  const context = await browser.newContext({ viewport: { width, height: 900 }, deviceScaleFactor: 1, ...options })
  const page = await context.newPage()
  page.on('console', (message) => {
    if (message.text().includes('Content Security Policy')) cspViolations.push(message.text())
  })
  const open = new Set<Request>()
  const sizes: Array<Promise<number>> = []
  page.on('request', (request) => {
    if (!request.url().includes('/v1/events')) open.add(request)
  })
  const settle = (request: Request) => {
    if (!open.delete(request)) return
    sizes.push(
      request.sizes().then(
        (s) => s.responseBodySize + s.responseHeadersSize,
        () => 0,
      ),
    )
  }
  page.on('requestfinished', settle)
  page.on('requestfailed', settle)
  return {
    context,
    page,
    async transferredBytes() {
      await waitFor(() => open.size === 0, { what: 'the page to finish its requests', timeoutMs: 15_000 })
      return (await Promise.all(sizes)).reduce((a, b) => a + b, 0)
    },
  }
}

/** Signs in on the dashboard at `apiUrl` with `key`. */
export async function signIn(page: Page, apiUrl: string, key: string): Promise<void> {
  await page.goto(`${apiUrl}/ui/`)
  await page.getByLabel('API key').fill(key)
  await page.getByRole('button', { name: 'Sign in' }).click()
  await page.getByRole('button', { name: 'Sign out' }).waitFor()
}
