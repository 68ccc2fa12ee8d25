/**
 * HTTP conventions Fastify leaves to the application:
 * - a known path with a method it does not serve answers 405 with `Allow`
 *   (Fastify answers 404): `routeMethods` indexes every route as it is added;
 * - a body with a Content-Encoding other than identity answers 415 with
 *   `Accept-Encoding: identity` (RFC 9110 §15.5.16) before it is read;
 * - `Expect: 100-continue` with a Content-Length over the body limit gets its
 *   413 without `100 Continue` first (Node answers 100 to every such request
 *   unless the server handles `checkContinue`), so the client never sends it;
 * - a request Node's HTTP parser refuses is answered in the API's error form,
 *   and logged without its raw bytes.
 */
import { STATUS_CODES } from 'node:http'
import type { Duplex } from 'node:stream'
import type { FastifyInstance } from 'fastify'
import { sendError } from './error-handler.ts'

/** The methods served at a concrete path; empty when no route matches it. */
export type RouteMethods = (path: string) => string[]

/**
 * Indexes the routes of `app` (call before any route is added). A path that a static route names
 * (`/v1/jobs/bulk`) is that route's, as Fastify routes it, not also a parametric route's that would
 * match it (`/v1/jobs/:id`): its Allow lists the static route's methods only, and a request with
 * another method, which Fastify would hand to the parametric route (answering for a job id "bulk"),
 * gets its 405.
 */
export function indexRouteMethods(app: FastifyInstance): RouteMethods {
  const routes: Array<{ pattern: RegExp; methods: string[]; parametric: boolean }> = []
  app.addHook('onRoute', (route) => {
    const parts = route.url.split('/')
    const source = parts.map((part) => (part.startsWith(':') ? '[^/]+' : part === '*' ? '.*' : part.replace(/[.*+?^${}()|[\]\\]/g, '\\$&'))).join('/')
    const methods = Array.isArray(route.method) ? route.method : [route.method]
    routes.push({ pattern: new RegExp(`^${source}$`), methods, parametric: parts.some((p) => p.startsWith(':') || p === '*') })
  })
  const methodsAt = (path: string): string[] => {
    const matching = routes.filter((r) => r.pattern.test(path))
    const named = matching.some((r) => !r.parametric) ? matching.filter((r) => !r.parametric) : matching
    const allowed = new Set<string>()
    for (const r of named) for (const m of r.methods) allowed.add(m)
    if (allowed.has('GET')) allowed.add('HEAD')
    return [...allowed].sort()
  }
  app.addHook('onRequest', async (request, reply) => {
    const url = request.routeOptions.url
    if (url === undefined || !url.includes(':')) return
    const path = request.url.split('?')[0] ?? request.url
    if (!routes.some((r) => !r.parametric && r.pattern.test(path))) return
    const allowed = methodsAt(path)
    if (allowed.includes(request.method)) return
    reply.header('allow', allowed.join(', '))
    return sendError(reply, 405, `${request.method} is not allowed on ${path}; allowed: ${allowed.join(', ')}`)
  })
  return methodsAt
}

/** Refuses request bodies with a Content-Encoding other than identity (415), before they are read. */
export function refuseContentEncodings(app: FastifyInstance): void {
  app.addHook('onRequest', async (request, reply) => {
    const encoding = request.headers['content-encoding']
    if (encoding === undefined || encoding.trim().toLowerCase() === 'identity') return
    reply.header('accept-encoding', 'identity')
    return sendError(reply, 415, `Content-Encoding "${encoding}" is not supported; send the body uncompressed`)
  })
}

/** Answers `Expect: 100-continue` with 100 only for a body within `bodyLimitBytes`; larger ones get their 413 at once. */
export function continueWithinLimit(app: FastifyInstance, bodyLimitBytes: number): void {
  app.server.on('checkContinue', (req, res) => {
    const length = Number(req.headers['content-length'])
    if (!(length > bodyLimitBytes)) res.writeContinue()
    app.server.emit('request', req, res)
  })
}

/**
 * Answers a request Node's HTTP parser refused (a bad header, headers over its size limit, a request
 * that took too long to arrive) as Fastify's own handler does, in this API's error form, and logs only
 * the parser's code and reason: the error carries the request's raw bytes (`rawPacket`), which hold
 * its Authorization header and so an API key.
 */
export function answerClientError(this: FastifyInstance, err: Error & { code?: string; reason?: string }, socket: Duplex): void {
  // a connection reset: nothing to answer
  if (err.code === 'ECONNRESET' || socket.destroyed) return
  const [statusCode, message] =
    err.code === 'ERR_HTTP_REQUEST_TIMEOUT'
      ? [408, 'the request did not arrive in time']
      : err.code === 'HPE_HEADER_OVERFLOW'
        ? [431, 'the request headers are larger than the server accepts (16 KB)']
        : [400, 'the request is not valid HTTP/1.1']
  this.log.debug({ code: err.code, reason: err.reason }, 'client error')
  if (socket.writable) {
    const body = JSON.stringify({ statusCode, error: STATUS_CODES[statusCode], message })
    socket.write(
      `HTTP/1.1 ${statusCode} ${STATUS_CODES[statusCode]}\r\nContent-Length: ${Buffer.byteLength(body)}\r\nContent-Type: application/json; charset=utf-8\r\nConnection: close\r\n\r\n${body}`,
    )
  }
  socket.destroy()
}
