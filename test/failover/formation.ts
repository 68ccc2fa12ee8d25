/**
 * A real pg_auto_failover formation for failover tests: a monitor and two data nodes on loopback
 * ports, each run by its own `pg_autoctl run` process, everything under one temp folder
 * (/tmp/pgsched-formation-<pid>-XXXXXX: data directories, pg_autoctl's config, state and pid files,
 * one log file per node). pg_autoctl refuses to run as root, so as root it runs as the `postgres`
 * OS user (runuser), with an empty environment apart from what is set here.
 *
 * Replication is synchronous: the formation's number_sync_standbys stays at its default 0 and both
 * nodes keep the default replication-quorum true, which with one standby makes the primary set
 * synchronous_standby_names to 'ANY 1 (pgautofailover_standby_<id>)': a commit returns once the
 * standby has it. When the standby is lost, the monitor moves the primary to wait_primary, which
 * empties synchronous_standby_names so that writes go on (pg_auto_failover's choice, not ours).
 *
 * Failure detection is made faster than pg_auto_failover's defaults (see MONITOR_SETTINGS and
 * NETWORK_PARTITION_TIMEOUT_S): a dead primary is noticed in about 4 s and the standby promoted
 * about 6 s later.
 *
 * Every wait has an explicit deadline, and an error says what it waited for, the formation's state
 * on the monitor and the tail of the logs concerned. createFormation() first removes what killed
 * runs left behind (folders whose pid is gone: their processes, shared memory and files).
 */
import { execFile, execFileSync, spawn, type ChildProcess } from 'node:child_process'
import { closeSync, existsSync, mkdirSync, openSync, readdirSync, readFileSync, chownSync } from 'node:fs'
import { mkdtemp, rm } from 'node:fs/promises'
import { join } from 'node:path'
import pg from 'pg'
import { freePort } from '../faults/api-process.ts'
import { waitFor } from '../wait-for.ts'

/** Where formation folders are made; a fixed place, so a later run finds what a killed run left. */
const TMP_ROOT = '/tmp'
const DIR_PREFIX = 'pgsched-formation-'
const HOST = '127.0.0.1'

/**
 * The monitor's failure detection (defaults in brackets). The monitor checks each node every
 * second; a node whose checks fail and whose pg_autoctl has not reported for 4 s is unhealthy; a
 * primary that cannot be reached is given 6 s to demote itself before the standby is promoted.
 */
export const MONITOR_SETTINGS: Readonly<Record<string, number>> = {
  'pgautofailover.health_check_period': 1000, // ms [5000]
  'pgautofailover.health_check_timeout': 1000, // ms [5000]
  'pgautofailover.health_check_max_retries': 1, // [2]
  'pgautofailover.health_check_retry_delay': 500, // ms [2000]
  'pgautofailover.node_considered_unhealthy_timeout': 4000, // ms [20000]
  'pgautofailover.primary_demote_timeout': 6000, // ms [30000]
  // No failover in the first this-many ms after the monitor starts [10000].
  'pgautofailover.startup_grace_period': 2000,
}

/**
 * Node side (`timeout.network_partition_timeout`, seconds [20]): a primary that reaches neither
 * the monitor nor a standby for this long demotes itself. It stays below primary_demote_timeout,
 * so a primary cut off from everything has stopped taking writes before the standby is promoted.
 */
export const NETWORK_PARTITION_TIMEOUT_S = 3

/** Deadlines, in ms. */
export const TIMEOUTS = {
  /** One `pg_autoctl create monitor|postgres` (initdb, or pg_basebackup for the standby). */
  create: 90_000,
  /** Short pg_autoctl commands: show uri, config set, stop. */
  command: 15_000,
  /** The monitor to accept connections after `pg_autoctl run`. */
  monitorReady: 30_000,
  /** The first node to be a settled "single" on the monitor. */
  single: 30_000,
  /** A primary and a secondary, settled, replicating synchronously. */
  healthy: 60_000,
  /** `pg_autoctl perform failover --wait <this / 1000>`; the command itself is given 30 s more. */
  performFailover: 60_000,
  /** A (new) primary after a failure. */
  primary: 60_000,
  /** The pg_autoctl run processes to exit after `pg_autoctl stop`. */
  stop: 30_000,
  /** Killed processes (and the children of a killed postmaster) to be gone. */
  processesGone: 15_000,
} as const

/** The node states in which a node takes writes (pgautofailover.replication_state). */
const WRITABLE_STATES = new Set(['single', 'wait_primary', 'primary', 'join_primary', 'apply_settings'])

/** One data node's row on the monitor (pgautofailover.node). */
export interface NodeState {
  name: string
  port: number
  /** The state the node's pg_autoctl last reported. */
  reportedState: string
  /** The state the monitor assigned it. */
  goalState: string
  /** The monitor's health check: 1 good, 0 bad, -1 not checked yet. */
  health: number
  reportedPgIsRunning: boolean
}

/** One row of the monitor's event log (pgautofailover.event). */
export interface NodeEvent {
  /** Epoch ms. */
  at: number
  /** node1 or node2. */
  node: string
  reportedState: string
  goalState: string
  description: string
}

export interface FormationNode {
  /** node1 or node2 (pg_autoctl --name). */
  readonly name: string
  readonly port: number
  readonly pgdata: string
  /** The file its `pg_autoctl create` and `pg_autoctl run` write to. */
  readonly logFile: string
  /** postgres://postgres@127.0.0.1:<port>/<db>?sslmode=disable: this node only, as user postgres. */
  readonly url: string
  /** Whether its `pg_autoctl run` is running (false once killed, until startNode). */
  running(): boolean
}

export interface Formation {
  /** The temp folder holding everything of this formation. */
  readonly dir: string
  readonly dbname: string
  /**
   * The connection string for applications: `pg_autoctl show uri --formation default` with user
   * postgres added (the tests run as root, and there is no role root), e.g.
   * postgres://postgres@127.0.0.1:p1,127.0.0.1:p2/pgsched?target_session_attrs=read-write&sslmode=disable
   */
  readonly url: string
  /** `pg_autoctl show uri --formation default` as it prints it (no user). */
  readonly formationUri: string
  /** The monitor's database, as user postgres (trust on 127.0.0.1). */
  readonly monitorUrl: string
  readonly monitorPort: number
  /** The data nodes' ports: node1 (the first primary), node2. */
  readonly ports: readonly [number, number]
  readonly nodes: readonly FormationNode[]
  node(port: number): FormationNode
  /** The data nodes as the monitor sees them now. */
  states(): Promise<NodeState[]>
  /** The monitor's event log (pgautofailover.event) from `sinceMs` on, oldest first. */
  nodeEvents(sinceMs: number): Promise<NodeEvent[]>
  /** The same, one line per event, for error messages. */
  events(sinceMs: number): Promise<string[]>
  /** The port of the node the monitor has as primary now (settled in a writable state), if any. */
  primary(): Promise<number | undefined>
  /**
   * Resolves with the port of a primary other than `excludingPort`: settled in a writable state on
   * the monitor (primary, or wait_primary when it has no standby) and out of recovery on the node.
   */
  waitForPrimary(excludingPort?: number, timeoutMs?: number): Promise<number>
  /** Resolves once there is a primary and a secondary, settled, the secondary streaming synchronously. */
  waitForHealthy(timeoutMs?: number): Promise<{ primary: number; secondary: number }>
  /**
   * `pg_autoctl perform failover`; resolves once the other node is primary and the old primary is
   * back as its synchronous secondary (waitForHealthy), with the ports and how long it took.
   */
  performFailover(): Promise<{ from: number; to: number; ms: number }>
  /**
   * Loses the primary: SIGKILL to its `pg_autoctl run` (all of its processes) and to its postmaster
   * (the pid on the first line of postmaster.pid), then waits until the postmaster and its children
   * are gone. Resolves with the node's port, the postmaster's pid and `at`, the Date.now() at which
   * the kills were sent. pg_autoctl is killed too because, left running, it restarts a killed
   * postmaster within a second and no failover happens. The node stays down until startNode.
   */
  killPrimaryPostmaster(): Promise<{ port: number; pid: number; at: number }>
  /** Starts a stopped node's `pg_autoctl run` again; resolves once it is a synchronous secondary. */
  startNode(port: number): Promise<void>
  /** The pids of every process of this formation now (pg_autoctl, runuser, postgres and their children). */
  processes(): number[]
  /** Stops everything (pg_autoctl stop, then SIGKILL what is left) and removes the folder. Safe to call twice. */
  destroy(): Promise<void>
}

interface Keeper {
  child: ChildProcess
  exited: Promise<void>
  done: boolean
}

interface PgAutoctlUser {
  uid: number
  gid: number
}

/** The PostgreSQL whose installation has the pgautofailover extension (the Debian package's). */
function pgBinDir(): string {
  const versions = readdirSync('/usr/share/postgresql')
    .filter((v) => existsSync(`/usr/share/postgresql/${v}/extension/pgautofailover.control`))
    .sort((a, b) => Number(b) - Number(a))
  const version = versions[0]
  if (!version) throw new Error('no PostgreSQL with the pgautofailover extension under /usr/share/postgresql (apt install postgresql-<v>-auto-failover)')
  return `/usr/lib/postgresql/${version}/bin`
}

/** As root, pg_autoctl runs as the postgres OS user; otherwise as the current user. */
function pgAutoctlUser(): PgAutoctlUser | undefined {
  if (process.getuid?.() !== 0) return undefined
  const id = (flag: string) => Number(execFileSync('id', [flag, 'postgres'], { encoding: 'utf8' }).trim())
  return { uid: id('-u'), gid: id('-g') }
}

/** The last `lines` lines of a file ('' if there is none). */
export function tail(file: string, lines = 40): string {
  try {
    return readFileSync(file, 'utf8')
      .split('\n')
      .slice(-lines - 1)
      .join('\n')
  } catch {
    return ''
  }
}

/** What /proc says about a process, or undefined once it is gone (a zombie counts as gone). */
function procStat(pid: number): { ppid: number; pgid: number } | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8')
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ')
    if (fields[0] === 'Z') return undefined
    return { ppid: Number(fields[1]), pgid: Number(fields[2]) }
  } catch {
    return undefined
  }
}

/** Whether a process is running (a zombie, dead but not yet reaped, is not). */
export function alive(pid: number): boolean {
  return procStat(pid) !== undefined
}

function kill(pid: number, signal: NodeJS.Signals): void {
  try {
    process.kill(pid, signal)
  } catch {
    // already gone
  }
}

/**
 * Every live process whose command line names `dir` (runuser, pg_autoctl run, the postmasters),
 * with all their descendants (pg_autoctl's services, which rename themselves, and the postmasters'
 * children).
 */
export function formationProcesses(dir: string): number[] {
  const parentOf = new Map<number, number>()
  const roots: number[] = []
  for (const entry of readdirSync('/proc')) {
    const pid = Number(entry)
    if (!Number.isInteger(pid) || pid === process.pid) continue
    const stat = procStat(pid)
    if (!stat) continue
    parentOf.set(pid, stat.ppid)
    let cmdline = ''
    try {
      cmdline = readFileSync(`/proc/${pid}/cmdline`, 'utf8').replaceAll('\0', ' ')
    } catch {
      continue
    }
    if (cmdline.includes(`${dir}/`) || cmdline.includes(`${dir} `)) roots.push(pid)
  }
  const found = new Set(roots)
  for (let grew = true; grew; ) {
    grew = false
    for (const [pid, ppid] of parentOf) {
      if (!found.has(pid) && found.has(ppid)) {
        found.add(pid)
        grew = true
      }
    }
  }
  return [...found].sort((a, b) => a - b)
}

/** "pid command line" of each process, for error messages. */
function describeProcesses(pids: number[]): string {
  return pids
    .map((pid) => {
      try {
        return `${pid} ${readFileSync(`/proc/${pid}/cmdline`, 'utf8').replaceAll('\0', ' ').trim()}`
      } catch {
        return `${pid}`
      }
    })
    .join('; ')
}

/**
 * SIGKILLs every process of the formation in `dir` (and `known` ones, e.g. children of a postmaster
 * that were listed before it died), again for any that appear meanwhile, until none is left. A
 * process group is killed as a whole only if its leader is one of them (the group of a `pg_autoctl
 * run` started here), so that a kill lands on nothing else.
 */
async function killFormationProcesses(dir: string, known: number[] = []): Promise<void> {
  const deadline = Date.now() + TIMEOUTS.processesGone
  for (;;) {
    const pids = [...new Set([...known.filter(alive), ...formationProcesses(dir)])]
    if (pids.length === 0) return
    if (Date.now() > deadline) {
      throw new Error(`processes of formation ${dir} still running ${TIMEOUTS.processesGone} ms after SIGKILL: ${describeProcesses(pids)}`)
    }
    for (const pid of pids) {
      const pgid = procStat(pid)?.pgid
      if (pgid !== undefined && pids.includes(pgid)) kill(-pgid, 'SIGKILL')
      kill(pid, 'SIGKILL')
    }
    await new Promise((resolve) => setTimeout(resolve, 50))
  }
}

/**
 * Removes the System V shared memory segment of a server killed with SIGKILL (a clean shutdown
 * removes it; a killed postmaster leaves it). The key and id are on line 7 of postmaster.pid; the
 * segment is removed only if both still match and the postmaster is gone.
 */
function removeSharedMemory(pgdata: string): void {
  let lines: string[]
  try {
    lines = readFileSync(join(pgdata, 'postmaster.pid'), 'utf8').split('\n')
  } catch {
    return // stopped cleanly
  }
  if (alive(Number(lines[0]))) return
  const [key, shmid] = (lines[6] ?? '').trim().split(/\s+/).map(Number)
  if (!key || shmid === undefined || Number.isNaN(shmid)) return
  const segments = readFileSync('/proc/sysvipc/shm', 'utf8').split('\n').slice(1)
  const match = segments.some((row) => {
    const [k, id] = row.trim().split(/\s+/).map(Number)
    return k === key && id === shmid
  })
  if (match) execFileSync('ipcrm', ['-m', String(shmid)])
}

/** Stops and removes formation folders of earlier runs whose process is gone. */
export async function dropLeftoverFormations(): Promise<void> {
  for (const name of readdirSync(TMP_ROOT)) {
    const owner = Number(new RegExp(`^${DIR_PREFIX}(\\d+)-`).exec(name)?.[1])
    if (!owner || owner === process.pid || alive(owner)) continue
    const dir = join(TMP_ROOT, name)
    await killFormationProcesses(dir)
    for (const pgdata of ['monitor', 'node1', 'node2']) removeSharedMemory(join(dir, pgdata))
    await rm(dir, { recursive: true, force: true })
  }
}

/** One query on a fresh connection (the servers come and go; no pool to go stale). */
async function query<R extends pg.QueryResultRow>(url: string, text: string, values: unknown[] = []): Promise<R[]> {
  const client = new pg.Client({ connectionString: url, connectionTimeoutMillis: 5_000, query_timeout: 10_000 })
  client.on('error', () => {}) // a server killed under an idle client
  try {
    await client.connect()
    return (await client.query<R>(text, values)).rows
  } finally {
    await client.end().catch(() => {})
  }
}

/** Command line options: { pgport: 5432, 'no-ssl': true } → ['--pgport', '5432', '--no-ssl']. */
function flags(options: Record<string, string | number | true>): string[] {
  return Object.entries(options).flatMap(([name, value]) => (value === true ? [`--${name}`] : [`--${name}`, String(value)]))
}

async function distinctFreePorts(n: number): Promise<number[]> {
  const ports = new Set<number>()
  while (ports.size < n) ports.add(await freePort())
  return [...ports]
}

/**
 * Creates a monitor and two data nodes (node1, then node2 as its standby) in database `dbname`,
 * each kept running by `pg_autoctl run`, and resolves once node1 is primary with node2 as its
 * synchronous secondary. On failure, everything made so far is destroyed before the error is thrown.
 */
export async function createFormation(options: { dbname?: string } = {}): Promise<Formation> {
  await dropLeftoverFormations()
  const dbname = options.dbname ?? 'pgsched'
  const bin = pgBinDir()
  const user = pgAutoctlUser()
  const dir = await mkdtemp(join(TMP_ROOT, `${DIR_PREFIX}${process.pid}-`))
  const home = join(dir, 'home')
  // pg_autoctl keeps its pid files in XDG_RUNTIME_DIR only if that folder exists (else in /tmp/pg_autoctl).
  for (const folder of [home, join(home, 'run')]) mkdirSync(folder, { mode: 0o700 })
  if (user) for (const folder of [dir, home, join(home, 'run')]) chownSync(folder, user.uid, user.gid)
  const [monitorPort, port1, port2] = (await distinctFreePorts(3)) as [number, number, number]
  const monitorPgdata = join(dir, 'monitor')
  const monitorLog = join(dir, 'monitor.log')
  const monitorUrl = `postgres://postgres@${HOST}:${monitorPort}/pg_auto_failover?sslmode=disable`
  const keepers = new Map<string, Keeper>() // by pgdata
  const nodes: FormationNode[] = [
    { name: 'node1', port: port1 },
    { name: 'node2', port: port2 },
  ].map(({ name, port }) => {
    const pgdata = join(dir, name)
    return {
      name,
      port,
      pgdata,
      logFile: join(dir, `${name}.log`),
      url: `postgres://postgres@${HOST}:${port}/${dbname}?sslmode=disable`,
      running: () => keepers.get(pgdata)?.done === false,
    }
  })

  /** The command line running `pg_autoctl <args>` as the postgres user, in this formation's environment. */
  const pgAutoctl = (args: string[]): [string, string[]] => {
    const env = [
      `PATH=${bin}:/usr/bin:/bin`,
      'LANG=C.UTF-8',
      `HOME=${home}`,
      `XDG_CONFIG_HOME=${home}/config`,
      `XDG_DATA_HOME=${home}/share`,
      `XDG_RUNTIME_DIR=${home}/run`,
    ]
    const command = ['env', '-i', ...env, 'pg_autoctl', ...args]
    return user ? ['runuser', ['-u', 'postgres', '--', ...command]] : [command[0] as string, command.slice(1)]
  }

  const logsOf = (files: string[]): string => files.map((f) => `--- last lines of ${f}:\n${tail(f)}`).join('\n')

  /** Runs `pg_autoctl <args>` to completion with its output appended to `logFile`. */
  const runLogged = async (args: string[], logFile: string, timeoutMs: number): Promise<void> => {
    const [file, argv] = pgAutoctl(args)
    const fd = openSync(logFile, 'a')
    try {
      const child = spawn(file, argv, { stdio: ['ignore', fd, fd], timeout: timeoutMs, killSignal: 'SIGKILL' })
      const { code, signal } = await new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve, reject) => {
        child.on('error', reject)
        child.on('exit', (c, s) => resolve({ code: c, signal: s }))
      })
      if (code !== 0) {
        const how = signal ? `was killed (${signal}${signal === 'SIGKILL' ? `, after ${timeoutMs} ms` : ''})` : `exited with ${code}`
        throw new Error(`pg_autoctl ${args.join(' ')} ${how}\n${logsOf([logFile])}`)
      }
    } finally {
      closeSync(fd)
    }
  }

  /** Runs `pg_autoctl <args>` and returns its stdout. */
  const runOutput = (args: string[]): Promise<string> => {
    const [file, argv] = pgAutoctl(args)
    return new Promise((resolve, reject) =>
      execFile(file, argv, { encoding: 'utf8', timeout: TIMEOUTS.command }, (err, stdout, stderr) =>
        err ? reject(new Error(`pg_autoctl ${args.join(' ')} failed: ${err.message}\n${stderr}`)) : resolve(stdout),
      ),
    )
  }

  /** Starts `pg_autoctl run` for `pgdata` in a process group of its own, its output appended to `logFile`. */
  const startKeeper = (pgdata: string, logFile: string): void => {
    const [file, argv] = pgAutoctl(['run', '--pgdata', pgdata])
    const fd = openSync(logFile, 'a')
    const child = spawn(file, argv, { stdio: ['ignore', fd, fd], detached: true })
    closeSync(fd)
    child.unref()
    const keeper: Keeper = { child, done: false, exited: Promise.resolve() }
    keeper.exited = new Promise((resolve) => {
      child.on('error', () => {
        keeper.done = true
        resolve()
      })
      child.on('exit', () => {
        keeper.done = true
        resolve()
      })
    })
    keepers.set(pgdata, keeper)
  }

  /** Throws (with its log) if a pg_autoctl run we started and did not stop has exited. */
  const checkKeepers = (): void => {
    for (const [pgdata, keeper] of keepers) {
      if (!keeper.done) continue
      const log = pgdata === monitorPgdata ? monitorLog : (nodes.find((n) => n.pgdata === pgdata)?.logFile as string)
      throw new Error(`pg_autoctl run --pgdata ${pgdata} exited (code ${keeper.child.exitCode}, signal ${keeper.child.signalCode})\n${logsOf([log])}`)
    }
  }

  /** The monitor's last answer in one line, for error messages. */
  let lastSeen = 'not read yet'
  const states = async (): Promise<NodeState[]> => {
    let rows: { nodename: string; nodeport: number; reportedstate: string; goalstate: string; health: number; reportedpgisrunning: boolean }[]
    try {
      rows = await query(
        monitorUrl,
        `select nodename, nodeport, reportedstate::text, goalstate::text, health, reportedpgisrunning
           from pgautofailover.node where formationid = 'default' order by nodeid`,
      )
    } catch (err: unknown) {
      lastSeen = `monitor not answering: ${(err as Error).message}`
      throw err
    }
    lastSeen = rows.map((r) => `${r.nodename}:${r.nodeport} ${r.reportedstate}→${r.goalstate} health ${r.health}`).join('; ')
    return rows.map((r) => ({
      name: r.nodename,
      port: r.nodeport,
      reportedState: r.reportedstate,
      goalState: r.goalstate,
      health: r.health,
      reportedPgIsRunning: r.reportedpgisrunning,
    }))
  }
  const nodeEvents = async (sinceMs: number): Promise<NodeEvent[]> => {
    const rows = await query<{ at: Date; nodename: string; reportedstate: string; goalstate: string; description: string }>(
      monitorUrl,
      `select eventtime as at, nodename, reportedstate::text, goalstate::text, description
         from pgautofailover.event where eventtime >= to_timestamp($1 / 1000.0) order by eventid`,
      [sinceMs],
    )
    return rows.map((r) => ({ at: r.at.getTime(), node: r.nodename, reportedState: r.reportedstate, goalState: r.goalstate, description: r.description }))
  }
  const events = async (sinceMs: number): Promise<string[]> =>
    (await nodeEvents(sinceMs)).map((e) => `${new Date(e.at).toISOString().slice(11, 23)} ${e.node} ${e.reportedState}→${e.goalState}: ${e.description}`)
  /** states(), or undefined while the monitor does not answer. */
  const observe = (): Promise<NodeState[] | undefined> => states().catch(() => undefined)

  /** waitFor, whose error adds the monitor's last answer and the tail of the logs concerned. */
  const waitWithLogs = async <T>(check: () => Promise<T> | T, what: string, timeoutMs: number, logs: string[]): Promise<NonNullable<T>> => {
    try {
      return await waitFor(
        async () => {
          checkKeepers()
          return check()
        },
        { what, timeoutMs, intervalMs: 100 },
      )
    } catch (err: unknown) {
      throw new Error(`${(err as Error).message}\nmonitor: ${lastSeen}\n${logsOf(logs)}`)
    }
  }
  const allLogs = () => [monitorLog, ...nodes.map((n) => n.logFile)]
  const nodeAt = (port: number): FormationNode => {
    const node = nodes.find((n) => n.port === port)
    if (!node) throw new Error(`no node on port ${port} (nodes: ${nodes.map((n) => n.port).join(', ')})`)
    return node
  }

  const primaryIn = (s: NodeState[]): number | undefined => {
    const writable = s.filter((n) => n.reportedState === n.goalState && WRITABLE_STATES.has(n.reportedState))
    if (writable.length > 1) throw new Error(`the monitor has several writable nodes: ${lastSeen}`)
    return writable[0]?.port
  }

  const primary = async (): Promise<number | undefined> => primaryIn(await states())

  const waitForPrimary = (excludingPort?: number, timeoutMs: number = TIMEOUTS.primary): Promise<number> =>
    waitWithLogs(
      async () => {
        const s = await observe()
        const port = s && primaryIn(s)
        if (port === undefined || port === excludingPort) return undefined
        try {
          const [row] = await query<{ recovery: boolean }>(nodeAt(port).url, 'select pg_is_in_recovery() as recovery')
          return row?.recovery === false ? port : undefined
        } catch {
          return undefined
        }
      },
      `a primary${excludingPort === undefined ? '' : ` other than the node on port ${excludingPort}`}, out of recovery`,
      timeoutMs,
      allLogs(),
    )

  const waitForHealthy = (timeoutMs: number = TIMEOUTS.healthy): Promise<{ primary: number; secondary: number }> =>
    waitWithLogs(
      async () => {
        const s = await observe()
        if (s?.length !== 2) return undefined
        const p = s.find((n) => n.reportedState === 'primary' && n.goalState === 'primary')
        const standby = s.find((n) => n.reportedState === 'secondary' && n.goalState === 'secondary')
        if (!p || !standby) return undefined
        try {
          const [row] = await query<{ names: string; recovery: boolean; sync: number }>(
            nodeAt(p.port).url,
            `select current_setting('synchronous_standby_names') as names, pg_is_in_recovery() as recovery,
                    (select count(*)::int from pg_stat_replication where state = 'streaming' and sync_state in ('sync', 'quorum')) as sync`,
          )
          if (!row || row.recovery || row.names === '' || row.sync !== 1) return undefined
        } catch {
          return undefined
        }
        return { primary: p.port, secondary: standby.port }
      },
      'a primary and a secondary, settled, the secondary streaming synchronously (synchronous_standby_names set)',
      timeoutMs,
      allLogs(),
    )

  const destroyOnce = async (): Promise<void> => {
    const before = formationProcesses(dir)
    const problems: string[] = []
    const running = [...keepers].filter(([, k]) => !k.done)
    await Promise.all(running.map(([pgdata]) => runOutput(['stop', '--pgdata', pgdata]).catch((err: unknown) => void problems.push((err as Error).message))))
    const stopDeadline = Date.now() + TIMEOUTS.stop
    for (const [pgdata, keeper] of running) {
      const left = stopDeadline - Date.now()
      let timer: NodeJS.Timeout | undefined
      const timedOut = await Promise.race([
        keeper.exited.then(() => false),
        new Promise<boolean>((resolve) => (timer = setTimeout(() => resolve(true), Math.max(0, left)))),
      ])
      clearTimeout(timer)
      if (timedOut) {
        problems.push(`pg_autoctl run --pgdata ${pgdata} did not exit within ${TIMEOUTS.stop} ms of pg_autoctl stop; killed`)
        if (keeper.child.pid) kill(-keeper.child.pid, 'SIGKILL')
      }
    }
    // What `pg_autoctl stop` did not stop, and the children of a postmaster killed earlier.
    try {
      await killFormationProcesses(dir, before)
    } catch (err: unknown) {
      problems.push((err as Error).message)
    }
    for (const pgdata of [monitorPgdata, ...nodes.map((n) => n.pgdata)]) {
      try {
        removeSharedMemory(pgdata)
      } catch (err: unknown) {
        problems.push(`removing the shared memory of ${pgdata}: ${(err as Error).message}`)
      }
    }
    // Logs are kept in the error (the folder goes).
    const logs = problems.length > 0 ? logsOf(allLogs()) : ''
    await rm(dir, { recursive: true, force: true })
    if (problems.length > 0) throw new Error(`destroying formation ${dir}:\n${problems.join('\n')}\n${logs}`)
  }
  let destroying: Promise<void> | undefined
  const destroy = (): Promise<void> => {
    destroying ??= destroyOnce()
    return destroying
  }

  const createNode = async (node: FormationNode, monitorUri: string): Promise<void> => {
    const args = flags({ pgdata: node.pgdata, pgctl: `${bin}/pg_ctl`, pgport: node.port, hostname: HOST, listen: HOST, name: node.name, dbname })
    const access = flags({ monitor: monitorUri, auth: 'trust', 'no-ssl': true, 'ssl-mode': 'disable' })
    await runLogged(['create', 'postgres', ...args, ...access], node.logFile, TIMEOUTS.create)
    await runOutput(['config', 'set', '--pgdata', node.pgdata, 'timeout.network_partition_timeout', String(NETWORK_PARTITION_TIMEOUT_S)])
    startKeeper(node.pgdata, node.logFile)
  }

  try {
    const monitorArgs = flags({ pgdata: monitorPgdata, pgctl: `${bin}/pg_ctl`, pgport: monitorPort, hostname: HOST })
    const monitorAccess = flags({ auth: 'trust', 'no-ssl': true, 'ssl-mode': 'disable' })
    await runLogged(['create', 'monitor', ...monitorArgs, ...monitorAccess], monitorLog, TIMEOUTS.create)
    startKeeper(monitorPgdata, monitorLog)
    await waitWithLogs(() => observe().then((s) => s !== undefined), `the monitor on port ${monitorPort} to answer`, TIMEOUTS.monitorReady, [monitorLog])
    for (const [name, value] of Object.entries(MONITOR_SETTINGS)) await query(monitorUrl, `alter system set ${name} = ${value}`)
    await query(monitorUrl, 'select pg_reload_conf()')
    await waitWithLogs(
      async () => {
        const rows = await query<{ name: string; setting: string }>(monitorUrl, `select name, setting from pg_settings where name like 'pgautofailover.%'`)
        return Object.entries(MONITOR_SETTINGS).every(([name, value]) => rows.find((r) => r.name === name)?.setting === String(value))
      },
      'the monitor to load the failure detection settings',
      TIMEOUTS.command,
      [monitorLog],
    )
    const monitorUri = (await runOutput(['show', 'uri', '--pgdata', monitorPgdata, '--formation', 'monitor'])).trim()

    const [node1, node2] = nodes as [FormationNode, FormationNode]
    await createNode(node1, monitorUri)
    await waitWithLogs(
      async () => (await observe())?.some((n) => n.port === node1.port && n.reportedState === 'single' && n.goalState === 'single'),
      `${node1.name} (port ${node1.port}) to be a settled single node`,
      TIMEOUTS.single,
      [monitorLog, node1.logFile],
    )
    await createNode(node2, monitorUri)
    const healthy = await waitForHealthy()
    if (healthy.primary !== node1.port) throw new Error(`expected ${node1.name} (port ${node1.port}) to be the first primary; the monitor has ${lastSeen}`)

    const formationUri = (await runOutput(['show', 'uri', '--pgdata', monitorPgdata, '--formation', 'default'])).trim()
    if (!formationUri.startsWith('postgres://')) throw new Error(`unexpected output of pg_autoctl show uri --formation default: ${formationUri}`)
    const url = formationUri.replace('postgres://', 'postgres://postgres@')

    return {
      dir,
      dbname,
      url,
      formationUri,
      monitorUrl,
      monitorPort,
      ports: [node1.port, node2.port],
      nodes,
      node: nodeAt,
      states,
      nodeEvents,
      events,
      primary,
      waitForPrimary,
      waitForHealthy,
      async performFailover() {
        const from = await primary()
        if (from === undefined) throw new Error(`no primary to fail over from; the monitor has ${lastSeen}`)
        const startedAt = Date.now()
        await runLogged(
          ['perform', 'failover', '--pgdata', monitorPgdata, '--wait', String(TIMEOUTS.performFailover / 1000)],
          monitorLog,
          TIMEOUTS.performFailover + 30_000,
        )
        const { primary: to, secondary } = await waitForHealthy()
        if (to === from || secondary !== from)
          throw new Error(`after pg_autoctl perform failover, primary ${to} and secondary ${secondary} (was primary ${from})`)
        return { from, to, ms: Date.now() - startedAt }
      },
      async killPrimaryPostmaster() {
        const port = await primary()
        if (port === undefined) throw new Error(`no primary to kill; the monitor has ${lastSeen}`)
        const node = nodeAt(port)
        const keeper = keepers.get(node.pgdata)
        if (!keeper || keeper.done) throw new Error(`the pg_autoctl run of ${node.name} (port ${port}) is not running`)
        const pid = Number(readFileSync(join(node.pgdata, 'postmaster.pid'), 'utf8').split('\n')[0])
        if (!alive(pid)) throw new Error(`the postmaster of ${node.name} (pid ${pid} in postmaster.pid) is not running`)
        const children = formationProcesses(dir).filter((p) => procStat(p)?.ppid === pid)
        keepers.delete(node.pgdata) // its exit is intended from here on
        const at = Date.now()
        kill(-(keeper.child.pid as number), 'SIGKILL') // runuser, pg_autoctl and its services (and the postmaster: same group)
        kill(pid, 'SIGKILL')
        await waitFor(() => keeper.done && [pid, ...children].every((p) => !alive(p)), {
          what: `the killed pg_autoctl run, postmaster (pid ${pid}) and its children (${children.join(', ')}) of ${node.name} to be gone`,
          timeoutMs: TIMEOUTS.processesGone,
          intervalMs: 20,
        })
        return { port, pid, at }
      },
      async startNode(port: number) {
        const node = nodeAt(port)
        if (node.running()) throw new Error(`${node.name} (port ${port}) is running already`)
        startKeeper(node.pgdata, node.logFile)
        const { secondary } = await waitForHealthy()
        if (secondary !== port) throw new Error(`${node.name} (port ${port}) came back, but not as the secondary; the monitor has ${lastSeen}`)
      },
      processes: () => formationProcesses(dir),
      destroy,
    }
  } catch (err: unknown) {
    await destroy().catch(() => {})
    throw err
  }
}
