/**
 * Connections that follow a failover. For a URL with several hosts, or with
 * `target_session_attrs=read-write`, connections come from a `pg.Client` subclass that picks its
 * host when it connects:
 * - the host that last took a connection is tried directly; with read-write, every session is
 *   then checked (`pg_is_in_recovery()`, `transaction_read_only`) and refused if it cannot write;
 * - once that host fails (a connection refused or lost, or a read-only session), the next
 *   connection searches again: every host is asked at once over a short-lived connection, and the
 *   first in the URL's order that accepts writes is taken (so a search takes at most one probe
 *   timeout, 5 s, however many hosts are down; connections opened meanwhile share it).
 * So the pools, and the LISTEN connection, follow a promotion by themselves: the connections to the
 * old primary break, and the next ones find the new one. A connection made during the search's
 * failure answers with an error whose code is 08001 (unable to establish a connection), which
 * the API maps to 503 and the worker retries. A single-host URL without target_session_attrs
 * connects as `pg` always does.
 */
import pg from 'pg'
import { parseDatabaseUrl, type ParsedDatabaseUrl } from './database-url.ts'

/** The driver settings for a database URL: the Client class to use and its config. */
export interface PgConnection {
  Client: typeof pg.Client
  config: pg.ClientConfig
}

/** Where to connect for `databaseUrl`, with `extra` settings (application_name, timeouts…). */
export function pgConnection(databaseUrl: string, extra: pg.ClientConfig = {}): PgConnection {
  const parsed = parseDatabaseUrl(databaseUrl)
  // One host without read-write, or none in the authority (a socket given as ?host=): as pg does.
  if (parsed.hosts.length === 0 || (parsed.hosts.length === 1 && !parsed.readWrite)) {
    return { Client: pg.Client, config: { ...extra, connectionString: parsed.hosts.length === 0 ? databaseUrl : parsed.urlFor(0) } }
  }
  return { Client: hostSearchingClient(databaseUrl, parsed), config: { ...extra, connectionString: parsed.urlFor(0) } }
}

/** How long the search waits for one host to answer. */
const PROBE_TIMEOUT_MS = 5_000

/** Per URL (shared by every pool of the process): the host that last took a connection. */
const chosen = new Map<string, number | undefined>()
/** Per URL: the search in progress. */
const searching = new Map<string, Promise<number>>()

/** The session check: in recovery (a standby) or read-only means no writes. */
const WRITABLE_SQL = "select not pg_is_in_recovery() and current_setting('transaction_read_only') = 'off' as writable"

/** An error for a connection that cannot be made now; code 08001 marks it as unavailability. */
function unavailable(message: string): Error {
  return Object.assign(new Error(message), { code: '08001' })
}

function hostSearchingClient(databaseUrl: string, parsed: ParsedDatabaseUrl): typeof pg.Client {
  const name = (i: number) => `${parsed.hosts[i]?.host}:${parsed.hosts[i]?.port ?? 'default port'}`

  /** Asks one host; null when it accepts writes (or answers, without read-write), else why not. */
  async function probe(i: number, config: pg.ClientConfig): Promise<string | null> {
    const client = new pg.Client({
      ...config,
      connectionString: parsed.urlFor(i),
      connectionTimeoutMillis: Math.min(config.connectionTimeoutMillis || PROBE_TIMEOUT_MS, PROBE_TIMEOUT_MS),
    })
    client.on('error', () => undefined)
    try {
      await client.connect()
      if (!parsed.readWrite) return null
      const { rows } = await client.query<{ writable: boolean }>(WRITABLE_SQL)
      return rows[0]?.writable ? null : `${name(i)} is read-only (a standby?)`
    } catch (err: unknown) {
      return `${name(i)}: ${(err as Error).message}`
    } finally {
      await client.end().catch(() => undefined)
    }
  }

  /**
   * Asks every host at once and takes the first in the URL's order that accepts writes (or answers,
   * without read-write): a search takes as long as its slowest needed answer, at most one probe
   * timeout, however many hosts are down.
   */
  async function search(config: pg.ClientConfig): Promise<number> {
    const answers = parsed.hosts.map((_, i) => probe(i, config))
    const why: string[] = []
    for (const [i, answer] of answers.entries()) {
      const refusal = await answer
      if (refusal === null) return i
      why.push(refusal)
    }
    const wanted = parsed.readWrite ? 'accepts writes' : 'answers'
    throw unavailable(`no host of the database URL ${wanted} (${why.join('; ')})`)
  }

  /** One search at a time per URL: the connections a pool opens together share it. */
  function sharedSearch(config: pg.ClientConfig): Promise<number> {
    let running = searching.get(databaseUrl)
    if (!running) {
      running = search(config).finally(() => searching.delete(databaseUrl))
      searching.set(databaseUrl, running)
    }
    return running
  }

  return class HostSearchingClient extends pg.Client {
    private readonly config: pg.ClientConfig
    private hostIndex: number | undefined
    private closing = false

    constructor(config?: string | pg.ClientConfig) {
      const c: pg.ClientConfig = typeof config === 'string' ? { connectionString: config } : { ...config }
      super(c)
      this.config = c
      // A connection that breaks sends the next one searching. pg emits 'error' before 'end', and
      // pg-pool ends an idle client on its 'error' (before 'end' could tell a break from a close).
      this.on('error', () => this.forget())
      this.once('end', () => {
        if (!this.closing) this.forget()
      })
    }

    private forget(): void {
      if (this.hostIndex !== undefined && chosen.get(databaseUrl) === this.hostIndex) chosen.delete(databaseUrl)
    }

    private async open(): Promise<void> {
      let i = chosen.get(databaseUrl)
      if (i === undefined) i = await sharedSearch(this.config)
      this.hostIndex = i
      const target = new pg.Client({ connectionString: parsed.urlFor(i) })
      // The constructor resolved the first host; point this client at the chosen one.
      Object.assign((this as unknown as { connectionParameters: object }).connectionParameters, { host: target.host, port: target.port })
      Object.assign(this, { host: target.host, port: target.port })
      try {
        await super.connect()
      } catch (err: unknown) {
        this.forget()
        throw err
      }
      if (parsed.readWrite) {
        let writable = false
        try {
          writable = (await this.query<{ writable: boolean }>(WRITABLE_SQL)).rows[0]?.writable === true
        } finally {
          if (!writable) {
            // A client whose connect failed is not ended by pg-pool: end it here.
            this.forget()
            await this.end().catch(() => undefined)
          }
        }
        if (!writable) throw unavailable(`${name(i)} no longer accepts writes (a failover?); the next connection searches the other hosts`)
      }
      chosen.set(databaseUrl, i)
    }

    override connect(): Promise<pg.Client>
    override connect(callback: (err: Error) => void): void
    override connect(callback?: (err: Error) => void): Promise<pg.Client> | undefined {
      const opened = this.open()
      if (callback) {
        opened.then(() => callback(undefined as unknown as Error), callback)
        return undefined
      }
      return opened.then(() => this)
    }

    override end(): Promise<void>
    override end(callback: (err: Error) => void): void
    override end(callback?: (err: Error) => void): Promise<void> | undefined {
      this.closing = true
      if (!callback) return super.end()
      super.end(callback)
      return undefined
    }
  }
}
