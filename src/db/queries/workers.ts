/** SQL for the workers table: register at start, mark stopped at shutdown. */
import type { Kysely } from 'kysely'
import type { DB } from '../schema.ts'

export interface WorkerRegisterParams {
  id: string
  host: string
  pid: number
  queues: readonly string[]
  types: readonly string[]
  concurrency: number
}

export async function workerRegister(db: Kysely<DB>, params: WorkerRegisterParams): Promise<void> {
  await db
    .insertInto('pgsched.workers')
    .values({ ...params, queues: [...params.queues], types: [...params.types] })
    .execute()
}

export async function workerMarkStopped(db: Kysely<DB>, params: { id: string }): Promise<void> {
  await db
    .updateTable('pgsched.workers')
    .set((eb) => ({ stopped_at: eb.fn('now'), last_seen_at: eb.fn('now') }))
    .where('id', '=', params.id)
    .execute()
}
