/**
 * Concurrent HTTP clients for the fault suite. Each takes the next job of the
 * workload when its release time comes and POSTs it to /v1/jobs; on a
 * network error or a 5xx it sends the same request again, with the same
 * idempotency key, until it gets an answer (so a reply lost to an API crash
 * shows up as a 200 replay, never as a second job). A small share of accepted
 * jobs is deliberately sent a second time, which must answer 200 and the same
 * job.
 */
import type { JobSpec } from './workload.ts'

export interface SubmitOutcome {
  jobId: string
  /** The status of the first answer that carried the job (202 new, 200 replay). */
  firstStatus: 202 | 200
  /** Requests sent for this key, retries and the deliberate repeat included. */
  requests: number
  /** Epoch ms of the first answer that carried the job. */
  answeredAt: number
  /** Deliberate repeats and the job id each answered with. */
  repeatedIds: string[]
}

export interface SubmitterStats {
  /** Answers by HTTP status; network failures under "network". */
  responses: Record<string, number>
  /** Keys rejected with a 4xx (a valid workload must have none). */
  rejected: Array<{ key: string; status: number; body: string }>
  /** Epoch ms of every successful answer (to time the API's recovery). */
  successTimes: number[]
}

export interface SubmitterOptions {
  /** The API's base URL at the moment of each request (it stays the same across restarts). */
  url: () => string
  apiKey: string
  clients: number
  /** Epoch ms the release times count from. */
  startMs: number
  /** Share of accepted jobs sent a second time on purpose. */
  repeatShare: number
  random: () => number
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms))

export async function submitAll(specs: readonly JobSpec[], o: SubmitterOptions): Promise<{ outcomes: Map<string, SubmitOutcome>; stats: SubmitterStats }> {
  const outcomes = new Map<string, SubmitOutcome>()
  const stats: SubmitterStats = { responses: {}, rejected: [], successTimes: [] }
  const count = (label: string) => (stats.responses[label] = (stats.responses[label] ?? 0) + 1)

  /** Sends `spec` until it gets a definite answer; returns the job id and status, or null when rejected. */
  async function send(spec: JobSpec): Promise<{ jobId: string; status: 200 | 202; requests: number; at: number } | null> {
    const headers: Record<string, string> = { authorization: `Bearer ${o.apiKey}`, 'content-type': 'application/json' }
    if (spec.viaHeader) headers['idempotency-key'] = spec.key
    const body = JSON.stringify(spec.body)
    for (let requests = 1; ; requests++) {
      let status: number
      let text: string
      try {
        const res = await fetch(`${o.url()}/v1/jobs`, { method: 'POST', headers, body, signal: AbortSignal.timeout(20_000) })
        status = res.status
        text = await res.text()
      } catch {
        count('network')
        await sleep(50 + Math.floor(o.random() * 150))
        continue
      }
      count(String(status))
      if (status === 202 || status === 200) {
        const at = Date.now()
        stats.successTimes.push(at)
        return { jobId: (JSON.parse(text) as { id: string }).id, status, requests, at }
      }
      if (status >= 500 || status === 429) {
        await sleep(50 + Math.floor(o.random() * 150))
        continue
      }
      stats.rejected.push({ key: spec.key, status, body: text.slice(0, 500) })
      return null
    }
  }

  let next = 0
  async function client(): Promise<void> {
    for (;;) {
      const spec = specs[next++]
      if (!spec) return
      const wait = o.startMs + spec.releaseAfterMs - Date.now()
      if (wait > 0) await sleep(wait)
      const first = await send(spec)
      if (!first) continue
      const outcome: SubmitOutcome = { jobId: first.jobId, firstStatus: first.status, requests: first.requests, answeredAt: first.at, repeatedIds: [] }
      outcomes.set(spec.key, outcome)
      if (o.random() < o.repeatShare) {
        const again = await send(spec)
        if (again) {
          outcome.repeatedIds.push(again.status === 200 ? again.jobId : `202:${again.jobId}`)
          outcome.requests += again.requests
        }
      }
    }
  }
  await Promise.all(Array.from({ length: o.clients }, () => client()))
  return { outcomes, stats }
}
