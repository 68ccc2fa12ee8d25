/**
 * `scheduler workers list`: the workers, alive, stale or stopped, with their host, pid, queues,
 * types and the executions they hold (DATABASE_URL; every tenant's, as for any API key).
 */
import type { Command } from 'commander'
import { workerToJson } from '../../api/json.ts'
import { ago, print, withClient } from '../job-cli.ts'
import { formatTable } from '../shared.ts'

export function registerWorkers(program: Command): void {
  const workers = program.command('workers').description('see the workers: alive, stale or stopped, and what they run')
  workers
    .command('list')
    .description('workers, most recently seen first')
    .option('--json', 'print JSON (as the REST API answers)')
    .action((o: { json?: boolean }) =>
      withClient(undefined, async (client) => {
        const list = await client.listWorkers()
        if (o.json) return print({ items: list.map(workerToJson) })
        process.stdout.write(
          list.length === 0
            ? 'no workers\n'
            : `${formatTable([
                ['ID', 'STATE', 'HOST', 'PID', 'QUEUES', 'TYPES', 'RUNNING', 'HELD', 'SLOTS', 'LAST SEEN'],
                ...list.map((w) => [
                  w.id,
                  w.state,
                  w.host,
                  String(w.pid),
                  w.queues.join(','),
                  w.types.join(','),
                  w.running === null ? '-' : String(w.running),
                  String(w.inFlight),
                  String(w.concurrency),
                  ago(w.lastSeenAt),
                ]),
              ])}\n`,
        )
      }),
    )
}
