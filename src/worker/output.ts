/**
 * Per-attempt output files: `<outputDir>/<jobId>/<executionId>.<attempt>.log`,
 * created on the handler's first write and named in executions.output_uri.
 */
import { createWriteStream, mkdirSync, type WriteStream } from 'node:fs'
import { join, resolve } from 'node:path'
import { pathToFileURL } from 'node:url'
import { finished } from 'node:stream/promises'

export class OutputFile {
  private stream: WriteStream | undefined
  private path = ''
  private readonly outputDir: string
  private readonly name: [jobId: string, executionId: string, attempt: number]

  constructor(outputDir: string, jobId: string, executionId: string, attempt: number) {
    this.outputDir = outputDir
    this.name = [jobId, executionId, attempt]
  }

  /** The stream, opened on first use. */
  get writable(): WriteStream {
    if (!this.stream) {
      const [jobId, executionId, attempt] = this.name
      this.path = join(resolve(this.outputDir), jobId, `${executionId}.${attempt}.log`)
      mkdirSync(join(this.path, '..'), { recursive: true })
      this.stream = createWriteStream(this.path, { flags: 'a' })
    }
    return this.stream
  }

  /** Closes the file; returns its file:// URI, or null if nothing was written. */
  async close(): Promise<string | null> {
    if (!this.stream) return null
    this.stream.end()
    await finished(this.stream).catch(() => undefined)
    return pathToFileURL(this.path).href
  }
}
