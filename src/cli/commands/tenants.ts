/**
 * `scheduler tenants list|view|set`: each tenant's fair-share weight and admission quotas, with its
 * pending and running executions (the REST routes need an operator key; this command needs
 * DATABASE_URL). Each prints the tenant afterwards, as a table or, with --json, as the REST API's JSON.
 */
import type { Command } from 'commander'
import { tenantToJson } from '../../api/json.ts'
import { ValidationError } from '../../errors.ts'
import { tenantAdmin, type TenantAdmin, type TenantPatch, type TenantView } from '../../tenant-admin.ts'
import { formatTable, inCliWords, withDatabase } from '../shared.ts'

function tenantTable(tenants: readonly TenantView[]): string {
  return formatTable([
    ['TENANT', 'WEIGHT', 'MAX PENDING', 'MAX SUBMITS/S', 'PENDING', 'RUNNING'],
    ...tenants.map((t) => [
      t.name,
      String(t.weight),
      t.maxPending === null ? '-' : String(t.maxPending),
      t.maxSubmitsPerSecond === null ? '-' : String(t.maxSubmitsPerSecond),
      String(t.pending),
      String(t.running),
    ]),
  ])
}

async function show(json: boolean | undefined, fn: (tenants: TenantAdmin) => Promise<TenantView | TenantView[]>): Promise<void> {
  const result = await withDatabase('pgsched-tenants', ({ db }) =>
    inCliWords({ weight: '--weight', maxPending: '--max-pending', maxSubmitsPerSecond: '--max-submits-per-second' }, () => fn(tenantAdmin(db))),
  )
  const list = Array.isArray(result) ? result : [result]
  if (json) process.stdout.write(`${JSON.stringify(Array.isArray(result) ? { items: list.map(tenantToJson) } : tenantToJson(result), null, 2)}\n`)
  else process.stdout.write(list.length === 0 ? 'no tenants with settings\n' : `${tenantTable(list)}\n`)
}

/** A number, or null for "none" where `none` allows it; `flag` names the option in the error. */
function numberOrNone(flag: string, text: string, none = true): number | null {
  if (none && text === 'none') return null
  const n = Number(text)
  // decimal digits only: Number() would take "0x10" as 16 and "1e3" as 1000, a setting no one wrote
  if (!/^-?\d+(\.\d+)?$/.test(text) || !Number.isFinite(n)) {
    const wanted = none ? 'a number or "none"' : 'a number'
    throw new ValidationError(`${flag} must be ${wanted}, got "${text}"`, [{ path: flag, message: wanted }])
  }
  return n
}

export function registerTenants(program: Command): void {
  const tenants = program.command('tenants').description("see and change tenants' fair-share weights and admission quotas")
  const json = ['--json', 'print JSON (as the REST API answers)'] as const

  tenants
    .command('list')
    .description('tenants with a weight or a quota set, with their pending and running executions')
    .option(...json)
    .action((opts: { json?: boolean }) => show(opts.json, (t) => t.list()))
  tenants
    .command('view')
    .description("one tenant's settings and figures")
    .argument('<tenant>')
    .option(...json)
    .action((name: string, opts: { json?: boolean }) => show(opts.json, (t) => t.view(name)))
  tenants
    .command('set')
    .description('change a tenant\'s settings (options left out stay as they are; "none" removes a quota)')
    .argument('<tenant>')
    .option('--weight <n>', 'turns per round in fair-share queues (default 1)')
    .option('--max-pending <n>', 'most pending executions, or "none"')
    .option('--max-submits-per-second <n>', 'most submits per second, or "none"')
    .option(...json)
    .action((name: string, opts: { json?: boolean; weight?: string; maxPending?: string; maxSubmitsPerSecond?: string }) => {
      const patch: TenantPatch = {}
      if (opts.weight !== undefined) {
        patch.weight = numberOrNone('--weight', opts.weight, false) as number
      }
      if (opts.maxPending !== undefined) patch.maxPending = numberOrNone('--max-pending', opts.maxPending)
      if (opts.maxSubmitsPerSecond !== undefined) patch.maxSubmitsPerSecond = numberOrNone('--max-submits-per-second', opts.maxSubmitsPerSecond)
      if (Object.keys(patch).length === 0) {
        const message = 'nothing to change: give at least one of --weight, --max-pending and --max-submits-per-second'
        throw new ValidationError(message, [{ path: 'weight', message }])
      }
      return show(opts.json, (t) => t.update(name, patch))
    })
}
