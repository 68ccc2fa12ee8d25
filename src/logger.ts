/**
 * The root pino logger. Components take `log.child({ component })`. Secrets
 * (database URL, passwords, API keys, authorization headers) are redacted.
 * JSON lines on stdout, or, with `pretty` (a terminal), one human line each.
 */
import { pino, type Logger } from 'pino'
import { assertKnownFields, type FieldSet } from './core/known-fields.ts'
import { prettyLog } from './lib/pretty-log.ts'

export type { Logger }

export interface CreateLoggerOptions {
  /** A pino level name (`silent` for none). */
  level: string
  /** Default `pgsched`. */
  name?: string
  /** One human line each (a terminal) rather than JSON lines. */
  pretty?: { colors: boolean }
}

/** Any other option is refused: a misspelt `prety` would write JSON lines where human ones were asked for. */
const OPTIONS_FIELDS: FieldSet<CreateLoggerOptions> = { level: true, name: true, pretty: true }
/** Any other key of `pretty` is refused: a misspelt `color: false` would colour the lines. */
const PRETTY_FIELDS: FieldSet<NonNullable<CreateLoggerOptions['pretty']>> = { colors: true }

/** @throws ValidationError naming an option it does not know, or a key of `pretty` (from JavaScript). */
export function createLogger(options: CreateLoggerOptions): Logger {
  assertKnownFields(options, OPTIONS_FIELDS, 'createLogger options')
  // (a plain `true` or `false` is taken as it always was: human lines without colours, or JSON lines)
  if (typeof options.pretty === 'object' && options.pretty !== null) assertKnownFields(options.pretty, PRETTY_FIELDS, 'createLogger options.pretty', 'pretty.')
  const settings = {
    name: options.name ?? 'pgsched',
    level: options.level,
    redact: {
      // rawPacket: the bytes of a request Node's HTTP parser refused, headers (and so a key) included
      paths: ['databaseUrl', '*.databaseUrl', '*.password', 'apiKey', '*.apiKey', 'req.headers.authorization', 'err.rawPacket', '*.rawPacket'],
      censor: '[redacted]',
    },
  }
  return options.pretty ? pino(settings, prettyLog({ out: process.stdout, colors: options.pretty.colors })) : pino(settings)
}
