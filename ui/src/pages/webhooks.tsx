/**
 * Webhooks: the signed-in tenant's subscriptions (an operator's: every tenant's, with whose each is) (URL shown as the API's errors show it, without
 * its query and token-like path segments; event types; queue; status: enabled, failing since when, or
 * disabled because its deliveries kept failing; created), and one subscription's page with its
 * status (why it was disabled, and a button enabling it again, or one disabling it), its delivery
 * log, newest first, a page at a time, a failed delivery marked; its event types and URL are edited
 * in place (PATCH /v1/webhooks/{id}; a refusal of the URL, a 409 naming the subscription that sends
 * there among them, is shown by the field), its secret is replaced by a new one (never shown: the
 * API does not return it) and the subscription is deleted after a confirmation.
 * Deliveries are jobs of pgsched's own, which send no live events: the log follows the tenant's
 * events (each may be delivered a moment later) and is read again every few seconds.
 */
import { useContext, useState } from 'preact/hooks'
import { ApiError, call, messageOf, withQuery } from '../api.ts'
import { ActionButton, CursorPager, announce, ErrorNotice, LongText, TableWrap } from '../components/common.tsx'
import { duration, shortId, shownUrl, when } from '../format.ts'
import { useInterval, useLiveRefresh, useLoad } from '../hooks.ts'
import { IdentityContext } from '../identity.ts'
import { href, navigate } from '../router.ts'
import type { Page, Webhook, WebhookDelivery } from '../types.ts'

/** The event types a subscription may choose (the API's list); none chosen: every event. */
export const EVENT_TYPES = ['submitted', 'started', 'retrying', 'succeeded', 'failed', 'cancelled', 'expired', 'paused', 'resumed'] as const

/** The shortest secret the API takes. */
const SECRET_MIN = 16

/** A delivery log page's size. */
const DELIVERIES_PAGE = 50

function eventsText(events: string[]): string {
  return events.length === 0 ? 'every event' : events.join(', ')
}

/** Enabled, failing (since when) or disabled: a badge and a word, as the list and the summary show it. */
function Status({ hook }: { hook: Webhook }) {
  if (!hook.enabled) return <span class="badge badge-failed">disabled</span>
  if (hook.failingSince) {
    return (
      <>
        <span class="badge badge-stale">failing</span> <span class="muted">since {when(hook.failingSince)}</span>
      </>
    )
  }
  return <span class="badge badge-succeeded">enabled</span>
}

/** Subscriptions per page of the list (a tenant has at most 100 by default). */
const WEBHOOKS_PAGE = 100

export function WebhooksPage() {
  // an operator key sees every tenant's subscriptions: whose each is
  const { operator } = useContext(IdentityContext)
  // the cursors of the pages shown so far: the last is the page on screen (undefined: the first)
  const [stack, setStack] = useState<Array<string | undefined>>([undefined])
  const cursor = stack[stack.length - 1]
  const hooks = useLoad(
    (signal) => call<{ items: Webhook[]; nextCursor: string | null }>(withQuery('/v1/webhooks', { limit: WEBHOOKS_PAGE, cursor }), { signal }),
    [cursor],
  )
  useInterval(hooks.reload, 15_000)
  return (
    <>
      <h1 tabIndex={-1}>Webhooks</h1>
      <ErrorNotice error={hooks.error} what="The webhook list" />
      {!hooks.data && hooks.loading && <p role="status">Loading…</p>}
      {hooks.data && (
        <TableWrap label="Webhook subscriptions">
          <table>
            <thead>
              <tr>
                <th scope="col">URL</th>
                {operator && <th scope="col">Tenant</th>}
                <th scope="col">Events</th>
                <th scope="col">Queue</th>
                <th scope="col">Status</th>
                <th scope="col">Created</th>
              </tr>
            </thead>
            <tbody>
              {hooks.data.items.map((w) => (
                <tr key={w.id} data-webhook-id={w.id}>
                  <td class="name">
                    <a href={href(`/webhooks/${w.id}`)} aria-label={`Webhook ${shownUrl(w.url)}, deliveries and settings`}>
                      {shownUrl(w.url)}
                    </a>
                  </td>
                  {operator && <td class="name">{w.tenant}</td>}
                  <td>{eventsText(w.events)}</td>
                  <td class="name">{w.queue}</td>
                  <td data-webhook-status={w.enabled ? (w.failingSince ? 'failing' : 'enabled') : 'disabled'}>
                    <Status hook={w} />
                  </td>
                  <td>{when(w.createdAt)}</td>
                </tr>
              ))}
            </tbody>
          </table>
          {hooks.data.items.length === 0 && stack.length === 1 && (
            <p class="empty">
              No webhook subscriptions. Create one with <code>POST /v1/webhooks</code> or <code>scheduler webhooks create</code>.
            </p>
          )}
        </TableWrap>
      )}
      {(stack.length > 1 || hooks.data?.nextCursor) && (
        <CursorPager label="Webhook pages" stack={stack} go={setStack} nextCursor={hooks.data?.nextCursor} back="Earlier" forward="Later" />
      )}
    </>
  )
}

/** Which field a 400 of an update is about, from its message ("url must be …", "body/events/0 must be …"). */
function fieldOf(message: string): 'url' | 'events' | 'secret' | null {
  const m = /^(?:body[/.])?(url|events|secret)\b/.exec(message)
  return (m?.[1] as 'url' | 'events' | 'secret' | undefined) ?? null
}

function FieldError({ id, text }: { id: string; text: string }) {
  if (!text) return null
  return (
    <p class="error" id={id} role="alert">
      {text}
    </p>
  )
}

/** The event types and URL of a subscription; a URL left empty stays as it is. */
function EditForm({ hook, saved }: { hook: Webhook; saved: () => void }) {
  const [events, setEvents] = useState<string[]>(hook.events)
  const [url, setUrl] = useState('')
  const [errors, setErrors] = useState<{ url?: string; events?: string; form?: string }>({})
  const [busy, setBusy] = useState(false)
  const save = async (e: Event) => {
    e.preventDefault()
    setErrors({})
    const body: { url?: string; events?: string[] } = {}
    if (url.trim()) body.url = url.trim()
    const chosen = EVENT_TYPES.filter((t) => events.includes(t))
    const same = chosen.length === hook.events.length && chosen.every((t) => hook.events.includes(t))
    if (!same) body.events = chosen
    if (body.url === undefined && body.events === undefined) {
      setErrors({ form: 'Nothing changed: choose other event types or give a new URL.' })
      return
    }
    setBusy(true)
    try {
      await call(`/v1/webhooks/${hook.id}`, { method: 'PATCH', body })
      announce('Webhook saved')
      setUrl('')
      saved()
    } catch (err: unknown) {
      const message = messageOf(err)
      // a 409 refuses the new URL (another subscription sends there): by the field, as a 400 of it is
      const field =
        err instanceof ApiError && err.status === 400
          ? fieldOf(message)
          : err instanceof ApiError && err.status === 409 && body.url !== undefined
            ? 'url'
            : null
      setErrors(field === 'url' || field === 'events' ? { [field]: message } : { form: message })
    } finally {
      setBusy(false)
    }
  }
  const toggle = (type: string, on: boolean) => setEvents(on ? [...events, type] : events.filter((t) => t !== type))
  return (
    // noValidate: the API's message (or the page's) is shown next to the field, not the browser's bubble
    <form class="webhook-form" noValidate onSubmit={(e) => void save(e)} aria-label="Edit webhook">
      <fieldset class="event-types" aria-describedby={errors.events ? 'webhook-events-error' : 'webhook-events-help'}>
        <legend>Event types</legend>
        <p class="help" id="webhook-events-help">
          None ticked: every event.
        </p>
        <div class="checks">
          {EVENT_TYPES.map((t) => (
            <label class="check" key={t}>
              <input type="checkbox" name="events" value={t} checked={events.includes(t)} onChange={(e) => toggle(t, e.currentTarget.checked)} /> {t}
            </label>
          ))}
        </div>
        <FieldError id="webhook-events-error" text={errors.events ?? ''} />
      </fieldset>
      <div class="field grow">
        <label for="webhook-url">New URL</label>
        <input
          id="webhook-url"
          type="url"
          inputMode="url"
          autocomplete="off"
          placeholder="unchanged"
          value={url}
          aria-invalid={errors.url ? true : undefined}
          aria-describedby={errors.url ? 'webhook-url-error' : undefined}
          onInput={(e) => setUrl(e.currentTarget.value)}
        />
        <FieldError id="webhook-url-error" text={errors.url ?? ''} />
      </div>
      <div class="field buttons">
        <button type="submit" class="primary" disabled={busy} aria-busy={busy}>
          Save
        </button>
      </div>
      <FieldError id="webhook-form-error" text={errors.form ?? ''} />
    </form>
  )
}

/** A new signing secret; the stored one is never shown (the API does not return it). */
function SecretForm({ hook }: { hook: Webhook }) {
  const [secret, setSecret] = useState('')
  const [error, setError] = useState('')
  const [busy, setBusy] = useState(false)
  const save = async (e: Event) => {
    e.preventDefault()
    setError('')
    if (secret.length < SECRET_MIN) {
      setError(`The secret must be at least ${SECRET_MIN} characters (it has ${secret.length}).`)
      return
    }
    setBusy(true)
    try {
      await call(`/v1/webhooks/${hook.id}`, { method: 'PATCH', body: { secret } })
      setSecret('')
      announce('Secret replaced: deliveries from now on are signed with the new one')
    } catch (err: unknown) {
      setError(messageOf(err))
    } finally {
      setBusy(false)
    }
  }
  return (
    <form class="webhook-form" noValidate onSubmit={(e) => void save(e)} aria-label="Replace the signing secret">
      <div class="field grow">
        <label for="webhook-secret">New secret</label>
        <input
          id="webhook-secret"
          type="password"
          autocomplete="new-password"
          minLength={SECRET_MIN}
          maxLength={256}
          value={secret}
          aria-invalid={error ? true : undefined}
          aria-describedby={error ? 'webhook-secret-error webhook-secret-help' : 'webhook-secret-help'}
          onInput={(e) => setSecret(e.currentTarget.value)}
        />
        <FieldError id="webhook-secret-error" text={error} />
      </div>
      <div class="field buttons">
        <button type="submit" disabled={busy} aria-busy={busy}>
          Replace secret
        </button>
      </div>
      <p class="help" id="webhook-secret-help">
        {SECRET_MIN}-256 characters. The current secret is never shown. Every delivery attempt from now on, retries of earlier events among them, is signed with
        the new one: let the receiver accept both for a moment.
      </p>
    </form>
  )
}

function DeliveryOutcome({ d }: { d: WebhookDelivery }) {
  if (d.ok) return <span class="badge badge-succeeded">delivered</span>
  return (
    <>
      <span class="badge badge-failed">failed</span>
      {d.willRetry === true && <span class="muted"> (retried)</span>}
      {d.willRetry === false && <span class="muted"> (no retry)</span>}
    </>
  )
}

function Deliveries({ id }: { id: string }) {
  // the cursors of the pages shown so far: the last is the page on screen (undefined: the newest)
  const [stack, setStack] = useState<Array<string | undefined>>([undefined])
  const cursor = stack[stack.length - 1]
  const page = useLoad(
    (signal) => call<Page<WebhookDelivery>>(withQuery(`/v1/webhooks/${encodeURIComponent(id)}/deliveries`, { limit: DELIVERIES_PAGE, cursor }), { signal }),
    [id, cursor],
  )
  // a delivery follows an event of the tenant within moments; retries come with no event: read now and then
  useLiveRefresh(() => true, page.reload, 2000)
  useInterval(page.reload, 5_000)
  const items = page.data?.items ?? []
  return (
    <>
      <h2>Deliveries</h2>
      <ErrorNotice error={page.error} what="The delivery log" />
      {!page.data && page.loading && <p role="status">Loading…</p>}
      {page.data && (
        <TableWrap label="Deliveries">
          <table aria-busy={page.loading}>
            <thead>
              <tr>
                <th scope="col">Time</th>
                <th scope="col">Outcome</th>
                <th scope="col">Event</th>
                <th scope="col">Job</th>
                <th scope="col">Attempt</th>
                <th scope="col">Status code or error</th>
                <th scope="col">Took</th>
              </tr>
            </thead>
            <tbody>
              {items.map((d) => (
                <tr key={d.id} data-delivery-id={d.id} data-ok={String(d.ok)} data-event-id={d.eventId}>
                  <td>{when(d.at)}</td>
                  <td>
                    <DeliveryOutcome d={d} />
                  </td>
                  <td>
                    {d.eventType} <span class="muted">{d.eventId}</span>
                  </td>
                  <td>
                    <a href={href(`/jobs/${d.jobId}`)} title={d.jobId} aria-label={`Delivery job ${d.jobId}`}>
                      {shortId(d.jobId)}
                    </a>
                  </td>
                  <td>{d.attempt}</td>
                  <td class={d.ok ? '' : 'error-text'}>
                    {d.statusCode !== null && <span>{d.statusCode}</span>}
                    {d.statusCode !== null && d.error && ': '}
                    {d.error && <LongText text={d.error} what="error" />}
                    {d.statusCode === null && !d.error && '—'}
                  </td>
                  <td>{duration(d.durationMs)}</td>
                </tr>
              ))}
            </tbody>
          </table>
          {items.length === 0 && <p class="empty">{stack.length > 1 ? 'No older deliveries.' : 'No deliveries yet.'}</p>}
        </TableWrap>
      )}
      <CursorPager label="Delivery pages" stack={stack} go={setStack} nextCursor={page.data?.nextCursor} back="Newer" forward="Older" />
    </>
  )
}

export function WebhookDetailPage({ id }: { id: string }) {
  const hook = useLoad((signal) => call<Webhook>(`/v1/webhooks/${encodeURIComponent(id)}`, { signal }), [id])
  useInterval(hook.reload, 15_000)
  const w = hook.data
  return (
    <>
      <h1 tabIndex={-1}>Webhook {w ? shownUrl(w.url) : id}</h1>
      <p>
        <a href={href('/webhooks')}>All webhooks</a>
      </p>
      <ErrorNotice error={hook.error} what="This webhook" />
      {!w && hook.loading && <p role="status">Loading…</p>}
      {w && (
        <>
          <section aria-label="Webhook summary" class="card" data-webhook-id={w.id}>
            <dl class="facts">
              <dt>URL</dt>
              <dd>{shownUrl(w.url)}</dd>
              <dt>Events</dt>
              <dd data-webhook-events>{eventsText(w.events)}</dd>
              <dt>Queue</dt>
              <dd>{w.queue}</dd>
              <dt>Status</dt>
              <dd data-webhook-status={w.enabled ? (w.failingSince ? 'failing' : 'enabled') : 'disabled'}>
                <Status hook={w} />
                {!w.enabled && w.disabledAt && <span class="muted"> since {when(w.disabledAt)}</span>}
              </dd>
              {!w.enabled && w.disabledReason && (
                <>
                  <dt>Why</dt>
                  <dd data-webhook-disabled-reason>
                    <LongText text={w.disabledReason} what="reason" />
                  </dd>
                </>
              )}
              <dt>Created</dt>
              <dd>{when(w.createdAt)}</dd>
              <dt>Id</dt>
              <dd>{w.id}</dd>
            </dl>
            <div class="actions">
              {w.enabled ? (
                <ActionButton
                  label="Disable"
                  name="Disable this webhook"
                  confirm="Disable this webhook? No event is sent to it until it is enabled again, and its deliveries still to come end unsent."
                  run={async () => {
                    await call(`/v1/webhooks/${w.id}`, { method: 'PATCH', body: { enabled: false } })
                    hook.reload()
                  }}
                  done="Webhook disabled"
                />
              ) : (
                <ActionButton
                  label="Enable"
                  name="Enable this webhook"
                  kind="primary"
                  run={async () => {
                    await call(`/v1/webhooks/${w.id}`, { method: 'PATCH', body: { enabled: true } })
                    hook.reload()
                  }}
                  done="Webhook enabled: the events from now on are sent"
                />
              )}
              <ActionButton
                label="Delete"
                name="Delete this webhook"
                kind="danger"
                confirm="Delete this webhook? Its deliveries still to come are cancelled and its delivery log goes with it."
                run={async () => {
                  await call(`/v1/webhooks/${w.id}`, { method: 'DELETE' })
                  navigate('/webhooks')
                }}
                done="Webhook deleted"
              />
            </div>
          </section>
          <Deliveries id={id} />
          <section class="card" aria-labelledby="webhook-edit-heading">
            <h2 id="webhook-edit-heading">Edit</h2>
            <EditForm key={`${w.events.join()} ${w.url}`} hook={w} saved={hook.reload} />
          </section>
          <section class="card" aria-labelledby="webhook-secret-heading">
            <h2 id="webhook-secret-heading">Signing secret</h2>
            <SecretForm hook={w} />
          </section>
        </>
      )}
    </>
  )
}
