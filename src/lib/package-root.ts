/**
 * Locates the package's root folder (where package.json and migrations/ are),
 * whether running from the TypeScript sources or from compiled dist/.
 */
import { existsSync } from 'node:fs'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'

let cached: string | undefined

export function packageRoot(): string {
  if (cached) return cached
  let dir = dirname(fileURLToPath(import.meta.url))
  while (!existsSync(join(dir, 'package.json')) || !existsSync(join(dir, 'migrations'))) {
    const parent = dirname(dir)
    if (parent === dir) throw new Error('pgsched package root not found (no package.json beside migrations/)')
    dir = parent
  }
  cached = dir
  return dir
}
