/**
 * The signed-in API key: kept in sessionStorage (this tab, until it closes) or, when the user
 * asks to be remembered, localStorage. Listeners hear sign-in and sign-out, with the reason a
 * sign-out happened (a 401 from the API, or the user).
 */
const KEY = 'pgsched.apiKey'

type Listener = (reason: string | null) => void
const listeners = new Set<Listener>()

export function currentKey(): string | null {
  return sessionStorage.getItem(KEY) ?? localStorage.getItem(KEY)
}

export function signIn(key: string, remember: boolean): void {
  sessionStorage.removeItem(KEY)
  localStorage.removeItem(KEY)
  ;(remember ? localStorage : sessionStorage).setItem(KEY, key)
  for (const l of listeners) l(null)
}

/** Forgets the key; `reason` is shown on the sign-in form (null: the user signed out). */
export function signOut(reason: string | null = null): void {
  sessionStorage.removeItem(KEY)
  localStorage.removeItem(KEY)
  for (const l of listeners) l(reason)
}

export function onSessionChange(listener: Listener): () => void {
  listeners.add(listener)
  return () => listeners.delete(listener)
}
