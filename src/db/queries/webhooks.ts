/**
 * Webhook subscriptions and their delivery log (migration 0022). A subscription is also an event
 * listener (same id, until infinity), so its tenant's events are captured while it exists. The
 * dispatcher's statements (which events go to which subscription) are here too.
 */
import { type RawBuilder, sql, type Kysely } from 'kysely'
import type { DB } from '../schema.ts'
import { WEBHOOK_JOB_TYPE, type EventType, type JobEvent } from '../../core/events.ts'
import { EVENT_COLUMNS, EVENTS_OF_BATCH, type EventRow, toEvent } from './events.ts'

export interface WebhookSubscriptionRow {
  id: string
  tenant: string
  url: string
  events: EventType[]
  queue: string
  secret: string
  createdAt: Date
  /** False once disabled (its deliveries kept failing, or an update), until an update enables it. */
  enabled: boolean
  /** When its first failed delivery attempt since the last successful one was recorded; null while not failing. */
  failingSince: Date | null
  disabledAt: Date | null
  /** Why it was disabled; null while enabled. */
  disabledReason: string | null
}

/** The columns of WebhookSubscriptionRow, unqualified (a select of the table, or `returning`). */
const columns = sql`id, tenant, url, events, queue, secret, created_at as "createdAt", disabled_at is null as enabled,
           failing_since as "failingSince", disabled_at as "disabledAt", disabled_reason as "disabledReason"`

/** A subscription written, or the id of the tenant's subscription already sending to its URL in its `queue`. */
export type WebhookSubscriptionWrite = { row: WebhookSubscriptionRow; existingId?: undefined } | { row?: undefined; existingId: string; queue: string }

/** A creation refused because the tenant already has `max` subscriptions. */
export interface WebhookSubscriptionsFull {
  full: true
  max: number
}

type WriteRow = WebhookSubscriptionRow & { existingId: string | null; targetQueue: string; cancelledDeliveries?: number | null }

/** Whether `err` is the refusal of webhook_subscriptions_target_key (a concurrent statement wrote the same target first). */
function isTargetTaken(err: unknown): boolean {
  const e = err as { code?: unknown; constraint?: unknown } | null
  return e?.code === '23505' && e.constraint === 'webhook_subscriptions_target_key'
}

/**
 * Runs a write of a subscription's target once more when a concurrent one took the same target
 * between its check and its write: the second run's check then sees that one and names it.
 */
async function retriedOnTargetTaken<T>(write: () => Promise<T>): Promise<T> {
  try {
    return await write()
  } catch (err: unknown) {
    if (!isTargetTaken(err)) throw err
    return await write()
  }
}

/**
 * The tenant's subscription with this receiver in this queue (its URL the same under
 * pgsched.webhook_url_key: scheme and host case, default port, dot segments, fragment; the first, by
 * id: subscriptions kept from before migrations 0064, 0068 and 0071 may repeat one another, and the unique index leaves those
 * out), other than `except`; none for a null `url`. Read through webhook_subscriptions_tenant_idx: a
 * tenant has few.
 */
const sameTarget = (tenant: string, queue: RawBuilder<unknown>, url: string | null, except: RawBuilder<unknown>) => sql`
  select o.id from pgsched.webhook_subscriptions o
   where o.tenant = ${tenant}::text and o.queue = ${queue}
     and pgsched.webhook_url_key(o.url) = pgsched.webhook_url_key(${url}::text)
     and o.id is distinct from ${except}
   order by o.id
   limit 1`

/**
 * Creates a subscription with its event listener, unless one of the tenant's already sends to
 * `url` in `queue` (whatever its event types): then nothing is written and its id is returned; or
 * unless the tenant has `maxPerTenant` subscriptions already (enabled or not): then nothing is
 * written either. Its own transaction: the tenant's creations take turns (a transaction-scoped
 * advisory lock on the tenant's name), so that two at once cannot both pass the count; the count
 * reads up to `maxPerTenant` entries of webhook_subscriptions_tenant_idx.
 */
export async function webhookSubscriptionInsert(
  db: Kysely<DB>,
  p: { tenant: string; url: string; events: readonly EventType[]; queue: string; secret: string; maxPerTenant: number },
): Promise<WebhookSubscriptionWrite | WebhookSubscriptionsFull> {
  return retriedOnTargetTaken(() =>
    db.transaction().execute(async (trx) => {
      await sql`select pg_advisory_xact_lock(hashtextextended('pgsched.webhook_subscriptions:' || ${p.tenant}::text, 0))`.execute(trx)
      // a statement of its own, after the lock: its snapshot sees the creation that held it
      const { rows: counted } = await sql<{ n: number }>`
        select count(*)::int as n
          from (select 1 from pgsched.webhook_subscriptions s where s.tenant = ${p.tenant}::text limit ${p.maxPerTenant}::int) x`.execute(trx)
      if ((counted[0]?.n ?? 0) >= p.maxPerTenant) return { full: true as const, max: p.maxPerTenant }
      return toWrite((await webhookSubscriptionInsertRow(trx, p)).rows[0])
    }),
  )
}

/** The creation's statement (in webhookSubscriptionInsert's transaction). */
function webhookSubscriptionInsertRow(db: Kysely<DB>, p: { tenant: string; url: string; events: readonly EventType[]; queue: string; secret: string }) {
  return sql<WriteRow>`
    with existing as (${sameTarget(p.tenant, sql`${p.queue}::text`, p.url, sql`null::uuid`)}),
    sub as (
      insert into pgsched.webhook_subscriptions (tenant, url, events, queue, secret)
      select ${p.tenant}::text, ${p.url}::text, ${[...p.events]}::text[], ${p.queue}::text, ${p.secret}::text
       where not exists (select 1 from existing)   -- every event would be delivered twice
      returning *
    ),
    listener as (
      -- its tenant's events are captured from now on, until the subscription is deleted
      insert into pgsched.event_listeners (id, tenant, kind, until)
      select id, tenant, 'webhook', 'infinity' from sub
    )
    select (select id from existing) as "existingId", ${p.queue}::text as "targetQueue", s.*
      from (values (1)) one
      left join (select ${columns} from sub) s on true`.execute(db)
}

function toWrite(r: WriteRow | undefined): WebhookSubscriptionWrite {
  if (!r) throw new Error('a webhook subscription write returned no row')
  if (r.existingId !== null) return { existingId: r.existingId, queue: r.targetQueue }
  const { existingId: _none, targetQueue: _queue, cancelledDeliveries: _cancelled, ...row } = r
  return { row }
}

/** The tenant's subscriptions, oldest first (tenant null: any tenant's, by id). */
export async function webhookSubscriptionList(
  db: Kysely<DB>,
  p: { tenant: string | null; id?: string; limit?: number; afterId?: string },
): Promise<WebhookSubscriptionRow[]> {
  const { rows } = await sql<WebhookSubscriptionRow>`
    select ${columns} from pgsched.webhook_subscriptions
     where (${p.tenant}::text is null or tenant = ${p.tenant}::text)
       and (${p.id ?? null}::uuid is null or id = ${p.id ?? null}::uuid)
       and (${p.afterId ?? null}::uuid is null or id > ${p.afterId ?? null}::uuid)
     order by id
     limit ${p.limit ?? null}::int`.execute(db)
  return rows
}

/** The tenant a subscription belongs to; undefined when there is no such subscription. */
export async function webhookTenantOf(db: Kysely<DB>, id: string): Promise<string | undefined> {
  const { rows } = await sql<{ tenant: string }>`select tenant from pgsched.webhook_subscriptions where id = ${id}::uuid`.execute(db)
  return rows[0]?.tenant
}

/**
 * The subscription a delivery job names, only when it belongs to the job's tenant (undefined when
 * it was deleted, or is another tenant's: a job's payload never picks whose secret signs it).
 */
export async function webhookSubscriptionForJob(db: Kysely<DB>, p: { id: string; jobId: string }): Promise<WebhookSubscriptionRow | undefined> {
  const { rows } = await sql<WebhookSubscriptionRow>`
    select ${columns} from pgsched.webhook_subscriptions
     where id = ${p.id}::uuid
       and tenant = (select j.tenant from pgsched.jobs j where j.id = ${p.jobId}::uuid)`.execute(db)
  return rows[0]
}

/**
 * Changes the fields given (undefined: kept) of a subscription of the tenant's; undefined when it
 * has no such one. A new URL that another of the tenant's subscriptions sends to in the same queue
 * (the same receiver: pgsched.webhook_url_key) changes nothing and returns that one's id. Delivery
 * attempts read the URL and secret when made (webhookSubscriptionForJob), and the dispatcher the
 * event types and whether it is enabled when it reads an event. `enabled: true` on a disabled
 * subscription enables it again (its events from now on are sent, its failures forgotten), and
 * `false` disables an enabled one, cancelling its deliveries with work left (up to
 * WEBHOOK_CANCEL_MAX); either way its event listener follows.
 */
export async function webhookSubscriptionUpdate(
  db: Kysely<DB>,
  p: { tenant: string; id: string; url?: string; events?: readonly EventType[]; secret?: string; enabled?: boolean },
): Promise<WebhookSubscriptionWrite | undefined> {
  const url = p.url ?? null
  const enabled = p.enabled ?? null
  const { rows } = await retriedOnTargetTaken(() =>
    sql<WriteRow>`
    with target as (
      select s.id, s.queue, s.url from pgsched.webhook_subscriptions s where s.id = ${p.id}::uuid and s.tenant = ${p.tenant}::text
    ),
    existing as (
      -- only a move to another receiver is checked: a subscription kept from before migrations 0064
      -- and 0068 that repeats another keeps its own, under any spelling
      select e.id from (${sameTarget(p.tenant, sql`(select queue from target)`, url, sql`${p.id}::uuid`)}) e
       where pgsched.webhook_url_key(${url}::text) <> pgsched.webhook_url_key((select url from target))
    ),
    changed as (
      update pgsched.webhook_subscriptions s
         set url = coalesce(${url}::text, s.url),
             events = coalesce(${p.events ? [...p.events] : null}::text[], s.events),
             secret = coalesce(${p.secret ?? null}::text, s.secret),
             -- held to the rule from its move on (webhook_subscriptions_target_key)
             duplicate_of = case when pgsched.webhook_url_key(${url}::text) <> pgsched.webhook_url_key(s.url) then null else s.duplicate_of end,
             disabled_at = case ${enabled}::bool when true then null when false then coalesce(s.disabled_at, now()) else s.disabled_at end,
             disabled_reason = case ${enabled}::bool when true then null when false then coalesce(s.disabled_reason, 'disabled by an update')
                                    else s.disabled_reason end,
             -- enabled again: a fresh start, sent the events from now on
             failing_since = case when ${enabled}::bool and s.disabled_at is not null then null else s.failing_since end,
             enabled_at = case when ${enabled}::bool and s.disabled_at is not null then now() else s.enabled_at end
       where s.id = ${p.id}::uuid and s.tenant = ${p.tenant}::text
         and not exists (select 1 from existing)
      returning ${columns}
    ),
    listener as (
      -- its tenant's events are captured again while it is enabled, and no longer for it while disabled
      update pgsched.event_listeners l
         set until = case when c.enabled then 'infinity' else least(l.until, now()) end
        from changed c
       where l.id = c.id and l.kind = 'webhook' and ${enabled}::bool is not null
    ),
    cancelled as (
      -- disabled: its deliveries with work left are cancelled, rather than each failing unsent
      select pgsched.webhook_deliveries_cancel(c.tenant, c.queue, c.id, null::uuid, ${WEBHOOK_CANCEL_MAX}::int) as n
        from changed c
       where ${enabled}::bool = false
    ),
    -- moved to another receiver: what repeated it at the one it leaves holds that one now
    promoted as (${repeatsPromoted(sql`(select id from changed)`, sql`pgsched.webhook_url_key(${url}::text) <> pgsched.webhook_url_key((select url from target))`)})
    -- reads cancelled: a plain select in WITH runs only when the statement reads it
    select (select id from existing) as "existingId", target.queue as "targetQueue", (select n from cancelled) as "cancelledDeliveries", c.*
      from target
      left join changed c on true`.execute(db),
  )
  const r = rows[0]
  // none of the tenant's, or deleted meanwhile
  return r === undefined || (r.existingId === null && r.id === null) ? undefined : toWrite(r)
}

/**
 * The subscriptions kept as repeats of `gone` (duplicate_of, migrations 0064, 0068 and 0071), once
 * it is deleted or moved to another receiver (`when`): the oldest of them becomes the one the unique
 * key holds (webhook_subscriptions_target_key), the others its repeats. Left as they were, they would
 * name a subscription that no longer exists, or that sends elsewhere, and the key would hold none of
 * them (creations still find them: sameTarget reads every subscription).
 */
const repeatsPromoted = (gone: RawBuilder<unknown>, when: RawBuilder<unknown> = sql`true`) => sql`
      update pgsched.webhook_subscriptions s
         set duplicate_of = nullif(f.first_id, s.id)
        from (select d.id as first_id from pgsched.webhook_subscriptions d where d.duplicate_of = ${gone} order by d.id limit 1) f
       where s.duplicate_of = ${gone} and ${when}`

/** Deletes a subscription (with its listener and delivery log); undefined when the tenant has no such one. */
export async function webhookSubscriptionDelete(db: Kysely<DB>, p: { tenant: string; id: string }): Promise<WebhookSubscriptionRow | undefined> {
  const { rows } = await sql<WebhookSubscriptionRow>`
    with sub as (
      delete from pgsched.webhook_subscriptions where id = ${p.id}::uuid and tenant = ${p.tenant}::text returning *
    ),
    listener as (
      delete from pgsched.event_listeners where id in (select id from sub) and kind = 'webhook'
    ),
    promoted as (${repeatsPromoted(sql`(select id from sub)`)})
    select ${columns} from sub`.execute(db)
  return rows[0]
}

export interface WebhookDeliveryRow {
  id: string
  eventId: string
  eventType: EventType
  jobId: string
  attempt: number
  at: Date
  statusCode: number | null
  ok: boolean
  error: string | null
  durationMs: number
  /** Another attempt follows; null for attempts recorded before migration 0051. */
  willRetry: boolean | null
}

/**
 * Most delivery jobs one statement that disables a subscription cancels (each a pgsched.cancel_job:
 * a few statements, with the job's events): a receiver down for an hour while its tenant is busy may have thousands, and
 * the statement runs in a delivery attempt or an update. Those left end at their next attempt, which
 * cancels the next ones (webhookDeliveryCancelLeft).
 */
export const WEBHOOK_CANCEL_MAX = 1_000

/** When a subscription whose delivery attempts keep failing is disabled (the workers' settings). */
export interface WebhookDisablePolicy {
  /** Disabled once its attempts have failed, none succeeding, for at least this long… */
  afterMs: number
  /** …with at least this many failed attempts; 0: never disabled. */
  afterFailures: number
}

/**
 * Records one delivery attempt and what it says of the subscription (not for a deleted one). Its row
 * is written only when this changes something: the first failed attempt after a success sets
 * failing_since, a successful one clears it, and a failed one disables the subscription when
 * failing_since is at least `afterMs` old and at least `afterFailures` attempts (this one among
 * them) failed since; those are counted only then, newest first through
 * webhook_deliveries_subscription_idx, down to failing_since (their ids are UUIDv7 of the database
 * clock) and up to the threshold. The disabling is guarded by the failing_since it was judged on: a
 * successful attempt (or an enable) committed meanwhile leaves it enabled. A subscription disabled
 * also stops being a live listener (no event of its tenant is captured for it), and its other
 * deliveries with work left are cancelled (up to WEBHOOK_CANCEL_MAX; a running one's worker aborts
 * it), rather than each failing unsent at its next attempt; this attempt is recorded as not retried.
 * Returns its reason, and how many deliveries were cancelled, when this attempt disabled it.
 */
export async function webhookDeliveryInsert(
  db: Kysely<DB>,
  p: Omit<WebhookDeliveryRow, 'id' | 'at'> & { subscriptionId: string; disable?: WebhookDisablePolicy },
): Promise<{ disabledReason: string; cancelled: number } | undefined> {
  const afterFailures = p.disable?.afterFailures ?? 0
  const { rows } = await sql<{ disabledReason: string | null; cancelled: number | null }>`
    with judged as (
      select s.id, s.failing_since,
             case when ${p.ok}::bool or ${afterFailures}::int = 0 then false
                  when coalesce(s.failing_since, now()) > now() - ${p.disable?.afterMs ?? 0}::bigint * interval '1 millisecond' then false
                  -- only past the time threshold: the failed attempts since it began failing (this one
                  -- not yet visible), newest first, down to the UUIDv7 of failing_since's millisecond
                  else (select count(*) from (
                          select 1 from pgsched.webhook_deliveries d
                           where d.subscription_id = s.id
                             and d.id >= encode(substring(int8send(floor(extract(epoch from s.failing_since) * 1000)::bigint) from 3)
                                                || decode('00000000000000000000', 'hex'), 'hex')::uuid
                             and d.at >= s.failing_since and not d.ok
                           order by d.id desc
                           limit ${afterFailures}::int - 1) f) >= ${afterFailures}::int - 1
             end as disable
        from pgsched.webhook_subscriptions s
       where s.id = ${p.subscriptionId}::uuid and s.disabled_at is null
    ),
    changed as (
      update pgsched.webhook_subscriptions s
         set failing_since = case when ${p.ok}::bool then null else coalesce(s.failing_since, now()) end,
             -- disabled only as judged: a concurrent statement that changed failing_since (a
             -- successful attempt, an enable) committed while this one waited for the row
             disabled_at = case when j.disable and s.failing_since is not distinct from j.failing_since then now() end,
             disabled_reason = case when j.disable and s.failing_since is not distinct from j.failing_since then format(
               'its delivery attempts failed for %s with none succeeding (%s or more failed attempts since %s); the last: %s',
               date_trunc('second', now() - coalesce(j.failing_since, now())), ${afterFailures}::int,
               to_char(coalesce(j.failing_since, now()) at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"'), left(coalesce(${p.error}::text, 'no error recorded'), 500)) end
        from judged j
       where s.id = j.id and s.disabled_at is null
         -- written only when it starts or stops failing, or is disabled
         and ((j.disable and s.failing_since is not distinct from j.failing_since) or (${p.ok}::bool) = (s.failing_since is not null))
      returning s.id, s.tenant, s.queue, s.disabled_reason
    ),
    recorded as (
      -- at: the insert's own time, and its id made of that same time (uuid_v7(at), migration 0073), so
      -- the log, newest first by id, is in the order of its times too (the statement's now() would be
      -- when it began; two readings of the clock could be milliseconds apart on a busy server)
      insert into pgsched.webhook_deliveries (id, at, subscription_id, event_id, event_type, job_id, attempt, status_code, ok, error, duration_ms, will_retry)
      select pgsched.uuid_v7(clock.at), clock.at, ${p.subscriptionId}::uuid, ${p.eventId}::text, ${p.eventType}::text, ${p.jobId}::uuid, ${p.attempt}::int,
             ${p.statusCode}::int, ${p.ok}::bool, ${p.error}::text, ${p.durationMs}::int,
             -- an attempt that disabled the subscription ends its delivery (the handler's FatalError)
             ${p.willRetry}::bool and not exists (select 1 from changed c where c.disabled_reason is not null)
        from (select clock_timestamp() as at) clock
       where exists (select 1 from pgsched.webhook_subscriptions where id = ${p.subscriptionId}::uuid)   -- not for a deleted one
    ),
    listener as (
      -- disabled: its tenant's events are no longer captured for it
      update pgsched.event_listeners l set until = least(l.until, now())
        from changed c
       where l.id = c.id and l.kind = 'webhook' and c.disabled_reason is not null
    ),
    cancelled as (
      -- disabled: its other deliveries with work left are cancelled, rather than each failing unsent
      select pgsched.webhook_deliveries_cancel(c.tenant, c.queue, c.id, ${p.jobId}::uuid, ${WEBHOOK_CANCEL_MAX}::int) as n
        from changed c
       where c.disabled_reason is not null
    )
    -- reads cancelled: a plain select in WITH runs only when the statement reads it
    select disabled_reason as "disabledReason", (select n from cancelled) as cancelled from changed`.execute(db)
  const reason = rows[0]?.disabledReason
  return reason ? { disabledReason: reason, cancelled: rows[0]?.cancelled ?? 0 } : undefined
}

/**
 * Cancels the delivery jobs of a disabled subscription that have work left, up to WEBHOOK_CANCEL_MAX,
 * but `exceptJobId` (pgsched.webhook_deliveries_cancel, migration 0070); returns how many. For an
 * attempt that found its subscription disabled: what the disabling statement left (more than the
 * bound, or submitted by a dispatcher that read the subscription before it was disabled).
 */
export async function webhookDeliveryCancelLeft(
  db: Kysely<DB>,
  p: { tenant: string; queue: string; subscriptionId: string; exceptJobId: string },
): Promise<number> {
  const { rows } = await sql<{ n: number }>`
    select pgsched.webhook_deliveries_cancel(${p.tenant}::text, ${p.queue}::text, ${p.subscriptionId}::uuid, ${p.exceptJobId}::uuid,
                                             ${WEBHOOK_CANCEL_MAX}::int) as n`.execute(db)
  return rows[0]?.n ?? 0
}

/** A subscription's delivery attempts, newest first, before the attempt `beforeId` when given. */
export async function webhookDeliveryList(db: Kysely<DB>, p: { subscriptionId: string; limit: number; beforeId?: string }): Promise<WebhookDeliveryRow[]> {
  const { rows } = await sql<WebhookDeliveryRow>`
    select id, event_id as "eventId", event_type as "eventType", job_id as "jobId", attempt, at, status_code as "statusCode", ok, error,
           duration_ms as "durationMs", will_retry as "willRetry"
      from pgsched.webhook_deliveries
     where subscription_id = ${p.subscriptionId}::uuid
       and (${p.beforeId ?? null}::uuid is null or id < ${p.beforeId ?? null}::uuid)
     order by id desc
     limit ${p.limit}::int`.execute(db)
  return rows
}

/**
 * The delivery jobs of a subscription that have work left (an execution pending or running), from
 * the due and running executions of the tenant's pgsched.webhook jobs (not from every job it has).
 */
export async function webhookDeliveryJobsLeft(db: Kysely<DB>, p: { tenant: string; subscriptionId: string }): Promise<string[]> {
  const { rows } = await sql<{ id: string }>`
    select j.id
      from (select job_id from pgsched.due where tenant = ${p.tenant}::text and type = ${WEBHOOK_JOB_TYPE}::text
            union
            select job_id from pgsched.runs where tenant = ${p.tenant}::text and type = ${WEBHOOK_JOB_TYPE}::text) w
      join pgsched.jobs j on j.id = w.job_id
     where j.tenant = ${p.tenant}::text and j.state = 'active' and j.payload ->> 'subscriptionId' = ${p.subscriptionId}::text`.execute(db)
  return rows.map((r) => r.id)
}

/** Deletes up to `limit` delivery records older than `olderThanMs`; returns how many. */
export async function webhookDeliveryPruneOld(db: Kysely<DB>, p: { olderThanMs: number; limit: number }): Promise<number> {
  const { rows } = await sql<{ n: number }>`
    with deleted as (
      delete from pgsched.webhook_deliveries
       where id in (select id from pgsched.webhook_deliveries
                     where at < now() - ${p.olderThanMs}::bigint * interval '1 millisecond' order by at limit ${p.limit}::int)
      returning 1
    )
    select count(*)::int as n from deleted`.execute(db)
  return rows[0]?.n ?? 0
}

/** Whether any enabled webhook subscription exists (the dispatcher's cheap check). */
export async function webhookSubscriptionAny(db: Kysely<DB>): Promise<boolean> {
  const { rows } = await sql<{ any: boolean }>`select exists (select 1 from pgsched.webhook_subscriptions where disabled_at is null) as any`.execute(db)
  return rows[0]?.any ?? false
}

export interface WebhookDue {
  subscriptionId: string
  queue: string
  event: JobEvent
}

/**
 * Under the lock of the webhooks cursor (SKIP LOCKED: one dispatcher at a time; `trx` must be a
 * transaction), the events of the next numbered batches after it (whole batches, as many as keep
 * the count within `limit`, at least one), each paired with every subscription of its tenant that
 * wants its type, is enabled, and was when it happened (enabled_at: its creation, or when it was
 * enabled again). Events of pgsched's own jobs (pgsched.webhook deliveries) are never sent.
 * `upTo`: the batch number the cursor goes to once they are submitted; null when another dispatcher
 * holds the cursor. `read`: how many events; `more`: batches are left.
 */
export async function webhookDueAfterCursor(
  trx: Kysely<DB>,
  p: { limit: number },
): Promise<{ upTo: string | null; read: number; more: boolean; due: WebhookDue[] }> {
  const { rows: cursor } = await sql<{ seq: string }>`
    select seq::text as seq from pgsched.event_cursors where name = 'webhooks' for update skip locked`.execute(trx)
  const from = cursor[0]?.seq
  if (from === undefined) return { upTo: null, read: 0, more: false, due: [] }
  const { rows } = await sql<EventRow & { subscription_id: string | null; subscription_queue: string | null; last: string; read: number; more: boolean }>`
    with next as (
      select n.*, sum(n.size) over (order by n.seq) as running, count(*) over () as batches
        from (select id, seq, size from pgsched.event_batches where seq is not null and seq > ${from}::bigint order by seq limit ${p.limit}::int) n
    ),
    chosen as (
      -- whole batches while the events stay within the limit; the first one in any case
      select * from next where running <= ${p.limit}::int or running = size
    ),
    summary as (
      select max(seq)::text as last, coalesce(sum(size), 0)::int as read,
             (select count(*) from chosen) < coalesce((select max(batches) from next), 0) or coalesce((select max(batches) from next), 0) = ${p.limit}::int as more
        from chosen
    )
    select ${EVENT_COLUMNS}, s.id as subscription_id, s.queue as subscription_queue, summary.last, summary.read, summary.more
      from summary
      left join (chosen c join pgsched.event_batches b on b.id = c.id cross join lateral ${EVENTS_OF_BATCH}) on true
      left join pgsched.webhook_subscriptions s
        on s.tenant = e.tenant and (cardinality(s.events) = 0 or e.type = any(s.events)) and s.enabled_at <= b.at and s.disabled_at is null
       and e.job_type not like 'pgsched.%'
     order by b.seq, e.n, s.id`.execute(trx)
  const due = rows.flatMap((r) =>
    r.subscription_id === null || r.seq === null ? [] : [{ subscriptionId: r.subscription_id, queue: r.subscription_queue as string, event: toEvent(r) }],
  )
  const head = rows[0]
  return { upTo: head?.last ?? from, read: head?.read ?? 0, more: head?.more ?? false, due }
}

/**
 * Of the subscriptions `ids`, those that still exist, each locked against deletion (FOR KEY SHARE)
 * until the transaction ends: the dispatcher's read of the events saw them in its snapshot, and a
 * delete that committed since (or was in progress: this waits for it) would otherwise leave deliveries
 * of a subscription that is gone, each failing unsent. A delete that comes after waits for this
 * transaction, then cancels the deliveries it submitted.
 */
export async function webhookSubscriptionsHeld(trx: Kysely<DB>, ids: readonly string[]): Promise<Set<string>> {
  if (ids.length === 0) return new Set()
  const { rows } = await sql<{ id: string }>`
    select id from pgsched.webhook_subscriptions where id = any(${[...ids]}::uuid[]) order by id for key share`.execute(trx)
  return new Set(rows.map((r) => r.id))
}

/** Moves the webhooks cursor to batch number `to` (in the transaction that holds it). */
export async function webhookCursorAdvance(trx: Kysely<DB>, p: { to: string }): Promise<void> {
  await sql`update pgsched.event_cursors set seq = greatest(seq, ${p.to}::bigint) where name = 'webhooks'`.execute(trx)
}
