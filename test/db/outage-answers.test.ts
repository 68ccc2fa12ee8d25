/**
 * An outage ends, in a quiet logger's lines, only when a connection or a write begun after the
 * outage was seen succeeds. A write sent before it, whose answer is read after the first broken
 * connection was reported, proves nothing: on a loaded machine it ended a 3-second outage 17 ms in,
 * and the outage was then reported a second time.
 */
import { sql } from 'kysely'
import pg from 'pg'
import { afterEach, describe, expect, it } from 'vitest'
import { createDb } from '../../src/db/pool.ts'
import { quietDuringOutages } from '../../src/db/outage.ts'
import { useTestDb } from '../db.ts'
import { capturingLogger } from '../log-capture.ts'
import { waitFor } from '../wait-for.ts'

const t = useTestDb()
const cleanups: Array<() => Promise<void>> = []
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c()
})

describe('the end of an outage in a quiet logger', () => {
  it('is not a write sent before the outage was seen, only one sent after', async () => {
    const lines: Array<{ msg: string; outageMs?: number }> = []
    const quiet = quietDuringOutages(capturingLogger('info', lines).log)
    const d = createDb({ databaseUrl: t.url, poolSize: 3, log: quiet.log, answers: quiet })
    cleanups.push(() => d.db.destroy())
    await sql`create table outage_probe (n int)`.execute(t.db)
    // A write held in flight by a lock the test holds on a connection of its own.
    const holder = new pg.Client({ connectionString: t.url })
    await holder.connect()
    cleanups.push(() => holder.end())
    await holder.query('select pg_advisory_lock(4711)')
    const early = sql`insert into outage_probe select 1 from (select pg_advisory_xact_lock(4711)) s`.execute(d.db)
    await waitFor(async () => (await holder.query("select 1 from pg_locks where locktype = 'advisory' and not granted")).rowCount, {
      what: 'the early write waiting on the lock',
    })

    // The outage: an idle connection of the pool is ended by the server.
    const { rows } = await sql<{ pid: number }>`select pg_backend_pid() as pid`.execute(d.db)
    await holder.query('select pg_terminate_backend($1)', [rows[0]?.pid])
    await waitFor(() => lines.some((l) => l.msg.startsWith('database unavailable')), { what: 'the outage reported' })

    // The early write now succeeds: the outage goes on.
    await holder.query('select pg_advisory_unlock(4711)')
    await early
    expect(lines.map((l) => l.msg)).not.toContain('database available again')

    // A write sent now ends it, once.
    await sql`insert into outage_probe values (2)`.execute(d.db)
    await sql`insert into outage_probe values (3)`.execute(d.db)
    const back = lines.filter((l) => l.msg === 'database available again')
    expect(back).toHaveLength(1)
    expect(back[0]?.outageMs).toBeGreaterThanOrEqual(0)
  })
})
