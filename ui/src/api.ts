/**
 * Calls to the pgsched REST API from the dashboard: every request carries the signed-in key as
 * `Authorization: Bearer` (never in a URL). A 401 signs the page out; a 404 from a route this
 * server does not have is told apart from a missing job, so pages can say an operation is not
 * available here rather than fail.
 */
import { currentKey, signOut } from './session.ts'

/** An error answer of the API, with its status and message. */
export class ApiError extends Error {
  readonly status: number
  /** True when the server has no such route (an older server): the operation is not available. */
  readonly missingRoute: boolean
  constructor(status: number, message: string, missingRoute: boolean) {
    super(message)
    this.status = status
    this.missingRoute = missingRoute
  }
}

export interface CallOptions {
  method?: 'GET' | 'POST' | 'PATCH' | 'DELETE'
  body?: unknown
  signal?: AbortSignal
}

/** The headers of an authenticated request. */
export function authHeaders(): Record<string, string> {
  return { authorization: `Bearer ${currentKey() ?? ''}` }
}

/** Builds `path?query` from the set (non-empty, or empty where `keepEmpty` names the key) values of `query`. */
export function withQuery(path: string, query: Record<string, string | number | undefined | null>, keepEmpty: readonly string[] = []): string {
  const q = new URLSearchParams()
  for (const [k, v] of Object.entries(query)) if (v !== undefined && v !== null && (v !== '' || keepEmpty.includes(k))) q.set(k, String(v))
  const s = q.toString()
  return s ? `${path}?${s}` : path
}

async function errorOf(res: Response): Promise<ApiError> {
  let message = `${res.status} ${res.statusText}`
  let body: { message?: unknown; error?: unknown } | undefined
  try {
    body = (await res.json()) as { message?: unknown; error?: unknown }
    if (typeof body.message === 'string') message = body.message
  } catch {
    // not JSON: keep the status line
  }
  // A server without the operation: 404 "no route POST /v1/…", or 405 where the path serves other methods
  // (DELETE /v1/jobs/{id} on a server that only has GET there).
  const missingRoute = res.status === 405 || (res.status === 404 && /^no route /.test(String(body?.message ?? '')))
  if (res.status === 401) signOut(message)
  return new ApiError(res.status, missingRoute ? 'this server does not offer this operation yet' : message, missingRoute)
}

/** A raw authenticated fetch; throws ApiError for an error status. */
export async function request(path: string, options: CallOptions = {}): Promise<Response> {
  const headers: Record<string, string> = authHeaders()
  if (options.body !== undefined) headers['content-type'] = 'application/json'
  const res = await fetch(path, {
    method: options.method ?? 'GET',
    headers,
    body: options.body === undefined ? undefined : JSON.stringify(options.body),
    signal: options.signal,
    cache: 'no-store',
  })
  if (!res.ok) throw await errorOf(res)
  return res
}

/** An authenticated JSON call. */
export async function call<T>(path: string, options: CallOptions = {}): Promise<T> {
  const res = await request(path, options)
  if (res.status === 204) return undefined as T
  return (await res.json()) as T
}

/** A message for any thrown value. */
export function messageOf(err: unknown): string {
  return err instanceof Error ? err.message : String(err)
}
