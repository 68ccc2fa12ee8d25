/**
 * The Postgres output store (table pgsched.execution_output, migration 0020):
 * workers append chunks, one statement per flush for every run that has
 * something buffered, and record the output URI on the execution when a run's
 * first chunk is stored; the API reads an attempt's chunks in seq order,
 * a page at a time, from where it stopped (follow mode polls with afterSeq).
 */
import { sql, type Kysely } from 'kysely'
import type { DB } from '../schema.ts'
import { keyArray } from './array-literal.ts'

/** One chunk to append: the next part of an attempt's output. */
export interface OutputChunk {
  executionId: string
  attempt: number
  data: Buffer
}

export interface ExecutionOutputAppendManyParams {
  chunks: readonly OutputChunk[]
}

/** Appends the chunks in one statement (all or none); within an attempt they keep the order given. */
export async function executionOutputAppendMany(db: Kysely<DB>, params: ExecutionOutputAppendManyParams): Promise<void> {
  const c = params.chunks
  if (c.length === 0) return
  await sql`
    insert into pgsched.execution_output (execution_id, attempt, data)
    select d.execution_id, d.attempt, d.data
      from unnest(${keyArray(c.map((x) => x.executionId))}::uuid[], ${keyArray(c.map((x) => x.attempt))}::int[],
                  ${c.map((x) => x.data)}::bytea[]) with ordinality as d(execution_id, attempt, data, n)
     order by d.n  -- seq follows the input order
  `.execute(db)
}

export interface ExecutionOutputUriSetParams {
  id: string
  jobId: string
  attempt: number
  uri: string
}

/**
 * Names where a running attempt's output is, so the API can stream it before the run ends. One row:
 * it waits at most for that row's lock and holds no other, so it cannot deadlock with the batched
 * lease statements. Does nothing once the attempt ended (its outcome write stores the URI) or moved on.
 */
export async function executionOutputUriSet(db: Kysely<DB>, params: ExecutionOutputUriSetParams): Promise<boolean> {
  const result = await sql`
    update pgsched.runs
       set output_uri = ${params.uri}::text
     where execution_id = ${params.id}::uuid
       and attempt = ${params.attempt}::int
       and output_uri is distinct from ${params.uri}::text
  `.execute(db)
  return Number(result.numAffectedRows ?? 0) > 0
}

export interface ExecutionOutputReadParams {
  executionId: string
  attempt: number
  /** Chunks after this seq (a bigint as a string); null: from the start. */
  afterSeq: string | null
  /** Most chunks returned. */
  limit: number
}

/** An attempt's chunks after `afterSeq`, in order, at most `limit`; empty when there are no more (yet). */
export async function executionOutputRead(db: Kysely<DB>, params: ExecutionOutputReadParams): Promise<Array<{ seq: string; data: Buffer }>> {
  const { rows } = await sql<{ seq: string; data: Buffer }>`
    select o.seq::text as seq, o.data
      from pgsched.execution_output o
     where o.execution_id = ${params.executionId}::uuid
       and o.attempt = ${params.attempt}::int
       and o.seq > coalesce(${params.afterSeq}::bigint, 0)
     order by o.seq  -- the bigint column, not the text alias (which would sort 10 before 9)
     limit ${params.limit}::int
  `.execute(db)
  return rows
}
