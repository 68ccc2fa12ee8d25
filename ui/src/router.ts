/**
 * Hash routes (`#/jobs?status=FAILED`, `#/jobs/<id>`): the server serves one page, and a
 * route is a bookmarkable, shareable link that carries no secret.
 */
import { useEffect, useMemo, useState } from 'preact/hooks'

export interface Route {
  path: string[]
  query: URLSearchParams
}

/** A path segment decoded; kept as written when it is no valid escape (`100%`), which would make decodeURIComponent throw. */
function segment(text: string): string {
  try {
    return decodeURIComponent(text)
  } catch {
    return text
  }
}

export function parseRoute(hash: string): Route {
  const text = hash.replace(/^#/, '') || '/'
  const [path = '/', query = ''] = text.split('?', 2)
  return { path: path.split('/').filter(Boolean).map(segment), query: new URLSearchParams(query) }
}

export function useRoute(): Route {
  const [hash, setHash] = useState(() => location.hash)
  useEffect(() => {
    const changed = () => setHash(location.hash)
    addEventListener('hashchange', changed)
    // the address may have changed between the first render and this effect (say, a link followed
    // as the page appeared): without this, that change would be missed until the next one
    changed()
    return () => removeEventListener('hashchange', changed)
  }, [])
  return useMemo(() => parseRoute(hash), [hash])
}

/** `#/path?query` for a link. */
export function href(path: string, query: Record<string, string | undefined> = {}): string {
  const q = new URLSearchParams()
  for (const [k, v] of Object.entries(query)) if (v) q.set(k, v)
  const s = q.toString()
  return `#${path}${s ? `?${s}` : ''}`
}

export function navigate(path: string, query: Record<string, string | undefined> = {}): void {
  location.hash = href(path, query)
}
