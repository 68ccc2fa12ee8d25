/**
 * The few S3 calls the output store makes (put, list, get), through the
 * official AWS SDK, which is an optional peer dependency: it is imported only
 * when an s3:// output store is configured or an s3:// output is read, and
 * its absence is a ConfigError naming the package to install. Credentials and,
 * unless given, the region come from the SDK's usual sources (AWS_ACCESS_KEY_ID,
 * AWS_SECRET_ACCESS_KEY, AWS_REGION, profiles, instance roles). With an endpoint
 * (an S3-compatible server) requests use path-style addressing.
 */
import { ConfigError, toError } from '../errors.ts'

/** How to reach the object store. */
export interface S3Settings {
  /** An S3-compatible server's URL; absent: AWS S3. */
  endpoint?: string
  region?: string
  /** Absent: the SDK's usual sources. For programmatic use; the command line never sets it. */
  credentials?: S3Credentials
}

/** An access key, with the session token of temporary credentials. */
export interface S3Credentials {
  accessKeyId: string
  secretAccessKey: string
  sessionToken?: string
}

/** Object calls, bucket and key explicit. */
export interface S3Objects {
  put(bucket: string, key: string, body: Buffer): Promise<void>
  /** Keys starting with `prefix` and sorting after `startAfter`, in key order, at most `limit` (≤ 1000). */
  list(bucket: string, prefix: string, startAfter: string | undefined, limit: number): Promise<string[]>
  /** The object's bytes; null if there is no such key. */
  get(bucket: string, key: string): Promise<Buffer | null>
}

/** The npm package the S3 store needs. */
export const S3_SDK_PACKAGE = '@aws-sdk/client-s3'
/** A request the server has not answered in this long fails (and is retried by the caller). */
const S3_REQUEST_TIMEOUT_MS = 30_000
const S3_CONNECT_TIMEOUT_MS = 5_000

type Sdk = typeof import('@aws-sdk/client-s3')

async function loadSdk(): Promise<Sdk> {
  try {
    return await import('@aws-sdk/client-s3')
  } catch (err: unknown) {
    const code = (err as { code?: string }).code
    if (code === 'ERR_MODULE_NOT_FOUND' || code === 'MODULE_NOT_FOUND') {
      throw new ConfigError(`an s3:// output store needs the optional package ${S3_SDK_PACKAGE}: install it with \`npm install ${S3_SDK_PACKAGE}\``)
    }
    throw toError(err)
  }
}

/**
 * Loads the SDK and makes a client; checks that a region is known (else a ConfigError now rather
 * than a failure at the first write).
 */
export async function createS3Objects(settings: S3Settings): Promise<S3Objects> {
  const sdk = await loadSdk()
  const client = new sdk.S3Client({
    ...(settings.endpoint ? { endpoint: settings.endpoint, forcePathStyle: true } : {}),
    ...(settings.region ? { region: settings.region } : {}),
    ...(settings.credentials ? { credentials: settings.credentials } : {}),
    requestHandler: { requestTimeout: S3_REQUEST_TIMEOUT_MS, connectionTimeout: S3_CONNECT_TIMEOUT_MS },
  })
  try {
    await client.config.region()
  } catch (err: unknown) {
    throw new ConfigError(`the s3 output store has no region: set AWS_REGION or SCHEDULER_OUTPUT_S3_REGION (${toError(err).message})`)
  }
  return {
    async put(bucket, key, body) {
      await client.send(new sdk.PutObjectCommand({ Bucket: bucket, Key: key, Body: body }))
    },
    async list(bucket, prefix, startAfter, limit) {
      const out = await client.send(new sdk.ListObjectsV2Command({ Bucket: bucket, Prefix: prefix, StartAfter: startAfter, MaxKeys: limit }))
      return (out.Contents ?? []).flatMap((o) => (o.Key ? [o.Key] : []))
    },
    async get(bucket, key) {
      try {
        const out = await client.send(new sdk.GetObjectCommand({ Bucket: bucket, Key: key }))
        return out.Body ? Buffer.from(await out.Body.transformToByteArray()) : Buffer.alloc(0)
      } catch (err: unknown) {
        if (err instanceof sdk.NoSuchKey) return null
        throw err
      }
    },
  }
}
