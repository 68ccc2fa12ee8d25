/**
 * `scheduler worker --handlers <file>` with a module that cannot be loaded: the exit message names
 * the module and the line its error points at (Node.js's own errors say neither for a syntax error
 * or a throw while the module loads). Run as the real bin, since the test runner loads modules its
 * own way.
 */
import { execFile } from 'node:child_process'
import { mkdtemp, rm, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { promisify } from 'node:util'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { useTestDb } from '../db.ts'

const t = useTestDb()
const run = promisify(execFile)

let dir = ''
beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'pgsched-handlers-'))
})
afterAll(async () => {
  await rm(dir, { recursive: true, force: true })
})

/** The worker's exit code and standard error, with `source` as its handlers module. */
async function workerWith(name: string, source: string | null): Promise<{ code: number; stderr: string }> {
  const file = join(dir, name)
  if (source !== null) await writeFile(file, source)
  const env = { ...process.env, DATABASE_URL: t.url, SCHEDULER_WORKER_METRICS_PORT: 'off', LOG_LEVEL: 'warn' }
  return run('node', ['bin/scheduler', 'worker', '--handlers', file], { env, timeout: 30_000, killSignal: 'SIGKILL' }).then(
    () => ({ code: 0, stderr: '' }),
    (err: { code: number; stderr: string }) => ({ code: err.code, stderr: err.stderr }),
  )
}

describe('scheduler worker --handlers with a module that cannot be loaded', () => {
  it('names the module and the line of a syntax error', async () => {
    const r = await workerWith('syntax.mjs', 'export const a = 1\nexport const b = this is not javascript\n')
    expect(r.code).toBe(1)
    expect(r.stderr).toContain(`scheduler: could not load the handlers module ${join(dir, 'syntax.mjs')} (line 2): Unexpected identifier`)
  })

  it('names the module and the line of an error thrown while it loads', async () => {
    const r = await workerWith('throws.mjs', "const config = {}\n\nif (!config.url) throw new Error('module init failed')\nexport const x = 1\n")
    expect(r.code).toBe(1)
    expect(r.stderr).toContain(`scheduler: could not load the handlers module ${join(dir, 'throws.mjs')} (line 3): module init failed`)
  })

  it('names a CommonJS module and its line, and the line of a SyntaxError thrown while a module loads', async () => {
    const cjs = await workerWith('throws.cjs', "const x = 1\n\nthrow new Error('cjs init failed')\n")
    expect(cjs.stderr).toContain(`scheduler: could not load the handlers module ${join(dir, 'throws.cjs')} (line 3): cjs init failed`)
    const parse = await workerWith('parse.mjs', "export const a = 1\nexport const config = JSON.parse('{bad')\n")
    expect(parse.stderr).toMatch(new RegExp(`scheduler: could not load the handlers module ${join(dir, 'parse.mjs')} \\(line 2\\): .*JSON`))
  })

  it('names a module that is not there', async () => {
    const r = await workerWith('missing.mjs', null)
    expect(r.code).toBe(1)
    expect(r.stderr).toContain(`scheduler: could not load the handlers module ${join(dir, 'missing.mjs')}: Cannot find module`)
  })

  it('names a module whose top-level await never settles, rather than exiting with nothing said', async () => {
    const r = await workerWith('forever.mjs', 'await new Promise(() => {})\nexport const x = 1\n')
    expect(r.code).toBe(1)
    expect(r.stderr).toContain(
      `scheduler: could not load the handlers module ${join(dir, 'forever.mjs')}: its top-level await never settles (nothing it waits for is left to happen)`,
    )
  })
})
