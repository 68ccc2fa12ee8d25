/**
 * The event scenarios of `scheduler bench` (opt-in: `--only events`, or one of
 * `burn-down-events-kept`, `burn-down-events-sse`): the burn-down paired run by run with the plain
 * burn-down, to show what events cost the hot path. Capture is on only while someone listens, so
 * the plain burn-down is itself the "no subscriber" case (each statement's one-time check of
 * pgsched.event_listeners finds nobody and writes nothing).
 * - burn-down-events-kept: the tenant's listener row live but nobody reading (what a stream leaves
 *   behind for the event retention after it disconnects): every change is written, never numbered
 *   nor read. The write alone.
 * - burn-down-events-sse: an API process and one real HTTP client reading GET /v1/events for the
 *   bench's tenant from before the submit until it has received every event of the burn-down
 *   (submitted, started, succeeded per job): capture, numbering, paging and serialising. The API
 *   process's CPU counts with the workers'; the run ends once the client has every event.
 */
import { createApiKey } from '../api/auth.ts'
import { eventListenerOpen } from '../db/queries/events.ts'
import { freePort } from './probes.ts'
import { spawnApi, type BenchProcess } from './processes.ts'
import type { Scratch } from './scratch.ts'
import type { BurnDownVariant } from './variants.ts'

export const EVENTS_VARIANTS = ['burn-down-events-kept', 'burn-down-events-sse'] as const
export type EventsVariantName = (typeof EVENTS_VARIANTS)[number]

/** The share of the plain throughput a listened burn-down should keep (issue: within 10 %). */
export const EVENTS_TARGET = '≥ 90'
/** The bench's tenant (runBench's client). */
const TENANT = 'bench'
/** Events per job of the burn-down: submitted, started, succeeded. */
const EVENTS_PER_JOB = 3
/** How long the client may lag behind the drained queue before the run fails. */
const CATCH_UP_MS = 120_000

/** One SSE client of GET /v1/events: counts the events it reads, until stopped. */
interface SseReader {
  received(): number
  /** Events by type, and ids received more than once (none, if the stream is right). */
  tally(): { byType: Record<string, number>; repeated: number }
  stop(): Promise<void>
}

async function openSse(url: string, key: string): Promise<SseReader> {
  const controller = new AbortController()
  const res = await fetch(url, { headers: { authorization: `Bearer ${key}`, accept: 'text/event-stream' }, signal: controller.signal })
  if (!res.ok || !res.body) throw new Error(`GET /v1/events answered ${res.status}: ${await res.text()}`)
  const reader = res.body.pipeThrough(new TextDecoderStream()).getReader()
  let count = 0
  let repeated = 0
  const ids = new Set<string>()
  const byType: Record<string, number> = {}
  let carry = ''
  let opened: () => void = () => {}
  const open = new Promise<void>((resolve) => (opened = resolve))
  const reading = (async () => {
    try {
      for (;;) {
        const { done, value } = await reader.read()
        if (done) return
        // whole messages only: a chunk may end inside one
        const text = carry + value
        const end = text.lastIndexOf('\n\n')
        if (end < 0) {
          carry = text
          continue
        }
        carry = text.slice(end + 2)
        for (const message of text.slice(0, end).split('\n\n')) {
          if (message.startsWith(': open')) opened()
          // a real client's work per event: its id and its JSON
          const id = /^id: (.+)$/m.exec(message)?.[1]
          const data = /^data: (.+)$/m.exec(message)?.[1]
          if (id === undefined || data === undefined) continue
          const event = JSON.parse(data) as { id?: unknown; type: string }
          if (event.id !== id) throw new Error(`an SSE message's id ${id} differs from its event's ${String(event.id)}`)
          count++
          byType[event.type] = (byType[event.type] ?? 0) + 1
          if (ids.has(id)) repeated++
          else ids.add(id)
        }
      }
    } catch (err: unknown) {
      if (!controller.signal.aborted) throw err
    }
  })()
  await Promise.race([open, reading])
  return {
    received: () => count,
    tally: () => ({ byType: { ...byType }, repeated }),
    async stop() {
      controller.abort()
      await reading.catch(() => undefined)
    },
  }
}

/** The chosen variants on `s` (the scratch database); `track` registers the processes they start. */
export function eventsVariants(names: readonly EventsVariantName[], s: Scratch, jobs: number, track: <P extends BenchProcess>(p: P) => P): BurnDownVariant[] {
  let api: BenchProcess | undefined
  let sse: SseReader | undefined
  const all: Record<EventsVariantName, BurnDownVariant> = {
    'burn-down-events-kept': {
      name: 'burn-down-events-kept',
      what: 'events written (the tenant listened to, as a stream leaves it for the retention), nobody reading',
      setup: async () => {
        await eventListenerOpen(s.db, { tenant: TENANT, keepMs: 3_600_000 })
      },
    },
    'burn-down-events-sse': {
      name: 'burn-down-events-sse',
      what: 'one SSE client reading GET /v1/events of the tenant (an API process beside the workers)',
      setup: async () => {
        const port = await freePort()
        api = track(spawnApi({ databaseUrl: s.url, port }))
        await api.ready
        const key = await createApiKey(s.db, { tenant: TENANT, name: 'bench-events' })
        sse = await openSse(`http://127.0.0.1:${port}/v1/events`, key.key)
      },
      watch: () => ({ api: api?.child.pid }),
      settle: async () => {
        const want = jobs * EVENTS_PER_JOB
        const deadline = Date.now() + CATCH_UP_MS
        while ((sse?.received() ?? 0) < want) {
          if (Date.now() > deadline) throw new Error(`the SSE client received ${sse?.received()} of ${want} events`)
          await new Promise((r) => setTimeout(r, 20))
        }
      },
      teardown: async () => {
        const got = sse?.received()
        const tally = sse?.tally()
        await sse?.stop()
        await api?.stop()
        sse = undefined
        api = undefined
        if (got !== undefined && (got !== jobs * EVENTS_PER_JOB || tally?.repeated !== 0)) {
          throw new Error(`the SSE client received ${got} events, not ${jobs * EVENTS_PER_JOB}: ${JSON.stringify(tally)}`)
        }
      },
    },
  }
  return names.map((n) => all[n])
}
