/**
 * The dashboard's shell: the sign-in form until an API key is given, then the header (navigation,
 * live status, sign-out), the page of the current hash route, and the announcer that tells screen
 * readers what changed. The live event stream runs while signed in.
 */
import './style.css'
import { render } from 'preact'
import { useEffect, useRef, useState } from 'preact/hooks'
import { messageOf } from './api.ts'
import { Announcer } from './components/common.tsx'
import { type Identity, IdentityContext, loadIdentity } from './identity.ts'
import { onLiveState, startLive, stopLive } from './live.ts'
import { FailuresPage } from './pages/failures.tsx'
import { JobDetailPage } from './pages/job-detail.tsx'
import { JobsPage } from './pages/jobs.tsx'
import { KeysPage } from './pages/keys.tsx'
import { OverviewPage } from './pages/overview.tsx'
import { QueuesPage } from './pages/queues.tsx'
import { SchedulesPage } from './pages/schedules.tsx'
import { SignIn } from './pages/sign-in.tsx'
import { TenantsPage } from './pages/tenants.tsx'
import { WebhookDetailPage, WebhooksPage } from './pages/webhooks.tsx'
import { WorkersPage } from './pages/workers.tsx'
import { type Route, useRoute } from './router.ts'
import { currentKey, keyProblem, onSessionChange, signOut } from './session.ts'

const NAV = [
  { path: 'overview', label: 'Overview' },
  { path: 'jobs', label: 'Jobs' },
  { path: 'failures', label: 'Failures' },
  { path: 'schedules', label: 'Schedules' },
  { path: 'queues', label: 'Queues' },
  { path: 'workers', label: 'Workers' },
  { path: 'webhooks', label: 'Webhooks' },
  { path: 'tenants', label: 'Tenants', operatorOnly: true },
  { path: 'keys', label: 'Keys', operatorOnly: true },
]

function Page({ route }: { route: Route }) {
  const [first = 'overview', second] = route.path
  if (first === 'jobs' && second) return <JobDetailPage key={second} id={second} />
  if (first === 'webhooks' && second) return <WebhookDetailPage key={second} id={second} />
  switch (first) {
    case 'jobs':
      return <JobsPage query={route.query} />
    case 'failures':
      return <FailuresPage />
    case 'schedules':
      return <SchedulesPage />
    case 'queues':
      return <QueuesPage />
    case 'workers':
      return <WorkersPage />
    case 'webhooks':
      return <WebhooksPage />
    case 'tenants':
      return <TenantsPage />
    case 'keys':
      return <KeysPage query={route.query} />
    default:
      return <OverviewPage />
  }
}

function LiveStatus() {
  const [open, setOpen] = useState(false)
  useEffect(() => onLiveState(setOpen), [])
  return (
    <span class={`live ${open ? 'live-on' : 'live-off'}`} data-live={open ? 'on' : 'off'}>
      {open ? 'Live' : 'Connecting…'}
    </span>
  )
}

function Shell({ identity }: { identity: Identity }) {
  const route = useRoute()
  const current = route.path[0] ?? 'overview'
  const main = useRef<HTMLElement>(null)
  useEffect(() => {
    startLive()
    return stopLive
  }, [])
  // A new page: focus its heading, so keyboard and screen-reader users start there.
  useEffect(() => {
    main.current?.querySelector('h1')?.focus()
  }, [route.path.join('/')])
  return (
    <IdentityContext.Provider value={identity}>
      <button type="button" class="skip" onClick={() => main.current?.querySelector('h1')?.focus()}>
        Skip to content
      </button>
      <header class="top">
        <span class="brand">pgsched</span>
        <nav aria-label="Main">
          <ul>
            {NAV.filter((n) => identity.operator || !('operatorOnly' in n)).map((n) => (
              <li key={n.path}>
                <a href={`#/${n.path}`} aria-current={current === n.path ? 'page' : undefined}>
                  {n.label}
                </a>
              </li>
            ))}
          </ul>
        </nav>
        <LiveStatus />
        <span class="who">{identity.operator ? 'operator key' : 'tenant key'}</span>
        <button type="button" onClick={() => signOut()}>
          Sign out
        </button>
      </header>
      <main id="main" ref={main}>
        <Page route={route} />
      </main>
      <Announcer />
    </IdentityContext.Provider>
  )
}

function App() {
  const [key, setKey] = useState(currentKey())
  const [reason, setReason] = useState<string | null>(null)
  const [identity, setIdentity] = useState<Identity | null>(null)
  const [error, setError] = useState<string | null>(null)
  useEffect(
    () =>
      onSessionChange((why) => {
        setKey(currentKey())
        setReason(why)
        setIdentity(null)
      }),
    [],
  )
  useEffect(() => {
    if (!key) return
    // a kept key of no key's shape (remembered by an older page) is not sent: the sign-in form says why
    const problem = keyProblem(key)
    if (problem) return signOut(problem)
    setError(null)
    loadIdentity().then(setIdentity, (err: unknown) => setError(messageOf(err)))
  }, [key])
  if (!key) return <SignIn reason={reason} />
  if (!identity) {
    return (
      <main id="main">
        <p role="status">{error ? `Could not reach the API: ${error}` : 'Signing in…'}</p>
        {error && (
          <button type="button" onClick={() => signOut()}>
            Sign out
          </button>
        )}
      </main>
    )
  }
  return <Shell identity={identity} />
}

const root = document.getElementById('app')
if (root) {
  root.textContent = ''
  render(<App />, root)
}
