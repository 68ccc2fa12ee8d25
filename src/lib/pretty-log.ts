/**
 * A pino destination that writes each JSON line as one human line, for a terminal
 * (`scheduler dev`): `12:03:04 INFO  [worker] worker started  queues=["default"] concurrency=10`.
 * An error shows its message and code; its stack only at error and fatal. Lines that
 * are not JSON pass through unchanged.
 */

const LEVELS: Readonly<Record<number, { name: string; color: string }>> = {
  10: { name: 'TRACE', color: '90' },
  20: { name: 'DEBUG', color: '36' },
  30: { name: 'INFO', color: '32' },
  40: { name: 'WARN', color: '33' },
  50: { name: 'ERROR', color: '31' },
  60: { name: 'FATAL', color: '35' },
}

/** Fields every line carries or that the layout already shows. */
const SHOWN = new Set(['level', 'time', 'pid', 'hostname', 'name', 'msg', 'component', 'err', 'v'])

export interface PrettyLogOptions {
  /** Where the lines go (e.g. process.stdout). */
  out: { write(text: string): unknown }
  /** ANSI colours for the level. */
  colors: boolean
}

function errorText(err: unknown, withStack: boolean): string {
  if (typeof err !== 'object' || err === null) return String(err)
  const e = err as { message?: unknown; code?: unknown; stack?: unknown }
  const code = typeof e.code === 'string' ? ` (${e.code})` : ''
  const stack = withStack && typeof e.stack === 'string' ? `\n${e.stack.split('\n').slice(1).join('\n')}` : ''
  return `${String(e.message ?? '')}${code}${stack}`
}

/** One pino JSON line as a human line (with its newline). */
export function formatLogLine(line: string, colors: boolean): string {
  let entry: Record<string, unknown>
  try {
    entry = JSON.parse(line) as Record<string, unknown>
  } catch {
    return line.endsWith('\n') ? line : `${line}\n`
  }
  const level = LEVELS[entry.level as number] ?? { name: String(entry.level), color: '0' }
  const time = typeof entry.time === 'number' ? new Date(entry.time).toTimeString().slice(0, 8) : ''
  const levelText = colors ? `\u001b[${level.color}m${level.name.padEnd(5)}\u001b[0m` : level.name.padEnd(5)
  const component = typeof entry.component === 'string' ? ` [${entry.component}]` : ''
  const fields = Object.entries(entry)
    .filter(([k]) => !SHOWN.has(k))
    .map(([k, v]) => `${k}=${typeof v === 'string' ? v : JSON.stringify(v)}`)
  const err = entry.err === undefined ? '' : `  ${errorText(entry.err, (entry.level as number) >= 50)}`
  return `${time} ${levelText}${component} ${String(entry.msg ?? '')}${fields.length > 0 ? `  ${fields.join(' ')}` : ''}${err}\n`
}

/** A destination for pino (its `write` gets one JSON line at a time). */
export function prettyLog(options: PrettyLogOptions): { write(line: string): void } {
  return {
    write(line: string) {
      options.out.write(formatLogLine(line, options.colors))
    },
  }
}
