/**
 * `scheduler jobs bulk <cancel|retry|delete> [filters]`: acts on every job of the filter, a bounded
 * number per call, repeating the call until none is left. Progress goes to stderr: one line
 * rewritten in place on a terminal, a line per call otherwise; the totals go to stdout (--json:
 * as JSON).
 */
import type { Command } from 'commander'
import { ValidationError } from '../../errors.ts'
import { BULK_ACTIONS, BULK_LIMIT_MAX, type BulkAction, type BulkFilter } from '../../job-operations.ts'
import { filterOf, filterOptions, print, withClient, type FilterOpts } from '../job-cli.ts'

/** Most calls one run makes: enough for a million jobs at the largest batch, and a stop for a filter that never empties. */
const MAX_CALLS = 100_000

interface BulkOpts extends FilterOpts {
  ids?: string
  all?: boolean
  batch: string
  json?: boolean
}

/** Writes progress to stderr: in place on a terminal, else one line each. */
function progressWriter() {
  const tty = process.stderr.isTTY === true
  return {
    update(line: string) {
      process.stderr.write(tty ? `\r${line}\u001b[K` : `${line}\n`)
    },
    done() {
      if (tty) process.stderr.write('\n')
    },
  }
}

export function registerJobsBulk(jobs: Command): void {
  filterOptions(
    jobs
      .command('bulk')
      .description('cancel, retry or delete every job of a filter, in batches, until none is left')
      .argument('<action>', BULK_ACTIONS.join(' | ')),
  )
    .option('--ids <ids>', 'comma-separated job ids (at most 1000)')
    .option('--all', 'every job (required when no filter is given)')
    .option('--batch <n>', `jobs per call, 1-${BULK_LIMIT_MAX}`, String(BULK_LIMIT_MAX))
    .option('--json', 'print the totals as JSON')
    .action((action: string, o: BulkOpts) => {
      if (!(BULK_ACTIONS as readonly string[]).includes(action)) {
        throw new ValidationError(`action must be one of ${BULK_ACTIONS.join(', ')}, got "${action}"`, [{ path: 'action', message: 'unknown action' }])
      }
      const filter: BulkFilter = { ...filterOf(o) }
      if (o.ids !== undefined) filter.ids = o.ids.split(',').map((s) => s.trim())
      if (o.all) filter.all = true
      // said in the command's words (the client's would be "set filter.all to true")
      if (!o.all && Object.values(filter).every((v) => v === undefined)) {
        const message = 'no jobs named: give a filter (--status, --type, --queue, --ids, …) or --all for every job'
        throw new ValidationError(message, [{ path: 'all', message }])
      }
      const limit = /^\s*\d+\s*$/.test(o.batch) ? Number(o.batch) : Number.NaN
      if (!Number.isInteger(limit) || limit < 1 || limit > BULK_LIMIT_MAX) {
        throw new ValidationError(`--batch must be an integer from 1 to ${BULK_LIMIT_MAX}, got "${o.batch}"`, [
          { path: 'batch', message: `1-${BULK_LIMIT_MAX}` },
        ])
      }
      return withClient(undefined, async (client) => {
        const ops = client.allTenants()
        const progress = progressWriter()
        let matched = 0
        let changed = 0
        let remaining = 0
        let calls = 0
        // the walk's position: each call takes the jobs after the last one the previous call looked
        // at, so a retried job that fails again (and matches again) is not retried once per call, nor
        // counted as left; the first call starts before every id
        let after = '00000000-0000-0000-0000-000000000000'
        for (;;) {
          const r = await ops.bulkJobs({ action: action as BulkAction, filter, limit, after })
          calls++
          matched += r.matched
          changed += r.changed
          remaining = r.remaining
          after = r.lastId ?? after
          const total = changed + remaining
          progress.update(`${action}: ${changed} of ${total} jobs (${total === 0 ? 100 : Math.floor((changed / total) * 100)}%), ${remaining} left`)
          if (remaining === 0 || r.matched === 0 || calls >= MAX_CALLS) break
        }
        progress.done()
        const totals = { action, matched, changed, remaining, calls }
        if (o.json) return print(totals)
        process.stdout.write(
          `${action}: ${changed} job${changed === 1 ? '' : 's'} changed in ${calls} call${calls === 1 ? '' : 's'}${remaining > 0 ? `, ${remaining} left` : ''}\n`,
        )
      })
    })
}
