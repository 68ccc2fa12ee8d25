/**
 * Tenants: each tenant's fair-share weight and admission quotas with its pending and running
 * executions (GET /v1/tenants), for operator keys, which edit them (PATCH /v1/tenants/{name}; an
 * empty quota field removes the quota; only the settings the form changed are sent, so one another
 * operator set since the form opened stays as they set it). A tenant without settings (weight 1, no quota) is not
 * listed: it is picked by name to be given some. Tenant keys are told the page is not theirs.
 */
import { useContext, useEffect, useRef, useState } from 'preact/hooks'
import { call, messageOf } from '../api.ts'
import { announce, ErrorNotice, TableWrap, FormEnd, TenantNameInput } from '../components/common.tsx'
import { useInterval, useLiveRefresh, useLoad } from '../hooks.ts'
import { IdentityContext } from '../identity.ts'
import { href } from '../router.ts'
import type { Tenant } from '../types.ts'

const path = (name: string) => `/v1/tenants/${encodeURIComponent(name)}`

/** Whether the tenant's pending executions have reached its quota: its submits are refused (429) until some start. */
const atQuota = (t: Tenant) => t.maxPending !== null && t.pending >= t.maxPending

const number = (n: number | null) => (n === null ? '' : String(n))

function SettingsForm({ tenant, saved }: { tenant: Tenant; saved: () => void }) {
  const [weight, setWeight] = useState(String(tenant.weight))
  const [maxPending, setMaxPending] = useState(number(tenant.maxPending))
  const [maxRate, setMaxRate] = useState(number(tenant.maxSubmitsPerSecond))
  const [error, setError] = useState('')
  const save = async (e: Event) => {
    e.preventDefault()
    setError('')
    // Only what the form changed is sent (PATCH leaves out the rest as it is): the form shows the
    // tenant as it was when it opened, and another operator may have changed it since. A quota
    // emptied is removed; the weight always has a value (1 when never set). What is not a number is
    // sent as typed, for the API's refusal to name the field (JSON has no NaN: it would become null,
    // which removes a quota).
    const value = (text: string) => (Number.isFinite(Number(text)) ? Number(text) : text)
    const quota = (text: string) => (text.trim() === '' ? null : value(text.trim()))
    const body: Record<string, number | string | null> = {}
    if (maxPending.trim() !== number(tenant.maxPending)) body.maxPending = quota(maxPending)
    if (maxRate.trim() !== number(tenant.maxSubmitsPerSecond)) body.maxSubmitsPerSecond = quota(maxRate)
    if (weight.trim() !== '' && weight.trim() !== String(tenant.weight)) body.weight = value(weight.trim())
    if (Object.keys(body).length === 0) {
      announce(`Settings of tenant ${tenant.name} unchanged`)
      saved()
      return
    }
    try {
      await call(path(tenant.name), { method: 'PATCH', body })
      announce(`Settings of tenant ${tenant.name} saved`)
      saved()
    } catch (err: unknown) {
      setError(messageOf(err))
    }
  }
  const id = (f: string) => `t-${tenant.name}-${f}`
  return (
    <form class="limits" onSubmit={(e) => void save(e)} aria-label={`Settings of tenant ${tenant.name}`}>
      <div class="field">
        <label for={id('weight')}>Weight (turns per round in fair-share queues)</label>
        <input id={id('weight')} inputMode="decimal" value={weight} onInput={(e) => setWeight(e.currentTarget.value)} />
      </div>
      <div class="field">
        <label for={id('max-pending')}>Max pending executions</label>
        <input
          id={id('max-pending')}
          inputMode="numeric"
          pattern="[0-9]*"
          placeholder="no quota"
          value={maxPending}
          onInput={(e) => setMaxPending(e.currentTarget.value)}
        />
      </div>
      <div class="field">
        <label for={id('max-rate')}>Max submits per second</label>
        <input id={id('max-rate')} inputMode="decimal" placeholder="no quota" value={maxRate} onInput={(e) => setMaxRate(e.currentTarget.value)} />
      </div>
      <FormEnd submit="Save settings" error={error} />
    </form>
  )
}

/**
 * The settings of one tenant, read alone (a tenant without settings is not listed), in a section
 * whose heading takes the focus when it opens, so keyboard and screen-reader users land on it.
 */
function EditTenant({ name, saved }: { name: string; saved: () => void }) {
  const tenant = useLoad((signal) => call<Tenant>(path(name), { signal }), [name])
  const heading = useRef<HTMLHeadingElement>(null)
  useEffect(() => heading.current?.focus(), [])
  return (
    <section class="card" aria-labelledby="t-edit-heading">
      <h2 id="t-edit-heading" tabIndex={-1} ref={heading}>
        Settings of {name}
      </h2>
      <ErrorNotice error={tenant.error} what={`Tenant ${name}`} />
      {tenant.data && <SettingsForm tenant={tenant.data} saved={saved} />}
    </section>
  )
}

/** Picks a tenant without settings by name (those the key knows of: with jobs, settings or an API key) to give it some. */
function OtherTenant({ names, pick }: { names: string[]; pick: (name: string) => void }) {
  const [name, setName] = useState('')
  return (
    <form
      class="filters"
      aria-label="Settings of another tenant"
      onSubmit={(e) => {
        e.preventDefault()
        if (!name.trim()) return
        pick(name.trim())
        setName('')
      }}
    >
      <div class="field">
        <label for="t-other">Another tenant</label>
        <TenantNameInput id="t-other" placeholder="tenant name" value={name} set={setName} names={names} />
      </div>
      <div class="field buttons">
        <button type="submit">Edit settings</button>
      </div>
    </form>
  )
}

function OperatorTenants() {
  const identity = useContext(IdentityContext)
  const tenants = useLoad((signal) => call<{ items: Tenant[] }>('/v1/tenants', { signal }), [])
  const [editing, setEditing] = useState<string | null>(null)
  // After a save the editor closes: the focus goes back to the tenant's row (listed once the list
  // has been read again, a tenant given its first settings too), or, for one not listed, to the other-tenant
  // field. Only when the focus is still lost (nowhere else since the save), and only after that
  // reload: one that failed gives up the return, rather than a later one taking the focus.
  const returnTo = useRef<{ name: string; before: unknown } | null>(null)
  useEffect(() => {
    const target = returnTo.current
    if (target === null || tenants.loading) return
    if (tenants.error !== undefined) returnTo.current = null
    if (tenants.data === target.before) return
    returnTo.current = null
    const active = document.activeElement
    if (active !== null && active !== document.body) return
    const row = document.querySelector<HTMLButtonElement>(`tr[data-tenant="${CSS.escape(target.name)}"] button`)
    ;(row ?? document.querySelector<HTMLInputElement>('#t-other'))?.focus()
  }, [tenants.data, tenants.loading, tenants.error])
  useLiveRefresh(() => true, tenants.reload, 2000)
  useInterval(tenants.reload, 15_000)
  const listed = new Set(tenants.data?.items.map((t) => t.name) ?? [])
  return (
    <>
      <ErrorNotice error={tenants.error} what="The tenant list" />
      {tenants.data && tenants.data.items.length === 0 && <p>No tenant has a weight or a quota set: each has weight 1 and no quota.</p>}
      {tenants.data && tenants.data.items.length > 0 && (
        <TableWrap label="Tenants">
          <table>
            <thead>
              <tr>
                <th scope="col">Tenant</th>
                <th scope="col">Weight</th>
                <th scope="col">Max pending</th>
                <th scope="col">Max submits/s</th>
                <th scope="col">Pending</th>
                <th scope="col">Running</th>
                <th scope="col">Actions</th>
              </tr>
            </thead>
            <tbody>
              {tenants.data.items.map((t) => (
                <tr key={t.name} data-tenant={t.name} data-at-quota={String(atQuota(t))}>
                  <th scope="row" class="name">
                    {t.name}
                  </th>
                  <td>{t.weight}</td>
                  <td>{t.maxPending ?? 'no quota'}</td>
                  <td>{t.maxSubmitsPerSecond ?? 'no quota'}</td>
                  <td>
                    {t.pending}
                    {atQuota(t) && (
                      <>
                        {' '}
                        <span class="badge badge-paused" title="Its submits get 429 until some of its pending executions start">
                          at quota<span class="visually-hidden">: its submits get 429 until some of its pending executions start</span>
                        </span>
                      </>
                    )}
                  </td>
                  <td>{t.running}</td>
                  <td>
                    <button
                      type="button"
                      aria-label={`Edit settings of ${t.name}`}
                      aria-expanded={editing === t.name}
                      onClick={() => setEditing(editing === t.name ? null : t.name)}
                    >
                      Edit settings
                    </button>{' '}
                    <a href={href('/keys', { tenant: t.name })} aria-label={`API keys of ${t.name}`}>
                      Keys
                    </a>
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
        </TableWrap>
      )}
      <OtherTenant names={identity.tenants.filter((n) => !listed.has(n))} pick={setEditing} />
      <p class="help">
        A submit over a quota gets 429 with Retry-After and writes nothing; a tenant marked at quota has as many pending executions as its max pending, so its
        submits are refused until some of them start. Max pending counts the tenant's own pending executions in every queue (its webhook deliveries are left
        out); 0 refuses every submit. A change applies to the next submit in the API process that made it and within a second everywhere else.
      </p>
      {editing && (
        <EditTenant
          key={editing}
          name={editing}
          saved={() => {
            returnTo.current = { name: editing, before: tenants.data }
            setEditing(null)
            tenants.reload()
          }}
        />
      )}
    </>
  )
}

export function TenantsPage() {
  const identity = useContext(IdentityContext)
  return (
    <>
      <h1 tabIndex={-1}>Tenants</h1>
      {identity.operator ? (
        <OperatorTenants />
      ) : (
        <p data-note="operator-only">Tenant weights and quotas are shown and set with operator keys: they bound what every tenant may do.</p>
      )}
    </>
  )
}
