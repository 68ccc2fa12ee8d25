/**
 * The jobs list: filters (status, type, queue, tenant for operator keys), a search by job id or
 * idempotency key, keyset paging (the API's cursors; the page's cursor and number are in the address,
 * so a reload, a bookmark or the browser's Back keeps the page; "Previous" goes back along the cursors
 * this tab has seen), export of the filtered list, and live refresh of the first page.
 */
import { useContext, useState } from 'preact/hooks'
import { ApiError, call, request, withQuery } from '../api.ts'
import { announce, ErrorNotice, StatusBadge, TableWrap, TenantNameInput } from '../components/common.tsx'
import { isUuid, shortId, when } from '../format.ts'
import { useLiveRefresh, useLoad } from '../hooks.ts'
import { IdentityContext } from '../identity.ts'
import { href, navigate } from '../router.ts'
import { JOB_STATUSES, type Job, type Page } from '../types.ts'

const FILTERS = ['status', 'type', 'queue', 'tenant', 'idempotencyKey', 'errorType', 'errorMessage'] as const
type Filters = Partial<Record<(typeof FILTERS)[number], string>>

const PAGE_SIZE = 50

function filtersOf(query: URLSearchParams): Filters {
  const f: Filters = {}
  for (const k of FILTERS) {
    const v = query.get(k)
    if (v) f[k] = v
  }
  return f
}

async function download(format: 'csv' | 'json', filters: Filters): Promise<void> {
  const res = await request(withQuery('/v1/jobs/export', { format, ...filters }))
  const url = URL.createObjectURL(await res.blob())
  const a = document.createElement('a')
  a.href = url
  a.download = `jobs.${format}`
  document.body.append(a)
  a.click()
  a.remove()
  setTimeout(() => URL.revokeObjectURL(url), 10_000)
}

/** Whether the key reads a job of this id: false on a 404 alone (any other failure leads to the job's page, which shows it). */
async function jobExists(id: string): Promise<boolean> {
  try {
    await call<Job>(`/v1/jobs/${id}`)
    return true
  } catch (err: unknown) {
    return !(err instanceof ApiError && err.status === 404)
  }
}

function FilterForm({ filters }: { filters: Filters }) {
  const identity = useContext(IdentityContext)
  const [draft, setDraft] = useState<Filters>(filters)
  const [search, setSearch] = useState(filters.idempotencyKey ?? '')
  const set = (k: keyof Filters) => (e: Event) => setDraft({ ...draft, [k]: (e.currentTarget as HTMLInputElement).value })
  const apply = async (e: Event) => {
    e.preventDefault()
    const text = search.trim()
    // a UUID is a job's id or an idempotency key of that shape: the job of that id when there is one, else the key is looked for
    if (isUuid(text) && (await jobExists(text.toLowerCase()))) return navigate(`/jobs/${text.toLowerCase()}`)
    navigate('/jobs', { ...draft, idempotencyKey: text || undefined })
  }
  return (
    <form class="filters" onSubmit={(e) => void apply(e)} aria-label="Job filters">
      <div class="field">
        <label for="f-status">Status</label>
        <select id="f-status" value={draft.status ?? ''} onChange={set('status')}>
          <option value="">any</option>
          {JOB_STATUSES.map((s) => (
            <option key={s} value={s}>
              {s}
            </option>
          ))}
        </select>
      </div>
      <div class="field">
        <label for="f-type">Type</label>
        <input id="f-type" value={draft.type ?? ''} onInput={set('type')} />
      </div>
      <div class="field">
        <label for="f-queue">Queue</label>
        <input id="f-queue" value={draft.queue ?? ''} onInput={set('queue')} />
      </div>
      {identity.operator && (
        <div class="field">
          <label for="f-tenant">Tenant</label>
          <TenantNameInput id="f-tenant" value={draft.tenant ?? ''} set={(tenant) => setDraft({ ...draft, tenant })} names={identity.tenants} />
        </div>
      )}
      <div class="field grow">
        <label for="f-search">Job id or idempotency key</label>
        <input id="f-search" type="search" value={search} onInput={(e) => setSearch(e.currentTarget.value)} />
      </div>
      <div class="field buttons">
        <button type="submit" class="primary">
          Apply
        </button>
        <a class="button" href="#/jobs">
          Clear
        </a>
      </div>
    </form>
  )
}

/** Where "Previous" leads from each page reached with "Next", in this tab (kept across a reload). */
const PREVIOUS = 'pgsched.jobs.previous'

function previousPages(): Record<string, { cursor: string | null; page: number }> {
  try {
    return JSON.parse(sessionStorage.getItem(PREVIOUS) ?? '{}') as Record<string, { cursor: string | null; page: number }>
  } catch {
    return {}
  }
}

function rememberPrevious(at: string, previous: { cursor: string | null; page: number }): void {
  const all = previousPages()
  delete all[at] // set anew: the newest last, for the trim below
  all[at] = previous
  // a long session's trail, not an archive: the latest 200 pages
  const keys = Object.keys(all)
  for (const k of keys.slice(0, Math.max(0, keys.length - 200))) delete all[k]
  try {
    sessionStorage.setItem(PREVIOUS, JSON.stringify(all))
  } catch {
    // storage full or refused: "Previous" then leads to the first page
  }
}

export function JobsPage({ query }: { query: URLSearchParams }) {
  const filters = filtersOf(query)
  const key = JSON.stringify(filters)
  // keyset paging has no offsets: the address holds the page's cursor (none on the first page)
  const cursor = query.get('cursor') ?? undefined
  const pageNumber = cursor ? Math.max(2, Number.parseInt(query.get('page') ?? '', 10) || 2) : 1
  const goTo = (to: string | null, number: number) =>
    navigate('/jobs', { ...filters, cursor: to ?? undefined, page: to && number > 1 ? String(number) : undefined })
  const next = (to: string) => {
    // the page shown while the next one loads (or failed to) names the one already in the address
    if (to === cursor) return
    rememberPrevious(`${key} ${to}`, { cursor: cursor ?? null, page: pageNumber })
    goTo(to, pageNumber + 1)
  }
  const previous = () => {
    const before = cursor ? previousPages()[`${key} ${cursor}`] : undefined
    goTo(before?.cursor ?? null, before?.page ?? 1)
  }
  const page = useLoad((signal) => call<Page<Job>>(withQuery('/v1/jobs', { ...filters, limit: PAGE_SIZE, cursor }), { signal }), [key, cursor])
  // Live: the first page follows new jobs and state changes; later pages stay put.
  useLiveRefresh(
    (e) => !cursor && (!filters.queue || e.queue === filters.queue) && (!filters.type || e.jobType === filters.type),
    () => page.reload(),
  )
  const items = page.data?.items ?? []
  return (
    <>
      <h1 tabIndex={-1}>Jobs</h1>
      <FilterForm key={key} filters={filters} />
      <div class="toolbar">
        <span>Export this list:</span>
        <button type="button" onClick={() => download('csv', filters).catch((err: unknown) => announce(`Export failed: ${String(err)}`))}>
          CSV
        </button>
        <button type="button" onClick={() => download('json', filters).catch((err: unknown) => announce(`Export failed: ${String(err)}`))}>
          JSON
        </button>
      </div>
      <ErrorNotice error={page.error} what="This job list" />
      {cursor && page.error instanceof ApiError && page.error.status === 400 && (
        <p class="notice" data-bad-page>
          This page's address does not name a page of this list. <a href={href('/jobs', filters)}>Go to its first page</a>.
        </p>
      )}
      <TableWrap label="Jobs">
        <table class="jobs" aria-busy={page.loading}>
          <caption class="visually-hidden">Jobs, newest first{pageNumber > 1 ? `, page ${pageNumber}` : ''}</caption>
          <thead>
            <tr>
              <th scope="col">Job</th>
              <th scope="col">Status</th>
              <th scope="col">Type</th>
              <th scope="col">Queue</th>
              <th scope="col">Tenant</th>
              <th scope="col">Attempts</th>
              <th scope="col">Created</th>
              <th scope="col">Next run</th>
            </tr>
          </thead>
          <tbody aria-live="polite" aria-relevant="additions">
            {items.map((job) => (
              <tr key={job.id} data-job-id={job.id} data-status={job.status} data-queue={job.queue}>
                <td>
                  <a href={href(`/jobs/${job.id}`)} title={job.id}>
                    {shortId(job.id)}
                  </a>
                </td>
                <td>
                  <StatusBadge status={job.status} />
                </td>
                <td class="name">{job.type}</td>
                <td class="name">{job.queue}</td>
                <td class="name">{job.tenant}</td>
                <td>
                  {job.attempts}/{job.maxAttempts}
                </td>
                <td>{when(job.createdAt)}</td>
                <td>{when(job.nextRunAt)}</td>
              </tr>
            ))}
          </tbody>
        </table>
        {items.length === 0 && !page.loading && !page.error && (
          <p class="empty">
            No jobs match.
            {filters.idempotencyKey && /^[0-9a-f]{12}$/i.test(filters.idempotencyKey) && (
              <span data-short-id-hint>
                {' '}
                The list shows the last 12 characters of each job's id, and a search by id needs the whole id (a job link's tooltip holds it): "
                {filters.idempotencyKey}" was looked for as an idempotency key.
              </span>
            )}
          </p>
        )}
      </TableWrap>
      <nav class="pager" aria-label="Pages">
        <button type="button" disabled={!cursor} onClick={previous}>
          Previous
        </button>
        <span>Page {pageNumber}</span>
        <button type="button" disabled={Boolean(page.error) || !page.data?.nextCursor} onClick={() => page.data?.nextCursor && next(page.data.nextCursor)}>
          Next
        </button>
      </nav>
    </>
  )
}
