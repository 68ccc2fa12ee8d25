/**
 * `scheduler bench`: runs the benchmark scenarios against a scratch database
 * on the DATABASE_URL server, prints the table, optionally writes JSON, and,
 * only when asked (--write-docs: full runs, or the list section alone), rewrites docs/benchmarks.md with the
 * figures: an installed package's folder may well be read-only (the Docker image).
 */
import { execFileSync } from 'node:child_process'
import { readFileSync } from 'node:fs'
import { constants } from 'node:fs'
import { access, writeFile } from 'node:fs/promises'
import { dirname, join, resolve } from 'node:path'
import type { Command } from 'commander'
import { ConfigError } from '../../errors.ts'
import { createLogger } from '../../logger.ts'
import { packageRoot } from '../../lib/package-root.ts'
import { PARTITION_COUNT_DEFAULT } from '../../core/names.ts'
import { runBench, SCENARIOS, type Scenario } from '../../bench/run.ts'
import { reportTable, type BenchReport } from '../../bench/report.ts'
import { SANDBOX_CONCURRENCY } from '../../bench/sandboxes.ts'
import { commandConfig } from '../shared.ts'
import { onShutdownSignal, signalExitCode } from '../signals.ts'
import { stopProcesses } from '../../bench/processes.ts'
import { dropScratches } from '../../bench/scratch.ts'

interface BenchFlags {
  quick?: boolean
  json?: string
  reps?: string
  historyRows?: string
  keepHistory?: boolean
  only?: string
  partitions?: string
  steadyRate?: string
  steadySeconds?: string
  writeDocs?: string | boolean
}

function positiveInt(value: string | undefined, name: string, fallback: number): number {
  if (value === undefined) return fallback
  const n = Number(value)
  // decimal digits only: Number() would take "0x10" as 16 and "1e3" as 1000
  if (!/^\d+$/.test(value) || !Number.isSafeInteger(n) || n < 1) throw new ConfigError(`--${name} must be a positive integer (got ${JSON.stringify(value)})`)
  return n
}

/** Refuses, naming `flag`, a file that cannot be written: its folder missing or not writable, or the file not writable. */
async function assertWritable(file: string, flag: string): Promise<void> {
  const existing = await access(file, constants.F_OK).then(
    () => true,
    () => false,
  )
  try {
    await access(existing ? file : dirname(resolve(file)), constants.W_OK)
  } catch (err: unknown) {
    const why = (err as NodeJS.ErrnoException).code === 'ENOENT' ? 'its folder does not exist' : 'it cannot be written'
    throw new ConfigError(`${flag} ${file}: ${why}`)
  }
}

/** docs/peers.md (the peer harness's last table, kept by hand) as a section, or nothing. */
function sideBySide(): string {
  try {
    return `\n## Side by side with graphile-worker and pg-boss\n\n${readFileSync(join(packageRoot(), 'docs', 'peers.md'), 'utf8')}`
  } catch {
    return ''
  }
}

const LIST_HEADING = '## Listing jobs with history in place'

/** The list scenario's section of docs/benchmarks.md (written by `--only list --write-docs`), or nothing. */
function listSection(existing: string): string {
  const start = existing.indexOf(LIST_HEADING)
  if (start < 0) return ''
  const end = existing.indexOf('\n## ', start + LIST_HEADING.length)
  return existing.slice(start, end < 0 ? undefined : end + 1).trimEnd()
}

function listMarkdown(report: BenchReport, command: string): string {
  return `${LIST_HEADING}

Run: ${report.startedAt}, ${Math.round(report.durationS)} s, with \`${command}\` at commit ${commitOf()}, on the machine above
(shared with other work while it ran: single requests vary by tens of milliseconds). One API process on a database
holding the history (src/bench/list-history.ts); each request is sent 20 times in a row after 2 unmeasured ones, by
a tenant key of the largest tenant (55 % of the jobs). The median's range is that of the 20 requests.

${reportTable(report)}
`
}

/** The commit the package was built from, when it is a git checkout. */
function commitOf(): string {
  try {
    return execFileSync('git', ['rev-parse', '--short', 'HEAD'], { cwd: packageRoot(), encoding: 'utf8' }).trim()
  } catch {
    return 'unknown'
  }
}

/** `section` in place of the list section of `existing` (or appended). */
function withListSection(existing: string, section: string): string {
  const old = listSection(existing)
  return old ? existing.replace(old, section.trimEnd()) : `${existing.trimEnd()}\n\n${section}`
}

function markdown(report: BenchReport, command: string): string {
  const m = report.machine
  return `# Benchmarks

Last run: ${report.startedAt}, ${Math.round(report.durationS)} s, with \`${command}\`.
Machine: ${m.cores} × ${m.cpu}, ${m.memoryGiB} GiB, ${m.os}, Node ${m.node}.
Database: ${m.postgres} on the same machine; scratch schema with ${m.partitions} hash partitions.
Each figure is the median of the repetitions, with their range; throughput is also shown as a share of the
**ceiling**, the same claim + complete SQL driven by a bare loop over 2 connections planned as the worker's
hot-path pool plans them, in the same run (the
machine is shared and noisy: ratios hold better than absolute numbers). What bounds each figure, with the
profiles and experiments behind it, is in [performance.md](performance.md). What the per-queue flow control costs
(a concurrency limit, fair share, a rate limit, each on but not binding, paired with the same run without it) is
not part of this run: \`scheduler bench --only flow\` measures it.

${reportTable(report)}
${sideBySide()}
## Claim plan with the history in place

\`\`\`
${report.explain}
\`\`\`
`
}

function readOr(file: string, fallback: string): string {
  try {
    return readFileSync(file, 'utf8')
  } catch {
    return fallback
  }
}

export function registerBench(program: Command): void {
  program
    .command('bench')
    .description('measure throughput, latency, priority, scale and memory on a scratch database')
    .option('--quick', 'small sizes and one repetition (under a minute)')
    .option('--json <file>', 'also write the report as JSON')
    .option('--reps <n>', 'repetitions per figure (default 3; 1 with --quick)')
    .option('--history-rows <n>', 'executions of history written for the scale and list scenarios (default 10000000; 20000 with --quick)')
    .option('--keep-history', "keep the list scenario's seeded database for the next run of the same size (dropped otherwise)")
    .option(
      '--only <scenarios>',
      `comma-separated scenarios to run (${SCENARIOS.join(', ')}); docs are not rewritten. flow (the burn-down-… variants: ` +
        'a concurrency limit, fair share or a rate limit on but not binding, and fair share reordering per-tenant backlogs, each paired with the plain burn-down; ' +
        "fair share's goal is against burn-down-tenants, the same tenants' submits with it off, which runs whenever burn-down-fair does) and sandbox (burn-down-thread, " +
        `burn-down-process: every handler in a thread or process sandbox, each paired with the in-process burn-down, at concurrency ${SANDBOX_CONCURRENCY}) ` +
        'events (burn-down-events-kept: events written with nobody reading; burn-down-events-sse: one SSE client reading GET /v1/events; ' +
        'each paired with the plain burn-down), steady-rates (the steady scenario at 150, 300, 600 and 1200 jobs/s), cold-start (the steady scenario on a new, ' +
        'never-analyzed database from its first request, for 60 s or --steady-seconds if longer; 5 s with --quick) and list (the API reads of the jobs page, timed over HTTP with --history-rows executions in history) run only when named',
    )
    .option('--partitions <n>', `hash partitions of the scratch schema (default: SCHEDULER_PARTITIONS or ${PARTITION_COUNT_DEFAULT})`)
    .option('--steady-rate <n>', 'jobs per second the steady and cold-start scenarios submit over REST (default 600; 100 with --quick)')
    .option(
      '--steady-seconds <n>',
      'measured window of the steady and steady-rates scenarios, after a warm-up of 10 s (3 s with --quick), and of cold-start when over 60 (default 30; 5 with --quick)',
    )
    .option(
      '--write-docs [file]',
      "after a full run, write the figures as markdown to file (default: the package's docs/benchmarks.md); with --only list alone, write or replace its section there",
    )
    .action(async (flags: BenchFlags) => {
      const config = commandConfig({ 'db.partitions': flags.partitions })
      if (!config.databaseUrl) throw new ConfigError('DATABASE_URL must be set (a postgres:// URL; a scratch database is created beside it)')
      const quick = Boolean(flags.quick)
      const only = flags.only?.split(',').map((x) => x.trim())
      const listOnly = only?.length === 1 && only[0] === 'list'
      if (flags.writeDocs !== undefined && (quick || (only && !listOnly)))
        throw new ConfigError('--write-docs needs a full run (without --quick and --only), or --only list alone')
      const unknown = only?.filter((x) => !(SCENARIOS as readonly string[]).includes(x))
      if (unknown && unknown.length > 0)
        throw new ConfigError(`--only: unknown scenario ${unknown.map((x) => `"${x}"`).join(', ')}; choose from ${SCENARIOS.join(', ')}`)
      const docsFile =
        flags.writeDocs === undefined ? undefined : typeof flags.writeDocs === 'string' ? flags.writeDocs : join(packageRoot(), 'docs', 'benchmarks.md')
      // the files written at the end are checked before the run: not found unwritable after it
      if (flags.json) await assertWritable(flags.json, '--json')
      if (docsFile !== undefined) await assertWritable(docsFile, '--write-docs')
      // interrupted: the worker and API processes it started stop, and its scratch databases go
      onShutdownSignal(async (signal) => {
        process.stderr.write('scheduler bench: interrupted; stopping its processes and dropping its scratch databases\n')
        await stopProcesses()
        await dropScratches()
        process.exitCode = signalExitCode(signal)
      })
      const report = await runBench({
        databaseUrl: config.databaseUrl,
        quick,
        reps: positiveInt(flags.reps, 'reps', quick ? 1 : 3),
        historyRows: positiveInt(flags.historyRows, 'history-rows', quick ? 20_000 : 10_000_000),
        keepHistory: Boolean(flags.keepHistory),
        steadyRate: positiveInt(flags.steadyRate, 'steady-rate', quick ? 100 : 600),
        steadySeconds: positiveInt(flags.steadySeconds, 'steady-seconds', quick ? 5 : 30),
        partitions: config.db.partitions,
        only: only as Scenario[] | undefined,
        log: createLogger({ level: 'warn' }),
        progress: (line) => process.stderr.write(`${line}\n`),
      })
      process.stdout.write(`${reportTable(report)}\n\nclaim plan:\n${report.explain}\n`)
      if (flags.json) await writeFile(flags.json, JSON.stringify(report, null, 2))
      if (docsFile !== undefined) {
        const command = ['scheduler bench', ...process.argv.slice(3)].join(' ')
        const file = docsFile
        const existing = readOr(file, '# Benchmarks\n')
        const list = listSection(existing)
        const text = listOnly ? withListSection(existing, listMarkdown(report, command)) : `${markdown(report, command)}${list ? `\n${list}\n` : ''}`
        await writeFile(file, text)
        process.stderr.write(`wrote ${file}\n`)
      }
    })
}
