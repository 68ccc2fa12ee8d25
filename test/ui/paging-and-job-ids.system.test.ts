/**
 * The dashboard (Chromium through playwright-core, a real `scheduler api`): the Keys page starts at
 * its first page whenever its tenant filter changes (it came back to an earlier walk's page), and a
 * job page for an id that is no UUID asks the API nothing: for `bulk` or `export`, the last segment
 * of a static route, it called that route (#/jobs/export downloaded the tenant's whole export and
 * threw; #/jobs/bulk read the 405 as "not available on this server").
 */
import { sql } from 'kysely'
import type { Browser, Page } from 'playwright-core'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { createApiKey } from '../../src/api/auth.ts'
import { useTestDb } from '../db.ts'
import { freePort, startApiProcess, type ApiProcess } from '../faults/api-process.ts'
import { waitFor } from '../wait-for.ts'
import { launchBrowser, openPage, signIn, stopApi } from './stack.ts'

const t = useTestDb({ truncate: false })
let api: ApiProcess
let browser: Browser
let operatorKey: string
let acmeKey: string

async function signedIn(key: string): Promise<{ page: Page; errors: string[]; requests: string[] }> {
  const { page } = await openPage(browser, 1280)
  const errors: string[] = []
  const requests: string[] = []
  page.on('pageerror', (e) => errors.push(e.message))
  page.on('request', (r) => {
    if (r.url().includes('/v1/')) requests.push(`${r.method()} ${new URL(r.url()).pathname}`)
  })
  await signIn(page, api.url, key)
  return { page, errors, requests }
}

beforeAll(async () => {
  operatorKey = (await createApiKey(t.db, { tenant: 'ops', operator: true })).key
  acmeKey = (await createApiKey(t.db, { tenant: 'acme' })).key
  // 130 more keys: two pages of the Keys page (100 a page)
  await sql`insert into pgsched.api_keys (tenant, name, key_prefix, key_hash)
            select case when g % 5 = 0 then 'beta' else 'acme' end, 'k' || g, 'psk_k' || lpad(g::text, 7, '0'), sha256(('k' || g)::bytea)
              from generate_series(1, 130) g`.execute(t.db)
  api = await startApiProcess({ databaseUrl: t.url, port: await freePort() })
  browser = await launchBrowser()
  // a job of acme's, so its export is not empty
  const res = await fetch(`${api.url}/v1/jobs`, {
    method: 'POST',
    headers: { authorization: `Bearer ${acmeKey}`, 'content-type': 'application/json' },
    body: JSON.stringify({ type: 'nobody.runs.this' }),
  })
  expect(res.status).toBeLessThan(300)
})

afterAll(async () => {
  await browser?.close()
  await stopApi(api)
})

describe('dashboard: key pages and job ids', () => {
  it("the Keys page starts at page 1 when its tenant filter changes, back to every tenant's keys too", async () => {
    const { page } = await signedIn(operatorKey)
    await page.goto(`${api.url}/ui/#/keys`)
    const pager = page.getByRole('navigation', { name: 'Key pages' })
    await pager.waitFor()
    await page.getByRole('button', { name: 'Later' }).click()
    await waitFor(async () => (await pager.textContent())?.includes('Page 2'), { what: 'page 2' })
    // narrow to acme: page 1 of acme's keys
    await page.getByRole('combobox', { name: 'Keys of tenant' }).fill('acme')
    await page.getByRole('button', { name: 'Show' }).click()
    await page.getByRole('region', { name: 'API keys of tenant acme' }).waitFor()
    expect(await pager.textContent()).toContain('Page 1')
    // and back to every tenant's keys: a new filter, so page 1 again (it shows page 2, the old walk)
    await page.getByRole('link', { name: "Every tenant's keys" }).click()
    await page.getByRole('region', { name: 'API keys', exact: true }).waitFor()
    await waitFor(async () => (await pager.textContent())?.includes('Page 1'), { what: "page 1 of every tenant's keys" })
    expect(await page.getByRole('button', { name: 'Earlier' }).isDisabled()).toBe(true)
  })

  it('#/jobs/bulk says the id is no job id, not that the server lacks the operation', async () => {
    const { page, requests } = await signedIn(acmeKey)
    await page.goto(`${api.url}/ui/#/jobs/bulk`)
    await page.locator('[data-not-a-job-id]').waitFor()
    const text = await page.locator('main').innerText()
    expect(text).toContain('“bulk” is not a job id')
    expect(requests.filter((r) => r.includes('/v1/jobs/bulk'))).toEqual([])
    // the API answered 405 (GET is not allowed on /v1/jobs/bulk); the page reads it as a missing route "answered 404"
    expect(text).not.toContain('not available on this server')
    expect(text).not.toContain('404')
  })

  it('#/jobs/export neither downloads the export nor throws', async () => {
    const { page, errors, requests } = await signedIn(acmeKey)
    await page.goto(`${api.url}/ui/#/jobs/export`)
    await page.locator('[data-not-a-job-id]').waitFor()
    expect(requests).not.toContain('GET /v1/jobs/export')
    expect(errors).toEqual([])
  })
})
