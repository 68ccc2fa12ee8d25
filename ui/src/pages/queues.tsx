/**
 * Queues: settings and live figures; operator keys pause and resume a queue and edit its limits
 * and fair share (PATCH /v1/queues/{name}; an empty field removes a limit). Only the settings the
 * form changed are sent: a limit another operator set since the form opened stays as they set it.
 */
import { useContext, useState } from 'preact/hooks'
import { call, messageOf } from '../api.ts'
import { ActionButton, announce, ErrorNotice, TableWrap, FormEnd } from '../components/common.tsx'
import { QUEUE_CLAIMED_NOTE } from '../figures.ts'
import { duration } from '../format.ts'
import { useInterval, useLiveRefresh, useLoad } from '../hooks.ts'
import { IdentityContext } from '../identity.ts'
import type { Queue } from '../types.ts'

const LIMITS = [
  { field: 'concurrencyLimit', label: 'Concurrency limit' },
  { field: 'keyConcurrencyLimit', label: 'Per-key concurrency limit' },
  { field: 'rateLimit', label: 'Rate limit (starts per period)' },
  { field: 'ratePeriodMs', label: 'Rate period (ms)' },
  { field: 'keyRateLimit', label: 'Per-key rate limit (starts of one key per period)' },
  { field: 'keyRatePeriodMs', label: 'Per-key rate period (ms)' },
] as const

/** Each rate limit's period: the two are sent together when either changed (the API refuses a period without its limit). */
const PERIOD_OF: Record<string, string> = { rateLimit: 'ratePeriodMs', keyRateLimit: 'keyRatePeriodMs' }
const PERIODS = new Set(Object.values(PERIOD_OF))

function LimitsForm({ queue, saved }: { queue: Queue; saved: () => void }) {
  // the queue as the form opened on it (the list, and so `queue`, is read again while the form is open)
  const [initial] = useState(() => Object.fromEntries(LIMITS.map((l) => [l.field, String(queue[l.field] ?? '')])) as Record<string, string>)
  const [initialFairShare] = useState(queue.fairShare)
  const [values, setValues] = useState(initial)
  const [fairShare, setFairShare] = useState(initialFairShare)
  const [error, setError] = useState('')
  const save = async (e: Event) => {
    e.preventDefault()
    setError('')
    // Only what the form changed is sent (PATCH leaves out the rest as it is): the form shows the
    // queue as it was when it opened, and another operator may have changed it since.
    const text = (field: string) => (values[field] ?? '').trim()
    const changed = (field: string) => text(field) !== (initial[field] ?? '').trim()
    const body: Record<string, number | boolean | null> = {}
    if (fairShare !== initialFairShare) body.fairShare = fairShare
    for (const { field } of LIMITS) {
      if (PERIODS.has(field)) continue // sent with its limit
      const period = PERIOD_OF[field]
      if (!changed(field) && !(period !== undefined && changed(period))) continue
      body[field] = text(field) ? Number(text(field)) : null
      // a limit removed takes no period: the one still shown is left out, unless it was typed (the API then says why it is refused)
      if (period !== undefined && text(period) && (body[field] !== null || changed(period))) body[period] = Number(text(period))
    }
    if (Object.keys(body).length === 0) {
      announce(`Limits of queue ${queue.name} unchanged`)
      saved()
      return
    }
    try {
      await call(`/v1/queues/${encodeURIComponent(queue.name)}`, { method: 'PATCH', body })
      announce(`Limits of queue ${queue.name} saved`)
      saved()
    } catch (err: unknown) {
      setError(messageOf(err))
    }
  }
  const id = (f: string) => `q-${queue.name}-${f}`
  return (
    <form class="limits" onSubmit={(e) => void save(e)} aria-label={`Limits of queue ${queue.name}`}>
      {LIMITS.map((l) => (
        <div class="field" key={l.field}>
          <label for={id(l.field)}>{l.label}</label>
          <input
            id={id(l.field)}
            inputMode="numeric"
            pattern="[0-9]*"
            placeholder="no limit"
            value={values[l.field]}
            onInput={(e) => setValues({ ...values, [l.field]: e.currentTarget.value })}
          />
        </div>
      ))}
      <div class="field">
        <label class="check">
          <input type="checkbox" checked={fairShare} onChange={(e) => setFairShare(e.currentTarget.checked)} /> Fair share between tenants
        </label>
      </div>
      <FormEnd submit="Save limits" error={error} />
    </form>
  )
}

export function QueuesPage() {
  const identity = useContext(IdentityContext)
  const queues = useLoad((signal) => call<{ items: Queue[] }>('/v1/queues', { signal }), [])
  const [editing, setEditing] = useState<string | null>(null)
  useLiveRefresh(() => true, queues.reload, 2000)
  useInterval(queues.reload, 15_000)
  const act = (name: string, action: 'pause' | 'resume') => async () => {
    await call(`/v1/queues/${encodeURIComponent(name)}/${action}`, { method: 'POST' })
    queues.reload()
  }
  return (
    <>
      <h1 tabIndex={-1}>Queues</h1>
      <ErrorNotice error={queues.error} what="The queue list" />
      {queues.data && (
        <TableWrap label="Queues">
          <table>
            <thead>
              <tr>
                <th scope="col">Queue</th>
                <th scope="col">State</th>
                <th scope="col">Due</th>
                <th scope="col">Scheduled</th>
                <th scope="col" title={QUEUE_CLAIMED_NOTE}>
                  Claimed
                </th>
                <th scope="col">Oldest due</th>
                <th scope="col" title="Live workers serving the queue">
                  Workers
                </th>
                <th scope="col">Limits</th>
                {identity.operator && <th scope="col">Actions</th>}
              </tr>
            </thead>
            <tbody>
              {queues.data.items.map((q) => (
                <tr key={q.name} data-queue={q.name} data-paused={String(q.paused)}>
                  <th scope="row" class="name">
                    {q.name}
                  </th>
                  <td>{q.paused ? <span class="badge badge-paused">paused</span> : 'active'}</td>
                  <td>{q.due}</td>
                  <td>{q.scheduled}</td>
                  <td>{q.running}</td>
                  <td>{duration(q.oldestDueLagMs)}</td>
                  <td data-live-workers={q.liveWorkers}>{q.liveWorkers}</td>
                  <td>
                    {[
                      q.concurrencyLimit !== null && `${q.concurrencyLimit} at once`,
                      q.keyConcurrencyLimit !== null && `${q.keyConcurrencyLimit} per key`,
                      q.rateLimit !== null && `${q.rateLimit} per ${duration(q.ratePeriodMs)}`,
                      q.keyRateLimit !== null && `${q.keyRateLimit} per key per ${duration(q.keyRatePeriodMs)}`,
                      q.fairShare && 'fair share',
                    ]
                      .filter(Boolean)
                      .join(', ') || 'none'}
                  </td>
                  {identity.operator && (
                    <td>
                      <div class="actions">
                        {q.paused ? (
                          <ActionButton label="Resume" name={`Resume ${q.name}`} run={act(q.name, 'resume')} done={`Queue ${q.name} resumed`} />
                        ) : (
                          <ActionButton label="Pause" name={`Pause ${q.name}`} run={act(q.name, 'pause')} done={`Queue ${q.name} paused`} />
                        )}
                        <button
                          type="button"
                          aria-label={`Edit limits of ${q.name}`}
                          aria-expanded={editing === q.name}
                          onClick={() => setEditing(editing === q.name ? null : q.name)}
                        >
                          Edit limits
                        </button>
                      </div>
                    </td>
                  )}
                </tr>
              ))}
            </tbody>
          </table>
        </TableWrap>
      )}
      {queues.data && (
        <p class="help" data-note="claimed">
          {QUEUE_CLAIMED_NOTE}
        </p>
      )}
      {editing && queues.data?.items.find((q) => q.name === editing) && (
        <section class="card" aria-label={`Edit queue ${editing}`}>
          <h2>Limits of {editing}</h2>
          <LimitsForm
            key={editing}
            queue={queues.data.items.find((q) => q.name === editing) as Queue}
            saved={() => {
              setEditing(null)
              queues.reload()
            }}
          />
        </section>
      )}
    </>
  )
}
