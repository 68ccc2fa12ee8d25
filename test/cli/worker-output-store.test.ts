/**
 * `scheduler worker` with an s3:// output store where the optional package
 * @aws-sdk/client-s3 is missing (a loader hook hides it): the worker refuses
 * to start and names the package to install.
 */
import { execFile } from 'node:child_process'
import { promisify } from 'node:util'
import { describe, expect, it } from 'vitest'
import { useTestDb } from '../db.ts'

const run = promisify(execFile)
const t = useTestDb()

describe('scheduler worker with the S3 output store', () => {
  it('refuses to start without @aws-sdk/client-s3, naming the package to install', async () => {
    const failed = await run('node', ['--import', './test/fixtures/without-aws-sdk.mjs', 'bin/scheduler', 'worker'], {
      env: {
        ...process.env,
        LOG_LEVEL: 'warn',
        DATABASE_URL: t.url,
        SCHEDULER_OUTPUT_STORE: 's3://pgsched-output/runs',
        SCHEDULER_OUTPUT_S3_REGION: 'us-east-1',
      },
      timeout: 30_000,
    }).catch((err: unknown) => err as { code: number; stderr: string })
    expect(failed).toMatchObject({ code: 2 })
    expect((failed as { stderr: string }).stderr).toContain('needs the optional package @aws-sdk/client-s3: install it with `npm install @aws-sdk/client-s3`')
  })
})
