// Builds the dashboard (ui/) into dist/ui: one bundled, minified app.js (Preact and uPlot
// inside it, so an installed package needs no front-end dependency), app.css and index.html.
// Run by `npm run build`, `prepare` and the test scripts after tsc.
import { copyFileSync, mkdirSync, rmSync } from 'node:fs'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { build } from 'esbuild'

const root = join(dirname(fileURLToPath(import.meta.url)), '..')
const out = join(root, 'dist', 'ui')
rmSync(out, { recursive: true, force: true })
mkdirSync(out, { recursive: true })
await build({
  entryPoints: { app: join(root, 'ui', 'src', 'main.tsx') },
  bundle: true,
  minify: true,
  format: 'esm',
  target: ['chrome110', 'firefox110', 'safari16'],
  jsx: 'automatic',
  jsxImportSource: 'preact',
  outdir: out,
  legalComments: 'linked',
  logLevel: 'warning',
})
copyFileSync(join(root, 'ui', 'index.html'), join(out, 'index.html'))
