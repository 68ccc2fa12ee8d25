/** Loading API data into a page, and reloading it when live events say it changed. */
import { useCallback, useEffect, useRef, useState } from 'preact/hooks'
import type { ApiError } from './api.ts'
import { type LiveEvent, onLiveEvent } from './live.ts'

export interface Loaded<T> {
  data: T | undefined
  error: ApiError | Error | undefined
  loading: boolean
  reload(): void
}

/** Runs `load` when `deps` change; `reload()` runs it again, keeping the old data on screen meanwhile. */
export function useLoad<T>(load: (signal: AbortSignal) => Promise<T>, deps: unknown[]): Loaded<T> {
  const [state, setState] = useState<{ data?: T; error?: ApiError | Error; loading: boolean }>({ loading: true })
  const [tick, setTick] = useState(0)
  useEffect(() => {
    const controller = new AbortController()
    setState((s) => ({ ...s, loading: true }))
    load(controller.signal).then(
      (data) => !controller.signal.aborted && setState({ data, loading: false }),
      (error: unknown) =>
        !controller.signal.aborted && setState((s) => ({ data: s.data, error: error instanceof Error ? error : new Error(String(error)), loading: false })),
    )
    return () => controller.abort()
  }, [...deps, tick])
  const reload = useCallback(() => setTick((t) => t + 1), [])
  return { data: state.data, error: state.error, loading: state.loading, reload }
}

/** Calls `onChange` (at most every `minMs`) after live events that `matches` accepts. */
export function useLiveRefresh(matches: (e: LiveEvent) => boolean, onChange: () => void, minMs = 750): void {
  const matchRef = useRef(matches)
  const changeRef = useRef(onChange)
  matchRef.current = matches
  changeRef.current = onChange
  useEffect(() => {
    let timer: ReturnType<typeof setTimeout> | undefined
    const off = onLiveEvent((e) => {
      if (!matchRef.current(e) || timer) return
      timer = setTimeout(() => {
        timer = undefined
        changeRef.current()
      }, minMs)
    })
    return () => {
      off()
      clearTimeout(timer)
    }
  }, [minMs])
}

/** Calls `tick` every `everyMs` while the page is shown. */
export function useInterval(tick: () => void, everyMs: number): void {
  const ref = useRef(tick)
  ref.current = tick
  useEffect(() => {
    const id = setInterval(() => ref.current(), everyMs)
    return () => clearInterval(id)
  }, [everyMs])
}
