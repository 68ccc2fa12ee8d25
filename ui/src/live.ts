/**
 * One shared event stream (GET /v1/events) while signed in: pages subscribe to the job and
 * execution events and refresh what they show. `onLiveState` reports whether the stream is
 * connected, for the header's status.
 *
 * One stream for every tab of the browser signed in with the same key, not one per tab: a
 * browser keeps at most six connections to a host over HTTP/1.1, and six tabs each holding a
 * stream left none for the tabs' own requests (every page stopped loading while its header said
 * Live). The tab holding a Web Lock named after the key (a hash of it: tabs signed in with other
 * keys, which may see other tenants, never share) follows the stream and passes each event and
 * its state to the others over a BroadcastChannel of the same name. When it closes, the lock
 * passes to another tab, which resumes after the last event the tabs saw (Last-Event-ID). A
 * browser without Web Locks or BroadcastChannel follows one stream per tab.
 */
import { currentKey } from './session.ts'
import { followSse } from './sse.ts'

export interface LiveEvent {
  id: string
  type: string
  at: string
  tenant: string
  jobId: string
  executionId: string | null
  queue: string
  jobType: string
  attempt: number | null
  /** Why the attempt ended (retrying, failed, expired); null otherwise. */
  error: { message: string; name: string; fatal?: true; timedOut?: true } | null
}

/** What the tabs of one key tell each other. */
type LiveMessage = { kind: 'event'; event: LiveEvent } | { kind: 'state'; open: boolean } | { kind: 'ask' }

const eventListeners = new Set<(e: LiveEvent) => void>()
const stateListeners = new Set<(open: boolean) => void>()
let controller: AbortController | null = null
let open = false
/** The last event this tab saw (from the stream or another tab): where a new leader resumes. */
let lastId: string | null = null

function setState(state: boolean): void {
  open = state
  for (const l of stateListeners) l(state)
}

function deliver(event: LiveEvent): void {
  lastId = event.id
  for (const l of eventListeners) l(event)
}

/** A name for the key's lock and channel: a hash, so that the key itself is never a name. */
async function sharedName(key: string): Promise<string> {
  const digest = await crypto.subtle.digest('SHA-256', new TextEncoder().encode(key))
  const hex = [...new Uint8Array(digest).slice(0, 12)].map((b) => b.toString(16).padStart(2, '0')).join('')
  return `pgsched-live-${hex}`
}

/** Follows the stream in this tab, passing what it reads to `share` as well. */
function follow(signal: AbortSignal, share?: (message: LiveMessage) => void): Promise<void> {
  return followSse(
    '/v1/events',
    {
      onMessage(message) {
        let event: LiveEvent
        try {
          event = JSON.parse(message.data) as LiveEvent
        } catch {
          return
        }
        deliver(event)
        share?.({ kind: 'event', event })
      },
      onState(state) {
        setState(state)
        share?.({ kind: 'state', open: state })
      },
    },
    signal,
    lastId,
  )
}

async function runShared(key: string, signal: AbortSignal): Promise<void> {
  const name = await sharedName(key)
  if (signal.aborted) return
  const channel = new BroadcastChannel(name)
  let leading = false
  channel.onmessage = (e: MessageEvent<LiveMessage>) => {
    const m = e.data
    if (m.kind === 'event') deliver(m.event)
    else if (m.kind === 'state') setState(m.open)
    // a tab that has just opened asks for the state: the leader answers
    else if (m.kind === 'ask' && leading) channel.postMessage({ kind: 'state', open } satisfies LiveMessage)
  }
  signal.addEventListener('abort', () => channel.close(), { once: true })
  channel.postMessage({ kind: 'ask' } satisfies LiveMessage)
  try {
    // held until this tab stops (sign-out, closing): then another tab's request is granted
    await navigator.locks.request(name, { signal }, async () => {
      leading = true
      await follow(signal, (message) => channel.postMessage(message))
    })
  } catch {
    // aborted while waiting for the lock, or signed out
  }
}

export function startLive(): void {
  if (controller) return
  controller = new AbortController()
  const key = currentKey()
  const shareable = key !== null && typeof BroadcastChannel === 'function' && typeof navigator.locks?.request === 'function' && crypto.subtle
  void (shareable ? runShared(key, controller.signal) : follow(controller.signal))
}

export function stopLive(): void {
  controller?.abort()
  controller = null
  setState(false)
}

export function onLiveEvent(listener: (e: LiveEvent) => void): () => void {
  eventListeners.add(listener)
  return () => eventListeners.delete(listener)
}

export function onLiveState(listener: (open: boolean) => void): () => void {
  stateListeners.add(listener)
  listener(open)
  return () => stateListeners.delete(listener)
}
