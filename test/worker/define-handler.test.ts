/**
 * What `defineHandler` and a worker's handler list refuse up front, from plain JavaScript: a handler
 * that is not a function (it would fail every attempt of its jobs, each retried) and two handlers of
 * one type (the built-in `http` and `pgsched.webhook` among them), named so that the caller can mend it.
 */
import { describe, expect, it } from 'vitest'
import { ValidationError } from '../../src/errors.ts'
import { defineHandler, HandlerRegistry } from '../../src/worker/handlers.ts'
import { createWorkerSystem } from '../../src/system.ts'
import { loadConfig } from '../../src/config.ts'
import { createLogger } from '../../src/logger.ts'

const refusal = (fn: () => unknown): unknown => {
  try {
    fn()
  } catch (err: unknown) {
    return err
  }
  throw new Error('not refused')
}

describe('defineHandler', () => {
  it('refuses a handler that is not a function, naming the handler and what it got', () => {
    for (const [run, got] of [
      [undefined, 'undefined'],
      [{ run: async () => 1 }, 'an object'],
      ['email.send', 'a string'],
    ] as const) {
      const err = refusal(() => defineHandler('email.send', run as never))
      expect(err).toBeInstanceOf(ValidationError)
      expect((err as Error).message).toBe(`handler "email.send": the handler must be a function (ctx) => result, got ${got}`)
    }
  })
})

describe('two handlers of one type', () => {
  it('are refused, naming the type', () => {
    const a = defineHandler('email.send', () => 1)
    const err = refusal(() => new HandlerRegistry([a, defineHandler('email.send', () => 2)]))
    expect(err).toBeInstanceOf(ValidationError)
    expect((err as Error).message).toBe('two handlers for type "email.send": a worker runs each type with one handler')
  })

  it("name the built-in http handler when an application's own takes its type", () => {
    const config = loadConfig({ DATABASE_URL: 'postgres://127.0.0.1:1/none', SCHEDULER_WORKER_METRICS_PORT: 'off' })
    const log = createLogger({ level: 'silent' })
    const err = refusal(() => createWorkerSystem({ config, log, handlers: [defineHandler('http', () => 1)] }))
    expect(err).toBeInstanceOf(ValidationError)
    expect((err as Error).message).toBe(
      'two handlers for type "http": a worker runs each type with one handler, and "http" is the built-in http handler\'s (give yours another type, or leave the built-in out with SCHEDULER_HTTP_HANDLER=off)',
    )
  })
})
