/**
 * The dependency direction of STYLE.md, checked on the import statements:
 * bin → system → {api | worker | maintenance} → db → core. api, worker and
 * maintenance never import each other; core does no I/O and imports no layer;
 * only config.ts reads the environment.
 */
import { readdirSync, readFileSync, statSync } from 'node:fs'
import { join, relative, dirname, resolve } from 'node:path'
import { describe, expect, it } from 'vitest'

const SRC = resolve('src')

function files(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const path = join(dir, name)
    return statSync(path).isDirectory() ? files(path) : path.endsWith('.ts') ? [path] : []
  })
}

function imports(file: string): string[] {
  const text = readFileSync(file, 'utf8')
  return [...text.matchAll(/^\s*(?:import|export)\b[^'"]*?from\s+'([^']+)'/gm)]
    .map((m) => m[1] as string)
    .filter((spec) => spec.startsWith('.'))
    .map((spec) => relative(SRC, resolve(dirname(file), spec)))
}

const layer = (path: string) => path.split('/')[0] ?? ''

describe('dependency direction', () => {
  const all = files(SRC).map((f) => ({ file: relative(SRC, f), deps: imports(f) }))

  it('keeps api, worker and maintenance apart', () => {
    const apart = ['api', 'worker', 'maintenance']
    const crossing = all.flatMap(({ file, deps }) =>
      apart.includes(layer(file)) ? deps.filter((d) => apart.includes(layer(d)) && layer(d) !== layer(file)).map((d) => `${file} → ${d}`) : [],
    )
    expect(crossing).toEqual([])
  })

  it('keeps core free of other layers and of I/O modules', () => {
    const bad = all
      .filter(({ file }) => layer(file) === 'core')
      .flatMap(({ file, deps }) => deps.filter((d) => !['core', 'errors.ts', 'clock.ts', 'lib'].includes(layer(d))).map((d) => `${file} → ${d}`))
    expect(bad).toEqual([])
    for (const { file } of all.filter((f) => layer(f.file) === 'core')) {
      expect(readFileSync(join(SRC, file), 'utf8'), file).not.toMatch(/from '(pg|kysely|node:fs|node:net|node:http)'/)
    }
  })

  it("keeps the API's schemas (TypeBox, some 900 modules to load) out of the CLI's job, queue, tenant, webhook and worker commands", () => {
    // the imports that load a module (not `import type`, which the compiler erases)
    const loads = (file: string) =>
      [...readFileSync(join(SRC, file), 'utf8').matchAll(/^\s*(?:import|export)\s+(?!type\b)[^'"]*?from\s+'([^']+)'/gm)]
        .map((m) => m[1] as string)
        .filter((spec) => spec.startsWith('.'))
        .map((spec) => relative(SRC, resolve(dirname(join(SRC, file)), spec)))
    const depsOf = new Map(all.map(({ file }) => [file, loads(file)]))
    for (const command of ['jobs', 'queues', 'tenants', 'webhooks', 'workers']) {
      const seen = new Set<string>()
      const next = [`cli/commands/${command}.ts`]
      for (let file = next.pop(); file !== undefined; file = next.pop()) {
        if (seen.has(file)) continue
        seen.add(file)
        next.push(...(depsOf.get(file) ?? []))
      }
      expect(
        [...seen].filter((f) => f.startsWith('api/schemas/')),
        command,
      ).toEqual([])
    }
  })

  it('lets nothing below the CLI import the CLI', () => {
    const bad = all.filter(({ file }) => layer(file) !== 'cli').flatMap(({ file, deps }) => deps.filter((d) => layer(d) === 'cli').map((d) => `${file} → ${d}`))
    expect(bad).toEqual([])
  })

  it('reads the environment only in config.ts and the command line', () => {
    const readers = all
      .filter(({ file }) => /process\.env\b/.test(readFileSync(join(SRC, file), 'utf8')))
      .map(({ file }) => file)
      .filter((file) => file !== 'config.ts' && layer(file) !== 'cli' && file !== 'bench/processes.ts')
    expect(readers).toEqual([])
  })
})
