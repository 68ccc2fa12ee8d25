/**
 * What `\d+` tells an operator: every column of the executions view and of the webhook delivery
 * log has a comment (migration 0049), and the columns pgsched.due and pgsched.runs share with the
 * history say what they mean there too.
 */
import { sql } from 'kysely'
import { describe, expect, it } from 'vitest'
import { useTestDb } from '../db.ts'

const t = useTestDb({ truncate: false })

async function uncommented(relation: string): Promise<string[]> {
  const { rows } = await sql<{ name: string }>`
    select a.attname as name
      from pg_attribute a
     where a.attrelid = ${`pgsched.${relation}`}::regclass and a.attnum > 0 and not a.attisdropped
       and col_description(a.attrelid, a.attnum) is null
     order by a.attnum`.execute(t.db)
  return rows.map((r) => r.name)
}

describe('column comments', () => {
  it('explain every column of the executions view and of the webhook delivery log', async () => {
    expect(await uncommented('executions')).toEqual([])
    expect(await uncommented('webhook_deliveries')).toEqual([])
  })

  it("explain every column of due and runs that the history explains, leaving only the job's plain copies", async () => {
    const plain = ['execution_id', 'job_id', 'type', 'priority', 'max_attempts', 'timeout_ms', 'created_at']
    expect(await uncommented('due')).toEqual(plain)
    expect(await uncommented('runs')).toEqual(plain)
  })
})
