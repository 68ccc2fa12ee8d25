/**
 * A client generated from /openapi.json works as users would build it:
 * openapi-typescript writes the types, a small program using openapi-fetch
 * and the named components (SubmitJobRequest, Job, JobPage, ExecutionPage,
 * Error) compiles with tsc in strict mode, and then submits, views, lists,
 * reads the history of and controls jobs against the API listening on a
 * real port.
 *
 * openapi-typescript builds its output with the TypeScript 5 compiler API, which TypeScript 7
 * (this repository's compiler) no longer has: the generator runs with a resolve hook that gives it
 * the `typescript-5` devDependency.
 */
import { execFile } from 'node:child_process'
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises'
import type { AddressInfo } from 'node:net'
import { join } from 'node:path'
import { promisify } from 'node:util'
import { afterAll, describe, expect, it } from 'vitest'
import { useTestDb } from '../db.ts'
import { useTestApi } from './helpers.ts'

const run = promisify(execFile)
const t = useTestDb()
const api = useTestApi(t)
const root = process.cwd()

const RESOLVE_HOOK = `import { register } from 'node:module'
register('data:text/javascript,' + encodeURIComponent(\`
export async function resolve(specifier, context, next) {
  if (specifier === 'typescript' && context.parentURL?.includes('/openapi-typescript/')) return next('typescript-5', context)
  return next(specifier, context)
}\`), import.meta.url)
`

const PROGRAM = `import createClient from 'openapi-fetch'
import type { components, paths } from './schema.js'

type SubmitJobRequest = components['schemas']['SubmitJobRequest']
type Job = components['schemas']['Job']
type JobPage = components['schemas']['JobPage']
type ExecutionPage = components['schemas']['ExecutionPage']
type ErrorBody = components['schemas']['Error']

const [baseUrl, key] = process.argv.slice(2) as [string, string]
const client = createClient<paths>({ baseUrl, headers: { authorization: \`Bearer \${key}\` } })

function must<T>(data: T | undefined, error: ErrorBody | undefined, what: string): T {
  if (data === undefined) throw new Error(\`\${what}: \${error?.statusCode} \${error?.message}\`)
  return data
}

const once: SubmitJobRequest = { type: 'report.build', payload: { month: '2030-01' }, priority: 5 }
const recurring: SubmitJobRequest = { type: 'cleanup', schedule: { every: '10s' } }
const submitted = await client.POST('/v1/jobs', { body: once })
const job: Job = must(submitted.data, submitted.error, 'submit')
const location: string | null = submitted.response.headers.get('location')
const again = await client.POST('/v1/jobs', { body: recurring })
const cron: Job = must(again.data, again.error, 'submit recurring')
const viewed = await client.GET('/v1/jobs/{id}', { params: { path: { id: job.id } } })
const view: Job = must(viewed.data, viewed.error, 'view')
const listed = await client.GET('/v1/jobs', { params: { query: { limit: 10, type: 'report.build' } } })
const page: JobPage = must(listed.data, listed.error, 'list')
const history = await client.GET('/v1/jobs/{id}/executions', { params: { path: { id: job.id } } })
const executions: ExecutionPage = must(history.data, history.error, 'history')
const paused = await client.POST('/v1/jobs/{id}/pause', { params: { path: { id: cron.id } } })
const resumed = await client.POST('/v1/jobs/{id}/resume', { params: { path: { id: cron.id } } })
const cancelled = await client.POST('/v1/jobs/{id}/cancel', { params: { path: { id: job.id } } })
const refused = await client.POST('/v1/jobs', { body: { type: 'x', priority: 5000 } })
const error: ErrorBody | undefined = refused.error
console.log(JSON.stringify({
  status: submitted.response.status,
  location,
  id: job.id,
  viewed: view.id,
  listed: page.items.map((j) => j.id),
  executions: executions.items.length,
  paused: must(paused.data, paused.error, 'pause').state,
  resumed: must(resumed.data, resumed.error, 'resume').state,
  cancelled: must(cancelled.data, cancelled.error, 'cancel').state,
  refused: { status: refused.response.status, path: error?.details?.[0]?.path },
}))
`

describe('a client generated from /openapi.json', () => {
  let dir: string | undefined
  afterAll(async () => {
    if (dir) await rm(dir, { recursive: true, force: true })
  })

  it('compiles in strict mode with named component types and submits, views, lists, reads history and controls jobs on a live API', async () => {
    // inside node_modules, so the program resolves openapi-fetch as a user's project would
    await mkdir(join(root, 'node_modules/.cache'), { recursive: true })
    dir = await mkdtemp(join(root, 'node_modules/.cache/pgsched-client-'))
    const doc = (await api.app.inject({ method: 'GET', url: '/openapi.json' })).body
    await writeFile(join(dir, 'openapi.json'), doc)
    await writeFile(join(dir, 'resolve-typescript-5.mjs'), RESOLVE_HOOK)
    await writeFile(join(dir, 'package.json'), JSON.stringify({ type: 'module', private: true }))
    await writeFile(join(dir, 'program.ts'), PROGRAM)
    await writeFile(
      join(dir, 'tsconfig.json'),
      JSON.stringify({
        compilerOptions: {
          strict: true,
          noUncheckedIndexedAccess: true,
          target: 'ES2022',
          module: 'NodeNext',
          moduleResolution: 'NodeNext',
          types: ['node'],
          typeRoots: [join(root, 'node_modules/@types')],
          outDir: '.',
        },
        files: ['program.ts', 'schema.d.ts'],
      }),
    )
    await run(
      process.execPath,
      ['--import', join(dir, 'resolve-typescript-5.mjs'), join(root, 'node_modules/openapi-typescript/bin/cli.js'), 'openapi.json', '-o', 'schema.d.ts'],
      { cwd: dir },
    )
    const compiled = await run(process.execPath, [join(root, 'node_modules/typescript/bin/tsc'), '-p', 'tsconfig.json'], { cwd: dir }).catch(
      (err: { stdout?: string; message: string }) => ({ stdout: err.stdout ?? err.message, failed: true }),
    )
    expect(compiled.stdout).toBe('')

    const key = await api.keyFor('typed')
    await api.app.listen({ host: '127.0.0.1', port: 0 })
    const { port } = api.app.server.address() as AddressInfo
    const { stdout } = await run(process.execPath, [join(dir, 'program.js'), `http://127.0.0.1:${port}`, key], { cwd: dir })
    const out = JSON.parse(stdout) as Record<string, unknown>
    expect(out).toMatchObject({
      status: 202,
      location: `/v1/jobs/${out.id as string}`,
      viewed: out.id,
      listed: [out.id],
      executions: 1,
      paused: 'paused',
      resumed: 'active',
      cancelled: 'cancelled',
      refused: { status: 400, path: 'priority' },
    })
  })
})
