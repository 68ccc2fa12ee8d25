/**
 * A local S3-compatible server (s3rver, in this process) for the S3 output
 * store's tests: one bucket, data in a temporary directory, started before the
 * file's tests and closed after them. Path-style addressing, as the store uses
 * with an endpoint.
 */
import { mkdtempSync, rmSync } from 'node:fs'
import type { AddressInfo } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import S3rver from 's3rver'
import { afterAll, beforeAll } from 'vitest'

/** The key s3rver accepts. */
export const S3_CREDENTIALS = { accessKeyId: 'S3RVER', secretAccessKey: 'S3RVER' }

export interface TestS3 {
  /** http://127.0.0.1:<port> */
  endpoint: string
  bucket: string
}

export function useTestS3(bucket = 'pgsched-output'): TestS3 {
  const s3 = { bucket } as TestS3
  let server: S3rver | undefined
  const dir = mkdtempSync(join(tmpdir(), 'pgsched-s3-'))
  beforeAll(async () => {
    server = new S3rver({ address: '127.0.0.1', port: 0, silent: true, directory: dir, configureBuckets: [{ name: bucket, configs: [] }] })
    const address = (await server.run()) as AddressInfo
    s3.endpoint = `http://127.0.0.1:${address.port}`
  })
  afterAll(async () => {
    await server?.close()
    rmSync(dir, { recursive: true, force: true })
  })
  return s3
}
