/**
 * One shared event stream (GET /v1/events) for the whole page while signed in: pages subscribe
 * to the job and execution events and refresh what they show. `onLiveState` reports whether the
 * stream is connected, for the header's status.
 */
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
}

const eventListeners = new Set<(e: LiveEvent) => void>()
const stateListeners = new Set<(open: boolean) => void>()
let controller: AbortController | null = null
let open = false

export function startLive(): void {
  if (controller) return
  controller = new AbortController()
  void followSse(
    '/v1/events',
    {
      onMessage(message) {
        let event: LiveEvent
        try {
          event = JSON.parse(message.data) as LiveEvent
        } catch {
          return
        }
        for (const l of eventListeners) l(event)
      },
      onState(state) {
        open = state
        for (const l of stateListeners) l(state)
      },
    },
    controller.signal,
  )
}

export function stopLive(): void {
  controller?.abort()
  controller = null
  open = false
  for (const l of stateListeners) l(false)
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
