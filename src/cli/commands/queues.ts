/**
 * `scheduler queues list|view|pause|resume|limit|key-limit|rate-limit|key-rate-limit|fair-share`: queue settings and live figures, for every
 * tenant (the REST routes need an operator key; this command needs DATABASE_URL). Each prints the
 * queue afterwards, as a table or, with --json, as the REST API's JSON.
 */
import type { Command } from 'commander'
import { queueToJson } from '../../api/json.ts'
import { ValidationError } from '../../errors.ts'
import { queueAdmin, type QueueAdmin, type QueueView } from '../../queue-admin.ts'
import { formatTable, inCliWords, withDatabase } from '../shared.ts'

/** How long ago, in the largest unit that reads well: `42.0 s`, `12 min`, `3.5 h`, `2,526 days`. */
export function waitedText(ms: number): string {
  const s = ms / 1000
  if (s < 120) return `${s.toFixed(1)} s`
  if (s < 7200) return `${Math.round(s / 60)} min`
  if (s < 172_800) return `${(s / 3600).toFixed(1)} h`
  return `${Math.round(s / 86_400).toLocaleString('en-US')} days`
}

function queueTable(queues: readonly QueueView[]): string {
  return formatTable([
    ['QUEUE', 'PAUSED', 'LIMIT', 'PER KEY', 'RATE', 'RATE PER KEY', 'FAIR', 'DUE', 'SCHEDULED', 'RUNNING', 'OLDEST DUE', 'UNSERVED', 'WORKERS'],
    ...queues.map((q) => [
      q.name,
      q.paused ? 'yes' : 'no',
      q.concurrencyLimit === null ? '-' : String(q.concurrencyLimit),
      q.keyConcurrencyLimit === null ? '-' : String(q.keyConcurrencyLimit),
      q.rateLimit === null ? '-' : `${q.rateLimit}/${q.ratePeriodMs} ms`,
      q.keyRateLimit === null ? '-' : `${q.keyRateLimit}/${q.keyRatePeriodMs} ms`,
      q.fairShare ? 'yes' : 'no',
      String(q.due),
      String(q.scheduled),
      String(q.running),
      q.oldestDueLagMs === null ? '-' : `${waitedText(q.oldestDueLagMs)} ago`,
      q.unserved === 0 ? '-' : `${q.unserved} (${q.unservedTypes.join(', ')})`,
      String(q.liveWorkers),
    ]),
  ])
}

/**
 * Runs `fn` on the queue operations and prints what it returns. A change (`changed`) to a queue with
 * no pending or running work and no live worker serving it is done, and a warning on stderr asks
 * whether the name is the one meant (a misspelt name makes a queue of its own).
 */
async function show(json: boolean | undefined, fn: (queues: QueueAdmin) => Promise<QueueView | QueueView[]>, changed?: string): Promise<void> {
  const result = await withDatabase('pgsched-queues', ({ db }) => inCliWords(QUEUE_WORDS, () => fn(queueAdmin(db))))
  const list = Array.isArray(result) ? result : [result]
  const q = list[0]
  if (changed && q && !Array.isArray(result) && q.due + q.scheduled + q.running === 0 && q.liveWorkers === 0) {
    process.stderr.write(
      `scheduler: warning: queue "${q.name}" has no pending or running work and no live worker serves it: ${changed} anyway (check the name if you meant an existing queue)\n`,
    )
  }
  if (json) process.stdout.write(`${JSON.stringify(Array.isArray(result) ? { items: list.map(queueToJson) } : queueToJson(result), null, 2)}\n`)
  else process.stdout.write(list.length === 0 ? 'no queues with work or settings\n' : `${queueTable(list)}\n`)
}

/** The queue settings' fields as the commands take them. */
const QUEUE_WORDS = {
  concurrencyLimit: '<limit>',
  keyConcurrencyLimit: '<limit>',
  rateLimit: '<limit>',
  keyRateLimit: '<limit>',
  ratePeriodMs: '--per-ms',
  keyRatePeriodMs: '--per-ms',
}

function parseLimit(text: string): number | null {
  if (text === 'none') return null
  const n = Number(text)
  if (!/^\d+$/.test(text) || !Number.isSafeInteger(n)) {
    throw new ValidationError(`limit must be a positive integer or "none", got "${text}"`, [{ path: 'limit', message: 'a positive integer or "none"' }])
  }
  return n
}

/** --per-ms of a rate limit: none when not given; refused with "none", which removes the limit (and would drop it). */
function periodFor(limit: string, perMs: string | undefined): number | undefined {
  if (perMs === undefined) return undefined
  if (limit === 'none') {
    const message = '--per-ms goes with a limit: "none" removes the rate limit and takes no period'
    throw new ValidationError(message, [{ path: 'perMs', message }])
  }
  return parsePerMs(perMs)
}

/** --per-ms: a whole number of milliseconds (the queue settings check its range). */
function parsePerMs(text: string): number {
  if (!/^\d+$/.test(text))
    throw new ValidationError(`--per-ms must be a whole number of milliseconds, got "${text}"`, [{ path: 'perMs', message: 'milliseconds' }])
  return Number(text)
}

export function registerQueues(program: Command): void {
  const queues = program.command('queues').description('see and change queues: pause, resume, limits, fair share (for every tenant)')
  const json = ['--json', 'print JSON (as the REST API answers)'] as const

  queues
    .command('list')
    .description('queues with work or settings, with their depth, running count and limits')
    .option(...json)
    .action((opts: { json?: boolean }) => show(opts.json, (q) => q.list()))
  queues
    .command('view')
    .description("one queue's settings and figures")
    .argument('<queue>')
    .option(...json)
    .action((name: string, opts: { json?: boolean }) => show(opts.json, (q) => q.view(name)))
  queues
    .command('pause')
    .description('stop claiming from a queue (running jobs finish; submits are still accepted)')
    .argument('<queue>')
    .option(...json)
    .action((name: string, opts: { json?: boolean }) => show(opts.json, (q) => q.pause(name), 'paused'))
  queues
    .command('resume')
    .description('claim from a paused queue again')
    .argument('<queue>')
    .option(...json)
    .action((name: string, opts: { json?: boolean }) => show(opts.json, (q) => q.resume(name), 'resumed'))
  queues
    .command('limit')
    .description('at most <limit> executions of the queue running at once across all workers ("none": no limit)')
    .argument('<queue>')
    .argument('<limit>', 'a positive integer, or none')
    .option(...json)
    .action((name: string, limit: string, opts: { json?: boolean }) => show(opts.json, (q) => q.setConcurrencyLimit(name, parseLimit(limit)), 'set'))
  queues
    .command('rate-limit')
    .description('at most <limit> starts of the queue per period across all workers ("none": no rate limit)')
    .argument('<queue>')
    .argument('<limit>', 'a positive integer, or none')
    .option('--per-ms <ms>', 'the period in milliseconds (default: the period the queue has, or 1000; not with none)')
    .option(...json)
    .action((name: string, limit: string, opts: { json?: boolean; perMs?: string }) =>
      show(opts.json, (q) => q.setRateLimit(name, parseLimit(limit), periodFor(limit, opts.perMs)), 'set'),
    )
  queues
    .command('key-rate-limit')
    .description('at most <limit> starts of one concurrency key of the queue per period across all workers ("none": no rate limit per key)')
    .argument('<queue>')
    .argument('<limit>', 'a positive integer, or none')
    .option('--per-ms <ms>', 'the period in milliseconds (default: the period the queue has, or 1000; not with none)')
    .option(...json)
    .action((name: string, limit: string, opts: { json?: boolean; perMs?: string }) =>
      show(opts.json, (q) => q.setKeyRateLimit(name, parseLimit(limit), periodFor(limit, opts.perMs)), 'set'),
    )
  queues
    .command('key-limit')
    .description('at most <limit> executions of one concurrency key of the queue running at once ("none": no limit)')
    .argument('<queue>')
    .argument('<limit>', 'a positive integer, or none')
    .option(...json)
    .action((name: string, limit: string, opts: { json?: boolean }) => show(opts.json, (q) => q.setKeyConcurrencyLimit(name, parseLimit(limit)), 'set'))
  queues
    .command('fair-share')
    .description('"on": claims take turns between tenants (strict priority first, then round-robin by tenant weight); "off": oldest due first')
    .argument('<queue>')
    .argument('<on|off>')
    .option(...json)
    .action((name: string, state: string, opts: { json?: boolean }) => {
      if (state !== 'on' && state !== 'off') {
        throw new ValidationError(`fair-share takes "on" or "off", got "${state}"`, [{ path: 'fairShare', message: '"on" or "off"' }])
      }
      return show(opts.json, (q) => q.setFairShare(name, state === 'on'), 'set')
    })
}
