/**
 * The root pino logger. Components take `log.child({ component })`. Secrets
 * (database URL, passwords, API keys, authorization headers) are redacted.
 * JSON lines on stdout, or, with `pretty` (a terminal), one human line each.
 */
import { pino, type Logger } from 'pino'
import { prettyLog } from './lib/pretty-log.ts'

export type { Logger }

export function createLogger(options: { level: string; name?: string; pretty?: { colors: boolean } }): Logger {
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
