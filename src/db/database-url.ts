/**
 * Database URLs: checked before the driver sees them (config and createDb), and split into hosts.
 *
 * A URL may list several hosts, in the libpq form that pg_auto_failover and Patroni hand to
 * applications: `postgres://user@h1:5432,h2:5433/db?target_session_attrs=read-write`. The `pg`
 * driver takes one host, so each host gets a URL of its own (see hosts.ts for the search).
 * `target_session_attrs`: `read-write` (or `primary`) keeps a connection only to a server that
 * accepts writes; `any` takes the first that answers. With several hosts the default is
 * `read-write`, since every pgsched process writes; with one host, `any` (libpq's default).
 */

/** One host of a database URL. */
export interface DatabaseHost {
  /** Decoded, for messages. */
  host: string
  /** Null when the URL gives none: the driver's default (PGPORT, else 5432) applies. */
  port: number | null
  /** As written in the URL (host[:port], still percent-encoded): what each host's URL carries. */
  raw: string
}

export interface ParsedDatabaseUrl {
  hosts: DatabaseHost[]
  /** Only a server that accepts writes (not in recovery, not read-only) is kept. */
  readWrite: boolean
  /** The URL of host `i`: the same user, database and parameters, that one host only. */
  urlFor(i: number): string
}

const URL_SHAPE = /^(postgres(?:ql)?:\/\/)([^@/?#]*@)?([^/?#]*)(.*)$/s
const SUPPORTED_ATTRS = new Set(['any', 'read-write', 'primary'])

const UNENCODED_USER_INFO = 'has a user name or password that is not percent-encoded: write a "#", "/", "?" or "@" in it as %23, %2F, %3F or %40'

/**
 * `text` (a database URL, or what was given as one) with its password masked, for messages: the
 * user information ends at the last @, as a password may hold characters a URL does not allow there.
 */
export function redactDatabaseUrl(text: string): string {
  const scheme = text.indexOf('://')
  const at = text.lastIndexOf('@')
  if (scheme < 0 || at < scheme) return text
  const userInfo = text.slice(scheme + 3, at)
  const colon = userInfo.indexOf(':')
  return colon < 0 ? text : `${text.slice(0, scheme + 3)}${userInfo.slice(0, colon)}:***${text.slice(at)}`
}

/** A database URL that cannot be used; the message completes "database URL …". */
export class DatabaseUrlError extends Error {}

/** Splits a database URL into its hosts; throws DatabaseUrlError naming what is wrong. */
export function parseDatabaseUrl(url: string): ParsedDatabaseUrl {
  const shape = URL_SHAPE.exec(url)
  if (!shape) {
    // Not postgres://…: leave it to the driver when it parses (e.g. a socket path given another way).
    checkParses(url)
    return { hosts: [], readWrite: false, urlFor: () => url }
  }
  const [, scheme, userInfo = '', authority = '', rest = ''] = shape
  let hosts: DatabaseHost[]
  try {
    hosts = authority === '' ? [] : authority.split(',').map((h) => parseHost(h, authority))
  } catch (err: unknown) {
    // an @ after what was read as the hosts: a user name or password holding # / or ?, which end
    // the user information unless percent-encoded (and what was read as hosts is part of it: never shown)
    if (err instanceof DatabaseUrlError && rest.includes('@')) throw new DatabaseUrlError(UNENCODED_USER_INFO)
    throw err
  }
  const queryStart = rest.indexOf('?')
  const fragmentStart = rest.indexOf('#')
  const path = queryStart === -1 ? rest : rest.slice(0, queryStart)
  const query = new URLSearchParams(queryStart === -1 ? '' : rest.slice(queryStart + 1, fragmentStart === -1 ? undefined : fragmentStart))
  const attrs = query.get('target_session_attrs')
  if (attrs !== null && !SUPPORTED_ATTRS.has(attrs)) {
    throw new DatabaseUrlError(`has target_session_attrs=${attrs}; pgsched writes, so only read-write (or primary) and any are supported`)
  }
  query.delete('target_session_attrs')
  const readWrite = attrs === null ? hosts.length > 1 : attrs !== 'any'
  const search = query.toString()
  const urlFor = (i: number) => `${scheme}${userInfo}${hosts[i]?.raw ?? ''}${path}${search === '' ? '' : `?${search}`}`
  for (let i = 0; i < Math.max(1, hosts.length); i++) checkParses(urlFor(i))
  return { hosts, readWrite, urlFor }
}

function parseHost(text: string, authority: string): DatabaseHost {
  const m = /^(?:\[([^\]]+)\]|([^:[\]]*))(?::(\d*))?$/.exec(text)
  const host = m?.[1] ?? m?.[2] ?? ''
  const port = m?.[3] ? Number(m[3]) : null
  if (!m || host === '' || (port !== null && !(port >= 1 && port <= 65535))) {
    throw new DatabaseUrlError(`has a host "${text}" that is not host[:port] (hosts: ${authority})`)
  }
  try {
    return { host: decodeURIComponent(host), port, raw: text }
  } catch {
    throw new DatabaseUrlError(`has a host "${text}" with a malformed percent-encoding (hosts: ${authority})`)
  }
}

function checkParses(url: string): void {
  try {
    new URL(url)
  } catch {
    throw new DatabaseUrlError('is not a valid URL (postgres://user:password@host:port/database; percent-encode special characters in the password)')
  }
}

/** What is wrong with a database URL (undefined: nothing). */
export function databaseUrlProblem(url: string): string | undefined {
  try {
    parseDatabaseUrl(url)
    return undefined
  } catch (err: unknown) {
    if (err instanceof DatabaseUrlError) return err.message
    throw err
  }
}
