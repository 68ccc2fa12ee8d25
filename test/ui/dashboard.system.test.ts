/**
 * The dashboard at /ui in a real browser (Debian's Chromium through playwright-core) against a
 * real `scheduler api` and a real `scheduler worker` process: sign-in, the transfer of a page
 * load, live updates of the job list, a job's output followed while it runs, each attempt's own
 * output, retry of a failed job, bulk retry of 100 failed jobs, pausing a queue (its waiting job's page
 * says so to the job's tenant key too), the charts' time axis named and drawn in the browser's zone, a webhook's
 * delivery log, edit, secret and delete, one disabled because its deliveries kept failing enabled again, tenant isolation and escaping of tenant input. With UI_SCREENSHOTS=<folder> (npm run screenshots) it also saves a
 * PNG of each page.
 */
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { randomUUID } from 'node:crypto'
import { createServer, type IncomingHttpHeaders } from 'node:http'
import type { AddressInfo } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { sql } from 'kysely'
import type { Browser, Page } from 'playwright-core'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { createApiKey } from '../../src/api/auth.ts'
import { apiKeyRevoke } from '../../src/db/queries/api-keys.ts'
import { webhookDeliveryInsert } from '../../src/db/queries/webhooks.ts'
import { verifyWebhookSignature } from '../../src/events/signature.ts'
import { uuidV7 } from '../../src/lib/uuid-v7.ts'
import { useTestDb } from '../db.ts'
import { insertExecution } from '../factories.ts'
import type { ApiProcess } from '../faults/api-process.ts'
import { waitFor } from '../wait-for.ts'
import { cspViolations, launchBrowser, openPage, signIn, startApi, startWorkerProcess, stopApi, type WorkerProcess } from './stack.ts'

const t = useTestDb({ truncate: false })
const flags = mkdtempSync(join(tmpdir(), 'pgsched-ui-'))
const screenshots = process.env.UI_SCREENSHOTS
const QUEUES = ['default', 'ui-bulk', 'ui-pause', 'ui-retry']
/** What one page load may transfer (issue 20: under 300 KB). */
const PAGE_LOAD_BYTES_MAX = 300 * 1024

let api: ApiProcess
let worker: WorkerProcess
let browser: Browser
let operatorKey: string
let acmeKey: string
let globexKey: string

interface JobJson {
  id: string
  status: string
  queue: string
}

async function rest<T>(key: string, method: string, path: string, body?: unknown): Promise<T> {
  const res = await fetch(`${api.url}${path}`, {
    method,
    headers: { authorization: `Bearer ${key}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
    body: body === undefined ? undefined : JSON.stringify(body),
  })
  if (!res.ok) throw new Error(`${method} ${path}: ${res.status} ${await res.text()}`)
  return (await res.json()) as T
}

const submit = (key: string, body: Record<string, unknown>) => rest<JobJson>(key, 'POST', '/v1/jobs', body)
const viewJob = (id: string) => rest<JobJson>(acmeKey, 'GET', `/v1/jobs/${id}`)

async function shot(page: Page, name: string): Promise<void> {
  if (!screenshots) return
  mkdirSync(screenshots, { recursive: true })
  await page.screenshot({ path: join(screenshots, `${name}.png`), fullPage: false })
}

/** A new signed-in page at `width` px. */
async function signedIn(key: string, width = 1280, options: { timezoneId?: string; locale?: string } = {}): Promise<Page> {
  const { page } = await openPage(browser, width, options)
  await signIn(page, api.url, key)
  return page
}

beforeAll(async () => {
  operatorKey = (await createApiKey(t.db, { tenant: 'ops', operator: true })).key
  acmeKey = (await createApiKey(t.db, { tenant: 'acme' })).key
  globexKey = (await createApiKey(t.db, { tenant: 'globex' })).key
  // loopback admitted (API and worker alike): the webhook test's receiver listens on 127.0.0.1
  api = await startApi(t.url, { SCHEDULER_HTTP_ALLOW: '127.0.0.1' })
  worker = await startWorkerProcess(t.url, QUEUES, { SCHEDULER_HTTP_ALLOW: '127.0.0.1' })
  browser = await launchBrowser()
})

afterAll(async () => {
  await browser?.close()
  await worker?.stop()
  await stopApi(api)
  rmSync(flags, { recursive: true, force: true })
})

describe('the dashboard in Chromium', () => {
  it('refuses an unknown key, signs in with a valid one, and a first visit transfers under 300 KB', async () => {
    const { page, context, transferredBytes } = await openPage(browser, 1280)
    await page.goto(`${api.url}/ui/`)
    // what has no key's shape is refused before it is sent: a key's prefix as the Keys page lists it
    // (its "…" cannot go in a header) and text that is no key at all
    const sent: string[] = []
    page.on('request', (request) => {
      if (request.url().includes('/v1/')) sent.push(request.url())
    })
    await page.getByLabel('API key').fill('psk_AbCdEfGh…')
    await page.getByRole('button', { name: 'Sign in' }).click()
    await expect(page.getByRole('alert').textContent()).resolves.toContain('only the start of a key')
    await page.getByLabel('API key').fill('not-a-key')
    await page.getByRole('button', { name: 'Sign in' }).click()
    await waitFor(async () => (await page.getByRole('alert').textContent())?.includes('not a valid API key'), { what: 'the key refused as no key' })
    expect(sent).toEqual([])
    await page.getByLabel('API key').fill(`psk_${'A'.repeat(43)}`)
    await page.getByRole('button', { name: 'Sign in' }).click()
    await expect(page.getByRole('alert').textContent()).resolves.toContain('API key is not valid')

    await page.getByLabel('API key').fill(operatorKey)
    await page.getByRole('button', { name: 'Sign in' }).click()
    await page.getByRole('heading', { name: 'Overview' }).waitFor()
    await page.locator('[data-live="on"]').waitFor()
    const bytes = await transferredBytes()
    console.log(`dashboard first visit (sign-in page, sign-in, overview): ${bytes} bytes transferred`)
    expect(bytes).toBeLessThan(PAGE_LOAD_BYTES_MAX)
    // The key is kept for the tab, never in the address.
    expect(page.url()).not.toContain(operatorKey)
    await page.getByRole('button', { name: 'Sign out' }).click()
    await page.getByLabel('API key').waitFor()
    expect(await page.evaluate<number>('sessionStorage.length + localStorage.length')).toBe(0)
    await context.close()
  })

  it('signs out at once, saying why, when its key is revoked while the page stays open', async () => {
    const { id, key } = await createApiKey(t.db, { tenant: 'acme', name: 'revoked in the browser' })
    // a finished job's page: it reads nothing more by itself, only the event stream stays open
    const done = await submit(key, { type: 'switch.fail', payload: { failWhile: join(flags, 'never') } })
    await waitFor(async () => (await viewJob(done.id)).status === 'COMPLETED', { what: 'the job to complete' })
    const page = await signedIn(key)
    await page.goto(`${api.url}/ui/#/jobs/${done.id}`)
    await page.waitForSelector('[data-job-status="COMPLETED"]')
    await page.locator('[data-live="on"]').waitFor()
    await apiKeyRevoke(t.db, { id })
    // the event stream is refused once the revocation is seen (within seconds): the page signs out,
    // with no click or navigation needed
    await page.getByLabel('API key').waitFor({ timeout: 30_000 })
    await expect(page.getByRole('alert').textContent()).resolves.toContain('revoked')
    expect(await page.evaluate<number>('sessionStorage.length + localStorage.length')).toBe(0)
    await page.context().close()
  })

  it('shares one event stream among the tabs of one key, so that eight tabs all load and stay live', async () => {
    const job = await submit(acmeKey, { type: 'noop', queue: 'ui-tabs' })
    const { page: first, context } = await openPage(browser, 1280)
    await first.goto(`${api.url}/ui/`)
    await first.getByLabel('API key').fill(acmeKey)
    await first.getByLabel('Remember on this device').check()
    await first.getByRole('button', { name: 'Sign in' }).click()
    await first.locator('[data-live="on"]').waitFor()
    // every event stream any tab of this browser opens, and those still open
    let streams = 0
    let openStreams = 0
    let mostOpen = 0
    context.on('request', (request) => {
      if (!request.url().includes('/v1/events')) return
      streams++
      mostOpen = Math.max(mostOpen, ++openStreams)
    })
    const closed = (request: { url(): string }) => {
      if (request.url().includes('/v1/events')) openStreams--
    }
    context.on('requestfinished', closed)
    context.on('requestfailed', closed)
    // a browser keeps at most six connections to a host: with a stream per tab, the seventh tab's
    // requests waited for ever while its header said Live
    const tabs = [first]
    for (let i = 0; i < 7; i++) {
      const tab = await context.newPage()
      await tab.goto(`${api.url}/ui/#/jobs`)
      tabs.push(tab)
    }
    for (const tab of tabs.slice(1)) {
      await tab.locator(`tr[data-job-id="${job.id}"]`).waitFor({ timeout: 15_000 })
      await tab.locator('[data-live="on"]').waitFor({ timeout: 15_000 })
    }
    expect(mostOpen).toBe(0) // the first tab's stream opened before counting began, and stays the only one
    expect(streams).toBe(0)
    // closing the tab that follows the stream hands it to another, and the others stay live
    await first.close()
    await waitFor(() => streams === 1, { timeoutMs: 15_000, what: 'another tab following the stream' })
    const later = await submit(acmeKey, { type: 'noop', queue: 'ui-tabs' })
    for (const tab of tabs.slice(1)) await tab.locator(`tr[data-job-id="${later.id}"]`).waitFor({ timeout: 15_000 })
    await context.close()
  })

  it('shows a submitted job in the list and its finish, without reloading', async () => {
    const page = await signedIn(acmeKey)
    await page.goto(`${api.url}/ui/#/jobs`)
    await page.getByRole('heading', { name: 'Jobs' }).waitFor()
    await page.locator('[data-live="on"]').waitFor()
    const gate = join(flags, 'list-gate')
    const job = await submit(acmeKey, { type: 'output.gate', payload: { gate } })
    const row = `tr[data-job-id="${job.id}"]`
    await page.waitForSelector(row, { timeout: 20_000 })
    writeFileSync(gate, '')
    await page.waitForSelector(`${row}[data-status="COMPLETED"]`, { timeout: 20_000 })
    await page.context().close()
  })

  it("follows a running job's output live on its page, then shows the stored output", async () => {
    const gate = join(flags, 'output-gate')
    const job = await submit(acmeKey, { type: 'output.gate', payload: { gate } })
    const page = await signedIn(acmeKey)
    await page.goto(`${api.url}/ui/#/jobs`)
    await page.locator(`tr[data-job-id="${job.id}"] a`).click()
    await page.getByRole('heading', { name: `Job ${job.id}` }).waitFor()
    const output = page.locator('.output-text pre').first()
    await waitFor(async () => (await output.textContent())?.includes('before gate'), { what: 'the first line of output while the job runs' })
    expect((await viewJob(job.id)).status).toBe('RUNNING')
    writeFileSync(gate, '')
    await waitFor(async () => (await output.textContent())?.includes('after gate'), { what: 'the line written after the gate opened' })
    await page.waitForSelector('[data-job-status="COMPLETED"]', { timeout: 20_000 })
    await page.reload()
    await waitFor(async () => (await page.locator('.output-text pre').first().textContent()) === 'before gate\nafter gate\n', { what: 'the stored output' })
    await shot(page, 'job-detail')
    await page.context().close()
  })

  it("keeps a running job's newest output line in view, until the reader scrolls up", async () => {
    const job = await submit(acmeKey, { type: 'output.lines', payload: { lines: 400, everyMs: 25 } })
    const page = await signedIn(acmeKey)
    await page.goto(`${api.url}/ui/#/jobs/${job.id}`)
    const box = page.locator('.output-text').first()
    const lastLine = async () => Number(/line (\d+)\n$/.exec((await box.textContent()) ?? '')?.[1] ?? 0)
    await waitFor(async () => (await lastLine()) >= 60, { what: 'more output than the box shows' })
    const atEnd = () => box.evaluate((e) => e.scrollHeight - e.scrollTop - e.clientHeight < 8)
    await waitFor(atEnd, { what: 'the box scrolled to its newest line' })
    expect(await box.evaluate((e) => e.scrollTop)).toBeGreaterThan(0)
    // scrolled up to read, the reader stays where they are while lines keep coming
    await box.evaluate((e) => e.scrollTo({ top: 0 }))
    const seen = await lastLine()
    await waitFor(async () => (await lastLine()) > seen + 20, { what: 'more lines' })
    expect(await box.evaluate((e) => e.scrollTop)).toBe(0)
    await page.context().close()
  })

  it('retries a failed job from its page and shows it succeed', async () => {
    const flag = join(flags, 'retry-switch')
    writeFileSync(flag, '')
    const job = await submit(acmeKey, { type: 'switch.fail', queue: 'ui-retry', maxAttempts: 1, payload: { failWhile: flag, message: 'switch on' } })
    await waitFor(async () => (await viewJob(job.id)).status === 'FAILED', { what: 'the job to fail' })
    const page = await signedIn(acmeKey)
    await page.goto(`${api.url}/ui/#/jobs/${job.id}`)
    await page.waitForSelector('[data-job-status="FAILED"]')
    await expect(page.locator('.execution').first().textContent()).resolves.toContain('switch on')
    rmSync(flag)
    await page.getByRole('button', { name: 'Retry', exact: true }).click()
    await page.waitForSelector('[data-job-status="COMPLETED"]', { timeout: 20_000 })
    // The failed attempt stays in the history beside the successful run.
    await expect(page.locator('main').textContent()).resolves.toContain('switch on')
    await page.context().close()
  })

  it('names an error named Error once on the job page', async () => {
    const job = await submit(acmeKey, { type: 'switch.fail', maxAttempts: 1, payload: { failWhile: flags, message: 'upstream returned 503' } })
    await waitFor(async () => (await viewJob(job.id)).status === 'FAILED', { what: 'the job to fail' })
    const page = await signedIn(acmeKey)
    await page.goto(`${api.url}/ui/#/jobs/${job.id}`)
    const execution = page.locator('.execution').first()
    await execution.locator('p.error-text').waitFor()
    expect(await execution.locator('p.error-text').textContent()).toBe('Error: upstream returned 503')
    expect(await execution.locator('tr[data-attempt="1"] td.error-text').textContent()).toBe('upstream returned 503')
    await page.context().close()
  })

  it('shortens a 3000-character error message to its start on the job and failures pages, with a button that shows it all', async () => {
    const long = `upstream returned 503: ${'x'.repeat(3000)}`
    const job = await submit(acmeKey, { type: 'switch.fail', maxAttempts: 1, payload: { failWhile: flags, message: long } })
    await waitFor(async () => (await viewJob(job.id)).status === 'FAILED', { what: 'the job to fail' })
    const page = await signedIn(acmeKey)
    await page.goto(`${api.url}/ui/#/jobs/${job.id}`)
    const execution = page.locator('.execution').first()
    const below = execution.locator('p.error-text')
    await below.waitFor()
    expect(await below.textContent()).toMatch(/^Error: upstream returned 503: x+…/)
    const cell = execution.locator('tr[data-attempt="1"] td.error-text')
    for (const where of [cell, below]) expect(((await where.textContent()) ?? '').length).toBeLessThan(400)
    await cell.getByRole('button', { name: `Show full message (${long.length} characters)` }).click()
    await expect(cell.locator('.long-text').textContent()).resolves.toBe(long)
    await cell.getByRole('button', { name: 'Shorten message' }).click()
    expect(((await cell.textContent()) ?? '').length).toBeLessThan(400)

    await page.goto(`${api.url}/ui/#/failures`)
    const group = page.locator('tr', { hasText: 'upstream returned 503: xxx' })
    await group.waitFor()
    expect(((await group.locator('p.error-text').textContent()) ?? '').length).toBeLessThan(400)
    await group.getByRole('button', { name: /^Show full message/ }).click()
    await expect(group.locator('.long-text').textContent()).resolves.toBe(long)
    await page.context().close()
  })

  it("shows each attempt's own output on the job's page, and says so when an attempt stored none", async () => {
    // the first attempt writes and fails, the second writes something else and succeeds
    const twice = await submit(acmeKey, {
      type: 'output.attempts',
      maxAttempts: 2,
      backoffBaseMs: 0,
      payload: { outputs: ['written by the failed attempt\n', 'written by the successful attempt\n'] },
    })
    // the first attempt fails without writing anything
    const silent = await submit(acmeKey, { type: 'output.attempts', maxAttempts: 2, backoffBaseMs: 0, payload: { outputs: [null, 'written at last\n'] } })
    // the first attempt writes and fails, the second writes nothing and succeeds
    const quiet = await submit(acmeKey, {
      type: 'output.attempts',
      maxAttempts: 2,
      backoffBaseMs: 0,
      payload: { outputs: ['written before the retry\n', null] },
    })
    for (const job of [twice, silent, quiet])
      await waitFor(async () => (await viewJob(job.id)).status === 'COMPLETED', { what: 'the job to succeed on its second attempt' })
    const executionOf = async (jobId: string) => {
      const page = await rest<{ items: Array<{ id: string; attempts: Array<{ outcome: string }> }> }>(acmeKey, 'GET', `/v1/jobs/${jobId}/executions`)
      expect(page.items).toHaveLength(1)
      expect(page.items[0]?.attempts.map((a) => a.outcome)).toEqual(['failed', 'succeeded'])
      return page.items[0]?.id as string
    }

    const page = await signedIn(acmeKey)
    const execution = await executionOf(twice.id)
    await page.goto(`${api.url}/ui/#/jobs/${twice.id}`)
    await page.waitForSelector('[data-job-status="COMPLETED"]')
    // the latest output shows as before
    const latest = page.getByLabel(`Output of execution ${execution}`, { exact: true }).locator('pre')
    await waitFor(async () => (await latest.textContent()) === 'written by the successful attempt\n', { what: "the latest attempt's output" })
    expect(await page.locator(`[data-output-note="${execution}"]`).count()).toBe(0) // it is the latest attempt's
    for (const [attempt, text] of [
      [1, 'written by the failed attempt\n'],
      [2, 'written by the successful attempt\n'],
    ] as const) {
      const button = page.getByRole('button', { name: `Show output of attempt ${attempt} of execution ${execution}` })
      await button.click()
      const output = page.getByLabel(`Output of attempt ${attempt} of execution ${execution}`, { exact: true }).locator('pre')
      await waitFor(async () => (await output.textContent()) === text, { what: `the output of attempt ${attempt}` })
      expect(await page.getByRole('button', { name: `Hide output of attempt ${attempt} of execution ${execution}` }).getAttribute('aria-expanded')).toBe('true')
    }
    // each attempt keeps its own output on screen beside the other's
    await expect(page.getByLabel(`Output of attempt 1 of execution ${execution}`, { exact: true }).locator('pre').textContent()).resolves.toBe(
      'written by the failed attempt\n',
    )

    const silentExecution = await executionOf(silent.id)
    await page.goto(`${api.url}/ui/#/jobs/${silent.id}`)
    await page.waitForSelector('[data-job-status="COMPLETED"]')
    await page.getByRole('button', { name: `Show output of attempt 1 of execution ${silentExecution}` }).click()
    const attempts = page.getByRole('region', { name: `Attempts of execution ${silentExecution}` })
    await attempts.getByText('No output stored for this attempt.').waitFor()
    expect(await page.getByLabel(`Output of attempt 1 of execution ${silentExecution}`, { exact: true }).count()).toBe(0)
    await page.getByRole('button', { name: `Show output of attempt 2 of execution ${silentExecution}` }).click()
    await waitFor(
      async () =>
        (await page.getByLabel(`Output of attempt 2 of execution ${silentExecution}`, { exact: true }).locator('pre').textContent()) === 'written at last\n',
      {
        what: 'the output of the second attempt',
      },
    )

    // the latest attempt wrote nothing: the execution's output is the earlier attempt's, and says so
    const quietExecution = await executionOf(quiet.id)
    await page.goto(`${api.url}/ui/#/jobs/${quiet.id}`)
    await page.waitForSelector('[data-job-status="COMPLETED"]')
    const quietLatest = page.getByLabel(`Output of execution ${quietExecution}`, { exact: true }).locator('pre')
    await waitFor(async () => (await quietLatest.textContent()) === 'written before the retry\n', { what: "the execution's output" })
    expect(await page.locator(`[data-output-note="${quietExecution}"]`).textContent()).toBe('Written by attempt 1; attempt 2 wrote none.')
    await page.getByRole('button', { name: `Show output of attempt 2 of execution ${quietExecution}` }).click()
    await page
      .getByRole('region', { name: `Attempts of execution ${quietExecution}` })
      .getByText('No output stored for this attempt.')
      .waitFor()
    await page.context().close()
  })

  it('requests no output a finished execution did not store, and follows none of an execution that has not started', async () => {
    const quiet = await submit(acmeKey, { type: 'switch.fail', payload: { failWhile: join(flags, 'never') } })
    await waitFor(async () => (await viewJob(quiet.id)).status === 'COMPLETED', { what: 'the job to finish' })
    // a queue no worker serves: its job waits
    const waiting = await submit(acmeKey, { type: 'noop', queue: 'ui-nobody' })
    const page = await signedIn(acmeKey)
    const outputRequests: string[] = []
    page.on('request', (request) => {
      if (request.url().includes('/output')) outputRequests.push(request.url())
    })
    await page.goto(`${api.url}/ui/#/jobs/${quiet.id}`)
    await page.waitForSelector('[data-job-status="COMPLETED"]')
    await page.locator('.execution').getByText('No output stored.').waitFor()
    const [execution] = (await rest<{ items: Array<{ id: string; outputUrl: string | null }> }>(acmeKey, 'GET', `/v1/jobs/${quiet.id}/executions`)).items
    expect(execution?.outputUrl).toBeNull()
    // nor for one of its attempts: none stored any
    await page.getByRole('button', { name: `Show output of attempt 1 of execution ${execution?.id}` }).click()
    await page
      .getByRole('region', { name: `Attempts of execution ${execution?.id}` })
      .getByText('No output stored for this attempt.')
      .waitFor()

    await page.goto(`${api.url}/ui/#/jobs/${waiting.id}`)
    await page.locator('.execution[data-state="pending"]').getByText('Not started yet: its output shows here once it runs.').waitFor()
    expect(outputRequests).toEqual([])
    await page.context().close()
  })

  it('bulk-retries 100 failed jobs from the failures page', async () => {
    const flag = join(flags, 'bulk-switch')
    writeFileSync(flag, '')
    const payload = { failWhile: flag, message: 'bulk switch on' }
    for (let i = 0; i < 100; i += 25) {
      await Promise.all(Array.from({ length: 25 }, () => submit(acmeKey, { type: 'switch.fail', queue: 'ui-bulk', maxAttempts: 1, payload })))
    }
    const failedCount = async () => (await rest<{ items: JobJson[] }>(acmeKey, 'GET', '/v1/jobs?queue=ui-bulk&status=FAILED&limit=500')).items.length
    await waitFor(async () => (await failedCount()) === 100, { what: '100 failed jobs', timeoutMs: 60_000 })
    const page = await signedIn(acmeKey)
    await page.goto(`${api.url}/ui/#/failures`)
    const group = page.locator('tr', { hasText: 'bulk switch on' })
    await group.waitFor()
    expect(await group.getAttribute('data-count')).toBe('100')
    await group.getByRole('button', { name: 'Show jobs and sample' }).click()
    await group.locator('.job-list li').first().waitFor()
    // a failed job has ended: it can be retried or deleted, never cancelled (a cancel would only fail)
    expect(await page.getByRole('button', { name: /^Cancel/ }).count()).toBe(0)
    await shot(page, 'failures')
    // retrying every failed job at once asks first; dismissed, it retries nothing
    const asked: string[] = []
    page.once('dialog', (dialog) => {
      asked.push(dialog.message())
      void dialog.dismiss()
    })
    await page.getByRole('button', { name: 'Retry all failed jobs' }).click()
    await waitFor(() => asked.length === 1, { what: 'the confirmation' })
    expect(asked[0]).toMatch(/^Retry all \d+ failed job\(s\)\? Each runs again\.$/)
    expect(await failedCount()).toBe(100)
    // a queue filter the API refuses: its error shows, without the groups listed before, nor buttons that would act on the new filter
    await page.getByLabel('Queue').fill('not a queue!')
    await page.getByRole('button', { name: 'Apply' }).click()
    await page.getByRole('alert').first().waitFor()
    expect(await page.getByText('bulk switch on').count()).toBe(0)
    expect(await page.getByRole('button', { name: /^(Retry|Delete) / }).count()).toBe(0)
    await page.getByLabel('Queue').fill('')
    await page.getByRole('button', { name: 'Apply' }).click()
    await group.waitFor()
    rmSync(flag)
    await group.getByRole('button', { name: 'Retry this group' }).click()
    await waitFor(async () => (await page.locator('.bulk-progress').textContent())?.includes('retry: 100 job(s) done'), {
      what: 'the bulk retry to report 100',
    })
    const completed = async () => (await rest<{ items: JobJson[] }>(acmeKey, 'GET', '/v1/jobs?queue=ui-bulk&status=COMPLETED&limit=500')).items.length
    await waitFor(async () => (await completed()) === 100, { what: '100 retried jobs to succeed', timeoutMs: 60_000 })
    // the group leaves the page at its next reload; until then its error shows twice (the group's
    // line and the sample's payload), which a single-element wait refuses
    await waitFor(async () => (await page.getByText('bulk switch on').count()) === 0, { what: 'the failure group to leave the page', timeoutMs: 20_000 })
    await page.context().close()
  })

  it('pauses a queue from the queues page: nothing more of it runs until it is resumed', async () => {
    const gate = join(flags, 'pause-gate')
    const running = await submit(acmeKey, { type: 'output.gate', queue: 'ui-pause', payload: { gate } })
    await waitFor(async () => (await viewJob(running.id)).status === 'RUNNING', { what: 'the first job to run' })
    const page = await signedIn(operatorKey)
    await page.goto(`${api.url}/ui/#/queues`)
    const row = page.locator('tr[data-queue="ui-pause"]')
    await row.getByRole('button', { name: 'Pause ui-pause' }).click()
    await page.waitForSelector('tr[data-queue="ui-pause"][data-paused="true"]')
    const waiting = await submit(acmeKey, { type: 'switch.fail', queue: 'ui-pause', payload: { failWhile: join(flags, 'never') } })
    writeFileSync(gate, '')
    // The worker still works: the running job finishes, and a job of another queue submitted after the paused one runs.
    await waitFor(async () => (await viewJob(running.id)).status === 'COMPLETED', { what: 'the running job to finish' })
    const other = await submit(acmeKey, { type: 'switch.fail', queue: 'default', payload: { failWhile: join(flags, 'never') } })
    await waitFor(async () => (await viewJob(other.id)).status === 'COMPLETED', { what: 'a job of another queue to run' })
    expect((await viewJob(waiting.id)).status).toBe('SCHEDULED')
    await waitFor(async () => (await row.locator('td').nth(1).textContent()) === '1' && (await row.locator('td').nth(3).textContent()) === '0', {
      what: 'the queue row to show 1 due and 0 running',
    })
    // the live workers serving the queue: this file's worker serves every queue
    expect(await row.locator('td[data-live-workers]').textContent()).toBe('1')
    await shot(page, 'queues')
    // the waiting job's page says why it does not start, to its tenant's key (which may not read the queue) as to an operator's
    for (const key of [operatorKey, acmeKey]) {
      const jobPage = await signedIn(key)
      await jobPage.goto(`${api.url}/ui/#/jobs/${waiting.id}`)
      const notice = await jobPage.locator('[data-queue-paused="ui-pause"]').textContent()
      expect(notice).toContain('Queue ui-pause has been paused since')
      expect(notice).toContain('does not start until the queue is resumed')
      await jobPage.context().close()
    }
    await row.getByRole('button', { name: 'Resume ui-pause' }).click()
    await waitFor(async () => (await viewJob(waiting.id)).status === 'COMPLETED', { what: 'the waiting job to run once resumed' })
    await page.context().close()
  })

  it("edits a queue's limits, its per-key rate limit and fair share from the queues page, each button named for its queue", async () => {
    await rest(operatorKey, 'PATCH', '/v1/queues/ui-limits', { concurrencyLimit: 5 })
    await rest(operatorKey, 'PATCH', '/v1/queues/ui-limits-other', { concurrencyLimit: 2 })
    const page = await signedIn(operatorKey)
    await page.goto(`${api.url}/ui/#/queues`)
    const row = page.locator('tr[data-queue="ui-limits"]')
    await row.waitFor()
    // no two buttons of the page share a name: a screen reader's list of buttons tells each queue's apart
    const names = await page.getByRole('button').evaluateAll((buttons) => buttons.map((b) => b.getAttribute('aria-label') ?? b.textContent ?? ''))
    expect(names.filter((n, i) => names.indexOf(n) !== i)).toEqual([])
    await row.getByRole('button', { name: 'Edit limits of ui-limits' }).click()
    const form = page.getByRole('form', { name: 'Limits of queue ui-limits' })
    await form.getByLabel('Per-key rate limit (starts of one key per period)').waitFor()
    // another operator sets a rate limit while the form is open: the form sends only what it changed, so that limit stays
    await rest(operatorKey, 'PATCH', '/v1/queues/ui-limits', { rateLimit: 7, ratePeriodMs: 1000 })
    await form.getByLabel('Per-key rate limit (starts of one key per period)').fill('10')
    await form.getByLabel('Per-key rate period (ms)').fill('60000')
    await form.getByLabel('Concurrency limit', { exact: true }).fill('')
    await form.getByLabel('Fair share between tenants').check()
    await form.getByRole('button', { name: 'Save limits' }).click()
    await waitFor(async () => (await row.locator('td').nth(6).textContent())?.includes('10 per key per'), { what: 'the row to show the per-key rate limit' })
    const queue = await rest<Record<string, unknown>>(operatorKey, 'GET', '/v1/queues/ui-limits')
    expect(queue).toMatchObject({ concurrencyLimit: null, keyRateLimit: 10, keyRatePeriodMs: 60_000, fairShare: true, rateLimit: 7, ratePeriodMs: 1000 })
    expect(await row.locator('td').nth(6).textContent()).toContain('fair share')
    // an emptied rate limit is removed, its period (still shown) left out; a concurrency limit set meanwhile stays
    await waitFor(async () => (await row.locator('td').nth(6).textContent())?.includes('7 per'), { what: 'the row to show the rate limit' })
    await row.getByRole('button', { name: 'Edit limits of ui-limits' }).click()
    await expect(form.getByLabel('Rate period (ms)', { exact: true }).inputValue()).resolves.toBe('1000')
    await rest(operatorKey, 'PATCH', '/v1/queues/ui-limits', { concurrencyLimit: 4 })
    await form.getByLabel('Rate limit (starts per period)').fill('')
    await form.getByRole('button', { name: 'Save limits' }).click()
    await form.waitFor({ state: 'detached' })
    expect(await rest<Record<string, unknown>>(operatorKey, 'GET', '/v1/queues/ui-limits')).toMatchObject({
      concurrencyLimit: 4,
      rateLimit: null,
      keyRateLimit: 10,
      keyRatePeriodMs: 60_000,
      fairShare: true,
    })
    await page.context().close()
  })

  it("sets a tenant's weight and quotas from the tenants page, marks one at its pending quota, and tells a tenant key the page is not its own", async () => {
    await createApiKey(t.db, { tenant: 'soylent' })
    const page = await signedIn(operatorKey)
    await page.goto(`${api.url}/ui/#/tenants`)
    // a tenant without settings is not listed: it is picked by name
    const other = page.getByRole('form', { name: 'Settings of another tenant' })
    await other.getByLabel('Another tenant').fill('soylent')
    await other.getByRole('button', { name: 'Edit settings' }).click()
    const form = page.getByRole('form', { name: 'Settings of tenant soylent' })
    const weight = form.getByLabel('Weight (turns per round in fair-share queues)')
    await expect(weight.inputValue()).resolves.toBe('1')
    expect(await form.getByLabel('Max pending executions').inputValue()).toBe('')
    // a value the API refuses: its message beside the form, and nothing saved
    await weight.fill('0')
    await form.getByRole('button', { name: 'Save settings' }).click()
    const alerted = (text: string) =>
      waitFor(async () => (await form.getByRole('alert').allTextContents()).join('').includes(text), { what: `an alert naming ${text}` })
    await alerted('weight')
    expect((await rest<{ items: { name: string }[] }>(operatorKey, 'GET', '/v1/tenants')).items.map((x) => x.name)).not.toContain('soylent')
    // text that is no number is refused by name, not taken for an empty field (which removes a quota)
    await weight.fill('1')
    await form.getByLabel('Max submits per second').fill('fifty')
    await form.getByRole('button', { name: 'Save settings' }).click()
    await alerted('maxSubmitsPerSecond')
    await weight.fill('2')
    await form.getByLabel('Max pending executions').fill('0')
    await form.getByLabel('Max submits per second').fill('50')
    await form.getByRole('button', { name: 'Save settings' }).click()
    const row = page.locator('tr[data-tenant="soylent"]')
    await row.waitFor()
    // the editor closes, and the focus goes to the tenant's row, now listed
    await waitFor(async () => (await page.evaluate('document.activeElement?.getAttribute("aria-label")')) === 'Edit settings of soylent', {
      what: "the focus on soylent's row",
    })
    expect(await rest(operatorKey, 'GET', '/v1/tenants/soylent')).toMatchObject({ weight: 2, maxPending: 0, maxSubmitsPerSecond: 50, pending: 0 })
    expect(await row.locator('td').allTextContents()).toEqual([
      '2',
      '0',
      '50',
      '0 at quota: its submits get 429 until some of its pending executions start',
      '0',
      'Edit settings Keys',
    ])
    // max pending 0 refuses every submit: the row says the tenant is at its quota
    expect(await row.getAttribute('data-at-quota')).toBe('true')
    await shot(page, 'tenants')
    // an emptied quota field removes the quota; only that is sent, so a quota another operator set meanwhile stays
    await row.getByRole('button', { name: 'Edit settings of soylent' }).click()
    await expect(form.getByLabel('Max pending executions').inputValue()).resolves.toBe('0')
    await rest(operatorKey, 'PATCH', '/v1/tenants/soylent', { maxSubmitsPerSecond: 40 })
    await form.getByLabel('Max pending executions').fill('')
    await form.getByRole('button', { name: 'Save settings' }).click()
    await waitFor(async () => (await row.getAttribute('data-at-quota')) === 'false', { what: 'the row to drop its at-quota mark' })
    expect(await row.locator('td').nth(1).textContent()).toBe('no quota')
    expect(await rest(operatorKey, 'GET', '/v1/tenants/soylent')).toMatchObject({ weight: 2, maxPending: null, maxSubmitsPerSecond: 40 })
    // the row's Keys link lists that tenant's keys alone
    await row.getByRole('link', { name: 'API keys of soylent' }).click()
    await waitFor(async () => page.url().endsWith('#/keys?tenant=soylent'), { what: 'the keys page of soylent' })
    const soylentKeys = page.getByRole('region', { name: 'API keys of tenant soylent' })
    await soylentKeys.locator('tbody tr').first().waitFor()
    expect(await soylentKeys.locator('tbody th').allTextContents()).toEqual(['soylent'])
    await page.context().close()
    // a tenant key: no link to the page, which says it is for operator keys and asks the API nothing it may not
    const { page: tenantPage } = await openPage(browser, 1280)
    const refused: string[] = []
    tenantPage.on('request', (request) => {
      // asked at all (an answer still on its way when the page is checked would be missed)
      if (/\/v1\/(tenants|keys)\b/.test(request.url())) refused.push(request.url())
    })
    await signIn(tenantPage, api.url, globexKey)
    await tenantPage.goto(`${api.url}/ui/#/overview`)
    await tenantPage.locator('h1').waitFor()
    const links = await tenantPage.getByRole('navigation', { name: 'Main' }).getByRole('link').allTextContents()
    expect(links).toContain('Webhooks')
    expect(links).not.toContain('Tenants')
    expect(links).not.toContain('Keys')
    for (const path of ['tenants', 'keys']) {
      await tenantPage.goto(`${api.url}/ui/#/${path}`)
      await expect(tenantPage.locator('[data-note="operator-only"]').textContent()).resolves.toContain('operator keys')
    }
    expect(refused).toEqual([])
    await tenantPage.context().close()
  })

  it('lists API keys without their secrets, creates a tenant key shown once that works at once, and revokes a key only once the confirmation is accepted', async () => {
    const page = await signedIn(operatorKey)
    await page.goto(`${api.url}/ui/#/keys`)
    const form = page.getByRole('form', { name: 'New tenant key' })
    await form.getByLabel('Tenant').fill('hooli')
    await form.getByLabel('Name (optional)').fill('ui-test')
    await form.getByRole('button', { name: 'Create key' }).click()
    const shown = page.locator('[data-new-key] code.secret')
    await shown.waitFor()
    const key = (await shown.textContent()) ?? ''
    expect(key).toMatch(/^psk_[A-Za-z0-9_-]{43}$/)
    // the key works at once, for its tenant
    expect(await rest<{ tenant: string; operator: boolean }>(key, 'GET', '/v1/identity')).toMatchObject({ tenant: 'hooli', operator: false })
    const listed = await rest<{ items: { id: string; name: string | null; keyPrefix: string }[] }>(operatorKey, 'GET', '/v1/keys?tenant=hooli')
    expect(listed.items.map((k) => k.name)).toEqual(['ui-test'])
    const { id, keyPrefix } = listed.items[0] as { id: string; keyPrefix: string }
    const row = page.locator(`tr[data-key-id="${id}"]`)
    await row.waitFor()
    // the table shows its prefix, never the key; the key is shown once, until Done
    // (its last use: 'never', or the identity call above once recorded)
    expect(await row.locator('td').allTextContents()).toEqual([
      'ui-test',
      `${keyPrefix}…`,
      'tenant',
      expect.any(String),
      expect.any(String),
      'active',
      'Revoke',
    ])
    expect(await page.locator('table').textContent()).not.toContain(key)
    // the key the page is signed in with says so
    const me = await rest<{ keyId: string }>(operatorKey, 'GET', '/v1/identity')
    await expect(page.locator(`tr[data-key-id="${me.keyId}"] td`).first().textContent()).resolves.toBe("– (this page's key)")
    await shot(page, 'keys')
    // Copy puts the key on the clipboard; without a clipboard, it selects the key for the keyboard's copy
    await page.context().grantPermissions(['clipboard-read', 'clipboard-write'], { origin: api.url })
    await page.getByRole('button', { name: 'Copy key' }).click()
    await page.locator('[data-new-key]').getByText('Copied.').waitFor()
    expect(await page.evaluate('navigator.clipboard.readText()')).toBe(key)
    await page.evaluate(`getSelection().removeAllRanges(); Object.defineProperty(navigator, 'clipboard', { value: undefined, configurable: true })`)
    await page.getByRole('button', { name: 'Copy key' }).click()
    await page.locator('[data-new-key]').getByText('Selected: copy it with Ctrl+C').waitFor()
    expect(await page.evaluate('getSelection().toString()')).toBe(key)
    await page.getByRole('button', { name: 'Done' }).click()
    await page.locator('[data-new-key]').waitFor({ state: 'detached' })
    expect(await page.locator('main').textContent()).not.toContain(key)
    // a dismissed confirmation revokes nothing: no revoke is sent
    const revokes: string[] = []
    page.on('request', (request) => {
      if (request.url().endsWith('/revoke')) revokes.push(request.url())
    })
    const revoke = row.getByRole('button', { name: `Revoke key ${keyPrefix}… of hooli` })
    let dismissed = false
    page.once('dialog', (dialog) => {
      dismissed = true
      void dialog.dismiss()
    })
    await revoke.click()
    expect(dismissed).toBe(true)
    expect(revokes).toEqual([])
    expect((await rest<{ tenant: string }>(key, 'GET', '/v1/identity')).tenant).toBe('hooli')
    // an accepted one revokes the key, at once
    let asked = ''
    page.once('dialog', (dialog) => {
      asked = dialog.message()
      void dialog.accept()
    })
    await revoke.click()
    await waitFor(async () => (await row.getAttribute('data-revoked')) === 'true', { what: 'the row to show the key revoked' })
    expect(asked).toContain('tenant hooli (ui-test)')
    expect(revokes).toEqual([`${api.url}/v1/keys/${id}/revoke`])
    expect((await fetch(`${api.url}/v1/jobs`, { headers: { authorization: `Bearer ${key}` } })).status).toBe(401)
    expect(await row.getByRole('button').count()).toBe(0)
    // the list narrowed to one tenant, in the address: a tenant with none says so
    await page.getByRole('form', { name: 'Key filter' }).getByLabel('Keys of tenant').fill('hooli')
    await page.getByRole('form', { name: 'Key filter' }).getByRole('button', { name: 'Show' }).click()
    await waitFor(async () => page.url().endsWith('#/keys?tenant=hooli'), { what: 'the filter in the address' })
    const hooli = page.getByRole('region', { name: 'API keys of tenant hooli' })
    await hooli.waitFor()
    expect(await hooli.locator('tbody tr').evaluateAll((rows) => rows.map((r) => r.getAttribute('data-key-id')))).toEqual([id])
    await page.goto(`${api.url}/ui/#/keys?tenant=nobody-here`)
    await expect(page.locator('[data-empty]').textContent()).resolves.toBe('Tenant nobody-here has no API key.')
    await page.getByRole('link', { name: "Every tenant's keys" }).click()
    await page.getByRole('region', { name: 'API keys', exact: true }).waitFor()
    // a long name with no break (150 characters) wraps in its cell: every column, the row's Revoke button among them, stays on screen
    const long = await createApiKey(t.db, { tenant: 'ui-long-key-name', name: 'n'.repeat(150) })
    await page.goto(`${api.url}/ui/#/keys?tenant=ui-long-key-name`)
    const longRow = page.locator(`tr[data-key-id="${long.id}"]`)
    await longRow.waitFor()
    expect(await page.locator('main .table-wrap').evaluate((e) => e.scrollWidth <= e.clientWidth)).toBe(true)
    const revokeBox = await longRow.getByRole('button', { name: /^Revoke/ }).boundingBox()
    expect((revokeBox?.x ?? Number.POSITIVE_INFINITY) + (revokeBox?.width ?? 0)).toBeLessThanOrEqual(1280)
    await page.context().close()
  })

  it("shows a tenant key only its own tenant's jobs", async () => {
    const mine = await submit(globexKey, { type: 'switch.fail', payload: { failWhile: join(flags, 'never') } })
    const theirs = await submit(acmeKey, { type: 'switch.fail', payload: { failWhile: join(flags, 'never') } })
    // every answer the tenant key's pages get is a success: no call it may not make (a 403 shows in the browser's console)
    const { page } = await openPage(browser, 1280)
    const refused: string[] = []
    page.on('response', (response) => {
      if (response.status() >= 400) refused.push(`${response.status()} ${response.url()}`)
    })
    await signIn(page, api.url, globexKey)
    await page.goto(`${api.url}/ui/#/jobs`)
    await page.waitForSelector(`tr[data-job-id="${mine.id}"]`)
    expect(refused).toEqual([])
    // a tenant key has no tenant filter
    expect(await page.locator('#f-tenant').count()).toBe(0)
    expect(await page.locator(`tr[data-job-id="${theirs.id}"]`).count()).toBe(0)
    expect(await page.locator('tbody tr td:nth-child(5)').allTextContents()).toEqual(expect.arrayContaining(['globex']))
    expect(new Set(await page.locator('tbody tr td:nth-child(5)').allTextContents())).toEqual(new Set(['globex']))
    await page.goto(`${api.url}/ui/#/jobs/${theirs.id}`)
    await expect(page.getByRole('alert').first().textContent()).resolves.toMatch(/not found/i)
    // a malformed escape in the address (decodeURIComponent throws on it) names no job: the page says so, it does not go blank
    await page.goto(`${api.url}/ui/#/jobs/100%`)
    await page.getByRole('heading', { name: 'Job 100%' }).waitFor()
    await page.getByRole('alert').first().waitFor()
    expect(await page.getByRole('button', { name: 'Sign out' }).count()).toBe(1)
    await page.context().close()
  })

  it('shows tenant input as text: markup in a payload is not run', async () => {
    const job = await submit(acmeKey, {
      type: 'switch.fail',
      payload: { failWhile: join(flags, 'never'), note: '<img src=x onerror="window.__injected=1"><script>window.__injected=2</script>' },
    })
    const page = await signedIn(acmeKey)
    await page.goto(`${api.url}/ui/#/jobs/${job.id}`)
    const payload = page.getByLabel('Payload')
    await waitFor(async () => (await payload.textContent())?.includes('<img src=x'), { what: 'the payload shown as text' })
    expect(await page.locator('main img, main script').count()).toBe(0)
    expect(await page.evaluate<unknown>('window.__injected')).toBeUndefined()
    await page.context().close()
  })

  it('marks paused and limited queues on the overview', async () => {
    await rest(operatorKey, 'POST', '/v1/queues/ui-overview-paused/pause')
    await rest(operatorKey, 'PATCH', '/v1/queues/ui-overview-limited', { concurrencyLimit: 3 })
    // a per-key rate limit alone limits the queue too
    await rest(operatorKey, 'PATCH', '/v1/queues/ui-overview-key-rate', { keyRateLimit: 2, keyRatePeriodMs: 1000 })
    const page = await signedIn(operatorKey)
    await page.goto(`${api.url}/ui/#/overview`)
    const paused = page.locator('[data-queue="ui-overview-paused"]')
    const limited = page.locator('[data-queue="ui-overview-limited"]')
    const keyRate = page.locator('[data-queue="ui-overview-key-rate"]')
    // the queue cards come with the overview's data, after the page itself
    await paused.locator('.badge').first().waitFor()
    await limited.locator('.badge').first().waitFor()
    await keyRate.locator('h3').waitFor()
    await expect(paused.locator('.badge').allTextContents()).resolves.toEqual(['paused'])
    await expect(limited.locator('.badge').allTextContents()).resolves.toEqual(['limited'])
    await expect(keyRate.locator('.badge').allTextContents()).resolves.toEqual(['limited'])
    await page.context().close()
  })

  it('draws throughput, failure rate and schedule lag over the last hour from /v1/stats, its time axis naming its zone', async () => {
    // a zone away from the server's (UTC) by a half hour, and every text the charts' canvases draw
    const { page } = await openPage(browser, 1280, { timezoneId: 'Asia/Kolkata' })
    await page.addInitScript({
      content: `window.drawnTexts = [];
        const fillText = CanvasRenderingContext2D.prototype.fillText;
        CanvasRenderingContext2D.prototype.fillText = function (text, ...rest) { window.drawnTexts.push(String(text)); return fillText.call(this, text, ...rest) };`,
    })
    await signIn(page, api.url, acmeKey)
    await page.goto(`${api.url}/ui/#/overview`)
    await page.waitForSelector('figure.chart canvas')
    await expect(page.locator('figure.chart figcaption').allTextContents()).resolves.toEqual(['Throughput per minute', 'Failure rate', 'Schedule lag'])
    // The jobs run above show in the throughput table of the last hour.
    const started = await page.locator('figure.chart').first().locator('tbody td:nth-child(2)').allTextContents()
    expect(started.map(Number).reduce((a, b) => a + b, 0)).toBeGreaterThan(0)
    // each minute names its zone, as every other time of the dashboard does
    const zone = await page.evaluate(
      () => new Intl.DateTimeFormat(undefined, { timeZoneName: 'short' }).formatToParts(new Date()).find((p) => p.type === 'timeZoneName')?.value,
    )
    expect(zone).toBeTruthy()
    expect(zone).not.toMatch(/^(UTC|GMT)$/)
    const minutes = await page.locator('figure.chart').first().locator('details tbody th').allTextContents()
    expect(minutes.length).toBeGreaterThan(0)
    for (const minute of minutes) expect(minute.endsWith(` ${zone}`) && /^\d\d:\d\d/.test(minute), minute).toBe(true)
    // each chart's time axis names the zone too, and its ticks are minutes of the table's (in that zone, not the server's)
    const drawn = await page.evaluate<string[]>('window.drawnTexts')
    expect(drawn.filter((text) => text === `Minute (${zone})`).length).toBeGreaterThanOrEqual(3)
    await expect(page.locator('figure.chart [role="img"]').first().getAttribute('aria-label')).resolves.toContain(`in ${zone}`)
    // "14:05", "02:05 PM GMT+5:30" or uPlot's "2:05pm" as the minute of the day; null for any other text
    const minuteOfDay = (text: string) => {
      const m = /^(\d{1,2}):(\d\d)\s*([ap]m)?/i.exec(text)
      if (!m) return null
      const h = Number(m[1])
      const suffix = m[3]?.toLowerCase()
      return (suffix ? (h % 12) + (suffix === 'pm' ? 12 : 0) : h) * 60 + Number(m[2])
    }
    const tableMinutes = new Set(minutes.map(minuteOfDay))
    const ticks = drawn.map(minuteOfDay).filter((m): m is number => m !== null)
    expect(ticks.length).toBeGreaterThan(0)
    for (const tick of ticks) expect(tableMinutes.has(tick), `tick at minute ${tick} of the day`).toBe(true)
    const operatorPage = await signedIn(operatorKey)
    await operatorPage.goto(`${api.url}/ui/#/overview`)
    await operatorPage.waitForSelector('figure.chart canvas')
    await shot(operatorPage, 'overview')
    await operatorPage.context().close()
    await page.context().close()
  })

  it('lists recurring schedules with their next fire times', async () => {
    const job = await submit(acmeKey, {
      type: 'switch.fail',
      schedule: { cron: '0 3 * * *', timezone: 'Europe/Berlin' },
      payload: { failWhile: join(flags, 'never') },
    })
    const page = await signedIn(acmeKey, 1280, { timezoneId: 'America/New_York', locale: 'en-GB' })
    await page.goto(`${api.url}/ui/#/schedules`)
    const row = page.locator('tr', { has: page.locator(`a[href="#/jobs/${job.id}"]`) })
    await row.waitFor()
    // the zone its fire times are reckoned in, beside the expression
    await expect(row.locator('td').nth(3).textContent()).resolves.toContain('cron 0 3 * * * (Europe/Berlin)')
    const fires = row.locator('td').nth(4).locator('li')
    expect(await fires.count()).toBe(5)
    // each fire time in the schedule's zone (03:00 in Berlin), then in the browser's (New York)
    for (const text of await fires.allTextContents()) expect(text).toMatch(/^\d\d\/\d\d\/\d{4}, 03:00:00 CES?T \(\d\d\/\d\d\/\d{4}, \d\d:00:00 GMT-[45]\)$/)
    // on the job's page too
    await page.goto(`${api.url}/ui/#/jobs/${job.id}`)
    const jobFires = page.locator('dt:text-is("Next fire times") + dd li')
    await waitFor(async () => (await jobFires.count()) === 5, { what: "the job page's five next fire times" })
    expect(await jobFires.first().textContent()).toMatch(/, 03:00:00 CES?T \(/)
    await page.goto(`${api.url}/ui/#/schedules`)
    await row.waitFor()
    await shot(page, 'schedules')
    await row.getByRole('button', { name: `Pause schedule ${job.id}` }).click()
    await waitFor(async () => (await rest<{ state: string }>(acmeKey, 'GET', `/v1/jobs/${job.id}`)).state === 'paused', { what: 'the schedule to pause' })
    // a cancelled job's schedule says so, with nothing to pause or resume
    const cancelled = await submit(acmeKey, { type: 'switch.fail', schedule: { every: '1h' }, payload: { failWhile: join(flags, 'never') } })
    await rest(acmeKey, 'POST', `/v1/jobs/${cancelled.id}/cancel`)
    await page.reload()
    const cancelledRow = page.locator('tr', { has: page.locator(`a[href="#/jobs/${cancelled.id}"]`) })
    await cancelledRow.locator('.badge-cancelled').waitFor()
    await expect(cancelledRow.locator('td').nth(3).textContent()).resolves.toContain('every 1h')
    expect(await cancelledRow.locator('td').nth(4).locator('li').count()).toBe(0)
    expect(await cancelledRow.getByRole('button').count()).toBe(0)
    await page.context().close()
  })

  it("shows a job's next fire times on its page when over 500 schedules come before it", async () => {
    const initechKey = (await createApiKey(t.db, { tenant: 'initech' })).key
    const schedule = { every: '1h' }
    const jobs: JobJson[] = []
    for (let i = 0; i < 501; i += 50) {
      const n = Math.min(50, 501 - i)
      jobs.push(...(await Promise.all(Array.from({ length: n }, () => submit(initechKey, { type: 'noop', queue: 'ui-nobody', schedule })))))
    }
    // job ids grow with time: the last one submitted is the 501st schedule by id
    const last = jobs.map((j) => j.id).sort()[500] as string
    const page = await signedIn(initechKey)
    await page.goto(`${api.url}/ui/#/jobs/${last}`)
    const fires = page.locator('dt:text-is("Next fire times") + dd li')
    await waitFor(async () => (await fires.count()) === 5, { what: 'the five next fire times of the 501st schedule' })
    // an interval has no zone of its own: its fire times are in the browser's alone
    expect(await fires.first().textContent()).not.toContain('(')
    await page.context().close()
  })

  it('lists the running worker as alive with what it serves', async () => {
    const page = await signedIn(acmeKey)
    await page.goto(`${api.url}/ui/#/workers`)
    const row = page.locator('tr[data-worker-state="alive"]').first()
    await row.waitFor()
    await expect(row.textContent()).resolves.toContain('ui-pause')
    // the executions a worker holds, beside its slots: held ones may be more (claimed ahead), and the page says so
    const headers = await page.locator('thead th').allTextContents()
    expect(headers).toEqual(expect.arrayContaining(['Running', 'Claimed', 'Slots']))
    expect(headers).not.toContain('In flight')
    expect(
      await row
        .locator('td')
        .nth(headers.indexOf('Slots') - 1)
        .textContent(),
    ).toBe('20')
    // how many run, as its heartbeats report it ('–' until its first): a count within its slots
    const runningCell = () =>
      page
        .locator('tr[data-worker-state="alive"]')
        .first()
        .locator('td')
        .nth(headers.indexOf('Running') - 1)
    let running: string | null = null
    await waitFor(
      async () => {
        running = await runningCell().textContent()
        if (/^\d+$/.test(running ?? '')) return true
        await page.reload()
        await page.locator('tr[data-worker-state="alive"]').first().waitFor()
        return false
      },
      { what: "the worker's running count from its heartbeat", timeoutMs: 15_000 },
    )
    expect(Number(running)).toBeLessThanOrEqual(20)
    await expect(page.locator('[data-note="claimed"]').textContent()).resolves.toContain('running at the worker')
    await expect(page.locator('[data-note="claimed"]').textContent()).resolves.toContain('claimed ahead of a free slot')
    await shot(page, 'workers')
    await page.goto(`${api.url}/ui/#/overview`)
    const card = page.locator('.queue-card').first()
    await card.waitFor()
    await expect(card.locator('dt').allTextContents()).resolves.toEqual(['Due', 'Scheduled', 'Claimed', 'Oldest due'])
    await expect(page.locator('[data-note="claimed"]').textContent()).resolves.toContain('claimed ahead of a free slot')
    await page.context().close()
  })

  it('filters the job list, finds a job by idempotency key, pages through it and exports it', async () => {
    const keyed = await submit(acmeKey, { type: 'switch.fail', idempotencyKey: 'order-4711', payload: { failWhile: join(flags, 'never') } })
    const uuidKey = randomUUID()
    const uuidKeyed = await submit(acmeKey, { type: 'switch.fail', idempotencyKey: uuidKey, payload: { failWhile: join(flags, 'never') } })
    const page = await signedIn(acmeKey)
    await page.goto(`${api.url}/ui/#/jobs`)
    // the first page first: filled before it arrives, the form could be drawn again empty
    await page.waitForSelector(`tr[data-job-id="${keyed.id}"]`)
    // an idempotency key shaped like a UUID is no job's id: the search finds the job by its key
    await page.getByLabel('Job id or idempotency key').fill(uuidKey)
    await page.getByRole('button', { name: 'Apply' }).click()
    await waitFor(async () => (await page.locator('tbody tr').count()) === 1 && (await page.locator(`tr[data-job-id="${uuidKeyed.id}"]`).count()) === 1, {
      what: 'the list filtered by a UUID idempotency key',
    })
    expect(new URLSearchParams(page.url().split('?')[1]).get('idempotencyKey')).toBe(uuidKey)
    // a job's whole id leads to its page
    await page.getByLabel('Job id or idempotency key').fill(keyed.id)
    await page.getByRole('button', { name: 'Apply' }).click()
    await page.waitForSelector(`section[data-job-id="${keyed.id}"]`)
    await page.goto(`${api.url}/ui/#/jobs`)
    await page.waitForSelector(`tr[data-job-id="${keyed.id}"]`)
    // a filter the API refuses (no queue has that name): its error shows, without the rows listed before under no filter
    await page.getByLabel('Queue').fill('not a queue!')
    await page.getByRole('button', { name: 'Apply' }).click()
    await page.getByRole('alert').first().waitFor()
    expect(await page.locator('tbody tr').count()).toBe(0)
    await page.goto(`${api.url}/ui/#/jobs`)
    await page.waitForSelector(`tr[data-job-id="${keyed.id}"]`)
    await page.getByLabel('Job id or idempotency key').fill('order-4711')
    await page.getByRole('button', { name: 'Apply' }).click()
    // the unfiltered page leaves once the filter changes; the filtered one takes its place
    await waitFor(async () => (await page.locator('tbody tr').count()) === 1, { what: 'the list filtered by idempotency key' })
    expect(await page.locator(`tr[data-job-id="${keyed.id}"]`).count()).toBe(1)
    // the short id the list shows is not an idempotency key: the empty list says how to find a job by id
    await page.getByLabel('Job id or idempotency key').fill(keyed.id.slice(-12))
    await page.getByRole('button', { name: 'Apply' }).click()
    await page.locator('[data-short-id-hint]').waitFor()
    await page.getByRole('link', { name: 'Clear' }).click()
    // Clear changes the address; the form is drawn anew (empty) when the page handles that change,
    // which on a busy machine can come after a fill made at once: wait for the new form first
    await waitFor(async () => (await page.getByLabel('Job id or idempotency key').inputValue()) === '', { what: 'the form cleared' })
    await page.getByLabel('Queue').fill('ui-bulk')
    await page.getByRole('button', { name: 'Apply' }).click()
    await page.waitForURL(/[?&]queue=ui-bulk(&|$)/)
    // 100 jobs in ui-bulk, 50 to a page: two pages, then back.
    await waitFor(async () => (await page.locator('tbody tr[data-queue="ui-bulk"]').count()) === 50 && (await page.locator('tbody tr').count()) === 50, {
      what: 'the first page of 50 jobs of ui-bulk',
    })
    const first = await page.locator('tbody tr').first().getAttribute('data-job-id')
    await page.getByRole('button', { name: 'Next' }).click()
    await page.getByText('Page 2', { exact: true }).waitFor()
    await waitFor(async () => (await page.locator('tbody tr').first().getAttribute('data-job-id')) !== first, { what: 'the second page' })
    expect(await page.locator('tbody tr').count()).toBe(50)
    expect(await page.getByRole('button', { name: 'Next' }).isDisabled()).toBe(true)
    const second = await page.locator('tbody tr').first().getAttribute('data-job-id')
    // the page is in the address: a reload keeps it (filters too), and Previous still leads back
    expect(new URLSearchParams(page.url().split('?')[1]).get('page')).toBe('2')
    expect(new URLSearchParams(page.url().split('?')[1]).get('cursor')).toBeTruthy()
    await page.reload()
    await page.getByText('Page 2', { exact: true }).waitFor()
    await waitFor(async () => (await page.locator('tbody tr').first().getAttribute('data-job-id')) === second, { what: 'the second page after a reload' })
    expect(await page.locator('tbody tr[data-queue="ui-bulk"]').count()).toBe(50)
    await page.getByRole('button', { name: 'Previous' }).click()
    await waitFor(async () => (await page.locator('tbody tr').first().getAttribute('data-job-id')) === first, { what: 'the first page again' })
    await page.getByText('Page 1', { exact: true }).waitFor()
    expect(await page.getByRole('button', { name: 'Previous' }).isDisabled()).toBe(true)
    // and the browser's Back returns to the page before
    await page.goBack()
    await waitFor(async () => (await page.locator('tbody tr').first().getAttribute('data-job-id')) === second, { what: 'the second page by Back' })
    await page.getByRole('button', { name: 'Previous' }).click()
    await waitFor(async () => (await page.locator('tbody tr').first().getAttribute('data-job-id')) === first, { what: 'the first page by Previous' })
    // an address whose cursor names no page says so, and leads to the list's first page
    await page.goto(`${api.url}/ui/#/jobs?queue=ui-bulk&cursor=not-a-cursor&page=3`)
    await page.locator('[data-bad-page]').waitFor()
    expect(await page.getByText('No jobs match.').count()).toBe(0)
    await page.locator('[data-bad-page] a').click()
    await waitFor(async () => (await page.locator('tbody tr').first().getAttribute('data-job-id')) === first, { what: 'the first page from a bad address' })
    expect(new URLSearchParams(page.url().split('?')[1]).get('queue')).toBe('ui-bulk')
    const [download] = await Promise.all([page.waitForEvent('download'), page.getByRole('button', { name: 'CSV' }).click()])
    const csv = readFileSync(await download.path(), 'utf8')
      .trim()
      .split('\n')
    expect(csv).toHaveLength(101)
    const operatorPage = await signedIn(operatorKey)
    await operatorPage.goto(`${api.url}/ui/#/jobs`)
    await operatorPage.locator('tbody tr').first().waitFor()
    // the tenant filter offers the tenants that have jobs or keys
    const tenantNames = await operatorPage.locator('#f-tenant-names option').evaluateAll((options) => options.map((o) => o.getAttribute('value') ?? ''))
    expect(tenantNames).toEqual(expect.arrayContaining(['acme', 'globex', 'ops']))
    await shot(operatorPage, 'jobs')
    await operatorPage.context().close()
    await page.context().close()
  })

  it('keeps a 128-character type and a 64-character queue within the screen at 1280 and 390 px', async () => {
    const queue = `ui-${'q'.repeat(61)}`
    const type = `ui.${'t'.repeat(125)}`
    const job = await submit(globexKey, { type, queue })
    for (const width of [1280, 390]) {
      const page = await signedIn(operatorKey, width)
      for (const path of ['overview', `jobs?queue=${queue}`, 'queues', `jobs/${job.id}`]) {
        await page.goto(`${api.url}/ui/#/${path}`)
        await page.getByText(queue).first().waitFor()
        expect(await page.evaluate<number>('document.documentElement.scrollWidth')).toBeLessThanOrEqual(width)
        // at 1280 px, every column of a table is on screen: the long names wrap
        if (width === 1280 && (await page.locator('main .table-wrap').count()) > 0)
          expect(
            await page
              .locator('main .table-wrap')
              .first()
              .evaluate((e) => e.scrollWidth <= e.clientWidth),
          ).toBe(true)
      }
      await page.context().close()
    }
  })

  it('marks an execution that missed its start deadline as expired, as its job', async () => {
    const job = await submit(acmeKey, { type: 'noop', queue: 'ui-nobody', startDeadlineMs: 1000, schedule: { at: '2020-01-01T00:00:00Z' } })
    await waitFor(async () => (await viewJob(job.id)).status === 'EXPIRED', { what: 'the job to expire' })
    const page = await signedIn(acmeKey)
    await page.goto(`${api.url}/ui/#/jobs/${job.id}`)
    await page.waitForSelector('[data-job-status="EXPIRED"]')
    await expect(page.locator('.execution h3 .badge').textContent()).resolves.toBe('expired')
    await page.context().close()
  })

  it("pages through a job's executions, 50 a page, newest first, and says an execution waiting for a retry waits for its next attempt", async () => {
    // a job with 58 executions: its own (in 2099), one waiting for its 2nd attempt and 56 in its history
    const job = await submit(acmeKey, { type: 'noop', queue: 'ui-nobody', schedule: { at: '2099-01-01T00:00:00Z' } })
    const base = Date.parse('2026-01-01T00:00:00Z')
    for (let i = 0; i < 56; i++) {
      await insertExecution(t.db, { jobId: job.id, state: 'succeeded', scheduledFor: new Date(base + i * 3_600_000) })
    }
    const retrying = await insertExecution(t.db, { jobId: job.id, state: 'pending', attempt: 1, scheduledFor: new Date('2098-01-01T00:00:00Z') })
    // the history's executions stored output: each shows in a closed section, read only once opened
    await t.db
      .updateTable('pgsched.execution_history')
      .set({ output_uri: sql<string>`'pgsched:output/' || id || '/1'` })
      .where('job_id', '=', job.id)
      .where('state', '=', 'succeeded')
      .execute()
    const page = await signedIn(acmeKey)
    const outputRequests: string[] = []
    page.on('request', (request) => {
      if (request.url().includes('/output')) outputRequests.push(request.url())
    })
    await page.goto(`${api.url}/ui/#/jobs/${job.id}`)
    await page.waitForSelector('nav[aria-label="Execution pages"]')
    await expect(page.locator('.execution').count()).resolves.toBe(50)
    await expect(page.locator(`[data-output-waiting="${retrying.id}"]`).textContent()).resolves.toMatch(
      /^Waiting for attempt 2 of \d+: its output shows here once that runs\.$/,
    )
    await page.getByRole('button', { name: 'Older' }).click()
    await waitFor(async () => (await page.locator('.execution').count()) === 8, { what: 'the second page of executions' })
    await expect(page.getByRole('button', { name: 'Older' }).isDisabled()).resolves.toBe(true)
    await page.getByRole('button', { name: 'Newer' }).click()
    await waitFor(async () => (await page.locator('.execution').count()) === 50, { what: 'the first page again' })
    // 56 closed output sections on the two pages: none read
    expect(await page.locator('.execution details').count()).toBe(48)
    expect(outputRequests).toEqual([])
    const first = page.locator('.execution:has(details)').first()
    const opened = (await first.getAttribute('data-execution-id')) ?? ''
    await first.locator('details summary').click()
    await waitFor(() => outputRequests.length === 1, { what: 'the opened output to be read' })
    expect(outputRequests[0]).toContain(`/v1/executions/${opened}/output`)
    await page.context().close()
  })

  it('shows every page readably at 390 px', async () => {
    const page = await signedIn(acmeKey, 390)
    for (const path of ['overview', 'jobs', 'failures', 'schedules', 'queues', 'workers', 'webhooks', 'tenants', 'keys']) {
      await page.goto(`${api.url}/ui/#/${path}`)
      await page.locator('h1').waitFor()
      // Nothing wider than the screen: wide tables scroll inside their own region.
      expect(await page.evaluate<number>('document.documentElement.scrollWidth')).toBeLessThanOrEqual(390)
    }
    await page.goto(`${api.url}/ui/#/jobs`)
    await page.locator('tbody tr').first().waitFor()
    await shot(page, 'jobs-390')
    await page.context().close()
    // the operator-only pages with their tables (a tenant at its quota, to be listed with its mark)
    await rest(operatorKey, 'PATCH', '/v1/tenants/ui-narrow', { maxPending: 0 })
    const operatorPage = await signedIn(operatorKey, 390)
    for (const path of ['tenants', 'keys']) {
      await operatorPage.goto(`${api.url}/ui/#/${path}`)
      await operatorPage.locator(path === 'tenants' ? 'tr[data-tenant="ui-narrow"] .badge' : 'table').waitFor()
      expect(await operatorPage.evaluate<number>('document.documentElement.scrollWidth')).toBeLessThanOrEqual(390)
    }
    await operatorPage.context().close()
  })

  it("lists a tenant's webhooks (to an operator every tenant's, naming each one's), shows a delivery log with its failed delivery, edits the events, replaces the secret and deletes it", async () => {
    // a tenant of its own: its delivery jobs (type pgsched.webhook) stay out of the other tests' lists
    const hooksKey = (await createApiKey(t.db, { tenant: 'umbrella' })).key
    // the receiver: 200 for a succeeded event, 422 (not retried) for a failed one
    const received: Array<{ type: string; body: string; headers: IncomingHttpHeaders }> = []
    const receiver = createServer((req, res) => {
      let body = ''
      req.on('data', (chunk: Buffer) => (body += chunk.toString()))
      req.on('end', () => {
        const type = (JSON.parse(body) as { type: string }).type
        received.push({ type, body, headers: req.headers })
        res.writeHead(type === 'failed' ? 422 : 200).end(type === 'failed' ? 'not this one' : 'ok')
      })
    })
    await new Promise<void>((resolve) => receiver.listen(0, '127.0.0.1', resolve))
    try {
      const port = (receiver.address() as AddressInfo).port
      const hook = await rest<{ id: string; secret: string }>(hooksKey, 'POST', '/v1/webhooks', {
        url: `http://127.0.0.1:${port}/hooks/pgsched?token=abc123`,
        events: ['succeeded', 'failed'],
      })
      const ok = await submit(hooksKey, { type: 'switch.fail', payload: { failWhile: join(flags, 'never') } })
      const failed = await submit(hooksKey, { type: 'switch.fail', maxAttempts: 1, payload: { failWhile: flags, message: 'refused on purpose' } })
      type Delivery = { eventType: string; ok: boolean; statusCode: number | null; jobId: string }
      const deliveries = () => rest<{ items: Delivery[] }>(hooksKey, 'GET', `/v1/webhooks/${hook.id}/deliveries`)
      await waitFor(async () => (await deliveries()).items.length >= 2, { what: 'both events delivered', timeoutMs: 30_000 })

      // an operator key lists every tenant's subscriptions, each with its tenant; a tenant's key has no such column
      const operatorPage = await signedIn(operatorKey)
      await operatorPage.goto(`${api.url}/ui/#/webhooks`)
      const listed = operatorPage.locator(`tr[data-webhook-id="${hook.id}"]`)
      await listed.waitFor()
      expect(await operatorPage.locator('thead th').allTextContents()).toEqual(['URL', 'Tenant', 'Events', 'Queue', 'Status', 'Created'])
      expect(await listed.locator('td').nth(1).textContent()).toBe('umbrella')
      await operatorPage.context().close()

      const page = await signedIn(hooksKey)
      await page.getByRole('link', { name: 'Webhooks' }).click()
      await page.getByRole('heading', { name: 'Webhooks' }).waitFor()
      const row = page.locator(`tr[data-webhook-id="${hook.id}"]`)
      await row.waitFor()
      expect(await page.locator('thead th').allTextContents()).toEqual(['URL', 'Events', 'Queue', 'Status', 'Created'])
      // the URL without its query, as the API's errors show it; the events; the queue
      await expect(row.locator('td').first().textContent()).resolves.toBe(`http://127.0.0.1:${port}/hooks/pgsched?…`)
      expect(await page.locator('main').textContent()).not.toContain('abc123')
      await expect(row.textContent()).resolves.toContain('succeeded, failed')
      await expect(row.textContent()).resolves.toContain('default')

      await row.getByRole('link').click()
      await page.getByRole('heading', { name: /^Webhook http/ }).waitFor()
      const good = page.locator('tr[data-ok="true"]')
      const bad = page.locator('tr[data-ok="false"]')
      await good.first().waitFor()
      await bad.first().waitFor()
      await expect(good.first().locator('.badge').textContent()).resolves.toBe('delivered')
      await expect(good.first().textContent()).resolves.toContain('succeeded')
      await expect(good.first().textContent()).resolves.toContain('200')
      await expect(bad.first().locator('.badge-failed').textContent()).resolves.toBe('failed')
      await expect(bad.first().textContent()).resolves.toContain('422')
      await expect(bad.first().textContent()).resolves.toContain('(no retry)')
      // the delivery job is linked to its page
      const badJob = (await deliveries()).items.find((d) => !d.ok)?.jobId
      await expect(bad.first().getByRole('link').getAttribute('href')).resolves.toBe(`#/jobs/${badJob}`)
      expect(await page.getByRole('button', { name: 'Older' }).isDisabled()).toBe(true)
      expect([ok.id, failed.id]).toHaveLength(2)

      // a refused URL: the API's message next to the field, nothing changed
      await page.getByLabel('New URL').fill('http://10.1.2.3/hooks')
      await page.getByRole('button', { name: 'Save' }).click()
      await expect(page.locator('#webhook-url-error').textContent()).resolves.toContain('SCHEDULER_HTTP_ALLOW')
      // only succeeded events from now on
      await page.getByLabel('New URL').fill('')
      await page.getByRole('checkbox', { name: 'failed' }).uncheck()
      await page.getByRole('button', { name: 'Save' }).click()
      await waitFor(async () => (await page.locator('[data-webhook-events]').textContent()) === 'succeeded', { what: 'the events saved' })
      const saved = await rest<{ events: string[]; url: string }>(hooksKey, 'GET', `/v1/webhooks/${hook.id}`)
      expect(saved).toMatchObject({ events: ['succeeded'], url: `http://127.0.0.1:${port}/hooks/pgsched?token=abc123` })

      // a new secret: too short is refused on the page; a long enough one signs the next delivery
      const secret = 'a-new-secret-of-the-ui-42'
      await page.getByLabel('New secret').fill('short')
      await page.getByRole('button', { name: 'Replace secret' }).click()
      await expect(page.locator('#webhook-secret-error').textContent()).resolves.toContain('at least 16 characters')
      await page.getByLabel('New secret').fill(secret)
      await page.getByRole('button', { name: 'Replace secret' }).click()
      await waitFor(async () => (await page.getByRole('status').filter({ hasText: 'Secret replaced' }).count()) > 0, { what: 'the secret replaced' })
      expect(await page.getByLabel('New secret').inputValue()).toBe('')
      expect(await page.locator('body').textContent()).not.toContain(hook.secret)
      const before = received.length
      await submit(hooksKey, { type: 'switch.fail', payload: { failWhile: join(flags, 'never') } })
      await submit(hooksKey, { type: 'switch.fail', maxAttempts: 1, payload: { failWhile: flags, message: 'not sent any more' } })
      const next = await waitFor(() => received.slice(before).find((r) => r.type === 'succeeded'), { what: 'a delivery after the rotation', timeoutMs: 30_000 })
      expect(verifyWebhookSignature({ secret, body: next.body, header: next.headers['pgsched-signature'] })).toBe(true)
      // the log shows it, newest first, without a reload
      await waitFor(async () => (await good.count()) >= 2, { what: 'the new delivery in the log', timeoutMs: 15_000 })

      // delete, after a confirmation
      const dialogs: string[] = []
      page.once('dialog', (dialog) => {
        dialogs.push(dialog.message())
        void dialog.accept()
      })
      await page.getByRole('button', { name: 'Delete this webhook' }).click()
      await page.waitForURL(/#\/webhooks$/)
      await page.getByText('No webhook subscriptions.').waitFor()
      expect(dialogs[0]).toContain('Delete this webhook?')
      expect((await rest<{ items: unknown[] }>(hooksKey, 'GET', '/v1/webhooks')).items).toEqual([])
      expect(received.filter((r) => r.type === 'failed').length).toBe(1)
      await page.context().close()
    } finally {
      await new Promise<void>((resolve) => receiver.close(() => resolve()))
    }
  })

  it('shows a webhook disabled because its deliveries kept failing, and why, enables it again, and shows a 409 on a new URL by the URL field', async () => {
    const key = (await createApiKey(t.db, { tenant: 'wayne' })).key
    const down = await rest<{ id: string }>(key, 'POST', '/v1/webhooks', { url: 'https://hooks.example.com/wayne' })
    const other = await rest<{ id: string }>(key, 'POST', '/v1/webhooks', { url: 'https://hooks.example.com/other' })
    // a failed attempt recorded as a worker records it, with a threshold it passes at once
    await webhookDeliveryInsert(t.db, {
      subscriptionId: down.id,
      eventId: '1-0',
      eventType: 'succeeded',
      jobId: uuidV7(),
      attempt: 12,
      statusCode: 503,
      ok: false,
      error: 'POST https://hooks.example.com/wayne answered 503',
      durationMs: 4,
      willRetry: false,
      disable: { afterMs: 0, afterFailures: 1 },
    })
    const page = await signedIn(key)
    await page.getByRole('link', { name: 'Webhooks' }).click()
    await page.getByRole('heading', { name: 'Webhooks' }).waitFor()
    const downRow = page.locator(`tr[data-webhook-id="${down.id}"]`)
    await downRow.waitFor()
    await expect(downRow.locator('[data-webhook-status]').textContent()).resolves.toBe('disabled')
    await expect(page.locator(`tr[data-webhook-id="${other.id}"] [data-webhook-status]`).textContent()).resolves.toBe('enabled')

    await downRow.getByRole('link').click()
    await page.getByRole('heading', { name: /^Webhook https/ }).waitFor()
    await expect(page.locator('[data-webhook-disabled-reason]').textContent()).resolves.toContain('failed attempts since')
    await expect(page.locator('[data-webhook-disabled-reason]').textContent()).resolves.toContain('answered 503')
    await page.getByRole('button', { name: 'Enable this webhook' }).click()
    await waitFor(async () => (await page.locator('dd[data-webhook-status]').getAttribute('data-webhook-status')) === 'enabled', {
      what: 'the webhook enabled',
    })
    expect(await page.locator('[data-webhook-disabled-reason]').count()).toBe(0)
    expect(await rest<{ enabled: boolean }>(key, 'GET', `/v1/webhooks/${down.id}`)).toMatchObject({ enabled: true, disabledReason: null })
    await page.getByRole('button', { name: 'Disable this webhook' }).waitFor()

    // the other moved onto the same receiver (host case aside): the 409's message by the URL field
    await page.goto(`${api.url}/ui/#/webhooks/${other.id}`)
    await page.locator(`section[data-webhook-id="${other.id}"]`).waitFor()
    await page.getByLabel('New URL').fill('https://HOOKS.example.com/wayne')
    await page.getByRole('button', { name: 'Save' }).click()
    await expect(page.locator('#webhook-url-error').textContent()).resolves.toBe(
      `webhook ${down.id} already sends this tenant's events to this url in queue default`,
    )
    expect(await page.getByLabel('New URL').getAttribute('aria-invalid')).toBe('true')
    expect(await page.locator('#webhook-form-error').count()).toBe(0)
    expect(await rest<{ url: string }>(key, 'GET', `/v1/webhooks/${other.id}`)).toMatchObject({ url: 'https://hooks.example.com/other' })
    await page.context().close()
  })

  it('broke no rule of its Content-Security-Policy on any page above', () => {
    expect(cspViolations).toEqual([])
  })
})
