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
import http from 'node:http'
import { compareEventIds } from '../core/events.ts'
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
  /** Events by type, and messages whose id did not come after the one before (none, if the stream is right). */
  tally(): { byType: Record<string, number>; outOfOrder: number }
  stop(): Promise<void>
}

/** `a` and `b` are event ids (`<batch>-<index>`): whether `b` comes after `a` along the stream. */
export const idAfter = (a: string, b: string): boolean => compareEventIds(a, b) < 0

const DATA_ID = '\ndata: {"id":"'
const TYPE = '"type":"'

/**
 * What a lean SSE client reads of GET /v1/events: each message's id and its event's type, found in
 * the text without parsing the JSON, fed chunk by chunk as they arrive (a chunk may end inside a
 * message). It checks what the stream promises: ids increase along the stream (so none repeats),
 * and each message's data carries its own id.
 */
export class SseTally {
  count = 0
  /** Messages whose id did not come after the one before. */
  outOfOrder = 0
  readonly byType: Record<string, number> = {}
  /** The stream's `: open` comment has arrived. */
  opened = false
  /** A message whose data did not carry its id (the first one). */
  malformed: string | undefined
  private last = '0-0'
  private carry = ''

  push(chunk: string): void {
    const text = this.carry.length > 0 ? this.carry + chunk : chunk
    let at = 0
    for (;;) {
      const end = text.indexOf('\n\n', at)
      if (end < 0) break
      if (text.startsWith('id: ', at)) {
        const idEnd = text.indexOf('\n', at)
        const id = text.slice(at + 4, idEnd)
        if (!text.startsWith(DATA_ID, idEnd) || !text.startsWith(`${id}"`, idEnd + DATA_ID.length)) this.malformed ??= text.slice(at, end)
        const t = text.indexOf(TYPE, idEnd)
        const type = t < 0 || t > end ? '(none)' : text.slice(t + TYPE.length, text.indexOf('"', t + TYPE.length))
        this.count++
        this.byType[type] = (this.byType[type] ?? 0) + 1
        if (!idAfter(this.last, id)) this.outOfOrder++
        this.last = id
      } else if (text.startsWith(': open\n', at)) this.opened = true
      at = end + 2
    }
    this.carry = text.slice(at)
  }
}

/**
 * Opens the stream with node:http and tallies it (SseTally). The client runs in the benchmark's
 * process, on the same two cores as what it measures, so it does no more than that; its CPU is
 * reported apart (BurnDownVariant.inBench).
 */
async function openSse(url: string, key: string): Promise<SseReader> {
  const req = http.get(url, { headers: { authorization: `Bearer ${key}`, accept: 'text/event-stream' } })
  let failed: Error | undefined
  const res = await new Promise<http.IncomingMessage>((resolve, reject) => {
    req.once('response', resolve)
    // kept for the stream's life: an error after the response (the socket reset) fails the reader
    req.on('error', (err) => {
      failed ??= err
      reject(err)
    })
  })
  if (res.statusCode !== 200) {
    let body = ''
    for await (const chunk of res) body += String(chunk)
    throw new Error(`GET /v1/events answered ${res.statusCode}: ${body}`)
  }
  res.setEncoding('utf8')
  const tally = new SseTally()
  const stopped = new Error('stopped')
  await new Promise<void>((resolve, reject) => {
    res.on('data', (chunk: string) => {
      tally.push(chunk)
      if (tally.opened) resolve()
    })
    const fail = (err: Error) => {
      failed ??= err
      reject(failed)
    }
    res.on('error', fail)
    res.once('end', () => fail(new Error('GET /v1/events ended')))
  })
  return {
    received: () => {
      if (failed && failed !== stopped) throw failed
      if (tally.malformed !== undefined) throw new Error(`an SSE message's data does not carry its id: ${tally.malformed}`)
      return tally.count
    },
    tally: () => ({ byType: { ...tally.byType }, outOfOrder: tally.outOfOrder }),
    async stop() {
      failed ??= stopped
      if (res.closed) return
      const closed = new Promise((resolve) => res.once('close', resolve))
      req.destroy()
      await closed
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
      inBench: 'the SSE client',
      settle: async () => {
        const want = jobs * EVENTS_PER_JOB
        const deadline = Date.now() + CATCH_UP_MS
        while ((sse?.received() ?? 0) < want) {
          if (Date.now() > deadline) throw new Error(`the SSE client received ${sse?.received()} of ${want} events`)
          await new Promise((r) => setTimeout(r, 20))
        }
      },
      teardown: async () => {
        const reader = sse
        sse = undefined
        // stopped first, whatever the reader found: the API process too
        try {
          await reader?.stop()
        } finally {
          await api?.stop()
          api = undefined
        }
        if (!reader) return
        const want = jobs * EVENTS_PER_JOB
        const got = reader.received()
        const tally = reader.tally()
        const missing = ['submitted', 'started', 'succeeded'].filter((t) => tally.byType[t] !== jobs)
        if (got !== want) throw new Error(`the SSE client received ${got} events, not ${want}: ${JSON.stringify(tally)}`)
        if (tally.outOfOrder !== 0) throw new Error(`the SSE client received ${tally.outOfOrder} events whose id did not come after the one before`)
        if (missing.length > 0) throw new Error(`the SSE client did not receive one ${missing.join(', ')} event per job: ${JSON.stringify(tally.byType)}`)
      },
    },
  }
  return names.map((n) => all[n])
}
