/**
 * Keys: every API key (never its secret: GET /v1/keys) with its tenant, name, prefix, kind, when it
 * was created, last used and revoked, for operator keys, which create tenant keys (the new key is
 * shown once, here, with a button that copies it) and revoke keys, after a confirmation. The list
 * can be narrowed to one tenant's keys, a filter kept in the address (`#/keys?tenant=NAME`, where the
 * tenants page links). Operator keys are made with the CLI only. Tenant keys are told the page is
 * not theirs.
 */
import { useContext, useEffect, useRef, useState } from 'preact/hooks'
import { call, messageOf, withQuery } from '../api.ts'
import { ActionButton, CursorPager, ErrorNotice, TableWrap, announce, FormEnd, TenantNameInput } from '../components/common.tsx'
import { when } from '../format.ts'
import { useInterval, useLoad } from '../hooks.ts'
import { IdentityContext } from '../identity.ts'
import { href, navigate } from '../router.ts'
import type { ApiKey } from '../types.ts'

function CreateKey({ names, created }: { names: string[]; created: (key: ApiKey & { key: string }) => void }) {
  const [tenant, setTenant] = useState('')
  const [name, setName] = useState('')
  const [error, setError] = useState('')
  const create = async (e: Event) => {
    e.preventDefault()
    setError('')
    try {
      const body: Record<string, string> = { tenant: tenant.trim() }
      if (name.trim()) body.name = name.trim()
      const key = await call<ApiKey & { key: string }>('/v1/keys', { method: 'POST', body })
      setTenant('')
      setName('')
      announce(`Key for tenant ${key.tenant} created`)
      created(key)
    } catch (err: unknown) {
      setError(messageOf(err))
    }
  }
  return (
    <form class="filters" aria-label="New tenant key" onSubmit={(e) => void create(e)}>
      <div class="field">
        <label for="k-tenant">Tenant</label>
        <TenantNameInput id="k-tenant" required value={tenant} set={setTenant} names={names} />
      </div>
      <div class="field">
        <label for="k-name">Name (optional)</label>
        <input id="k-name" value={name} onInput={(e) => setName(e.currentTarget.value)} />
      </div>
      <FormEnd submit="Create key" error={error} />
    </form>
  )
}

/**
 * A key just created, shown once. Not a live region (a screen reader would read the secret aloud,
 * and announce() already says the key was made): its text takes the focus instead. Copy puts it on
 * the clipboard; where the browser allows no clipboard (a page not served over HTTPS or from this
 * host, or the permission refused) it selects the key instead, for the keyboard's copy.
 */
function NewKey({ created, done }: { created: ApiKey & { key: string }; done: () => void }) {
  const text = useRef<HTMLParagraphElement>(null)
  const secret = useRef<HTMLElement>(null)
  const [copied, setCopied] = useState<'copied' | 'selected' | null>(null)
  useEffect(() => {
    setCopied(null)
    text.current?.focus()
  }, [created.id])
  const copy = async () => {
    try {
      if (!navigator.clipboard) throw new Error('no clipboard')
      await navigator.clipboard.writeText(created.key)
      setCopied('copied')
      announce('Key copied')
    } catch {
      const range = document.createRange()
      if (secret.current) range.selectNodeContents(secret.current)
      const selection = getSelection()
      selection?.removeAllRanges()
      selection?.addRange(range)
      setCopied('selected')
      announce('The browser allows no copying here: the key is selected, copy it with the keyboard')
    }
  }
  return (
    <div class="notice" data-new-key>
      <p tabIndex={-1} ref={text}>
        The key for tenant <strong>{created.tenant}</strong>. Store it now: it is not shown again.
      </p>
      <code class="secret" ref={secret}>
        {created.key}
      </code>
      <div>
        <button type="button" onClick={() => void copy()}>
          Copy key
        </button>{' '}
        <button type="button" onClick={done}>
          Done
        </button>
        {copied && <span class="muted"> {copied === 'copied' ? 'Copied.' : 'Selected: copy it with Ctrl+C (⌘C).'}</span>}
      </div>
    </div>
  )
}

/** Narrows the list to one tenant's keys, in the address. */
function TenantFilter({ tenant, names }: { tenant: string | undefined; names: string[] }) {
  const [draft, setDraft] = useState(tenant ?? '')
  useEffect(() => setDraft(tenant ?? ''), [tenant])
  return (
    <form
      class="filters"
      aria-label="Key filter"
      onSubmit={(e) => {
        e.preventDefault()
        navigate('/keys', { tenant: draft.trim() || undefined })
      }}
    >
      <div class="field">
        <label for="k-filter-tenant">Keys of tenant</label>
        <TenantNameInput id="k-filter-tenant" placeholder="every tenant" value={draft} set={setDraft} names={names} />
      </div>
      <div class="field buttons">
        <button type="submit">Show</button>
        {tenant !== undefined && <a href={href('/keys')}>Every tenant's keys</a>}
      </div>
    </form>
  )
}

/** Keys per page of the list. */
const KEYS_PAGE = 100

function OperatorKeys({ tenant }: { tenant: string | undefined }) {
  const identity = useContext(IdentityContext)
  // the list names the tenant it was read for: while another tenant's is read, the last one stays
  // on screen under its own name, never under the new filter's
  // the cursors of the pages shown so far, for this tenant filter: the last is the page on screen
  // (undefined: the first, the oldest keys)
  const [pages, setPages] = useState<{ tenant: string | undefined; stack: Array<string | undefined> }>({ tenant, stack: [undefined] })
  // a new filter starts at its first page (kept, so that a filter in between and back starts over too)
  useEffect(() => {
    if (pages.tenant !== tenant) setPages({ tenant, stack: [undefined] })
  }, [tenant, pages.tenant])
  const stack = pages.tenant === tenant ? pages.stack : [undefined]
  const cursor = stack[stack.length - 1]
  const keys = useLoad(
    async (signal) => ({
      ...(await call<{ items: ApiKey[]; nextCursor: string | null }>(withQuery('/v1/keys', { tenant, limit: KEYS_PAGE, cursor }), { signal })),
      tenant,
    }),
    [tenant, cursor],
  )
  const [fresh, setFresh] = useState<(ApiKey & { key: string }) | null>(null)
  // last use and revocations made elsewhere (another page, the CLI) show without a reload
  useInterval(keys.reload, 15_000)
  return (
    <>
      <ErrorNotice error={keys.error} what="The key list" />
      <section class="card" aria-labelledby="k-new-heading">
        <h2 id="k-new-heading">New tenant key</h2>
        <CreateKey
          names={identity.tenants}
          created={(key) => {
            setFresh(key)
            keys.reload()
          }}
        />
        <p class="help">
          Operator keys are created with <code>scheduler keys create --tenant NAME --operator</code>, which needs the database.
        </p>
        {fresh && <NewKey created={fresh} done={() => setFresh(null)} />}
      </section>
      <TenantFilter tenant={tenant} names={identity.tenants} />
      {keys.data && keys.data.items.length === 0 && keys.data.tenant !== undefined && <p data-empty>Tenant {keys.data.tenant} has no API key.</p>}
      {keys.data && keys.data.items.length > 0 && (
        <TableWrap label={keys.data.tenant === undefined ? 'API keys' : `API keys of tenant ${keys.data.tenant}`}>
          <table>
            <thead>
              <tr>
                <th scope="col">Tenant</th>
                <th scope="col">Name</th>
                <th scope="col">Key</th>
                <th scope="col">Kind</th>
                <th scope="col">Created</th>
                <th scope="col">Last used</th>
                <th scope="col">Status</th>
                <th scope="col">Actions</th>
              </tr>
            </thead>
            <tbody>
              {keys.data.items.map((k) => (
                <tr key={k.id} data-key-id={k.id} data-revoked={String(k.revokedAt !== null)}>
                  <th scope="row" class="name">
                    {k.tenant}
                  </th>
                  <td class="name">
                    {k.name ?? '–'}
                    {k.id === identity.keyId && <span class="muted"> (this page's key)</span>}
                  </td>
                  <td>
                    <code>{k.keyPrefix}…</code>
                  </td>
                  <td>{k.operator ? 'operator' : 'tenant'}</td>
                  <td>{when(k.createdAt)}</td>
                  <td>{k.lastUsedAt ? when(k.lastUsedAt) : 'never'}</td>
                  <td>{k.revokedAt ? <span class="badge badge-cancelled">revoked {when(k.revokedAt)}</span> : 'active'}</td>
                  <td>
                    {k.revokedAt === null && (
                      <ActionButton
                        label="Revoke"
                        name={`Revoke key ${k.keyPrefix}… of ${k.tenant}`}
                        kind="danger"
                        confirm={`Revoke the key ${k.keyPrefix}… of tenant ${k.tenant}${k.name ? ` (${k.name})` : ''}? Its clients get 401 from now on${k.id === identity.keyId ? ', and this page signs out' : ''}.`}
                        run={async () => {
                          await call(`/v1/keys/${k.id}/revoke`, { method: 'POST' })
                          keys.reload()
                        }}
                        done={`Key ${k.keyPrefix}… revoked`}
                      />
                    )}
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
        </TableWrap>
      )}
      {(stack.length > 1 || keys.data?.nextCursor) && (
        <CursorPager
          label="Key pages"
          stack={stack}
          go={(next) => setPages({ tenant, stack: next })}
          nextCursor={keys.data?.nextCursor}
          back="Earlier"
          forward="Later"
        />
      )}
    </>
  )
}

export function KeysPage({ query }: { query: URLSearchParams }) {
  const identity = useContext(IdentityContext)
  const tenant = query.get('tenant')?.trim() || undefined
  return (
    <>
      <h1 tabIndex={-1}>Keys</h1>
      {identity.operator ? (
        <OperatorKeys tenant={tenant} />
      ) : (
        <p data-note="operator-only">API keys are listed, created and revoked with operator keys: they give access to tenants.</p>
      )}
    </>
  )
}
