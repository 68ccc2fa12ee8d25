/**
 * An execution's output. While the execution is pending or running it is followed live
 * (GET /v1/executions/{id}/output?follow=true, read chunk by chunk as the worker stores it);
 * once finished, what was stored is read once. With `attempt`, the output that attempt stored
 * (`?attempt=N`), read once; a 404 says that attempt stored none. With `stored` false (the
 * execution says it has none: no `outputUrl`, or a later attempt than its `outputAttempt`) nothing
 * is requested and it says so at once. Shown as text, never as markup.
 * Followed live, the box keeps its newest line in view, as `tail -f` does, unless the reader has
 * scrolled up to read earlier lines (scrolling back to the end follows again).
 */
import { useEffect, useLayoutEffect, useRef, useState } from 'preact/hooks'
import { ApiError, request, withQuery } from '../api.ts'

export function Output({ executionId, live, attempt, stored }: { executionId: string; live: boolean; attempt?: number; stored?: boolean }) {
  const known = !live && stored === false
  const [text, setText] = useState('')
  const [state, setState] = useState<'reading' | 'following' | 'done' | 'none' | 'error'>('reading')
  const [error, setError] = useState('')
  const box = useRef<HTMLElement>(null)
  /** The box's content height when it was last laid out: before the text that came since. */
  const height = useRef(0)
  useLayoutEffect(() => {
    const el = box.current
    if (!el) return
    // Showing its end before this text came: judged from where the box is scrolled now, not from a
    // scroll event, which fires a frame later (a reader's scroll up just before a chunk came would
    // otherwise be undone).
    const atEnd = height.current - el.scrollTop - el.clientHeight < 8
    if (live && atEnd) el.scrollTop = el.scrollHeight
    height.current = el.scrollHeight
  }, [text, live])
  useEffect(() => {
    setText('')
    // none stored, as the execution says: no request that could only answer 404
    if (known) return
    const controller = new AbortController()
    setState(live ? 'following' : 'reading')
    const read = async () => {
      const path = withQuery(`/v1/executions/${executionId}/output`, { follow: live ? 'true' : undefined, attempt })
      const res = await request(path, { signal: controller.signal })
      if (!res.body) return
      const reader = res.body.pipeThrough(new TextDecoderStream()).getReader()
      for (;;) {
        const { value, done } = await reader.read()
        if (done) break
        setText((t) => t + value)
      }
    }
    read().then(
      () => !controller.signal.aborted && setState('done'),
      (err: unknown) => {
        if (controller.signal.aborted) return
        if (err instanceof ApiError && err.status === 404) setState('none')
        else {
          setError(err instanceof Error ? err.message : String(err))
          setState('error')
        }
      },
    )
    return () => controller.abort()
  }, [executionId, live, attempt, known])
  const label = attempt === undefined ? `Output of execution ${executionId}` : `Output of attempt ${attempt} of execution ${executionId}`
  if (known || state === 'none') return <p class="muted">{attempt === undefined ? 'No output stored.' : 'No output stored for this attempt.'}</p>
  return (
    <div class="output">
      <p class="muted" role="status">
        {state === 'following' ? 'Following the output as it is written…' : state === 'error' ? `Output could not be read: ${error}` : ''}
      </p>
      {/* biome-ignore lint/a11y/noNoninteractiveTabindex: a scrolling region must be reachable by keyboard */}
      <section class="output-text" ref={box} aria-label={label} tabIndex={0} data-output-of={executionId} data-output-attempt={attempt}>
        <pre>{text}</pre>
      </section>
    </div>
  )
}
