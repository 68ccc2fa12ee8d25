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

/** @throws ValidationError naming an option it does not know (from JavaScript). */
export function createLogger(options: CreateLoggerOptions): Logger {
  assertKnownFields(options, OPTIONS_FIELDS, 'createLogger options')
  const settings = {
    name: options.name ?? 'pgsched',
    level: options.level,
    redact: {
      paths: ['databaseUrl', '*.databaseUrl', '*.password', 'apiKey', '*.apiKey', 'req.headers.authorization'],
      censor: '[redacted]',
    },
  }
  return options.pretty ? pino(settings, prettyLog({ out: process.stdout, colors: options.pretty.colors })) : pino(settings)
}
