/**
 * Workers: alive, stale or stopped, where they run, what they serve and how busy they are: the
 * executions running at its last heartbeat (its `running`), those it holds (its `inFlight`: those
 * running in its slots and those claimed ahead of a free slot, so it may exceed its concurrency)
 * and its slots (its concurrency).
 */
import { call } from '../api.ts'
import { ErrorNotice, StatusBadge, TableWrap } from '../components/common.tsx'
import { WORKER_CLAIMED_NOTE as CLAIMED_NOTE, WORKER_RUNNING_NOTE as RUNNING_NOTE } from '../figures.ts'
import { when } from '../format.ts'
import { useInterval, useLoad } from '../hooks.ts'
import type { WorkerInfo } from '../types.ts'

export function WorkersPage() {
  const workers = useLoad((signal) => call<{ items: WorkerInfo[] }>('/v1/workers', { signal }), [])
  useInterval(workers.reload, 10_000)
  return (
    <>
      <h1 tabIndex={-1}>Workers</h1>
      <ErrorNotice error={workers.error} what="The worker list" />
      {workers.data && (
        <TableWrap label="Workers">
          <table>
            <thead>
              <tr>
                <th scope="col">Worker</th>
                <th scope="col">State</th>
                <th scope="col">Host</th>
                <th scope="col">PID</th>
                <th scope="col">Queues</th>
                <th scope="col">Types</th>
                <th scope="col" title={RUNNING_NOTE}>
                  Running
                </th>
                <th scope="col" title={CLAIMED_NOTE}>
                  Claimed
                </th>
                <th scope="col">Slots</th>
                <th scope="col">Started</th>
                <th scope="col">Last seen</th>
              </tr>
            </thead>
            <tbody>
              {workers.data.items.map((w) => (
                <tr key={w.id} data-worker-state={w.state}>
                  <th scope="row">{w.id}</th>
                  <td>
                    <StatusBadge status={w.state} />
                  </td>
                  <td>{w.host}</td>
                  <td>{w.pid}</td>
                  <td class="name">{w.queues.join(', ')}</td>
                  <td class="name">{w.types.join(', ')}</td>
                  <td title={RUNNING_NOTE}>{w.running ?? '–'}</td>
                  <td title={CLAIMED_NOTE}>{w.inFlight}</td>
                  <td>{w.concurrency}</td>
                  <td>{when(w.startedAt)}</td>
                  <td>{when(w.stoppedAt ?? w.lastSeenAt)}</td>
                </tr>
              ))}
            </tbody>
          </table>
          {workers.data.items.length === 0 && <p class="empty">No worker has started.</p>}
        </TableWrap>
      )}
      {workers.data && (
        <p class="help" data-note="claimed">
          {RUNNING_NOTE} {CLAIMED_NOTE}
        </p>
      )}
    </>
  )
}
