/**
 * The root pino logger. Components take `log.child({ component })`. Secrets
 * (database URL, passwords, API keys, authorization headers) are redacted.
 */
import { pino, type Logger } from 'pino'

export type { Logger }

export function createLogger(options: { level: string; name?: string }): Logger {
  return pino({
    name: options.name ?? 'pgsched',
    level: options.level,
    redact: {
      paths: ['databaseUrl', '*.databaseUrl', '*.password', 'apiKey', '*.apiKey', 'req.headers.authorization'],
      censor: '[redacted]',
    },
  })
}
