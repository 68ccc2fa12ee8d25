/**
 * Output across hosts: a `scheduler worker` process and a `scheduler api`
 * process, each in a working directory of its own with different output
 * settings (as on two machines sharing only the database and, for S3, the
 * object store). The API follows a job's output while the handler still
 * writes, and serves all of it after the end, from Postgres (the default
 * store) and from an S3-compatible server (s3rver, in this test process).
 */
import { type ChildProcess, spawn } from 'node:child_process'
import { mkdtempSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join, resolve } from 'node:path'
import { afterEach, describe, expect, it } from 'vitest'
import { createApiKey } from '../../src/api/auth.ts'
import { createClient } from '../../src/client.ts'
import { useTestDb } from '../db.ts'
import { S3_CREDENTIALS, useTestS3 } from '../s3-server.ts'
import { waitFor } from '../wait-for.ts'

const t = useTestDb()
const s3 = useTestS3()
const REPO = resolve('.')
const SCHEDULER = join(REPO, 'bin/scheduler')
const HANDLERS = join(REPO, 'test/fixtures/handlers.js')
const LINES = 10
const EVERY_MS = 300
const FULL = Array.from({ length: LINES }, (_, i) => `line ${i + 1}\n`).join('')

const children: ChildProcess[] = []
afterEach(async () => {
  await Promise.all(
    children.splice(0).map(async (child) => {
      if (child.exitCode !== null || child.signalCode !== null) return
      const exited = new Promise((r) => child.once('exit', r))
      child.kill('SIGTERM')
      await exited
    }),
  )
})

/** A scheduler process in a directory of its own; resolves once `ready` shows in its log with what it matched. */
async function start(args: string[], env: Record<string, string>, ready: RegExp): Promise<{ match: RegExpExecArray; log: () => string }> {
  const cwd = mkdtempSync(join(tmpdir(), 'pgsched-host-'))
  const child = spawn('node', [SCHEDULER, ...args], {
    cwd,
    env: { ...process.env, DATABASE_URL: t.url, LEDGER_DATABASE_URL: t.url, LOG_LEVEL: 'info', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  })
  children.push(child)
  let text = ''
  child.stderr?.on('data', (chunk: Buffer) => (text += chunk.toString()))
  const match = await new Promise<RegExpExecArray>((resolveMatch, reject) => {
    child.stdout?.on('data', (chunk: Buffer) => {
      text += chunk.toString()
      const m = ready.exec(text)
      if (m) resolveMatch(m)
    })
    child.once('exit', () => reject(new Error(`${args[0]} exited before it was ready:\n${text}`)))
  })
  return { match, log: () => text }
}

const s3Env = () => ({
  SCHEDULER_OUTPUT_S3_ENDPOINT: s3.endpoint,
  AWS_REGION: 'us-east-1',
  AWS_ACCESS_KEY_ID: S3_CREDENTIALS.accessKeyId,
  AWS_SECRET_ACCESS_KEY: S3_CREDENTIALS.secretAccessKey,
})

async function followAcrossHosts(workerEnv: Record<string, string>, apiEnv: Record<string, string>, uriPattern: RegExp): Promise<void> {
  await start(['worker', '--handlers', HANDLERS, '--concurrency', '2'], workerEnv, /"msg":"worker started"/)
  const api = await start(['api', '--port', '0', '--host', '127.0.0.1'], apiEnv, /"url":"(http:\/\/[^"]+)","msg":"api listening"/)
  const url = api.match[1] as string
  const { key } = await createApiKey(t.db, { tenant: 'acme' })
  const client = createClient({ db: t.db, tenant: 'acme' })
  const { job } = await client.submitJob({ type: 'output.lines', payload: { lines: LINES, everyMs: EVERY_MS } })
  const executionId = job.lastExecution?.id as string

  const res = await fetch(`${url}/v1/executions/${executionId}/output?follow=true`, { headers: { authorization: `Bearer ${key}` } })
  expect(res.status).toBe(200)
  const reader = (res.body as ReadableStream<Uint8Array>).getReader()
  const decoder = new TextDecoder()
  let text = ''
  /** What had arrived while the execution was still running (checked at each arrival). */
  let whileRunning = ''
  for (;;) {
    const { value, done } = await reader.read()
    if (done) break
    text += decoder.decode(value, { stream: true })
    if ((await client.viewExecution(executionId)).state === 'running') whileRunning = text
  }
  // Lines arrived while the handler was still writing, and the follow ended with all of them.
  expect(whileRunning).toMatch(/^line 1\n/)
  expect(whileRunning.length).toBeLessThan(FULL.length)
  expect(text).toBe(FULL)
  const done = await waitFor(async () => {
    const e = await client.viewExecution(executionId)
    return e.state === 'succeeded' ? e : null
  })
  expect(done.outputUri).toMatch(uriPattern)
  const after = await fetch(`${url}/v1/executions/${executionId}/output`, { headers: { authorization: `Bearer ${key}` } })
  expect(after.status).toBe(200)
  expect(await after.text()).toBe(FULL)
}

describe('output read by an API on another host', () => {
  it('streams from Postgres while the job runs and after it ends', async () => {
    await followAcrossHosts({}, { SCHEDULER_OUTPUT_STORE: 'file', SCHEDULER_OUTPUT_DIR: 'api-output' }, /^pgsched:output\/[0-9a-f-]{36}\/1$/)
  })

  it('streams from an S3-compatible store while the job runs and after it ends', async () => {
    await followAcrossHosts(
      { SCHEDULER_OUTPUT_STORE: `s3://${s3.bucket}/worker-runs`, ...s3Env() },
      { SCHEDULER_OUTPUT_STORE: `s3://${s3.bucket}/elsewhere`, ...s3Env() },
      new RegExp(`^s3://${s3.bucket}/worker-runs/[0-9a-f-]{36}/1/$`),
    )
  })
})
