/**
 * The start-up wait of `scheduler api` and `scheduler worker`: a process started before its
 * database (a compose file, a host reboot, a failover in progress) retries with backoff instead of
 * exiting. Only "cannot reach it now" errors are retried (isDatabaseUnreachable: refused, reset,
 * timed out, unknown host, starting up, shutting down, no host accepting writes); a wrong password
 * or a missing database fails at once, since waiting cannot mend them. It waits without a bound
 * (an orchestrator decides when to give up), logging each wait at warn, until the signal aborts.
 */
import { isDatabaseUnreachable } from './outage.ts'
import { pgConnection } from './hosts.ts'
import { abortableSleep } from '../lib/service.ts'
import type { Logger } from '../logger.ts'

/** First wait after a failed attempt; each next one doubles, up to STARTUP_RETRY_MAX_MS. */
export const STARTUP_RETRY_FIRST_MS = 500
/** Longest wait between attempts: a database that comes back is found within this long. */
export const STARTUP_RETRY_MAX_MS = 15_000
/** One attempt's connection timeout: a host that drops packets counts as unreachable after this. */
export const STARTUP_CONNECT_TIMEOUT_MS = 5_000

export interface WaitForDatabaseParams {
  databaseUrl: string
  log: Logger
  /** Ends the wait (a shutdown signal). */
  signal: AbortSignal
  /** Default STARTUP_RETRY_FIRST_MS. */
  firstDelayMs?: number
  /** Default STARTUP_RETRY_MAX_MS. */
  maxDelayMs?: number
  /** Default STARTUP_CONNECT_TIMEOUT_MS. */
  connectTimeoutMs?: number
  /** Wait, too, while the database does not accept writes (a standby not yet promoted, a read-only database): a worker's. */
  writable?: boolean
}

/** One connection and `select 1`; with `writable`, an unreachable-class error while the database takes no writes. */
async function ping(databaseUrl: string, connectTimeoutMs: number, writable: boolean): Promise<void> {
  const { Client, config } = pgConnection(databaseUrl, { application_name: 'pgsched-startup', connectionTimeoutMillis: connectTimeoutMs })
  const client = new Client(config)
  // An error event after connect failed (a reset mid-handshake) must not crash the process.
  client.on('error', () => undefined)
  try {
    await client.connect()
    const { rows } = await client.query<{ writable: boolean }>(
      "select not pg_is_in_recovery() and current_setting('transaction_read_only') = 'off' as writable",
    )
    if (writable && rows[0]?.writable !== true) {
      // (08001: retried as a database that cannot be reached now, as a multi-host URL's search finding no writable host is)
      throw Object.assign(new Error('the database accepts no writes (a standby not yet promoted, or default_transaction_read_only set)'), {
        code: '08001',
      })
    }
  } finally {
    await client.end().catch(() => undefined)
  }
}

/**
 * Resolves true once the database answers, false when `signal` aborted first.
 * @throws the error of an attempt that failed for another reason than reachability.
 */
export async function waitForDatabase(params: WaitForDatabaseParams): Promise<boolean> {
  const first = params.firstDelayMs ?? STARTUP_RETRY_FIRST_MS
  const max = params.maxDelayMs ?? STARTUP_RETRY_MAX_MS
  const startedAt = Date.now()
  for (let attempt = 1; !params.signal.aborted; attempt++) {
    try {
      await ping(params.databaseUrl, params.connectTimeoutMs ?? STARTUP_CONNECT_TIMEOUT_MS, params.writable === true)
      if (attempt > 1) params.log.info({ attempt, waitedMs: Date.now() - startedAt }, 'database reachable')
      return true
    } catch (err: unknown) {
      if (!isDatabaseUnreachable(err)) throw err
      // Up to ±20 % jitter, so processes started together do not knock together.
      const retryInMs = Math.round(Math.min(max, first * 2 ** (attempt - 1)) * (0.8 + 0.4 * Math.random()))
      params.log.warn({ err, attempt, retryInMs }, 'database unreachable at start-up; retrying')
      await abortableSleep(retryInMs, params.signal)
    }
  }
  return false
}
