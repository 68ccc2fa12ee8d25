/**
 * Built-in handler `http`: calls a URL. Payload: {url, method?, headers?,
 * body?, timeoutMs?}. 2xx succeeds with a summary of the response; 4xx is
 * fatal except 408 and 429; 5xx, timeouts and network errors are retried.
 */
import { FatalError } from '../errors.ts'
import { defineHandler } from './handlers.ts'

interface HttpPayload {
  url: string
  method?: string
  headers?: Record<string, string>
  body?: unknown
  timeoutMs?: number
}

const SUMMARY_BYTES = 4096

function parsePayload(payload: unknown): HttpPayload {
  const p = payload as Partial<HttpPayload> | null
  if (!p || typeof p.url !== 'string') throw new FatalError('http job payload needs a "url" string')
  let url: URL
  try {
    url = new URL(p.url)
  } catch {
    throw new FatalError(`http job payload "url" is not a valid URL: ${p.url}`)
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') throw new FatalError('http job "url" must be http or https')
  return p as HttpPayload
}

export const httpHandler = defineHandler('http', async (ctx) => {
  const p = parsePayload(ctx.payload)
  const signals = [ctx.signal]
  if (p.timeoutMs !== undefined) signals.push(AbortSignal.timeout(p.timeoutMs))
  const body = p.body === undefined ? undefined : typeof p.body === 'string' ? p.body : JSON.stringify(p.body)
  const headers = { ...(typeof p.body === 'object' && p.body !== null ? { 'content-type': 'application/json' } : {}), ...p.headers }
  let response: Response
  try {
    response = await fetch(p.url, { method: p.method ?? 'GET', headers, body, signal: AbortSignal.any(signals) })
  } catch (err: unknown) {
    if (ctx.signal.aborted) throw err
    const reason = err instanceof Error && err.name === 'TimeoutError' ? `timed out after ${p.timeoutMs} ms` : String((err as Error)?.cause ?? err)
    throw new Error(`request to ${p.url} failed: ${reason}`)
  }
  const text = await response.text()
  const summary = {
    status: response.status,
    contentType: response.headers.get('content-type'),
    body: text.slice(0, SUMMARY_BYTES),
    truncated: text.length > SUMMARY_BYTES,
  }
  if (response.ok) return summary
  const message = `${p.method ?? 'GET'} ${p.url} answered ${response.status}`
  if (response.status >= 400 && response.status < 500 && response.status !== 408 && response.status !== 429) {
    throw new FatalError(message)
  }
  throw new Error(message)
})
