/**
 * Failed jobs grouped by their latest error (type and message), largest groups first, with counts,
 * first and last seen and one sample payload. Retry, cancel or delete one job, a whole group
 * (POST /v1/jobs/bulk with the group's errorType and errorMessage) or every failed job; bulk
 * calls repeat until the API reports nothing remaining, and the progress is announced.
 */
import { useContext, useState } from 'preact/hooks'
import { call, withQuery } from '../api.ts'
import { ActionButton, announce, ErrorNotice, JsonBlock, LongText, StatusBadge, TableWrap } from '../components/common.tsx'
import { clip, shortId, when } from '../format.ts'
import { useLiveRefresh, useLoad } from '../hooks.ts'
import { IdentityContext } from '../identity.ts'
import { href } from '../router.ts'
import type { BulkResult, FailureGroup, Job, Page } from '../types.ts'

type BulkAction = 'retry' | 'cancel' | 'delete'
type BulkFilter = Record<string, string | boolean>

/** Most bulk calls one click makes (1000 jobs each): a runaway loop stops here. */
const BULK_CALLS_MAX = 1000
/** The position before every job id: where a walk of bulk calls starts. */
const WALK_START = '00000000-0000-0000-0000-000000000000'

/** Repeats a bulk action until nothing remains; reports progress after each call. */
async function runBulk(action: BulkAction, filter: BulkFilter, progress: (text: string) => void): Promise<number> {
  let changed = 0
  // the walk's position: each call takes the jobs after the previous call's last, so a retried job
  // that fails again (and matches again) is not retried once per call, nor counted as remaining; the
  // first call starts before every id
  let after = WALK_START
  for (let i = 0; i < BULK_CALLS_MAX; i++) {
    const r: BulkResult = await call<BulkResult>('/v1/jobs/bulk', { method: 'POST', body: { action, filter, limit: 1000, after } })
    changed += r.changed
    after = r.lastId ?? after
    progress(`${action}: ${changed} done, ${r.remaining} remaining`)
    if (r.remaining === 0 || r.matched === 0) break
  }
  return changed
}

/**
 * Retry, cancel and delete buttons for the jobs `filter` selects. Progress goes to the page's
 * own status line (`progress`), which stays when the group's row goes away once it is done.
 */
function BulkButtons({
  filters,
  what,
  done,
  setProgress,
  confirmRetry,
}: {
  filters: BulkFilter[]
  what: string
  done: () => void
  setProgress: (text: string) => void
  confirmRetry?: string
}) {
  const run = (action: BulkAction) => async () => {
    let changed = 0
    for (const filter of filters) changed += await runBulk(action, filter, setProgress)
    setProgress(`${action}: ${changed} job(s) done`)
    done()
  }
  const verbs = { retry: 'Retry', cancel: 'Cancel', delete: 'Delete' } as const
  // the jobs of a failure have ended: retry and delete apply to them, cancel never does
  return (
    <fieldset class="actions">
      <legend class="visually-hidden">Actions on {what}</legend>
      {(['retry', 'delete'] as const).map((a) => (
        <ActionButton
          key={a}
          label={`${verbs[a]} ${what}`}
          kind={a === 'retry' ? 'primary' : 'danger'}
          confirm={a === 'retry' ? confirmRetry : `${verbs[a]} ${what}?`}
          run={run(a)}
          done={`${verbs[a]} ${what}: finished`}
        />
      ))}
    </fieldset>
  )
}

function GroupJobs({ group, queue }: { group: FailureGroup; queue: string }) {
  // the page's queue filter too: the group's count and its bulk buttons have it
  const jobs = useLoad(
    (signal) =>
      call<Page<Job>>(withQuery('/v1/jobs', { errorType: group.errorType, errorMessage: group.message, queue, limit: 20 }, ['errorType', 'errorMessage']), {
        signal,
      }),
    [group.errorType, group.message, queue],
  )
  const act = (id: string, action: 'retry') => async () => {
    await call(`/v1/jobs/${id}/${action}`, { method: 'POST' })
    jobs.reload()
  }
  return (
    <>
      <ErrorNotice error={jobs.error} what="The jobs of this group" />
      <ul class="plain job-list">
        {jobs.data?.items.map((j) => (
          <li key={j.id}>
            <a href={href(`/jobs/${j.id}`)} title={j.id}>
              {shortId(j.id)}
            </a>{' '}
            <StatusBadge status={j.status} /> {j.type} in {j.queue}{' '}
            <ActionButton label="Retry" name={`Retry job ${j.id}`} run={act(j.id, 'retry')} done="Retry submitted" />
          </li>
        ))}
      </ul>
    </>
  )
}

export function FailuresPage() {
  const [queue, setQueue] = useState('')
  const [open, setOpen] = useState<string | null>(null)
  const [progress, setProgress] = useState('')
  const failures = useLoad((signal) => call<{ items: FailureGroup[] }>(withQuery('/v1/failures', { queue }), { signal }), [queue])
  useLiveRefresh((e) => e.type === 'failed' || e.type === 'expired' || e.type === 'started', failures.reload, 2000)
  const groups = failures.data?.items ?? []
  const total = groups.reduce((n, g) => n + g.count, 0)
  const identity = useContext(IdentityContext)
  return (
    <>
      <h1 tabIndex={-1}>Failures</h1>
      <form
        class="filters"
        aria-label="Failure filters"
        onSubmit={(e) => {
          e.preventDefault()
          const data = new FormData(e.currentTarget)
          setQueue(String(data.get('queue') ?? ''))
        }}
      >
        <div class="field">
          <label for="failures-queue">Queue</label>
          <input id="failures-queue" name="queue" defaultValue={queue} />
        </div>
        <div class="field buttons">
          <button type="submit">Apply</button>
        </div>
      </form>
      <ErrorNotice error={failures.error} what="The failure groups" />
      {failures.data && (
        <>
          <p>
            {total} failed job(s) in {groups.length} group(s).
          </p>
          {total > 0 && (
            <BulkButtons
              // the groups count expired jobs as failures too
              filters={(['FAILED', 'EXPIRED'] as const).map((status): BulkFilter => (queue ? { status, queue } : { status }))}
              what="all failed jobs"
              // every group at once (for an operator key, every tenant's): a retry runs them all again
              confirmRetry={`Retry all ${total} failed job(s)${queue ? ` of queue ${queue}` : ''}${identity.operator ? ', of every tenant' : ''}? Each runs again.`}
              setProgress={setProgress}
              done={() => {
                failures.reload()
                announce('Failure groups reloaded')
              }}
            />
          )}
          <p class="bulk-progress" role="status" aria-live="polite">
            {progress}
          </p>
          <TableWrap label="Failure groups">
            <table class="failures">
              <thead>
                <tr>
                  <th scope="col">Error</th>
                  <th scope="col">Count</th>
                  <th scope="col">First seen</th>
                  <th scope="col">Last seen</th>
                  <th scope="col">Types and queues</th>
                </tr>
              </thead>
              <tbody>
                {groups.map((g) => {
                  const id = `${g.errorType}\n${g.message}`
                  return (
                    <tr key={id} data-error-type={g.errorType} data-count={g.count}>
                      <td>
                        <p class="error-text">
                          <strong>{g.errorType}</strong>: <LongText text={g.message} />
                        </p>
                        <button
                          type="button"
                          aria-label={`${open === id ? 'Hide' : 'Show'} jobs and sample of ${g.errorType}: ${clip(g.message, 80)}`}
                          aria-expanded={open === id}
                          onClick={() => setOpen(open === id ? null : id)}
                        >
                          {open === id ? 'Hide jobs and sample' : 'Show jobs and sample'}
                        </button>
                        {open === id && (
                          <div class="group-detail">
                            <BulkButtons
                              filters={[{ errorType: g.errorType, errorMessage: g.message, ...(queue ? { queue } : {}) }]}
                              what="this group"
                              setProgress={setProgress}
                              done={failures.reload}
                            />
                            <h2 class="small">Sample payload (job {shortId(g.sampleJobId)})</h2>
                            <JsonBlock value={g.samplePayload} label="Sample payload" />
                            <GroupJobs group={g} queue={queue} />
                          </div>
                        )}
                      </td>
                      <td>{g.count}</td>
                      <td>{when(g.firstSeenAt)}</td>
                      <td>{when(g.lastSeenAt)}</td>
                      <td class="name">
                        {g.types.join(', ')} · {g.queues.join(', ')}
                      </td>
                    </tr>
                  )
                })}
              </tbody>
            </table>
            {groups.length === 0 && <p class="empty">No failed jobs.</p>}
          </TableWrap>
        </>
      )}
    </>
  )
}
