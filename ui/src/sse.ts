/**
 * Reads a Server-Sent Events stream with fetch(), so the request can carry the API key in its
 * Authorization header (EventSource cannot send headers, and a key in a URL would end up in
 * logs and history). Reconnects with Last-Event-ID after a drop, backing off up to 10 s.
 */
import { authHeaders } from './api.ts'
import { signOut } from './session.ts'

export interface SseMessage {
  id: string | null
  data: string
}

export interface SseOptions {
  onMessage(message: SseMessage): void
  /** Called with true once the stream is open, false when it dropped. */
  onState(open: boolean): void
}

/** Opens and keeps open the stream at `path` until `signal` aborts; from after `fromId` when given. */
export async function followSse(path: string, options: SseOptions, signal: AbortSignal, fromId: string | null = null): Promise<void> {
  let lastId: string | null = fromId
  let backoffMs = 500
  while (!signal.aborted) {
    try {
      const headers: Record<string, string> = { ...authHeaders(), accept: 'text/event-stream' }
      if (lastId) headers['last-event-id'] = lastId
      const res = await fetch(path, { headers, signal, cache: 'no-store' })
      if (res.status === 401) {
        // the key is no longer valid (revoked, say): signed out at once, with the API's reason, rather
        // than left showing what it may no longer read until the page's next call
        options.onState(false)
        const body = (await res.json().catch(() => null)) as { message?: unknown } | null
        signOut(typeof body?.message === 'string' ? body.message : '401 Unauthorized')
        return
      }
      if (!res.ok || !res.body) throw new Error(`event stream answered ${res.status}`)
      const reader = res.body.pipeThrough(new TextDecoderStream()).getReader()
      let buffer = ''
      for (;;) {
        const { value, done } = await reader.read()
        if (done) break
        buffer += value
        let end = buffer.indexOf('\n\n')
        while (end >= 0) {
          const block = buffer.slice(0, end)
          buffer = buffer.slice(end + 2)
          end = buffer.indexOf('\n\n')
          let id: string | null = null
          const data: string[] = []
          for (const line of block.split('\n')) {
            if (line === ': open') {
              options.onState(true)
              backoffMs = 500
            } else if (line.startsWith('id:')) id = line.slice(3).trim()
            else if (line.startsWith('data:')) data.push(line.slice(5).replace(/^ /, ''))
          }
          if (id) lastId = id
          if (data.length > 0) options.onMessage({ id, data: data.join('\n') })
        }
      }
    } catch {
      // dropped or refused: reconnect below
    }
    if (signal.aborted) return
    options.onState(false)
    await new Promise((resolve) => setTimeout(resolve, backoffMs))
    backoffMs = Math.min(backoffMs * 2, 10_000)
  }
}
