/**
 * The TypeScript examples of README.md and docs/ compile as a user's project would compile them: in
 * an ES module package of its own, against pgsched's declaration files as the package ships them
 * (emitted here from src/, found through package.json `exports`), with only pgsched's runtime
 * dependencies installed beside it and TypeScript 5 in strict mode. An example headed by a file name
 * (`// handlers.js — …`) is checked as that file; the placeholders the examples leave to the reader
 * (`db`, `rows`, `mailer`, …) are declared below with the types a reader would give them.
 */
import { execFile } from 'node:child_process'
import { mkdir, mkdtemp, readdir, readFile, rm, symlink, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { dirname, join } from 'node:path'
import { promisify } from 'node:util'
import { afterAll, describe, expect, it } from 'vitest'

const run = promisify(execFile)
const root = process.cwd()

/** The readers' own values the examples use without defining them. */
const PLACEHOLDERS = `
declare const client: import('pgsched').Client
declare const db: import('kysely').Kysely<{ users: { id: number; email: string } }>
declare const rows: Array<{ email: string }>
declare const mailer: string
declare function renderPdf(ctx: import('pgsched').HandlerContext<{ html: string }>): Promise<{ pages: number }>
declare function convertVideo(ctx: import('pgsched').HandlerContext): Promise<void>
declare const secret: string
declare const req: { body: Buffer; headers: Record<string, string | undefined> }
declare const res: { status(code: number): { end(): void } }
`

/** The modules of the reader's project that examples import. */
const PROJECT_MODULES: Record<string, { file: string; text: string }> = {
  './handlers.js': {
    file: 'handlers.ts',
    text: "import { defineHandler } from 'pgsched'\nexport const sendEmail = defineHandler('email.send', async () => null)\n",
  },
}

interface Example {
  /** Where the example is: `README.md:186`. */
  where: string
  /** The file it is checked as. */
  file: string
  text: string
}

async function examplesOf(path: string): Promise<Example[]> {
  const lines = (await readFile(join(root, path), 'utf8')).split('\n')
  const found: Example[] = []
  for (let i = 0; i < lines.length; i++) {
    if (lines[i] !== '```ts') continue
    const start = i + 1
    let end = start
    while (end < lines.length && lines[end] !== '```') end++
    const body = lines.slice(start, end)
    const named = /^\/\/ ([\w.-]+\.(?:ts|js|mts|mjs))\b/.exec(body[0] ?? '')
    found.push({ where: `${path}:${start}`, file: named?.[1] ?? 'example.ts', text: body.join('\n') })
    i = end
  }
  return found
}

/**
 * The example as a module: its imports at the top; a fragment (one exporting nothing) inside a function
 * of its own, as the surrounding code of an application would hold it (`return` in a request handler).
 */
function moduleOf(text: string): string {
  const lines = text.split('\n')
  const imports = lines.filter((l) => l.startsWith('import '))
  const rest = lines.filter((l) => !l.startsWith('import '))
  if (rest.some((l) => l.startsWith('export '))) return `${imports.join('\n')}\n${rest.join('\n')}\n`
  return `${imports.join('\n')}\nexport {}\nasync function example() {\n${rest.join('\n')}\n}\nvoid example\n`
}

let dir = ''
afterAll(async () => {
  if (dir) await rm(dir, { recursive: true, force: true })
})

describe('the TypeScript examples of README.md and docs/', () => {
  it("compile as written in a user's project, against the package's declarations", async () => {
    dir = await mkdtemp(join(tmpdir(), 'pgsched-readme-'))
    const pkg = JSON.parse(await readFile(join(root, 'package.json'), 'utf8')) as { dependencies: Record<string, string>; types: string }
    // the package as it is installed: its package.json and declarations, its dependencies beside it
    const installed = join(dir, 'node_modules', 'pgsched')
    await mkdir(installed, { recursive: true })
    await writeFile(join(installed, 'package.json'), JSON.stringify(pkg))
    await run(
      join(root, 'node_modules/.bin/tsc'),
      ['-p', 'tsconfig.json', '--emitDeclarationOnly', '--declarationMap', 'false', '--outDir', join(installed, 'dist')],
      {
        cwd: root,
        timeout: 120_000,
      },
    )
    for (const dep of [...Object.keys(pkg.dependencies), '@types/node']) {
      await mkdir(dirname(join(dir, 'node_modules', dep)), { recursive: true })
      await symlink(join(root, 'node_modules', dep), join(dir, 'node_modules', dep), 'dir').catch((err: NodeJS.ErrnoException) => {
        if (err.code !== 'EEXIST') throw err
      })
    }
    // the project: an ES module package, strict, Node's globals and no DOM
    await writeFile(join(dir, 'package.json'), JSON.stringify({ name: 'app', private: true, type: 'module' }))
    const compilerOptions = {
      target: 'ES2022',
      lib: ['ES2023'],
      module: 'NodeNext',
      moduleResolution: 'NodeNext',
      strict: true,
      noEmit: true,
      allowJs: true,
      checkJs: true,
      types: ['node'],
    }
    await writeFile(join(dir, 'tsconfig.json'), JSON.stringify({ compilerOptions, include: ['examples/**/*'] }))
    await mkdir(join(dir, 'examples'))
    await writeFile(join(dir, 'examples', 'placeholders.d.ts'), PLACEHOLDERS)

    const docs = ['README.md', ...(await readdir(join(root, 'docs'))).filter((f) => f.endsWith('.md')).map((f) => `docs/${f}`)]
    const examples = (await Promise.all(docs.map(examplesOf))).flat()
    expect(examples.length).toBeGreaterThanOrEqual(6)
    const whereOf = new Map<string, string>()
    for (const [i, ex] of examples.entries()) {
      const exampleDir = join(dir, 'examples', String(i))
      await mkdir(exampleDir)
      await writeFile(join(exampleDir, ex.file), moduleOf(ex.text))
      whereOf.set(`examples/${i}/`, ex.where)
      for (const [specifier, module] of Object.entries(PROJECT_MODULES)) {
        if (ex.text.includes(`'${specifier}'`) && module.file !== ex.file) await writeFile(join(exampleDir, module.file), module.text)
      }
    }
    const tsc = join(root, 'node_modules/typescript-5/bin/tsc')
    const out = await run(process.execPath, [tsc, '-p', 'tsconfig.json'], { cwd: dir, timeout: 120_000 }).then(
      (r) => r.stdout,
      (err: { stdout: string }) => err.stdout,
    )
    // each error as the example it is in: `README.md:253 handlers.js(4,52): error TS8011: …`
    const errors = out
      .split('\n')
      .filter((l) => /error TS\d+/.test(l))
      .map((l) => l.replace(/^examples\/\d+\//, (m) => `${whereOf.get(m) ?? m} `))
    expect(errors).toEqual([])
  })
})
