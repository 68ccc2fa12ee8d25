/**
 * The claim of one limited queue under its settings row lock (migrations 0012, 0013, 0015, 0016,
 * 0027): the claims of the queue take turns on that lock, and each sees every claim before it.
 */
import { sql, type Kysely } from 'kysely'
import type { DB } from '../schema.ts'
import { PREPARE } from '../pool.ts'
import { executionClaimBatchQuery, inClaimOrder, type ClaimedExecution, type ExecutionClaimBatchParams } from './claim.ts'

/** Rate-limited queues: slots are the period / limit times this apart (see migration 0015). */
export const RATE_SPACING = 1.07
/** How far ahead of its slot a rate-limited execution may be claimed (the worker waits for the slot). */
export const RATE_HORIZON_MS = 100

interface LimitedSetting {
  paused: boolean
  fair: boolean
  limit: number | null
  keyLimit: number | null
  /** Rate limit: slot spacing (ms; null: no rate limit). */
  spacingMs: number | null
  /** Rate limit per key: slot spacing of one key (ms; null: none). */
  keySpacingMs: number | null
  running: number
  due: boolean
}

/**
 * Claims from one limited queue: locks its settings row (claims of the queue take turns), then
 * claims at most its limit minus what runs now, per key at most the key limit minus what of it
 * runs, and with a rate limit only as many as there are start slots within RATE_HORIZON_MS (each
 * execution carries the delay to its slot, and next_start_at moves past the last). Nothing when
 * the queue is paused or no longer limited (the ordinary claim takes it then). `full`: a limit, not
 * a lack of due work, held the claim back (as far as the counts read with the lock tell).
 */
export async function queueClaimLimited(
  db: Kysely<DB>,
  params: Omit<ExecutionClaimBatchParams, 'limited'>,
): Promise<{ claimed: ClaimedExecution[]; full: boolean; running: number | null }> {
  const queue = params.queues[0] as string
  return db.transaction().execute(async (trx) => {
    // The row lock, taken by an update that also clears the bound admitted claims keep of the running
    // executions (migrations/0027): this claim is not in it.
    const { rows } = await sql<LimitedSetting>`${sql.raw(PREPARE)}
      update pgsched.queues set running_bound = null where name = ${queue}::text
      returning paused, fair_share as fair, concurrency_limit as limit, key_concurrency_limit as "keyLimit",
             rate_period_ms::float8 / rate_limit * ${RATE_SPACING}::float8 as "spacingMs",
             key_rate_period_ms::float8 / key_rate_limit * ${RATE_SPACING}::float8 as "keySpacingMs",
             exists (select 1 from pgsched.due p where p.queue = ${queue}::text and p.run_at <= now()) as due,
             (select count(*)::int from pgsched.runs r where r.queue = ${queue}::text) as running`.execute(trx)
    const s = rows[0]
    if (!s || s.paused || (!s.fair && s.limit === null && s.keyLimit === null && s.spacingMs === null && s.keySpacingMs === null))
      return { claimed: [], full: false, running: null }
    let room = params.limit
    // The first free slot, read once the lock is held (the transaction's now() is from before any
    // wait for it), as ms from then: how many slots fit the horizon.
    let slots: { firstSlotMs: number } | undefined
    if (s.spacingMs !== null) {
      const { rows: r } = await sql<{ firstSlotMs: number }>`${sql.raw(PREPARE)}
        select greatest(0, extract(epoch from coalesce(next_start_at, t.at) - t.at) * 1000)::float8 as "firstSlotMs"
          from pgsched.queues, (select clock_timestamp() as at) t
         where name = ${queue}::text`.execute(trx)
      slots = r[0]
      if (slots) room = Math.min(room, slots.firstSlotMs > RATE_HORIZON_MS ? 0 : Math.floor((RATE_HORIZON_MS - slots.firstSlotMs) / s.spacingMs) + 1)
    }
    const keyRate = s.keySpacingMs === null ? undefined : { spacingMs: s.keySpacingMs, horizonMs: RATE_HORIZON_MS }
    const limited = { capacity: s.limit, keyLimit: s.keyLimit, fair: s.fair, keyRate }
    const claimed = inClaimOrder((await executionClaimBatchQuery({ ...params, limit: room, queues: [queue], limited }).execute(trx)).rows)
    if (s.keySpacingMs !== null && claimed.length > 0) {
      await keySlotsTake(trx, queue, claimed, s.spacingMs, s.keySpacingMs)
    } else if (s.spacingMs !== null && slots && claimed.length > 0) {
      const { spacingMs } = s
      const span = claimed.length * spacingMs
      // Slots from the clock read last, just before the commit, and never in the past: the worker
      // waits from when the answer arrives, so a delay counted from an earlier instant (the claim's
      // own time, a wait for the lock) would start runs early, bunched with the previous claim's.
      const { rows: u } = await sql<{ firstSlotMs: number }>`${sql.raw(PREPARE)}
        update pgsched.queues q
           set next_start_at = greatest(coalesce(q.next_start_at, t.at), t.at) + ${span}::float8 * interval '1 millisecond'
          from (select clock_timestamp() as at) t
         where q.name = ${queue}::text
        returning (extract(epoch from q.next_start_at - t.at) * 1000 - ${span}::float8)::float8 as "firstSlotMs"`.execute(trx)
      const first = u[0]?.firstSlotMs ?? 0
      claimed.forEach((c, i) => {
        c.startDelayMs = Math.max(0, first + i * spacingMs)
      })
    }
    // Held back by a limit (the queue's, a key's or the rate): as far as the counts read with the lock tell.
    const queueFull = s.limit !== null && s.running + claimed.length >= s.limit
    return {
      claimed,
      full: claimed.length < params.limit && s.due && (queueFull || s.keyLimit !== null || s.spacingMs !== null || s.keySpacingMs !== null),
      running: s.running + claimed.length,
    }
  })
}

/** Between a tenant and its key in the keys of keySlotsTake (chr(31) in SQL: the unit separator). */
const KEY_SEPARATOR = '\u001f'

/**
 * The start slots of a claim with a rate limit per key (migrations/0027), in claim order: each
 * execution starts at the later of its key's next slot and, with a rate limit on the queue too, the
 * queue's next slot; both move past it. Executions without a key take only the queue's slots. The
 * keys' next slots are written to queue_key_slots (those now in the past are removed), the queue's to
 * next_start_at; each execution carries its delay. Read and written from one clock reading, one
 * statement before the commit.
 */
async function keySlotsTake(trx: Kysely<DB>, queue: string, claimed: ClaimedExecution[], spacingMs: number | null, keySpacingMs: number): Promise<void> {
  // keys are counted per tenant (migration 0041): each as `<tenant>\u001f<key>`, as the claim's TENANT_KEY
  const keyOf = (c: ClaimedExecution) => (c.concurrencyKey == null ? null : `${c.keyTenant ?? ''}${KEY_SEPARATOR}${c.concurrencyKey}`)
  const keys = [...new Set(claimed.map(keyOf).filter((k): k is string => k !== null))]
  const { rows } = await sql<{ at: string; queueFirstMs: number; keyFirstMs: Record<string, number> | null }>`${sql.raw(PREPARE)}
    select t.at::text as at,
           greatest(0, extract(epoch from coalesce(q.next_start_at, t.at) - t.at) * 1000)::float8 as "queueFirstMs",
           (select json_object_agg(k.tenant || chr(31) || k.concurrency_key, greatest(0, extract(epoch from k.next_start_at - t.at) * 1000))
              from pgsched.queue_key_slots k
             where k.queue = q.name and k.tenant || chr(31) || k.concurrency_key = any(${keys}::text[])) as "keyFirstMs"
      from pgsched.queues q, (select clock_timestamp() as at) t
     where q.name = ${queue}::text`.execute(trx)
  const read = rows[0]
  if (!read) return
  let queueNext = spacingMs === null ? 0 : read.queueFirstMs
  const keyNext = new Map(Object.entries(read.keyFirstMs ?? {}))
  for (const c of claimed) {
    const key = keyOf(c)
    const at = Math.max(spacingMs === null ? 0 : queueNext, key == null ? 0 : (keyNext.get(key) ?? 0))
    c.startDelayMs = at
    if (spacingMs !== null) queueNext = at + spacingMs
    if (key != null) keyNext.set(key, at + keySpacingMs)
    delete c.concurrencyKey
    delete c.keyTenant
  }
  const tenantsAndKeys = [...keyNext.keys()].map((k) => k.split(KEY_SEPARATOR))
  await sql`${sql.raw(PREPARE)}
    with queue_slot as (
      update pgsched.queues set next_start_at = ${read.at}::timestamptz + ${queueNext}::float8 * interval '1 millisecond'
       where name = ${queue}::text and ${spacingMs !== null}::boolean
    ),
    stale as (
      delete from pgsched.queue_key_slots d
       where d.queue = ${queue}::text and d.next_start_at < ${read.at}::timestamptz and d.tenant || chr(31) || d.concurrency_key <> all(${keys}::text[])
    )
    insert into pgsched.queue_key_slots as s (queue, tenant, concurrency_key, next_start_at)
    select ${queue}::text, tenant, k, ${read.at}::timestamptz + ms * interval '1 millisecond'
      from unnest(${tenantsAndKeys.map((tk) => tk[0] ?? '')}::text[], ${tenantsAndKeys.map((tk) => tk.slice(1).join(KEY_SEPARATOR))}::text[],
                  ${[...keyNext.values()]}::float8[]) as n (tenant, k, ms)
    on conflict (queue, tenant, concurrency_key) do update set next_start_at = excluded.next_start_at`.execute(trx)
}
