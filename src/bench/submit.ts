/**
 * The submit scenarios of `scheduler bench`: a batch from TypeScript (with the CPU per job of the
 * submitting process and of PostgreSQL), single submits from 8 concurrent TypeScript callers, and
 * POST /v1/jobs against one API process from 32 connections.
 */
import { performance } from 'node:perf_hooks'
import type autocannon from 'autocannon'
import { createApiKey } from '../api/auth.ts'
import type { Client } from '../client.ts'
import { cpuMeter } from './cpu.ts'
import { freePort } from './probes.ts'
import { spawnApi, type BenchProcess } from './processes.ts'
import type { Row } from './report.ts'
import type { Scratch } from './scratch.ts'
import { figure } from './stats.ts'

export interface SubmitScenarios {
  s: Scratch
  client: Client
  /** Jobs in the batch scenario. */
  n: number
  quick: boolean
  /** Labels of the repetitions of a figure. */
  reps: (label: string) => string[]
  add: (row: Row) => void
  loadTest: typeof autocannon | undefined
  track: <P extends BenchProcess>(p: P) => P
  /** Which to run: the TypeScript ones (batch and single), the REST one. */
  batch: boolean
  rest: boolean
  progress: (line: string) => void
}

/** Runs the chosen submit scenarios and adds their rows; returns the API's peak RSS (MB; NaN without REST). */
export async function addSubmitRows(o: SubmitScenarios): Promise<number> {
  const { s, client, n, quick, reps, add, loadTest, track, batch, rest } = o
  const { progress } = o
  if (batch) {
    const runs: number[] = []
    const clientUs: number[] = []
    const postgresUs: number[] = []
    for (const l of reps('submit batch')) {
      progress(l)
      await s.reset()
      const t0 = performance.now()
      const meter = cpuMeter({})
      const ownCpu = process.cpuUsage()
      for (let done = 0; done < n; done += 10_000) {
        await client.submitJobs(Array.from({ length: Math.min(10_000, n - done) }, () => ({ type: 'bench.noop' })))
      }
      runs.push(n / ((performance.now() - t0) / 1000))
      const own = process.cpuUsage(ownCpu)
      clientUs.push((own.user + own.system) / n)
      postgresUs.push((meter.read().postgres / n) * 1e6)
    }
    add({
      scenario: 'submit',
      metric: `batch from TypeScript (${n.toLocaleString('en-US')} jobs, 10,000 per call)`,
      unit: 'jobs/s',
      figure: figure(runs),
      target: '≥ 120,000',
    })
    add({ scenario: 'submit', metric: 'CPU per job, batch from TypeScript: the submitting process', unit: 'µs', figure: figure(clientUs) })
    add({ scenario: 'submit', metric: 'CPU per job, batch from TypeScript: PostgreSQL', unit: 'µs', figure: figure(postgresUs) })
  }
  if (batch) {
    const runs: number[] = []
    const perCaller = quick ? 250 : 1_000
    for (const l of reps('submit single ×8')) {
      progress(l)
      await s.reset()
      const t0 = performance.now()
      await Promise.all(
        Array.from({ length: 8 }, async () => {
          for (let i = 0; i < perCaller; i++) await client.submitJob({ type: 'bench.noop' })
        }),
      )
      runs.push((8 * perCaller) / ((performance.now() - t0) / 1000))
    }
    add({ scenario: 'submit', metric: 'single submitJob from TypeScript, 8 concurrent callers', unit: 'jobs/s', figure: figure(runs), target: '≥ 4,000' })
  }
  let apiRss = Number.NaN
  if (rest) {
    const runs: number[] = []
    const p99s: number[] = []
    const key = await createApiKey(s.db, { tenant: 'bench', name: 'bench' })
    for (const l of reps('submit REST ×32')) {
      progress(l)
      await s.reset()
      const port = await freePort()
      const api = track(spawnApi({ databaseUrl: s.url, port }))
      await api.ready
      if (!loadTest) throw new Error('the REST scenario ran without its load generator')
      const result = await loadTest({
        url: `http://127.0.0.1:${port}/v1/jobs`,
        method: 'POST',
        connections: 32,
        duration: quick ? 2 : 8,
        headers: { authorization: `Bearer ${key.key}`, 'content-type': 'application/json' },
        body: JSON.stringify({ type: 'bench.noop', payload: { n: 1 } }),
      })
      if (result.non2xx > 0 || result.errors > 0) {
        throw new Error(`REST submit: ${result.non2xx} non-2xx answers and ${result.errors} errors`)
      }
      runs.push(result.requests.average)
      p99s.push(result.latency.p99)
      apiRss = Math.max(Number.isNaN(apiRss) ? 0 : apiRss, api.peakRssMb())
      await api.stop()
    }
    add({ scenario: 'submit', metric: 'POST /v1/jobs, one API process, 32 connections', unit: 'jobs/s', figure: figure(runs), target: '≥ 4,000' })
    add({ scenario: 'submit', metric: 'POST /v1/jobs p99 latency', unit: 'ms', figure: figure(p99s), target: '< 50' })
  }
  return apiRss
}
