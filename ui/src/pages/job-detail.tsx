/**
 * One job: its status and settings, its schedule with the next fire times, the actions its status
 * allows (cancel, pause/resume, retry, rerun, delete), and every execution with every attempt,
 * error and result; the latest execution's output is read, and followed live while it runs. Each
 * attempt that has ended shows the output it stored on request (a failed attempt's, before its retry).
 * Live events of this job reload the page's data.
 */
import { useState } from 'preact/hooks'
import { call, withQuery } from '../api.ts'
import { ActionButton, CursorPager, ErrorNotice, JsonBlock, LongText, StatusBadge, TableWrap } from '../components/common.tsx'
import { Output } from '../components/output.tsx'
import { duration, errorText, fireTime, isUuid, when } from '../format.ts'
import { useInterval, useLiveRefresh, useLoad } from '../hooks.ts'
import { href, navigate } from '../router.ts'
import type { Attempt, Execution, Job, Page, ScheduleInfo } from '../types.ts'

const FINISHED = new Set(['COMPLETED', 'FAILED', 'EXPIRED', 'CANCELLED'])
const RETRYABLE = new Set(['FAILED', 'EXPIRED', 'CANCELLED'])

function scheduleText(job: Job): string {
  const s = job.schedule
  if (!s) return 'one-time'
  const what = s.kind === 'cron' ? `cron ${s.cron ?? ''} (${s.timezone})` : `every ${duration(s.intervalMs)}`
  return `${what}${s.paused ? ', paused' : ''}${s.error ? `, stopped: ${s.error}` : ''}`
}

/** The job's next fire times, from its schedule alone (`?jobId=`): none when it cannot be read. */
async function nextFireTimes(jobId: string, signal: AbortSignal): Promise<string[]> {
  try {
    const page = await call<{ items: ScheduleInfo[] }>(withQuery('/v1/schedules', { jobId }), { signal })
    return page.items.find((s) => s.jobId === jobId)?.nextFireTimes ?? []
  } catch {
    return []
  }
}

/** An execution's state as the job's status names it: one that failed before any attempt missed its start deadline. */
function executionState(e: Execution): string {
  return e.state === 'failed' && e.attempt === 0 ? 'expired' : e.state
}

function Actions({ job, reload }: { job: Job; reload: () => void }) {
  const act = (action: string) => async () => {
    await call(`/v1/jobs/${job.id}/${action}`, { method: 'POST' })
    reload()
  }
  const finished = FINISHED.has(job.status)
  return (
    <fieldset class="actions">
      <legend class="visually-hidden">Job actions</legend>
      {!finished && <ActionButton label="Cancel" kind="danger" run={act('cancel')} done="Job cancelled" confirm="Cancel this job?" />}
      {job.schedule && job.state === 'active' && <ActionButton label="Pause" run={act('pause')} done="Job paused" />}
      {job.state === 'paused' && <ActionButton label="Resume" run={act('resume')} done="Job resumed" />}
      {RETRYABLE.has(job.status) && <ActionButton label="Retry" kind="primary" run={act('retry')} done="Retry submitted" />}
      {finished && <ActionButton label="Rerun" run={act('rerun')} done="Rerun submitted" />}
      {finished && (
        <ActionButton
          label="Delete"
          kind="danger"
          confirm="Delete this job and all its history?"
          run={async () => {
            await call(`/v1/jobs/${job.id}`, { method: 'DELETE' })
            navigate('/jobs')
          }}
          done="Job deleted"
        />
      )}
    </fieldset>
  )
}

/** The columns of an execution's attempts table (the row an attempt's output opens spans them all). */
const ATTEMPT_COLUMNS = 7

/**
 * One attempt of `executionId`. One that has ended gets a button that opens a row below it with
 * the output that attempt stored, read once when opened: only opened rows cost a request. The
 * running attempt has none: its output is the execution's, followed live below the table.
 */
function AttemptRow({ executionId, a, stored }: { executionId: string; a: Attempt; stored?: boolean }) {
  const [open, setOpen] = useState(false)
  const outputId = `attempt-output-${executionId}-${a.attempt}`
  return (
    <>
      <tr data-attempt={a.attempt}>
        <td>{a.attempt}</td>
        <td>{a.outcome}</td>
        <td>{when(a.startedAt)}</td>
        <td>{when(a.endedAt)}</td>
        <td>{a.host ? `${a.workerId ?? ''} on ${a.host}` : (a.workerId ?? '—')}</td>
        <td class="error-text">{a.error ? <LongText text={errorText(a.error)} /> : ''}</td>
        <td>
          {a.outcome !== 'running' && (
            <button
              type="button"
              aria-label={`${open ? 'Hide' : 'Show'} output of attempt ${a.attempt} of execution ${executionId}`}
              aria-expanded={open}
              aria-controls={open ? outputId : undefined}
              onClick={() => setOpen(!open)}
            >
              {open ? 'Hide output' : 'Show output'}
            </button>
          )}
        </td>
      </tr>
      {open && (
        <tr id={outputId}>
          <td colSpan={ATTEMPT_COLUMNS}>
            <div class="attempt-output-body">
              <Output executionId={executionId} live={false} attempt={a.attempt} stored={stored} />
            </div>
          </td>
        </tr>
      )}
    </>
  )
}

/**
 * Whether attempt `attempt` of a finished execution stored output, as far as the execution tells:
 * false with no output at all or for an attempt after the latest that stored any (`outputAttempt`);
 * undefined (ask) otherwise. An execution that still runs may store more: undefined.
 */
function attemptStored(e: Execution, attempt: number): boolean | undefined {
  if (e.state === 'pending' || e.state === 'running') return undefined
  if (e.outputUrl === null) return false
  return e.outputAttempt !== null && attempt > e.outputAttempt ? false : undefined
}

/** Says so when a finished execution's output is an earlier attempt's: its latest attempt wrote none. */
function OutputOfEarlierAttempt({ e }: { e: Execution }) {
  if (e.outputAttempt === null || e.outputAttempt === e.attempt) return null
  return (
    <p class="muted" data-output-note={e.id}>
      Written by attempt {e.outputAttempt}; attempt {e.attempt} wrote none.
    </p>
  )
}

/**
 * An earlier execution's stored output in a closed section, read only once the section is first
 * opened (and kept when it closes again): a page of 50 executions would otherwise download every
 * one's output, unseen.
 */
function StoredOutput({ e }: { e: Execution }) {
  const [opened, setOpened] = useState(false)
  return (
    <details onToggle={(ev) => ev.currentTarget.open && setOpened(true)}>
      <summary>Output</summary>
      {opened && (
        <>
          <OutputOfEarlierAttempt e={e} />
          <Output executionId={e.id} live={false} />
        </>
      )}
    </details>
  )
}

function ExecutionView({ e, latest }: { e: Execution; latest: boolean }) {
  // only a running execution's output is followed: a pending one's has not begun (in a paused queue
  // it may wait for days), and a finished one's is read once, when it stored any
  const live = e.state === 'running'
  const waiting = e.state === 'pending'
  return (
    <article class="execution" aria-labelledby={`ex-${e.id}`} data-execution-id={e.id} data-state={e.state}>
      <h3 id={`ex-${e.id}`}>
        Execution for {when(e.scheduledFor)} <StatusBadge status={executionState(e)} />
      </h3>
      <dl class="facts">
        <dt>Attempts</dt>
        <dd>
          {e.attempt}/{e.maxAttempts}
        </dd>
        <dt>Run at</dt>
        <dd>{when(e.runAt)}</dd>
        <dt>Started</dt>
        <dd>{when(e.startedAt)}</dd>
        <dt>Finished</dt>
        <dd>{when(e.finishedAt)}</dd>
      </dl>
      {e.attempts.length > 0 && (
        <TableWrap label={`Attempts of execution ${e.id}`}>
          <table class="attempts">
            <thead>
              <tr>
                <th scope="col">Attempt</th>
                <th scope="col">Outcome</th>
                <th scope="col">Started</th>
                <th scope="col">Ended</th>
                <th scope="col">Worker</th>
                <th scope="col">Error</th>
                <th scope="col">Output</th>
              </tr>
            </thead>
            <tbody>
              {e.attempts.map((a) => (
                <AttemptRow key={a.attempt} executionId={e.id} a={a} stored={attemptStored(e, a.attempt)} />
              ))}
            </tbody>
          </table>
        </TableWrap>
      )}
      {e.error && (
        <p class="error-text">
          Error: <LongText text={errorText(e.error)} />
        </p>
      )}
      {e.result !== null && e.result !== undefined && (
        <>
          <h4>Result</h4>
          <JsonBlock value={e.result} label="Result" />
        </>
      )}
      {latest || live || waiting ? (
        <>
          <h4>Output</h4>
          {waiting && e.outputUrl === null ? (
            <p class="muted" data-output-waiting={e.id}>
              {e.attempt === 0
                ? 'Not started yet: its output shows here once it runs.'
                : `Waiting for attempt ${e.attempt + 1} of ${e.maxAttempts}: its output shows here once that runs.`}
            </p>
          ) : (
            <>
              {!live && <OutputOfEarlierAttempt e={e} />}
              <Output executionId={e.id} live={live} stored={live ? undefined : e.outputUrl !== null} />
            </>
          )}
        </>
      ) : (
        e.outputUrl && <StoredOutput e={e} />
      )}
    </article>
  )
}

/** Executions a page of the job's page shows (newest first; Older and Newer move between pages). */
const EXECUTIONS_PAGE = 50

/**
 * A job's page; an address whose id is no job id (a UUID) says so, asking the API nothing: an id
 * such as `export` or `bulk` would name another route (GET /v1/jobs/export is the whole export).
 */
export function JobDetailPage({ id }: { id: string }) {
  if (!isUuid(id)) {
    return (
      <>
        <h1 tabIndex={-1}>Job {id}</h1>
        <p class="error" role="alert" data-not-a-job-id>
          “{id}” is not a job id: a job id is a UUID, such as 0193c7a0-0000-7000-8000-000000000000.
        </p>
      </>
    )
  }
  return <JobDetail id={id} />
}

function JobDetail({ id }: { id: string }) {
  const job = useLoad((signal) => call<Job>(`/v1/jobs/${encodeURIComponent(id)}`, { signal }), [id])
  // the cursors of the pages of executions shown so far: the last is the page on screen (undefined: the newest)
  const [stack, setStack] = useState<Array<string | undefined>>([undefined])
  const cursor = stack[stack.length - 1]
  const executions = useLoad(
    (signal) => call<Page<Execution>>(withQuery(`/v1/jobs/${encodeURIComponent(id)}/executions`, { limit: EXECUTIONS_PAGE, cursor }), { signal }),
    [id, cursor],
  )
  const fires = useLoad((signal) => (job.data?.schedule ? nextFireTimes(id, signal) : Promise.resolve([])), [id, Boolean(job.data?.schedule)])
  const reload = () => {
    job.reload()
    executions.reload()
    // a pause, a resume or a fire time passed changes them too
    fires.reload()
  }
  useLiveRefresh((e) => e.jobId === id, reload, 300)
  const j = job.data
  // pausing or resuming its queue is no event of the job: a job with work to come is read again now and then
  useInterval(() => {
    if (job.data && !FINISHED.has(job.data.status)) job.reload()
  }, 15_000)
  // a job waiting in a paused queue looks due and never starts: its page says why, for every key (the
  // job tells whether its queue is paused; the queue itself is for operator keys only)
  const waitsInPausedQueue = j && !FINISHED.has(j.status) && j.state !== 'paused' && j.queuePaused
  return (
    <>
      <h1 tabIndex={-1}>Job {id}</h1>
      <ErrorNotice error={job.error} what="This job" />
      {j && (
        <>
          <section aria-label="Job summary" class="card" data-job-id={j.id} data-job-status={j.status}>
            <p class="status-line">
              Status <StatusBadge status={j.status} /> <span class="visually-hidden">{j.status}</span>
            </p>
            <dl class="facts">
              <dt>Type</dt>
              <dd>{j.type}</dd>
              <dt>Queue</dt>
              <dd>{j.queue}</dd>
              <dt>Tenant</dt>
              <dd>{j.tenant}</dd>
              <dt>Priority</dt>
              <dd>{j.priority}</dd>
              <dt>Idempotency key</dt>
              <dd>{j.idempotencyKey ?? '—'}</dd>
              <dt>Created</dt>
              <dd>{when(j.createdAt)}</dd>
              <dt>Schedule</dt>
              <dd>{scheduleText(j)}</dd>
              <dt>Next run</dt>
              <dd>{when(j.nextRunAt)}</dd>
              {(fires.data?.length ?? 0) > 0 && (
                <>
                  <dt>Next fire times</dt>
                  <dd>
                    <ul class="plain">
                      {fires.data?.map((t) => (
                        <li key={t}>{fireTime(t, j.schedule?.kind === 'cron' ? j.schedule.timezone : null)}</li>
                      ))}
                    </ul>
                  </dd>
                </>
              )}
            </dl>
            {j.unserved && <p class="notice">{j.unserved}</p>}
            {waitsInPausedQueue && (
              <p class="notice" data-queue-paused={j.queue}>
                Queue <a href={href('/queues')}>{j.queue}</a> {j.queuePausedAt ? `has been paused since ${when(j.queuePausedAt)}` : 'is paused'}: this job does
                not start until the queue is resumed.
              </p>
            )}
            <Actions job={j} reload={reload} />
          </section>
          <h2>Payload</h2>
          <JsonBlock value={j.payload} label="Payload" />
        </>
      )}
      <h2>Executions</h2>
      <ErrorNotice error={executions.error} what="The executions" />
      {executions.data?.items.map((e, i) => (
        <ExecutionView key={e.id} e={e} latest={i === 0 && stack.length === 1} />
      ))}
      {executions.data?.items.length === 0 && <p class="empty">{stack.length > 1 ? 'No older executions.' : 'No executions yet.'}</p>}
      {(stack.length > 1 || executions.data?.nextCursor) && (
        <CursorPager
          label="Execution pages"
          stack={stack}
          go={setStack}
          nextCursor={executions.data?.nextCursor}
          back="Newer"
          forward="Older"
          detail={`(${EXECUTIONS_PAGE} executions a page, newest first)`}
        />
      )}
    </>
  )
}
