/**
 * What the dashboard's figures of executions held count, said beside them. The API's `running` (a
 * queue's) and `inFlight` (a worker's) count the executions workers hold a lease on: those running
 * and those a worker claimed ahead of a free slot (its prefetch), which have not started yet. So a
 * worker can show more of them than its concurrency without running more at once.
 */

/** What a queue's Claimed figure counts (its `running`). */
export const QUEUE_CLAIMED_NOTE =
  'Claimed: executions of the queue that workers hold now, those running and those a worker claimed ahead of a free slot, which start as slots free up. ' +
  'A concurrency limit counts them all.'

/** What a worker's Claimed figure counts (its `inFlight`). */
export const WORKER_CLAIMED_NOTE =
  'Claimed: the executions a worker holds now, those running in its slots and those it claimed ahead of a free slot, which start as slots free up. ' +
  'It can exceed the slots (its concurrency); at most that many run at once.'

/** What a worker's Running figure counts (its `running`). */
export const WORKER_RUNNING_NOTE =
  "Running: the executions whose handler was running at the worker's last heartbeat; at most its slots. The rest of what it has claimed waits for a free slot."
