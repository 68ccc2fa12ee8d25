import { execFile, spawn } from 'node:child_process'
import { once } from 'node:events'
import { mkdtempSync, readFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { promisify } from 'node:util'
import { describe, expect, it } from 'vitest'
import { LIST_REQUESTS } from '../../src/bench/list.ts'
import { adminUrl } from '../db.ts'
import { waitFor } from '../wait-for.ts'

const run = promisify(execFile)

interface ReportRow {
  scenario: string
  metric: string
  unit: string
  figure: { median: number; runs: number[] }
  ofCeiling?: number
  target?: string
}

/** Runs `scheduler bench` with `args` and `--json`, on a scratch database beside the test database. */
async function bench(args: string[]): Promise<{ stdout: string; stderr: string; report: { rows: ReportRow[]; explain: string } }> {
  const out = join(mkdtempSync(join(tmpdir(), 'pgsched-bench-')), 'report.json')
  const { stdout, stderr } = await run('node', ['bin/scheduler', 'bench', ...args, '--json', out], {
    env: { ...process.env, DATABASE_URL: adminUrl() },
    maxBuffer: 10 * 1024 * 1024,
  })
  return { stdout, stderr, report: JSON.parse(readFileSync(out, 'utf8')) as { rows: ReportRow[]; explain: string } }
}

/** How many databases named like `pattern` are left. */
async function databasesLike(pattern: string): Promise<string> {
  const { stdout } = await run('psql', [adminUrl(), '-Atc', `select count(*) from pg_database where datname like '${pattern}'`])
  return stdout.trim()
}

describe('scheduler bench --quick', () => {
  it('runs every scenario on a scratch database and reports finite figures', { timeout: 180_000 }, async () => {
    const { stdout, report } = await bench(['--quick'])
    const scenarios = new Set(report.rows.map((r) => r.scenario))
    expect([...scenarios].sort()).toEqual(['burn-down', 'ceiling', 'latency', 'memory', 'priority', 'recurring', 'scale', 'steady', 'submit'])
    for (const row of report.rows.filter((r) => r.scenario !== 'memory')) expect(Number.isFinite(row.figure.median)).toBe(true)
    expect(report.rows.find((r) => r.scenario === 'burn-down')?.ofCeiling).toBeGreaterThan(0)
    // CPU per job, split between Node.js and PostgreSQL, for the burn-down and the batch submit
    const cpuRows = report.rows.filter((r) => r.metric.startsWith('CPU per job'))
    expect(cpuRows.map((r) => `${r.scenario}: ${r.metric.replace(/.*: /, '')}`).sort()).toEqual([
      'burn-down: PostgreSQL',
      'burn-down: PostgreSQL',
      'burn-down: worker',
      'burn-down: workers',
      'submit: PostgreSQL',
      'submit: the submitting process',
    ])
    for (const row of cpuRows) expect(row.figure.median, `${row.scenario}: ${row.metric}`).toBeGreaterThan(0)
    // the steady scenario's reference: a bare HTTP server under the same load
    expect(
      report.rows.find((r) => r.scenario === 'steady' && r.metric.startsWith('for reference: CPU per request of a bare Fastify server'))?.figure.median,
    ).toBeGreaterThan(0)
    expect(report.explain).toContain('Index Scan using due_claim_idx on due') // the claim index returns rows in priority order
    expect(stdout).toContain('| scenario | measure | median |')
    expect(await databasesLike('pgsched_bench_%')).toBe('0')
  })

  it('runs the flow-control variants only when named, each paired with the plain burn-down, fair share also with the same submits without it', {
    timeout: 180_000,
  }, async () => {
    const { stdout, report } = await bench(['--quick', '--only', 'flow'])
    expect([...new Set(report.rows.map((r) => r.scenario))].sort()).toEqual([
      'burn-down',
      'burn-down-fair',
      'burn-down-fair-backlogs',
      'burn-down-limit',
      'burn-down-rate',
      'burn-down-tenants',
    ])
    for (const row of report.rows) expect(Number.isFinite(row.figure.median)).toBe(true)
    // per variant and process count (1, 2): jobs/s, the share of the paired burn-down, CPU per job
    const ratios = report.rows.filter((r) => r.unit === '% of burn-down')
    expect(ratios.map((r) => r.scenario).sort()).toEqual([
      'burn-down-fair',
      'burn-down-fair',
      'burn-down-fair-backlogs',
      'burn-down-fair-backlogs',
      'burn-down-limit',
      'burn-down-limit',
      'burn-down-rate',
      'burn-down-rate',
      'burn-down-tenants',
      'burn-down-tenants',
    ])
    for (const row of ratios) expect(row.figure.median, `${row.scenario}: ${row.metric}`).toBeGreaterThan(0)
    // the goal is shown for the mechanisms on but not binding against the same run without them: the
    // plain burn-down for the limits, the same tenants' submits with fair share off for fair share;
    // none for the fair order reordering backlogs, nor for the tenants' submits themselves
    for (const row of ratios) expect(row.target).toBe(['burn-down-limit', 'burn-down-rate'].includes(row.scenario) ? '≥ 90' : undefined)
    const fairShares = report.rows.filter((r) => r.unit === '% of burn-down-tenants')
    expect(fairShares.map((r) => [r.scenario, r.target])).toEqual([
      ['burn-down-fair', '≥ 90'],
      ['burn-down-fair', '≥ 90'],
    ])
    for (const row of fairShares) expect(row.figure.median, `${row.scenario}: ${row.metric}`).toBeGreaterThan(0)
    expect(report.rows.filter((r) => r.scenario.startsWith('burn-down-') && r.unit === 'jobs/s')).toHaveLength(10)
    expect(stdout).toContain('| burn-down-fair |')
    expect(await databasesLike('pgsched_bench_%')).toBe('0')
  })

  it('runs the sandbox variants only when named, each paired with the in-process burn-down', { timeout: 180_000 }, async () => {
    const { report } = await bench(['--quick', '--only', 'sandbox'])
    expect([...new Set(report.rows.map((r) => r.scenario))].sort()).toEqual(['burn-down-in-process', 'burn-down-process', 'burn-down-thread'])
    for (const row of report.rows) expect(row.figure.median, `${row.scenario}: ${row.metric}`).toBeGreaterThan(0)
    // per mode and process count (1, 2): jobs/s, the share of the paired in-process run, CPU per job (workers, PostgreSQL)
    const ratios = report.rows.filter((r) => r.unit === '% of burn-down')
    expect(ratios.map((r) => r.scenario).sort()).toEqual(['burn-down-process', 'burn-down-process', 'burn-down-thread', 'burn-down-thread'])
    expect(report.rows.filter((r) => r.unit === 'jobs/s')).toHaveLength(6)
    // a process sandbox's CPU is counted with its worker's: more than in-process and a thread's
    const workerCpu = (scenario: string) =>
      report.rows.find((r) => r.scenario === scenario && r.metric.startsWith('CPU per job, 1 worker process'))?.figure.median ?? 0
    expect(workerCpu('burn-down-process')).toBeGreaterThan(workerCpu('burn-down-in-process'))
    expect(report.rows.filter((r) => r.unit === 'ms')).toHaveLength(4) // each mode's start, apart: wall time and CPU
    expect(await databasesLike('pgsched_bench_%')).toBe('0')
  })

  it('runs the event variants only when named, each paired with the plain burn-down, the SSE client getting every event once', {
    timeout: 180_000,
  }, async () => {
    const { report } = await bench(['--quick', '--only', 'events'])
    expect([...new Set(report.rows.map((r) => r.scenario))].sort()).toEqual(['burn-down', 'burn-down-events-kept', 'burn-down-events-sse'])
    const ratios = report.rows.filter((r) => r.unit === '% of burn-down')
    expect(ratios.map((r) => r.scenario).sort()).toEqual(['burn-down-events-kept', 'burn-down-events-kept', 'burn-down-events-sse', 'burn-down-events-sse'])
    for (const row of ratios) expect(row.figure.median, `${row.scenario}: ${row.metric}`).toBeGreaterThan(0)
    // the SSE variant's CPU counts its API process with the workers
    expect(report.rows.some((r) => r.scenario === 'burn-down-events-sse' && r.metric.includes('API process'))).toBe(true)
    // the client's own CPU over the burn-down (its started and succeeded events), reported apart, at 1 and 2 worker processes
    const client = report.rows.filter((r) => r.scenario === 'burn-down-events-sse' && r.metric.includes('with the SSE client'))
    expect(client).toHaveLength(2)
    for (const row of client) expect(row.figure.median).toBeGreaterThan(0)
  })

  it('runs the steady state at several rates and on a new database from its first request only when named', { timeout: 180_000 }, async () => {
    const { report } = await bench(['--quick', '--only', 'steady-rates,cold-start'])
    expect([...new Set(report.rows.map((r) => r.scenario))].sort()).toEqual(['cold-start', 'steady-rates'])
    // --quick: the two lowest rates, each with its CPU per execution split and in total
    const totals = report.rows.filter((r) => r.scenario === 'steady-rates' && r.metric.endsWith('CPU per execution, total'))
    expect(totals.map((r) => r.metric)).toEqual([
      '150/s + 200 recurring jobs: CPU per execution, total',
      '300/s + 200 recurring jobs: CPU per execution, total',
    ])
    for (const row of totals) expect(row.figure.median).toBeGreaterThan(0)
    // beside each rate, the reference server's CPU per request under the same load
    const bare = report.rows.filter((r) => r.scenario === 'steady-rates' && r.metric.includes('bare Fastify server'))
    expect(bare.map((r) => r.metric)).toEqual([
      '150/s + 200 recurring jobs: for reference, CPU per request of a bare Fastify server at 150/s',
      '300/s + 200 recurring jobs: for reference, CPU per request of a bare Fastify server at 300/s',
    ])
    for (const row of bare) expect(row.figure.median).toBeGreaterThan(0)
    // the cold start measured the submits the load generator saw and the lag of what they made due
    const cold = (metric: string) => report.rows.find((r) => r.scenario === 'cold-start' && r.metric.startsWith(metric))?.figure.median
    expect(cold('executions per second')).toBeGreaterThan(0)
    expect(cold('due → claim p99')).toBeGreaterThan(0)
    expect(cold('POST /v1/jobs p99')).toBeGreaterThan(0)
    expect(await databasesLike('pgsched_bench_%')).toBe('0')
  })

  it('times the reads of the jobs page over HTTP with history in place, only when named, and drops its database', { timeout: 300_000 }, async () => {
    const { stderr, report } = await bench(['--only', 'list', '--history-rows', '10000'])
    expect(stderr).toContain('list: writing 10,000 executions of history')
    expect([...new Set(report.rows.map((r) => r.scenario))]).toEqual(['list'])
    // each request of the table: its median and p95 over 20 requests, in ms
    const medians = report.rows.filter((r) => r.metric.endsWith('median of 20'))
    expect(medians.map((r) => r.metric)).toEqual(LIST_REQUESTS.map((q) => `${q.name}, 10,000 executions in history: median of 20`))
    expect(report.rows.filter((r) => r.metric.endsWith('p95 of 20'))).toHaveLength(LIST_REQUESTS.length)
    for (const row of medians) {
      expect(row.figure.runs).toHaveLength(20)
      expect(row.figure.median).toBeGreaterThan(0)
      expect(row.unit).toBe('ms')
    }
    expect(medians.find((r) => r.metric.startsWith('GET /v1/jobs (first page, 50)'))?.target).toBe('< 100')
    expect(await databasesLike('pgsched_bench_list_10000_p%')).toBe('0')
  })
})

describe('scheduler bench interrupted', () => {
  it('stops the processes it started and drops its scratch databases on SIGTERM, then exits 143', { timeout: 120_000 }, async () => {
    const before = await databasesLike('pgsched_bench_%')
    const bench = spawn('node', ['bin/scheduler', 'bench', '--quick', '--only', 'burn-down'], {
      env: { ...process.env, DATABASE_URL: adminUrl() },
      stdio: ['ignore', 'ignore', 'pipe'],
    })
    let stderr = ''
    bench.stderr.on('data', (chunk: Buffer) => {
      stderr += chunk.toString()
    })
    const exited = once(bench, 'exit')
    const childrenOf = (pid: number): number[] => readFileSync(`/proc/${pid}/task/${pid}/children`, 'utf8').trim().split(/\s+/).filter(Boolean).map(Number)
    const alive = (pid: number) => {
      try {
        process.kill(pid, 0)
        return true
      } catch {
        return false
      }
    }
    let children: number[] = []
    try {
      // its worker processes running the burn-down
      await waitFor(
        () => {
          children = childrenOf(bench.pid as number)
          return children.length > 0
        },
        { what: 'the bench to start its workers', timeoutMs: 90_000 },
      )
      expect(await databasesLike('pgsched_bench_%')).toBe(String(Number(before) + 1))
      bench.kill('SIGTERM')
      const [code] = (await exited) as [number | null]
      expect(code, stderr).toBe(143)
      expect(stderr).toContain('scheduler bench: interrupted; stopping its processes and dropping its scratch databases')
      expect(children.filter(alive)).toEqual([])
      expect(await databasesLike('pgsched_bench_%')).toBe(before)
    } finally {
      for (const pid of [bench.pid as number, ...children]) if (alive(pid)) process.kill(pid, 'SIGKILL')
    }
  })
})
