/**
 * GET /v1/events: the tenant's job and execution events as Server-Sent Events (an operator key's
 * stream carries every tenant's). Each event is `id: <batch>-<index>` and `data: <Event JSON>`; a reconnect
 * with Last-Event-ID (or ?after=) resumes after that event, without gaps within the event
 * retention. A comment line (`: open`) says the stream is open (capture has started); `: ping`
 * lines keep idle connections alive. Streams end when the client leaves or the API closes.
 */
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import type { EventType } from '../../core/events.ts'
import { EVENT_ID_PATTERN } from '../../core/events.ts'
import { ValidationError } from '../../errors.ts'
import { CommonErrors, REQUEST_ID_HEADER, StreamLimitResponse } from '../schemas/error.ts'
import { EventStreamQuery } from '../schemas/event.ts'
import { watchApiKey, type RouteDeps } from './deps.ts'

/** Idle streams get a comment this often, so proxies and clients do not time them out. */
const PING_MS = 15_000
const LAST_EVENT_ID = new RegExp(EVENT_ID_PATTERN)
/** The headers of a stream (and of its HEAD). */
const STREAM_HEADERS = {
  'content-type': 'text/event-stream; charset=utf-8',
  'cache-control': 'no-cache',
  connection: 'keep-alive',
  'x-accel-buffering': 'no',
}

export const eventRoutes: FastifyPluginAsyncTypebox<RouteDeps> = async (app, deps) => {
  const open = new Set<AbortController>()
  app.addHook('preClose', async () => {
    for (const c of open) c.abort()
  })

  app.get(
    '/events',
    {
      schema: {
        operationId: 'streamEvents',
        tags: ['events'],
        summary: 'Stream job and execution events (Server-Sent Events)',
        description:
          'text/event-stream of the tenant’s events (an operator key: every tenant’s), filtered by job, job type, queue and event types. ' +
          'Each message is `id: <event id>` and `data: <Event as JSON>`; ids increase along the stream. Reconnect with the `Last-Event-ID` header ' +
          '(or `after`) to get every event after that one, once and in order, within the event retention (SCHEDULER_EVENTS_RETENTION_MS, ' +
          'default 1 hour). Without it the stream starts with the events after it opened (signalled by a `: open` comment).',
        security: [{ apiKey: [] }],
        querystring: EventStreamQuery,
        response: {
          200: {
            description: 'An endless text/event-stream; each `data:` is an Event.',
            headers: REQUEST_ID_HEADER,
            content: { 'text/event-stream': { schema: { $ref: 'Event#' } } },
          },
          ...CommonErrors,
          429: StreamLimitResponse,
        },
      },
    },
    async (request, reply) => {
      deps.clientFor(request) // refuses a request without an API key
      const identity = request.identity
      if (!identity) throw new Error('a request without an identity passed clientFor')
      // the key's tenant; an operator key's stream carries every tenant's events
      const tenant = identity.operator ? null : identity.tenant
      const q = request.query
      const header = request.headers['last-event-id']
      let after = q.after
      const fromHeader = typeof header === 'string' && header.trim() !== ''
      if (fromHeader) {
        // a resume from an id no page can read would start from now, silently skipping what was missed
        if (!LAST_EVENT_ID.test(header.trim())) {
          throw new ValidationError(`Last-Event-ID: not an event id: ${JSON.stringify(header)} (ids look like 42-0: <batch>-<index>)`)
        }
        after = header.trim()
      }
      // HEAD (which Fastify routes here): the stream's headers and no body, at once and without a slot;
      // the stream itself would never end the headers of an answer that has no body
      if (request.method === 'HEAD') return reply.code(200).headers(STREAM_HEADERS).send()
      // a slot of the tenant's, given back when the stream ends (or fails to open)
      const release = deps.streams.take(tenant, 'GET /v1/events')
      const controller = new AbortController()
      const res = reply.raw
      // before any await: a client that leaves while the stream opens ends it too
      res.on('close', () => controller.abort())
      res.once('close', release)
      open.add(controller)
      let pages: AsyncGenerator<string[], void, undefined>
      try {
        pages = await deps.eventMessages(tenant, {
          jobId: q.jobId,
          type: q.type,
          queue: q.queue,
          events: q.events?.split(',') as EventType[] | undefined,
          after,
          signal: controller.signal,
          retentionMs: deps.eventsRetentionMs,
        })
      } catch (err: unknown) {
        open.delete(controller)
        release()
        // a position refused is named as the client sent it
        if (fromHeader && err instanceof ValidationError && err.message.startsWith('after: ')) {
          throw new ValidationError(`Last-Event-ID: ${err.message.slice('after: '.length)}`)
        }
        throw err
      }
      reply.hijack()
      if (controller.signal.aborted || res.destroyed || request.raw.socket?.destroyed === true) {
        open.delete(controller)
        await pages.return()
        res.end()
        request.log.debug('event stream ended (the client left while it opened)')
        return
      }
      res.writeHead(200, { ...STREAM_HEADERS, 'x-request-id': request.id })
      request.raw.on('close', () => controller.abort())
      // The events of one page come without a pause between them: corked until the next turn of the
      // event loop, they leave in one write to the socket instead of one per event.
      let corked = false
      const uncork = () => {
        corked = false
        res.uncork()
      }
      // a page's texts all go in before waiting for the socket to drain (once, if it must)
      const write = async (texts: readonly string[]) => {
        if (!corked) {
          corked = true
          res.cork()
          setImmediate(uncork)
        }
        let room = true
        for (const text of texts) room = res.write(text)
        if (!room && !controller.signal.aborted) {
          await new Promise<void>((resolve) => {
            const done = () => {
              res.off('drain', done)
              controller.signal.removeEventListener('abort', done)
              resolve()
            }
            res.on('drain', done)
            controller.signal.addEventListener('abort', done, { once: true })
          })
        }
      }
      let ping: NodeJS.Timeout | undefined
      let stopKeyCheck: (() => void) | undefined
      try {
        ping = setInterval(() => res.write(': ping\n\n'), PING_MS)
        // a key revoked (or deleted) while its stream is open ends the stream: its reconnect is then a 401
        stopKeyCheck = watchApiKey(deps, request, () => {
          if (controller.signal.aborted) return
          request.log.info({ keyId: identity.keyId }, 'event stream ended: its API key is no longer valid')
          controller.abort()
        })
        await write([': open\n\n'])
        // each page's messages come as a few texts of about 32 kB (written from the batches' arrays),
        // corked together: one write to the socket per page
        for await (const texts of pages as AsyncIterable<string[]>) {
          if (controller.signal.aborted) break
          await write(texts)
        }
      } catch (err: unknown) {
        request.log.warn({ err }, 'event stream failed')
      } finally {
        clearInterval(ping)
        stopKeyCheck?.()
        open.delete(controller)
        release()
        controller.abort()
        res.end()
        request.log.debug('event stream ended')
        deps.streamEnded(request, reply)
      }
    },
  )
}
