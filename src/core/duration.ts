/**
 * ISO-8601 durations of fixed length (weeks, days, hours, minutes, seconds:
 * `PT5M`, `P1D`, `PT0.5S`). Years and months are refused: their length varies;
 * use a cron schedule for calendar intervals.
 */
const ISO_DURATION = /^P(?:(\d+)W)?(?:(\d+)D)?(?:T(?:(\d+)H)?(?:(\d+)M)?(?:(\d+(?:\.\d+)?)S)?)?$/

/** Milliseconds in an ISO-8601 duration, or undefined if it is not one we accept. */
export function parseIsoDurationMs(text: string): number | undefined {
  const m = ISO_DURATION.exec(text)
  if (!m || text === 'P' || text.endsWith('T')) return undefined
  const [, w, d, h, min, s] = m
  const ms =
    Number(w ?? 0) * 604_800_000 + Number(d ?? 0) * 86_400_000 + Number(h ?? 0) * 3_600_000 + Number(min ?? 0) * 60_000 + Math.round(Number(s ?? 0) * 1000)
  return ms
}
