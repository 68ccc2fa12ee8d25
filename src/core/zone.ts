/**
 * UTC offsets and offset changes of IANA time zones, read from the runtime's zone database (Intl).
 * Fire-time computation needs, for any instant, the offset in force and the offset changes nearby;
 * asking Intl costs about a microsecond, so offsets are sampled once per UTC day ("cell") and kept,
 * and each change is located to the second by bisection, once. Offset changes less than a day apart
 * that cancel each other out are not seen (the zone database has none since 1970).
 */

const CELL_MS = 86_400_000
/** Cached cells per zone before the cache of that zone is dropped (about 110 years). */
const MAX_CELLS = 40_000

interface ZoneCache {
  format: Intl.DateTimeFormat
  /** Offset (ms) at the start of each cell, by cell index. */
  offsets: Map<number, number>
  /** The offset change inside each cell that has one (its first instant with the new offset), by cell index. */
  changes: Map<number, number | null>
}

const zones = new Map<string, ZoneCache>()

function zone(timezone: string): ZoneCache {
  let z = zones.get(timezone)
  if (!z) {
    z = {
      format: new Intl.DateTimeFormat('en-US', { timeZone: timezone, timeZoneName: 'longOffset' }),
      offsets: new Map(),
      changes: new Map(),
    }
    zones.set(timezone, z)
  }
  return z
}

/**
 * The IANA zone database's names without a slash (its zones and backward links), lower case. The
 * runtime's zone data (ICU) also takes other short names, Java's (BST, IST, CST, AST, ECT, ...), which
 * name zones other than the abbreviations suggest (BST is Asia/Dhaka there); pgsched.submit_job
 * refuses them (pgsched.time_zone_known holds the same list, migration 0059), and so does a submit
 * through the client or the API.
 */
const IANA_NAMES_WITHOUT_SLASH: ReadonlySet<string> = new Set(
  (
    'CET CST6CDT Cuba EET EST EST5EDT Egypt Eire GB GB-Eire GMT GMT+0 GMT-0 GMT0 Greenwich HST Hongkong Iceland Iran Israel Jamaica ' +
    'Japan Kwajalein Libya MET MST MST7MDT NZ NZ-CHAT Navajo PRC PST8PDT Poland Portugal ROC ROK Singapore Turkey UCT UTC Universal W-SU WET Zulu'
  )
    .toLowerCase()
    .split(' '),
)

/**
 * The IANA zone database's only names with a slash and a digit, any case: Etc/GMT with a whole-hour
 * offset in POSIX sign (Etc/GMT+5 is 5 hours behind UTC), from -14 to +12, without a leading zero,
 * and Etc/GMT0. Other such names are no zones: PostgreSQL reads them as POSIX rules (Europe/Berlin1
 * is a zone named EUROPE/BERLIN one hour behind UTC, Etc/GMT+05 one five hours behind) and ICU does
 * not read them, except its SystemV/ names (SystemV/EST5EDT, ...: the old `systemv` file, dropped
 * from the database in 2020b). pgsched.time_zone_known holds the same pattern (migration 0057).
 */
const IANA_NAME_WITH_SLASH_AND_DIGIT = /^etc\/gmt(?:[+-]?0|-(?:[1-9]|1[0-4])|\+(?:[1-9]|1[0-2]))$/i

/**
 * Names without a digit that ICU still reads and the IANA database no longer has, lower case:
 * Canada/East-Saskatchewan (removed in 2017c) and US/Pacific-New (2020b). PostgreSQL reads them only
 * with zone files that old; pgsched.time_zone_known refuses them too.
 */
const REMOVED_NAMES: ReadonlySet<string> = new Set(['canada/east-saskatchewan', 'us/pacific-new'])

/**
 * Whether `timezone` names an IANA zone, as a submit takes it: one of the database's names without a
 * slash (any case), or an Area/Location name of the database that this runtime knows (any case);
 * never the runtime's own extras (Java's short names, SystemV/..., names the database removed), nor
 * PostgreSQL's (POSIX rules written as Area/Location names, the files that are not zones: posix/,
 * right/, Factory, localtime, posixrules). The same rule as pgsched.time_zone_known (migration 0057),
 * which asks PostgreSQL's zone files where this asks the runtime's (ICU).
 */
export function isIanaTimeZone(timezone: string): boolean {
  const lower = timezone.toLowerCase()
  if (lower === 'factory' || lower === 'localtime' || lower === 'posixrules' || lower.startsWith('posix/') || lower.startsWith('right/')) return false
  if (!timezone.includes('/')) return IANA_NAMES_WITHOUT_SLASH.has(lower) && isValidTimeZone(timezone)
  if (!/^[A-Za-z]+(\/[A-Za-z0-9_+-]+)+$/.test(timezone) || REMOVED_NAMES.has(lower)) return false
  if (/[0-9]/.test(timezone) && !IANA_NAME_WITH_SLASH_AND_DIGIT.test(timezone)) return false
  return isValidTimeZone(timezone)
}

/** Whether `timezone` is a zone name this runtime knows (what fire times are computed in). */
export function isValidTimeZone(timezone: string): boolean {
  try {
    new Intl.DateTimeFormat('en-US', { timeZone: timezone })
    return true
  } catch {
    return false
  }
}

let lookups = 0

/** How many times the zone database has been asked so far (the work the caches save; for diagnostics and tests). */
export function zoneLookups(): number {
  return lookups
}

/** The offset Intl reports at `at` ("GMT", "GMT+13:45", "GMT-04:56:02"), in ms. */
function askOffset(z: ZoneCache, at: number): number {
  lookups++
  const text = z.format.format(at)
  const m = /GMT(?:([+-])(\d{2}):(\d{2})(?::(\d{2}))?)?$/.exec(text)
  if (!m) throw new Error(`unexpected time zone offset "${text}"`)
  if (m[1] === undefined) return 0
  const ms = ((Number(m[2]) * 60 + Number(m[3])) * 60 + Number(m[4] ?? 0)) * 1000
  return m[1] === '-' ? -ms : ms
}

function cellOffset(z: ZoneCache, cell: number): number {
  let o = z.offsets.get(cell)
  if (o === undefined) {
    if (z.offsets.size >= MAX_CELLS) {
      z.offsets.clear()
      z.changes.clear()
    }
    o = askOffset(z, cell * CELL_MS)
    z.offsets.set(cell, o)
  }
  return o
}

/** The first instant of `cell` with the offset of the next cell, or null when the offset does not change in it. */
function cellChange(z: ZoneCache, cell: number): number | null {
  let c = z.changes.get(cell)
  if (c === undefined) {
    const before = cellOffset(z, cell)
    c = null
    if (before !== cellOffset(z, cell + 1)) {
      // Offsets change on whole seconds: bisect to the second (17 steps).
      let lo = cell * CELL_MS
      let hi = lo + CELL_MS
      while (hi - lo > 1000) {
        const mid = lo + Math.floor((hi - lo) / 2000) * 1000
        if (askOffset(z, mid) === before) lo = mid
        else hi = mid
      }
      c = hi
    }
    z.changes.set(cell, c)
  }
  return c
}

/** UTC offset (local wall time minus UTC) of `timezone` at instant `at`, in ms. */
export function offsetAt(timezone: string, at: number): number {
  if (timezone === 'UTC') return 0
  const z = zone(timezone)
  const cell = Math.floor(at / CELL_MS)
  const change = cellChange(z, cell)
  return change !== null && at >= change ? cellOffset(z, cell + 1) : cellOffset(z, cell)
}

/** The latest offset change at or before `at` and after `at - lookbackMs` (its first instant with the new offset), or undefined. */
export function previousChange(timezone: string, at: number, lookbackMs: number): number | undefined {
  if (timezone === 'UTC') return undefined
  const z = zone(timezone)
  const last = Math.floor((at - lookbackMs) / CELL_MS)
  for (let cell = Math.floor(at / CELL_MS); cell >= last; cell--) {
    const c = cellChange(z, cell)
    if (c !== null && c <= at && c > at - lookbackMs) return c
  }
  return undefined
}

/** The first offset change after `at` and at or before `until` (its first instant with the new offset), or undefined. */
export function nextChange(timezone: string, at: number, until: number): number | undefined {
  if (timezone === 'UTC') return undefined
  const z = zone(timezone)
  const last = Math.floor(until / CELL_MS)
  for (let cell = Math.floor(at / CELL_MS); cell <= last; cell++) {
    const c = cellChange(z, cell)
    if (c !== null && c > at) return c <= until ? c : undefined
  }
  return undefined
}
