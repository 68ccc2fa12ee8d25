/**
 * The dashboard's files at /ui, as the API serves them (built into dist/ui by `npm run build`,
 * which `npm test` runs first): a policy that allows no inline script or style on every /ui
 * response, the page and its bundle, and a plain 404 where the dashboard was not built.
 */
import { mkdtemp } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { buildApp, type App } from '../../src/api/app.ts'
import { DASHBOARD_CSP } from '../../src/api/dashboard.ts'
import { useTestDb } from '../db.ts'
import { useTestApi } from './helpers.ts'

const t = useTestDb()
const api = useTestApi(t)

describe('GET /ui', () => {
  it('redirects /ui to the page at /ui/', async () => {
    const res = await api.app.inject({ method: 'GET', url: '/ui' })
    expect(res.statusCode).toBe(302)
    expect(res.headers.location).toBe('/ui/')
  })

  it('serves the page with a Content-Security-Policy that allows no inline script or style', async () => {
    const res = await api.app.inject({ method: 'GET', url: '/ui/' })
    expect(res.statusCode).toBe(200)
    expect(res.headers['content-type']).toMatch(/^text\/html/)
    const csp = String(res.headers['content-security-policy'])
    expect(csp).toBe(DASHBOARD_CSP)
    expect(csp).toContain("script-src 'self'")
    expect(csp).not.toContain('unsafe-inline')
    expect(csp).not.toContain('unsafe-eval')
    expect(res.headers['x-content-type-options']).toBe('nosniff')
    expect(res.headers['x-frame-options']).toBe('DENY')
    // Every script is a file of this origin: none written inline in the page.
    const scripts = [...res.body.matchAll(/<script\b[^>]*>([\s\S]*?)<\/script>/g)]
    expect(scripts.length).toBeGreaterThan(0)
    for (const [tag, body] of scripts) {
      expect(tag).toMatch(/\ssrc="[^":]+"/)
      expect(body?.trim()).toBe('')
    }
    expect(res.body).not.toMatch(/<style\b|\sstyle=|\son[a-z]+=/i)
  })

  it('serves the bundled script and style sheet, under the same policy', async () => {
    for (const [file, type] of [
      ['app.js', /javascript/],
      ['app.css', /text\/css/],
    ] as const) {
      const res = await api.app.inject({ method: 'GET', url: `/ui/${file}` })
      expect(res.statusCode, file).toBe(200)
      expect(res.headers['content-type']).toMatch(type)
      expect(res.headers['content-security-policy']).toBe(DASHBOARD_CSP)
    }
  })

  it('answers 404 for a file it does not have (405 would say GET is not allowed there), and never serves outside its folder', async () => {
    for (const url of ['/ui/nonexistent.js', '/ui/..%2f..%2fetc%2fpasswd']) {
      const res = await api.app.inject({ method: 'GET', url })
      expect(res.statusCode, url).toBe(404)
      expect(res.body, url).not.toContain('root:')
    }
    expect((await api.app.inject({ method: 'DELETE', url: '/ui/app.js' })).statusCode).toBe(405)
  })

  it('needs no API key for the page itself (the page asks for one), while /v1 still does', async () => {
    expect((await api.app.inject({ method: 'GET', url: '/ui/' })).statusCode).toBe(200)
    expect((await api.app.inject({ method: 'GET', url: '/v1/jobs' })).statusCode).toBe(401)
  })
})

describe('GET /ui without a built dashboard', () => {
  let app: App
  beforeAll(async () => {
    app = buildApp({ db: t.db, log: t.log, dashboardDir: await mkdtemp(join(tmpdir(), 'pgsched-no-ui-')) })
    await app.ready()
  })
  afterAll(async () => app?.close())

  it('answers 404 saying the dashboard is not built', async () => {
    const res = await app.inject({ method: 'GET', url: '/ui/' })
    expect(res.statusCode).toBe(404)
    expect(res.json().message).toContain('dashboard is not built')
  })
})
