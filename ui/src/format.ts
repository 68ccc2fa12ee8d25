/** How times, durations and values are written on the page. All text goes through Preact, which escapes it. */
export function when(iso: string | null | undefined): string {
  if (!iso) return '—'
  const d = new Date(iso)
  // in the browser's zone, named (a schedule's own zone differs from it: 09:00 Berlin shows as 03:00 EST)
  return Number.isNaN(d.getTime()) ? iso : d.toLocaleString(undefined, { dateStyle: 'short', timeStyle: 'long' })
}

/**
 * A schedule's fire time: in the schedule's own zone when it has one the browser does not share
 * ("09:00 Berlin" reads 09:00 CET), then in the browser's zone in brackets; as `when` otherwise, and
 * when the browser does not know the zone's name.
 */
export function fireTime(iso: string, zone: string | null | undefined): string {
  const d = new Date(iso)
  if (!zone || Number.isNaN(d.getTime())) return when(iso)
  let own: string
  try {
    if (new Intl.DateTimeFormat(undefined, { timeZone: zone }).resolvedOptions().timeZone === Intl.DateTimeFormat().resolvedOptions().timeZone) return when(iso)
    own = d.toLocaleString(undefined, { dateStyle: 'short', timeStyle: 'long', timeZone: zone })
  } catch {
    return when(iso)
  }
  // two names of one zone (an alias, a link) read the same: once is enough
  const local = when(iso)
  return own === local ? local : `${own} (${local})`
}

/** A minute (of a chart's figures) as `when` writes a time, to the minute: in the browser's zone, named ("14:05 CET"). */
export function minuteOf(date: Date): string {
  return Number.isNaN(date.getTime()) ? '—' : date.toLocaleTimeString(undefined, { hour: '2-digit', minute: '2-digit', timeZoneName: 'short' })
}

/** The short name of the browser's zone at `date`, as `when` and `minuteOf` write it ("CET", "GMT+5:30"). */
export function zoneOf(date: Date): string {
  return new Intl.DateTimeFormat(undefined, { timeZoneName: 'short' }).formatToParts(date).find((p) => p.type === 'timeZoneName')?.value ?? ''
}

/**
 * A duration in its largest unit: milliseconds, seconds to a tenth, minutes and seconds, hours to a
 * tenth. Rounded before the unit is chosen, so a value that rounds up to the next unit is written in
 * it: 59,960 ms is "1 min" (not "60.0 s"), 119,600 ms "2 min" (not "1 min 60 s").
 */
export function duration(ms: number | null | undefined): string {
  if (ms === null || ms === undefined) return '—'
  if (Math.round(ms) < 1000) return `${Math.round(ms)} ms`
  const tenths = Math.round(ms / 100)
  if (tenths < 600) return `${(tenths / 10).toFixed(1)} s`
  const seconds = Math.round(ms / 1000)
  if (seconds < 3600) {
    const minutes = Math.floor(seconds / 60)
    return seconds % 60 === 0 ? `${minutes} min` : `${minutes} min ${seconds % 60} s`
  }
  return `${(ms / 3_600_000).toFixed(1)} h`
}

/** A JSON value as indented text (for <pre>). */
export function json(value: unknown): string {
  if (value === undefined) return ''
  try {
    return JSON.stringify(value, null, 2) ?? ''
  } catch {
    return String(value)
  }
}

/** A URL as the API's errors show it (the same rule, from the server's source). */
export { shownUrl } from '../../src/core/shown-url.ts'

export function shortId(id: string): string {
  return id.slice(-12)
}

export function isUuid(text: string): boolean {
  return /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i.test(text.trim())
}

/** `text` cut to `max` characters, with an ellipsis when cut. */
export const clip = (text: string, max: number): string => (text.length > max ? `${text.slice(0, max - 1)}…` : text)

/**
 * An error as one line of text: `name: message`, or the message alone when the name is the plain
 * `Error` (or none), so that "Error: upstream returned 503" never reads "Error: Error: …".
 */
export function errorText(error: { name?: string | null; message: string }): string {
  return error.name && error.name !== 'Error' ? `${error.name}: ${error.message}` : error.message
}

/** How much of a long text (an error's message) shows before it is opened: its first line, at most this many characters. */
export const SHORT_TEXT_MAX = 300

/** `text` shortened to its first line and at most `max` characters, with an ellipsis when anything is left out; null when it shows whole. */
export function shortened(text: string, max = SHORT_TEXT_MAX): string | null {
  const newline = text.indexOf('\n')
  const firstLine = newline === -1 ? text : text.slice(0, newline).trimEnd()
  if (firstLine.length > max) return clip(firstLine, max)
  return firstLine === text ? null : `${firstLine}…`
}
