/**
 * `scheduler keys create --tenant <name> [--name <label>] [--operator]` prints a new API
 * key once (the database keeps only its SHA-256); `keys list [--tenant]`
 * shows keys without their secret, with when each was last used (to within a
 * minute: the API records a key's use at most once a minute per process), so a
 * rotation can tell whether the old key still serves; `keys revoke <id>` stops
 * a key. The key alone goes to stdout, so `KEY=$(scheduler keys create --tenant acme)` works.
 */
import type { Command } from 'commander'
import { NotFoundError, ValidationError } from '../../errors.ts'
import { formatTable, withDatabase } from '../shared.ts'
import { apiKeyList, apiKeyRevoke, type ApiKey } from '../../db/queries/api-keys.ts'
import { createApiKey } from '../../api/auth.ts'
import { isTenantName, TENANT_RULE } from '../../core/names.ts'

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i

function keyTable(keys: readonly ApiKey[]): string {
  return formatTable([
    ['ID', 'TENANT', 'NAME', 'PREFIX', 'OPERATOR', 'CREATED', 'LAST USED', 'REVOKED'],
    ...keys.map((k) => [
      k.id,
      k.tenant,
      k.name ?? '-',
      `${k.keyPrefix}…`,
      k.operator ? 'yes' : 'no',
      k.createdAt.toISOString(),
      k.lastUsedAt?.toISOString() ?? '-',
      k.revokedAt?.toISOString() ?? '-',
    ]),
  ])
}

export function registerKeys(program: Command): void {
  const keys = program.command('keys').description('manage API keys (each key acts for one tenant)')

  keys
    .command('create')
    .description('create an API key and print it once')
    .requiredOption('--tenant <name>', 'tenant the key acts for')
    .option('--name <label>', 'a label to recognise the key by')
    .option('--operator', 'an operator key: may also see and change queues (GET /v1/queues, pause, limits), which every tenant shares')
    .action(async (opts: { tenant: string; name?: string; operator?: boolean }) => {
      const created = await withDatabase('pgsched-keys', ({ db }) =>
        createApiKey(db, { tenant: opts.tenant, name: opts.name ?? null, operator: opts.operator === true }),
      )
      process.stdout.write(`${created.key}\n`)
      const kind = created.operator ? 'Operator key' : 'API key'
      process.stderr.write(`${kind} ${created.id} for tenant "${created.tenant}" created. It is shown only this once; store it now.\n`)
    })

  keys
    .command('list')
    .description('list API keys (never their secret) and when each was last used, to within a minute')
    .option('--tenant <name>', "only this tenant's keys")
    .option('--json', 'print JSON: every key, as GET /v1/keys answers its last page: {"items": [...], "nextCursor": null}')
    .action(async (opts: { tenant?: string; json?: boolean }) => {
      // a name no tenant can have matches no key: refused, rather than "no API keys"
      if (opts.tenant !== undefined && !isTenantName(opts.tenant)) {
        throw new ValidationError(`--tenant: not a tenant name: ${JSON.stringify(opts.tenant)} (${TENANT_RULE})`)
      }
      const list = await withDatabase('pgsched-keys', ({ db }) => apiKeyList(db, { tenant: opts.tenant }))
      // every key at once: the shape of the API's last page
      if (opts.json) process.stdout.write(`${JSON.stringify({ items: list, nextCursor: null }, null, 2)}\n`)
      else process.stdout.write(list.length === 0 ? 'no API keys\n' : `${keyTable(list)}\n`)
    })

  keys
    .command('revoke')
    .description('revoke an API key (requests with it get 401)')
    .argument('<id>', 'key id, as shown by `keys list`')
    .action(async (id: string) => {
      if (!UUID.test(id)) {
        // the prefix keys list shows beside the id (psk_…) is not it
        const hint = id.startsWith('psk_') ? ": that is a key or its prefix; give the key's ID, the first column of `scheduler keys list`" : ''
        throw new ValidationError(`key id must be a UUID, got "${id}"${hint}`)
      }
      const revoked = await withDatabase('pgsched-keys', ({ db }) => apiKeyRevoke(db, { id }))
      if (!revoked) throw new NotFoundError(`no API key ${id}`)
      process.stdout.write(`revoked API key ${revoked.id} (tenant "${revoked.tenant}") at ${revoked.revokedAt?.toISOString()}\n`)
    })
}
