/**
 * The signed-in API key: kept in sessionStorage (this tab, until it closes) or, when the user
 * asks to be remembered, localStorage. Listeners hear sign-in and sign-out, with the reason a
 * sign-out happened (a 401 from the API, or the user).
 */
const KEY = 'pgsched.apiKey'

type Listener = (reason: string | null) => void
const listeners = new Set<Listener>()

/** The shape of every API key, as the API checks it (API_KEY_PATTERN of src/api/auth.ts): `psk_` and 43 base64url characters. */
const API_KEY_PATTERN = /^psk_[A-Za-z0-9_-]{43}$/

/**
 * Why `key` cannot be an API key, or null when it has a key's shape. Checked before the key is
 * sent: a header takes Latin-1 text only, and the browser refuses to send one with, say, the "…"
 * that ends a key's prefix on the Keys page, saying only that the request failed.
 */
export function keyProblem(key: string): string | null {
  if (API_KEY_PATTERN.test(key)) return null
  if (key.startsWith('psk_') && key.endsWith('…'))
    return 'This is only the start of a key, as the Keys page lists it: sign in with the whole key, shown once when it was made (psk_ followed by 43 characters).'
  return 'This is not a valid API key: keys look like psk_ followed by 43 letters, digits, - and _.'
}

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
