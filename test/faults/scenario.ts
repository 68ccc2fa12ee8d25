/**
 * The fault scenario: a real `scheduler api` process and several real
 * `scheduler worker` processes on the test file's database, a mixed workload
 * submitted over HTTP by concurrent clients, and faults injected while it
 * runs:
 *   - SIGKILL of a random worker every few seconds, restarted after a pause;
 *   - one worker frozen with SIGSTOP for longer than its lease, then SIGCONT;
 *   - one wipe of every database connection (pg_terminate_backend);
 *   - the API SIGKILLed and restarted on the same port while clients submit.
 * When everything has settled it collects what the checker may read: the
 * ledger the fixture handlers wrote, and the jobs and executions as the API
 * reports them. `useFaultScenario` registers the hooks; call it at file level.
 */
import { mkdtemp, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { sql } from 'kysely'
import { afterEach } from 'vitest'
import type { JobJson } from '../../src/api/schemas/job.ts'
import type { ExecutionJson } from '../../src/api/schemas/execution.ts'
import { useTestDb } from '../db.ts'
import { useWorkerProcesses, type LedgerRow, type WorkerProcess } from '../worker/processes.ts'
import { freePort, schedulerCli, startApiProcess, type ApiProcess } from './api-process.ts'
import { submitAll, type SubmitOutcome, type SubmitterStats } from './submitter.ts'
import { buildWorkload, createRandom, type JobSpec } from './workload.ts'

export interface ScenarioOptions {
  seed: number
  oneTimeJobs: number
  recurringJobs: number
  recurringForMs: number
  submitForMs: number
  /** Delayed jobs are due 1 s to this long after they are sent. */
  maxDelayMs: number
  clients: number
  workers: number
  concurrency: number
  /** Mean time between SIGKILLs (±25 %); killing goes on until submissions end and `minKills` happened. */
  killEveryMs: number
  minKills: number
  /** Pause before a killed worker is restarted. */
  restartAfterMs: number
  freezeAtMs: number
  freezeForMs: number
  wipeAtMs: number
  apiKillAtMs: number
  apiDownForMs: number
  /** Longest wait, after the last submission, for every job to finish. */
  drainTimeoutMs: number
  /** Worker settings (short leases, so recovery is quick). */
  leaseMs: number
  heartbeatMs: number
}

export interface FaultLog {
  kills: Array<{ pid: number; atMs: number }>
  freeze: { pid: number; stoppedAtMs: number; continuedAtMs: number } | null
  wipe: { atMs: number; terminated: number; livePids: number[] } | null
  apiRestart: { killedAtMs: number; restartedAtMs: number } | null
}

/** Everything the checker reads: the ledger, the API's view, and what the clients and fault injector saw. */
export interface Observation {
  options: ScenarioOptions
  startedAtMs: number
  endedAtMs: number
  specs: JobSpec[]
  outcomes: Map<string, SubmitOutcome>
  stats: SubmitterStats
  /** Every job of the tenant, as GET /v1/jobs lists them. */
  jobs: JobJson[]
  /** Executions of the recurring jobs (GET /v1/jobs/{id}/executions), by job id. */
  histories: Map<string, ExecutionJson[]>
  ledger: LedgerRow[]
  faults: FaultLog
  /** Worker pids started during the run. */
  workerPids: number[]
  apiLogs: string
  apiKey: string
  /** What each worker process wrote, by pid (for diagnosis). */
  workerLogs: Map<number, string>
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms))

function progress(message: string): void {
  if (process.env.FAULTS_QUIET !== '1') process.stderr.write(`[faults ${new Date().toISOString().slice(11, 23)}] ${message}\n`)
}

/**
 * Writes the ledger, the API's jobs and every process's log under the system temp folder (not the
 * test run's own, which is removed when the run ends); returns the folder.
 */
export async function saveForDiagnosis(obs: Observation): Promise<string> {
  const dir = await mkdtemp(join(process.env.PGSCHED_TEST_KEEP_DIR ?? tmpdir(), `pgsched-faults-${obs.options.seed}-`))
  const csv = obs.ledger.map((r) =>
    [r.execution_id, r.job_id, r.attempt, r.pid, r.started_at.toISOString(), r.finished_at?.toISOString() ?? '', r.outcome ?? ''].join(','),
  )
  await writeFile(join(dir, 'ledger.csv'), `execution_id,job_id,attempt,pid,started_at,finished_at,outcome\n${csv.join('\n')}\n`)
  await writeFile(join(dir, 'jobs.json'), JSON.stringify(obs.jobs))
  await writeFile(join(dir, 'faults.json'), JSON.stringify(obs.faults, null, 2))
  await writeFile(join(dir, 'api.log'), obs.apiLogs)
  for (const [pid, log] of obs.workerLogs) await writeFile(join(dir, `worker-${pid}.log`), log)
  return dir
}

export function useFaultScenario() {
  const t = useTestDb()
  const { spawnWorker, ledger } = useWorkerProcesses(t)
  const apis: ApiProcess[] = []

  afterEach(async () => {
    for (const api of apis.splice(0)) {
      if (api.alive()) api.child.kill('SIGKILL')
      await api.exited
    }
  })

  async function run(o: ScenarioOptions): Promise<Observation> {
    const random = createRandom(o.seed ^ 0x5eed)
    const workerEnv = {
      SCHEDULER_LEASE_MS: String(o.leaseMs),
      SCHEDULER_HEARTBEAT_MS: String(o.heartbeatMs),
      SCHEDULER_REAPER_INTERVAL_MS: '250',
      SCHEDULER_POLL_INTERVAL_MS: '250',
      SCHEDULER_DB_POOL_SIZE: '5',
    }
    const apiKey = (await schedulerCli(t.url, ['keys', 'create', '--tenant', 'faults', '--name', 'fault suite'])).trim()
    const port = await freePort()
    let api = await startApiProcess({ databaseUrl: t.url, port })
    apis.push(api)

    const workers: WorkerProcess[] = []
    const started: WorkerProcess[] = []
    const ready = new Set<WorkerProcess>()
    const startWorker = async () => {
      const w = spawnWorker({ concurrency: o.concurrency, env: workerEnv })
      started.push(w)
      workers.push(w)
      await w.ready
      ready.add(w)
      return w
    }
    await Promise.all(Array.from({ length: o.workers }, () => startWorker()))

    const startedAtMs = Date.now()
    const at = (offsetMs: number) => sleep(Math.max(0, startedAtMs + offsetMs - Date.now()))
    const specs = buildWorkload({
      seed: o.seed,
      startMs: startedAtMs,
      oneTimeJobs: o.oneTimeJobs,
      recurringJobs: o.recurringJobs,
      recurringForMs: o.recurringForMs,
      submitForMs: o.submitForMs,
      maxDelayMs: o.maxDelayMs,
    })
    progress(`seed ${o.seed}: ${specs.length} jobs over ${o.submitForMs} ms, ${o.workers} workers × ${o.concurrency}`)
    const faults: FaultLog = { kills: [], freeze: null, wipe: null, apiRestart: null }
    let frozenPid: number | null = null
    let submitting = true

    const submitted = submitAll(specs, {
      url: () => api.url,
      apiKey,
      clients: o.clients,
      startMs: startedAtMs,
      repeatShare: 0.02,
      random,
    }).finally(() => (submitting = false))

    /** Workers running normally: started, not killed, not frozen. */
    const live = () => workers.filter((w) => w.alive() && ready.has(w) && w.pid !== frozenPid)

    const restarts: Array<Promise<unknown>> = []
    const killing = (async () => {
      while (submitting || faults.kills.length < o.minKills) {
        await sleep(o.killEveryMs * (0.75 + random() * 0.5))
        const candidates = live()
        const victim = candidates[Math.floor(random() * candidates.length)]
        if (!victim) continue
        victim.child.kill('SIGKILL')
        faults.kills.push({ pid: victim.pid, atMs: Date.now() })
        await victim.exited
        workers.splice(workers.indexOf(victim), 1)
        progress(`SIGKILL worker ${victim.pid} (${faults.kills.length})`)
        // Restarted in the background, so the next kill keeps its pace.
        restarts.push(
          sleep(o.restartAfterMs)
            .then(startWorker)
            .catch((err: unknown) => progress(`restart failed: ${String(err)}`)),
        )
      }
      await Promise.all(restarts)
    })()

    const freezing = (async () => {
      await at(o.freezeAtMs)
      // Freeze a worker that is running something, so the zombie has work to lose.
      let zombie: WorkerProcess | undefined
      while (!zombie) {
        const pid = await holdingPid(live().map((w) => w.pid))
        zombie = live().find((w) => w.pid === pid)
      }
      frozenPid = zombie.pid
      zombie.child.kill('SIGSTOP')
      const stoppedAtMs = Date.now()
      progress(`SIGSTOP worker ${zombie.pid} for ${o.freezeForMs} ms`)
      await sleep(o.freezeForMs)
      const continuedAtMs = Date.now()
      zombie.child.kill('SIGCONT')
      faults.freeze = { pid: zombie.pid, stoppedAtMs, continuedAtMs }
      progress(`SIGCONT worker ${zombie.pid}`)
      // Let it notice, then it is an ordinary worker again (and may be killed).
      await sleep(o.leaseMs)
      frozenPid = null
    })()

    const wiping = (async () => {
      await at(o.wipeAtMs)
      const livePids = live().map((w) => w.pid)
      const atMs = Date.now()
      const { rows } = await sql<{ n: number }>`
        select count(pg_terminate_backend(pid))::int as n from pg_stat_activity
         where datname = current_database() and pid <> pg_backend_pid()`.execute(t.db)
      faults.wipe = { atMs, terminated: rows[0]?.n ?? 0, livePids }
      progress(`terminated ${faults.wipe.terminated} database connections`)
    })()

    const restartingApi = (async () => {
      await at(o.apiKillAtMs)
      api.child.kill('SIGKILL')
      const killedAtMs = Date.now()
      await api.exited
      progress('SIGKILL api')
      await sleep(o.apiDownForMs)
      api = await startApiProcess({ databaseUrl: t.url, port })
      apis.push(api)
      faults.apiRestart = { killedAtMs, restartedAtMs: Date.now() }
      progress('api restarted')
    })()

    /** A pid among `pids` with a handler running now (ledger row not finished), else any of them. */
    async function holdingPid(pids: number[]): Promise<number | undefined> {
      for (let i = 0; i < 40; i++) {
        const { rows } = await sql<{ pid: number }>`
          select pid from public.test_ledger where finished_at is null and pid = any(${pids}::int[])
           group by pid order by count(*) desc limit 1`.execute(t.db)
        if (rows[0]) return rows[0].pid
        await sleep(50)
      }
      return pids[0]
    }

    const { outcomes, stats } = await submitted
    progress(`submitted: ${outcomes.size} accepted, responses ${JSON.stringify(stats.responses)}`)
    await Promise.all([killing, freezing, wiping, restartingApi])

    // Drain: every recurring job past its end, and no job left SCHEDULED or RUNNING.
    const get = async <T>(path: string): Promise<T> => {
      for (let i = 0; ; i++) {
        try {
          const res = await fetch(`${api.url}${path}`, { headers: { authorization: `Bearer ${apiKey}` }, signal: AbortSignal.timeout(30_000) })
          if (res.status === 200) return (await res.json()) as T
          if (res.status < 500 || i > 20) throw new Error(`GET ${path}: ${res.status} ${await res.text()}`)
        } catch (err: unknown) {
          if (i > 20) throw err
        }
        await sleep(250)
      }
    }
    const drainDeadline = Date.now() + o.drainTimeoutMs
    const recurringEndMs = startedAtMs + o.recurringForMs
    // Two answers in a row with nothing left: the two lists are two reads, and a job can pass from one
    // to the other between them (RUNNING → SCHEDULED as the reaper requeues a dead worker's run, or
    // back as it is claimed), in neither list at once.
    let quiet = 0
    for (;;) {
      const [notStarted, started] = await Promise.all([
        get<{ items: JobJson[] }>('/v1/jobs?status=SCHEDULED&limit=1'),
        get<{ items: JobJson[] }>('/v1/jobs?status=RUNNING&limit=1'),
      ])
      quiet = Date.now() > recurringEndMs + 3000 && notStarted.items.length === 0 && started.items.length === 0 ? quiet + 1 : 0
      if (quiet >= 2) break
      if (Date.now() > drainDeadline) {
        progress('drain deadline passed with jobs unfinished')
        break
      }
      await sleep(1000)
    }
    progress('drained; reading the ledger and the API')

    const jobs: JobJson[] = []
    for (let cursor: string | null = null; ; ) {
      const page: { items: JobJson[]; nextCursor: string | null } = await get(`/v1/jobs?limit=500${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''}`)
      jobs.push(...page.items)
      cursor = page.nextCursor
      if (!cursor) break
    }
    const histories = new Map<string, ExecutionJson[]>()
    for (const job of jobs.filter((j) => j.schedule !== null)) {
      const items: ExecutionJson[] = []
      for (let cursor: string | null = null; ; ) {
        const page: { items: ExecutionJson[]; nextCursor: string | null } = await get(
          `/v1/jobs/${job.id}/executions?limit=500${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''}`,
        )
        items.push(...page.items)
        cursor = page.nextCursor
        if (!cursor) break
      }
      histories.set(job.id, items)
    }
    const rows = await ledger()
    const apiLogs = apis.map((a) => a.output()).join('')
    return {
      options: o,
      startedAtMs,
      endedAtMs: Date.now(),
      specs,
      outcomes,
      stats,
      jobs,
      histories,
      ledger: rows,
      faults,
      workerPids: started.map((w) => w.pid),
      apiLogs,
      apiKey,
      workerLogs: new Map(started.map((w) => [w.pid, w.output()])),
    }
  }

  return { t, run }
}
