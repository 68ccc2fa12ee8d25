/**
 * /v1/executions/{id}/output: streams the output a worker stored for an
 * execution (the file named by its `output_uri`, a file:// URI on storage
 * the API can read). 404 when the execution has none or the file is gone
 * (pruned). The file is opened before the reply starts, so a missing file
 * is a clean 404 rather than a broken stream.
 */
import { type FileHandle, open } from 'node:fs/promises'
import { fileURLToPath } from 'node:url'
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import { NotFoundError } from '../../errors.ts'
import { IdParams } from '../schemas/common.ts'
import { CommonErrors } from '../schemas/error.ts'
import type { RouteDeps } from './deps.ts'

/** The local path behind an output URI; null for none or a scheme this API cannot read. */
function outputPath(uri: string | null): string | null {
  if (!uri) return null
  try {
    const url = new URL(uri)
    return url.protocol === 'file:' ? fileURLToPath(url) : null
  } catch {
    return null
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
        description: 'Streams what the handler wrote to its output stream (`text/plain` for log files).',
        security: [{ apiKey: [] }],
        params: IdParams,
        response: {
          200: {
            description: 'The stored output.',
            content: {
              'text/plain': { schema: { type: 'string' } },
              'application/octet-stream': { schema: { type: 'string', format: 'binary' } },
            },
          },
          ...CommonErrors,
        },
      },
    },
    async (request, reply) => {
      const id = request.params.id
      const execution = await deps.clientFor(request).viewExecution(id)
      const path = outputPath(execution.outputUri)
      if (!path) throw new NotFoundError(`execution ${id} has no stored output`)
      let handle: FileHandle
      try {
        handle = await open(path, 'r')
      } catch (err: unknown) {
        const code = (err as { code?: string }).code
        if (code === 'ENOENT' || code === 'ENOTDIR' || code === 'EISDIR') {
          throw new NotFoundError(`output of execution ${id} is no longer stored`)
        }
        throw err
      }
      const stat = await handle.stat()
      if (!stat.isFile()) {
        await handle.close()
        throw new NotFoundError(`output of execution ${id} is no longer stored`)
      }
      const text = /\.(log|txt)$/.test(path)
      return (
        reply
          .type(text ? 'text/plain; charset=utf-8' : 'application/octet-stream')
          .header('content-length', stat.size)
          // A stream is sent as is; the response schema only documents the content types.
          .send(handle.createReadStream() as unknown as string)
      )
    },
  )
}
