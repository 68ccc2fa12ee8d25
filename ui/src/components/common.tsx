/** Small pieces every page uses: error notices, status badges, JSON blocks, long texts, action buttons, the announcer. */
import type { ComponentChildren } from 'preact'
import { useEffect, useState } from 'preact/hooks'
import { ApiError, messageOf } from '../api.ts'
import { json, shortened } from '../format.ts'

/** An error from loading or acting; a route this server lacks is said plainly, not as a failure. */
export function ErrorNotice({ error, what }: { error: unknown; what?: string }) {
  if (!error) return null
  if (error instanceof ApiError && error.missingRoute) {
    return (
      <p class="notice" role="status">
        {what ?? 'This view'} is not available on this server yet (its API answered 404).
      </p>
    )
  }
  if (error instanceof ApiError && error.status === 403) {
    return (
      <p class="notice" role="status">
        {what ?? 'This view'} needs an operator key: {error.message}
      </p>
    )
  }
  return (
    <p class="error" role="alert">
      {messageOf(error)}
    </p>
  )
}

export function StatusBadge({ status }: { status: string }) {
  return <span class={`badge badge-${status.toLowerCase().replace(/[^a-z]/g, '')}`}>{status}</span>
}

/** Any JSON value (tenant input included) as escaped text. */
export function JsonBlock({ value, label }: { value: unknown; label: string }) {
  return (
    // biome-ignore lint/a11y/noNoninteractiveTabindex: a scrolling region must be reachable by keyboard
    <section class="json" aria-label={label} tabIndex={0}>
      <pre>{json(value)}</pre>
    </section>
  )
}

/**
 * A text that may be very long (an error's message of thousands of characters): its first line, at
 * most about 300 characters, with a button that shows it all (and one that shortens it again).
 * A short text shows as it is.
 */
export function LongText({ text, what = 'message' }: { text: string; what?: string }) {
  const [open, setOpen] = useState(false)
  const short = shortened(text)
  if (short === null) return <>{text}</>
  return (
    <>
      <span class="long-text" data-long-text={open ? 'full' : 'short'}>
        {open ? text : short}
      </span>{' '}
      <button type="button" class="long-text-toggle" aria-expanded={open} onClick={() => setOpen(!open)}>
        {open ? `Shorten ${what}` : `Show full ${what} (${text.length} characters)`}
      </button>
    </>
  )
}

/** A wide table that scrolls on its own on a narrow screen, focusable so a keyboard can scroll it. */
/**
 * The buttons of a list read a page at a time by cursor: `stack` holds the cursors of the pages shown
 * so far (the last is the page on screen, undefined the first page), `go` sets it; `nextCursor` is the
 * page's own (null on the last page); `detail` follows the page number.
 */
export function CursorPager(props: {
  label: string
  stack: Array<string | undefined>
  go: (stack: Array<string | undefined>) => void
  nextCursor: string | null | undefined
  back: string
  forward: string
  detail?: string
}) {
  const { stack, go, nextCursor } = props
  return (
    <nav class="pager" aria-label={props.label}>
      <button type="button" disabled={stack.length <= 1} onClick={() => go(stack.slice(0, -1))}>
        {props.back}
      </button>
      <span>
        Page {stack.length}
        {props.detail ? ` ${props.detail}` : ''}
      </span>
      <button type="button" disabled={!nextCursor} onClick={() => nextCursor && go([...stack, nextCursor])}>
        {props.forward}
      </button>
    </nav>
  )
}

export function TableWrap({ label, children }: { label: string; children: ComponentChildren }) {
  return (
    // biome-ignore lint/a11y/noNoninteractiveTabindex: a scrolling region must be reachable by keyboard
    <section class="table-wrap" aria-label={label} tabIndex={0}>
      {children}
    </section>
  )
}

let announceSink: ((text: string) => void) | null = null

/** Says `text` to screen readers (and shows it) in the page's polite live region. */
export function announce(text: string): void {
  announceSink?.(text)
}

/** How long an announcement stays on screen. */
const ANNOUNCE_MS = 8000

export function Announcer() {
  const [text, setText] = useState('')
  announceSink = setText
  // an announcement is about the action just taken: it goes after a while, and when the page changes
  useEffect(() => {
    if (!text) return
    const timer = setTimeout(() => setText(''), ANNOUNCE_MS)
    const clear = () => setText('')
    window.addEventListener('hashchange', clear)
    return () => {
      clearTimeout(timer)
      window.removeEventListener('hashchange', clear)
    }
  }, [text])
  return (
    <p class="announcer" role="status" aria-live="polite">
      {text}
    </p>
  )
}

/** A button that runs an API action, disabled while it runs; errors and results are announced. */
export function ActionButton(props: {
  label: string
  /** The accessible name when the visible label needs context ("Retry job 1a2b…"). */
  name?: string
  run: () => Promise<unknown>
  done?: string
  confirm?: string
  kind?: 'danger' | 'primary'
  describedBy?: string
}) {
  const [busy, setBusy] = useState(false)
  const click = async () => {
    if (props.confirm && !window.confirm(props.confirm)) return
    setBusy(true)
    try {
      await props.run()
      announce(props.done ?? `${props.name ?? props.label}: done`)
    } catch (err: unknown) {
      announce(`${props.name ?? props.label} failed: ${err instanceof ApiError && err.missingRoute ? 'not available on this server yet' : messageOf(err)}`)
    } finally {
      setBusy(false)
    }
  }
  return (
    <button
      type="button"
      class={props.kind ?? ''}
      disabled={busy}
      aria-busy={busy}
      aria-label={props.name}
      aria-describedby={props.describedBy}
      onClick={() => void click()}
    >
      {props.label}
    </button>
  )
}

/** The end of a settings form: its submit button, and the API's refusal of the last submit, if any. */
export function FormEnd({ submit, error }: { submit: string; error: string }) {
  return (
    <>
      <div class="field buttons">
        <button type="submit" class="primary">
          {submit}
        </button>
      </div>
      {error && (
        <p class="error" role="alert">
          {error}
        </p>
      )}
    </>
  )
}

/** A tenant's name, typed or picked from those the key knows of (`names`, a datalist). */
export function TenantNameInput(props: { id: string; value: string; set: (value: string) => void; names: string[]; required?: boolean; placeholder?: string }) {
  const listId = `${props.id}-names`
  return (
    <>
      <input
        id={props.id}
        list={listId}
        required={props.required}
        placeholder={props.placeholder}
        value={props.value}
        onInput={(e) => props.set(e.currentTarget.value)}
      />
      <datalist id={listId}>
        {props.names.map((n) => (
          <option key={n} value={n} />
        ))}
      </datalist>
    </>
  )
}
