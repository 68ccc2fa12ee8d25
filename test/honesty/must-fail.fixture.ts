/**
 * A test that must fail. `.ci/check-test-exit-code.sh` copies it into test/ and runs `npm test`
 * on it, with and without DATABASE_URL, to prove the test command's exit code tells the truth.
 * It uses the per-file database, so the run goes through the whole setup and teardown.
 */
import { sql } from 'kysely'
import { describe, expect, it } from 'vitest'
import { useTestDb } from '../db.ts'

const t = useTestDb()

describe('the test command', () => {
  it('fails when a test fails', async () => {
    const { rows } = await sql<{ one: number }>`select 1 as one`.execute(t.db)
    expect(rows[0]?.one).toBe(2)
  })
})
