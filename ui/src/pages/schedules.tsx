/** Recurring schedules: what fires, when it fires next, its last run; pause and resume each. */
import { useContext, useState } from 'preact/hooks'
import { call, withQuery } from '../api.ts'
import { ActionButton, CursorPager, ErrorNotice, StatusBadge, TableWrap } from '../components/common.tsx'
import { fireTime, shortId, when } from '../format.ts'
import { useLiveRefresh, useLoad } from '../hooks.ts'
import { IdentityContext } from '../identity.ts'
import { href } from '../router.ts'
import type { Page, ScheduleInfo } from '../types.ts'

/** "cron 0 9 * * * (Europe/Berlin)" or "every 30s": the API gives the expression (or the interval) and its kind apart. */
function scheduleText(s: ScheduleInfo): string {
  // a cron expression's zone; an interval has none
  if (s.kind === 'cron') return `cron ${s.schedule}${s.timezone ? ` (${s.timezone})` : ''}`
  return `every ${s.schedule}`
}

export function SchedulesPage() {
  // an operator key sees every tenant's schedules: whose each is
  const { operator } = useContext(IdentityContext)
  const [stack, setStack] = useState<Array<string | undefined>>([undefined])
  const cursor = stack[stack.length - 1]
  const page = useLoad((signal) => call<Page<ScheduleInfo>>(withQuery('/v1/schedules', { limit: 100, cursor }), { signal }), [cursor])
  useLiveRefresh((e) => e.type === 'paused' || e.type === 'resumed' || e.type === 'started' || e.type === 'succeeded' || e.type === 'failed', page.reload, 2000)
  const act = (id: string, action: 'pause' | 'resume') => async () => {
    await call(`/v1/jobs/${id}/${action}`, { method: 'POST' })
    page.reload()
  }
  return (
    <>
      <h1 tabIndex={-1}>Recurring schedules</h1>
      <ErrorNotice error={page.error} what="The schedule list" />
      {page.data && (
        <TableWrap label="Schedules">
          <table>
            <thead>
              <tr>
                <th scope="col">Job</th>
                {operator && <th scope="col">Tenant</th>}
                <th scope="col">Type</th>
                <th scope="col">Queue</th>
                <th scope="col">Schedule</th>
                <th scope="col">Next fire times</th>
                <th scope="col">Last run</th>
                <th scope="col">Actions</th>
              </tr>
            </thead>
            <tbody>
              {page.data.items.map((s) => (
                <tr key={s.jobId}>
                  <td>
                    <a href={href(`/jobs/${s.jobId}`)} title={s.jobId}>
                      {shortId(s.jobId)}
                    </a>
                  </td>
                  {operator && <td class="name">{s.tenant}</td>}
                  <td class="name">{s.type}</td>
                  <td class="name">{s.queue}</td>
                  <td>
                    {scheduleText(s)}{' '}
                    {s.state === 'cancelled' ? (
                      <span class="badge badge-cancelled">cancelled</span>
                    ) : (
                      s.paused && <span class="badge badge-paused">paused</span>
                    )}
                    {s.error !== null && (
                      <>
                        {' '}
                        <span class="badge badge-failed">stopped</span>
                        <span class="error-text"> {s.error}</span>
                      </>
                    )}
                  </td>
                  <td>
                    <ul class="plain">
                      {s.nextFireTimes.slice(0, 5).map((t) => (
                        <li key={t}>{fireTime(t, s.kind === 'cron' ? s.timezone : null)}</li>
                      ))}
                    </ul>
                  </td>
                  <td>
                    {s.lastRun?.status ? (
                      <>
                        <StatusBadge status={s.lastRun.status} /> {when(s.lastRun.finishedAt ?? s.lastRun.scheduledFor ?? null)}
                      </>
                    ) : (
                      'not run yet'
                    )}
                  </td>
                  <td>
                    {s.state === 'cancelled' ? null : s.paused ? (
                      <ActionButton label="Resume" name={`Resume schedule ${s.jobId}`} run={act(s.jobId, 'resume')} done="Schedule resumed" />
                    ) : (
                      <ActionButton label="Pause" name={`Pause schedule ${s.jobId}`} run={act(s.jobId, 'pause')} done="Schedule paused" />
                    )}
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
          {page.data.items.length === 0 && <p class="empty">No recurring jobs.</p>}
        </TableWrap>
      )}
      <CursorPager label="Pages" stack={stack} go={setStack} nextCursor={page.data?.nextCursor} back="Previous" forward="Next" />
    </>
  )
}
