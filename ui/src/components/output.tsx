/**
 * An execution's output. While the execution is pending or running it is followed live
 * (GET /v1/executions/{id}/output?follow=true, read chunk by chunk as the worker stores it);
 * once finished, what was stored is read once. Shown as text, never as markup.
 */
import { useEffect, useState } from 'preact/hooks'
import { ApiError, request } from '../api.ts'

export function Output({ executionId, live }: { executionId: string; live: boolean }) {
  const [text, setText] = useState('')
  const [state, setState] = useState<'reading' | 'following' | 'done' | 'none' | 'error'>('reading')
  const [error, setError] = useState('')
  useEffect(() => {
    const controller = new AbortController()
    setText('')
    setState(live ? 'following' : 'reading')
    const read = async () => {
      const res = await request(`/v1/executions/${executionId}/output${live ? '?follow=true' : ''}`, { signal: controller.signal })
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
  }, [executionId, live])
  const label = `Output of execution ${executionId}`
  if (state === 'none') return <p class="muted">No output stored.</p>
  return (
    <div class="output">
      <p class="muted" role="status">
        {state === 'following' ? 'Following the output as it is written…' : state === 'error' ? `Output could not be read: ${error}` : ''}
      </p>
      {/* biome-ignore lint/a11y/noNoninteractiveTabindex: a scrolling region must be reachable by keyboard */}
      <section class="output-text" aria-label={label} tabIndex={0} data-output-of={executionId}>
        <pre>{text}</pre>
      </section>
    </div>
  )
}
