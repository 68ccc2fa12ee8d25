/**
 * /v1/executions/{id}/output: streams the output a worker stored for an
 * execution, from the store its `output_uri` names (Postgres chunks, S3 part
 * objects, or a file:// path on storage this API can read; api/output-readers.ts).
 * Without `follow`, what is stored so far; 404 when there is none or a file
 * is gone. With `follow=true` and a pending or running execution, the response
 * stays open: it waits for the attempt to start if need be, sends each chunk
 * as it is stored (polling every FOLLOW_POLL_MS) and ends once that attempt
 * has ended and everything it stored was sent (a worker stores all output
 * before it writes the outcome). Closing the API ends open follows.
 */
import { Readable } from 'node:stream'
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import { Type } from '@fastify/type-provider-typebox'
import type { Client } from '../../client.ts'
import type { Execution } from '../../core/job.ts'
import { type OutputLocation, outputLocationOfAttempt, outputUriAttempt, parseOutputUri } from '../../core/output-uri.ts'
import { NotFoundError } from '../../errors.ts'
import { abortableSleep } from '../../lib/service.ts'
import { OutputGoneError, type OutputReader, type OutputReaders } from '../output-readers.ts'
import { IdParams } from '../schemas/common.ts'
import { CommonErrors, ErrorResponses, REQUEST_ID_HEADER, StreamLimitResponse } from '../schemas/error.ts'
import { watchApiKey, type RouteDeps } from './deps.ts'
import { clientForExecution } from './job-operations.ts'

/** What the output route needs besides the client. */
export interface OutputRouteDeps {
  readers: OutputReaders
  /** Aborted when the API closes: open follows end. */
  closing: AbortSignal
  /** How often a follow looks for new output and for the attempt's end. */
  followPollMs: number
}

/** Between a store's flushes (250 ms for Postgres): new output shows within about half a second. */
export const FOLLOW_POLL_MS = 300

const OutputQuery = Type.Object(
  {
    follow: Type.Optional(
      Type.Boolean({
        default: false,
        description:
          'Keep the response open while the execution is pending or running: output is sent as the worker stores it, ' +
          'and the response ends when that attempt ends. Without it, the output stored so far.',
      }),
    ),
    attempt: Type.Optional(
      Type.Integer({
        minimum: 1,
        maximum: 1000,
        'x-expected': 'an attempt number from 1 to 1000',
        description:
          "The output of this attempt (as in the execution's `attempts`); default the latest attempt's. An earlier attempt's is read " +
          'from the store the latest one used; 404 when that attempt stored none.',
      }),
    ),
  },
  { additionalProperties: false },
)

const live = (e: Execution) => e.state === 'pending' || e.state === 'running'

/** A reader for `location`; null if its file is gone. */
async function openReader(readers: OutputReaders, location: OutputLocation): Promise<OutputReader | null> {
  try {
    return await readers.open(location)
  } catch (err: unknown) {
    if (err instanceof OutputGoneError) return null
    throw err
  }
}

/** Everything the reader has now. */
async function* readAll(reader: OutputReader): AsyncGenerator<Buffer> {
  try {
    yield* drain(reader)
  } finally {
    await reader.close()
  }
}

interface FollowParams {
  client: Client
  execution: Execution
  deps: OutputRouteDeps
  /** Called once the response is being sent (Fastify has set its headers). */
  started: () => void
  /** Aborted when the client hangs up or the API closes: the follow ends at once. */
  stop: AbortSignal
}

/** See the file header: the attempt running now, or the next one of a pending execution. */
async function* follow({ client, execution, deps, started, stop }: FollowParams): AsyncGenerator<Buffer> {
  started()
  let e = execution
  const attempt = e.state === 'running' ? e.attempt : e.attempt + 1
  let uri: string | null = null
  let reader: OutputReader | null = null
  try {
    for (;;) {
      // Decided before reading: whatever the attempt stored before it ended is read below.
      const ended = !live(e) || e.attempt > attempt || (e.attempt === attempt && e.state !== 'running')
      const location = parseOutputUri(e.outputUri)
      if (location && e.outputUri !== uri && (outputUriAttempt(location) ?? attempt) === attempt) {
        await reader?.close()
        reader = await openReader(deps.readers, location)
        uri = e.outputUri
      }
      if (reader) yield* drain(reader)
      if (ended || stop.aborted) return
      await abortableSleep(deps.followPollMs, stop)
      if (stop.aborted) return
      try {
        e = await client.viewExecution(e.id)
      } catch (err: unknown) {
        if (err instanceof NotFoundError) return
        throw err
      }
    }
  } finally {
    await reader?.close()
  }
}

async function* drain(reader: OutputReader): AsyncGenerator<Buffer> {
  for (;;) {
    const chunks = await reader.next()
    if (chunks.length === 0) return
    yield* chunks
  }
}

/** Registers the /executions routes (mounted under /v1 behind authentication). */
export const executionRoutes: FastifyPluginAsyncTypebox<RouteDeps> = async (app, deps) => {
  app.get(
    '/executions/:id/output',
    {
      schema: {
        operationId: 'viewExecutionOutput',
        tags: ['executions'],
        summary: 'Stored output of an execution',
        description:
          'Streams what the handler wrote to its output stream (`text/plain`), from the store the worker used (PostgreSQL, S3, or a file on ' +
          "this API's host). With `follow=true` it streams while the handler is still writing, until the attempt ends.",
        security: [{ apiKey: [] }],
        params: IdParams,
        querystring: OutputQuery,
        response: {
          200: {
            description: 'The stored output (with `follow=true`, sent as it is stored).',
            headers: REQUEST_ID_HEADER,
            content: {
              'text/plain': { schema: { type: 'string' } },
              'application/octet-stream': { schema: { type: 'string', format: 'binary' } },
            },
          },
          ...CommonErrors,
          404: ErrorResponses[404],
          429: StreamLimitResponse,
        },
      },
    },
    async (request, reply) => {
      const id = request.params.id
      const client = await clientForExecution(deps, request, id)
      const execution = await client.viewExecution(id)
      const latest = parseOutputUri(execution.outputUri)
      const asked = request.query.attempt
      if (asked !== undefined && asked > execution.attempt) throw new NotFoundError(`execution ${id} has had ${execution.attempt} attempt(s), not ${asked}`)
      // output_uri names the latest attempt that stored output, which need not be the latest attempt:
      // another one is read where that name says, its attempt changed
      const earlier = asked !== undefined && (latest === null || outputUriAttempt(latest) !== asked)
      const location = earlier ? outputLocationOfAttempt(id, latest, asked) : latest
      let body: AsyncGenerator<Buffer>
      let text = true
      if (request.query.follow === true && !earlier && live(execution)) {
        // The status and headers go out at once, not with the first output (which may be a while).
        // A client that hangs up ends the follow (a generator between yields is not ended by the stream).
        const identity = request.identity
        const release = deps.streams.take(identity && !identity.operator ? identity.tenant : null, `GET /v1/executions/${id}/output?follow=true`)
        const hangUp = new AbortController()
        // a key revoked while it follows ends the follow too (within the key cache period)
        const stopKeyCheck = watchApiKey(deps, request, () => hangUp.abort())
        reply.raw.once('close', () => {
          release()
          stopKeyCheck()
          hangUp.abort()
        })
        const stop = AbortSignal.any([hangUp.signal, deps.output.closing])
        body = follow({ client, execution, deps: deps.output, started: () => reply.raw.flushHeaders(), stop })
        reply.header('cache-control', 'no-store')
      } else {
        const which = earlier ? `attempt ${asked} of execution ${id}` : `execution ${id}`
        if (!location) throw new NotFoundError(`${which} has no stored output`)
        const reader = await openReader(deps.output.readers, location)
        if (!reader) throw new NotFoundError(earlier ? `${which} has no stored output` : `output of ${which} is no longer stored`)
        if (location.store === 'file') text = /\.(log|txt)$/.test(location.url.pathname)
        if (earlier) {
          // an attempt that stored nothing is a 404, not an empty page: its first part is read now
          let first: Buffer[]
          try {
            first = await reader.next()
          } catch (err: unknown) {
            await reader.close()
            throw err
          }
          if (first.length === 0) {
            await reader.close()
            throw new NotFoundError(`${which} has no stored output`)
          }
          body = (async function* () {
            try {
              yield* first
              yield* drain(reader)
            } finally {
              await reader.close()
            }
          })()
        } else body = readAll(reader)
      }
      return (
        reply
          .type(text ? 'text/plain; charset=utf-8' : 'application/octet-stream')
          // A stream is sent as is; the response schema only documents the content types.
          .send(Readable.from(body, { objectMode: false }) as unknown as string)
      )
    },
  )
}
