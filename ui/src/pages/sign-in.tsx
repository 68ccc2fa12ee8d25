/** The sign-in form: an API key (`scheduler keys create`), kept for this tab or remembered on this device. */
import { useState } from 'preact/hooks'
import { keyProblem, signIn } from '../session.ts'

export function SignIn({ reason }: { reason: string | null }) {
  const [key, setKey] = useState('')
  const [remember, setRemember] = useState(false)
  const [problem, setProblem] = useState<string | null>(null)
  const submit = (e: Event) => {
    e.preventDefault()
    if (!key.trim()) return
    // not a key's shape: said here, and nothing is sent (the API would refuse it; a character past Latin-1 could not even go in the header)
    const wrong = keyProblem(key.trim())
    setProblem(wrong)
    if (!wrong) signIn(key.trim(), remember)
  }
  return (
    <main id="main" class="sign-in">
      <h1>pgsched dashboard</h1>
      {problem ? (
        <p class="error" role="alert" data-key-problem>
          {problem}
        </p>
      ) : (
        reason && (
          <p class="error" role="alert">
            Signed out: {reason}
          </p>
        )
      )}
      <form onSubmit={submit}>
        <label for="api-key">API key</label>
        <input
          id="api-key"
          name="api-key"
          type="password"
          autocomplete="off"
          required
          placeholder="psk_…"
          aria-describedby="api-key-help"
          value={key}
          onInput={(e) => setKey(e.currentTarget.value)}
        />
        <p id="api-key-help" class="help">
          A key made by <code>scheduler keys create --tenant NAME</code> (add <code>--operator</code> to see every tenant and change queues). It is sent only to
          this server, as a Bearer header.
        </p>
        <label class="check">
          <input type="checkbox" checked={remember} onChange={(e) => setRemember(e.currentTarget.checked)} /> Remember on this device
        </label>
        <button type="submit" class="primary">
          Sign in
        </button>
      </form>
    </main>
  )
}
