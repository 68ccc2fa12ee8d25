/**
 * Handlers only `scheduler dev` adds: `echo`, which returns its payload as the result (and
 * logs one line), so the first job of the printed example succeeds at once, offline.
 */
import { defineHandler, type Handler } from '../../worker/handlers.ts'

export const ECHO_TYPE = 'echo'

export const echoHandler: Handler = defineHandler(ECHO_TYPE, (ctx) => {
  ctx.log.info('echo job ran')
  return ctx.payload
})

/** The user's handlers plus the dev ones whose type the user's do not take. */
export function withDevHandlers(handlers: readonly Handler[]): Handler[] {
  return handlers.some((h) => h.type === ECHO_TYPE) ? [...handlers] : [...handlers, echoHandler]
}
