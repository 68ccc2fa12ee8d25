/**
 * The operator dashboard at /ui: the single-page app built by scripts/build-ui.mjs into
 * dist/ui (index.html, app.js, app.css), served as static files by the API itself. The page
 * signs in with an API key and calls /v1 like any client, so it needs no session of its own.
 * Every /ui response carries a Content-Security-Policy without inline script or style: all
 * the page runs is the bundled app.js from this origin, and it connects to this origin only.
 * A package built without the dashboard (dist/ui missing) answers /ui with a 404 saying so.
 */
import { existsSync } from 'node:fs'
import { join } from 'node:path'
import fastifyStatic from '@fastify/static'
import type { FastifyInstance } from 'fastify'
import { packageRoot } from '../lib/package-root.ts'
import { sendError } from './error-handler.ts'

/** Where the built dashboard lives unless a caller says otherwise. */
export function dashboardDirDefault(): string {
  return join(packageRoot(), 'dist', 'ui')
}

/** The policy of every /ui response: this origin's script, style and API only; no framing. */
export const DASHBOARD_CSP = [
  "default-src 'none'",
  "script-src 'self'",
  "style-src 'self'",
  "img-src 'self' data:",
  "font-src 'self'",
  "connect-src 'self'",
  "base-uri 'none'",
  "form-action 'self'",
  "frame-ancestors 'none'",
].join('; ')

/** Serves the dashboard from `dir` under /ui/ (and redirects /ui there). */
export async function registerDashboard(app: FastifyInstance, dir: string): Promise<void> {
  app.addHook('onSend', async (request, reply) => {
    if (request.url === '/ui' || request.url.startsWith('/ui/')) {
      reply.header('content-security-policy', DASHBOARD_CSP)
      reply.header('x-content-type-options', 'nosniff')
      reply.header('referrer-policy', 'no-referrer')
      reply.header('x-frame-options', 'DENY')
    }
  })
  app.get('/ui', { schema: { hide: true } }, async (_request, reply) => reply.redirect('/ui/'))
  if (!existsSync(join(dir, 'index.html'))) {
    app.get('/ui/*', { schema: { hide: true } }, async (_request, reply) =>
      sendError(reply, 404, 'the dashboard is not built into this installation; run npm run build'),
    )
    return
  }
  await app.register(fastifyStatic, {
    root: dir,
    prefix: '/ui/',
    index: ['index.html'],
    // The app's files change only with a new build: revalidate rather than trust a cached copy.
    cacheControl: true,
    maxAge: 0,
    schemaHide: true,
  })
}
