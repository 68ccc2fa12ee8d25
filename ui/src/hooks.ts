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

const sameDeps = (a: readonly unknown[] | undefined, b: readonly unknown[]) => a !== undefined && a.length === b.length && a.every((v, i) => Object.is(v, b[i]))

/**
 * Runs `load` when `deps` change; `reload()` runs it again, keeping the old data on screen meanwhile
 * (after a failed reload too, beside its error). Data and errors belong to the `deps` they were read
 * with: once `deps` change (another filter) they are gone at once, in the very render that has the new
 * `deps`, so a list never shows under a filter it was not read with, nor, when the new read fails, beside its error.
 */
export function useLoad<T>(load: (signal: AbortSignal) => Promise<T>, deps: unknown[]): Loaded<T> {
  const [state, setState] = useState<{ deps?: unknown[]; data?: T; error?: ApiError | Error; loading: boolean }>({ loading: true })
  const [tick, setTick] = useState(0)
  useEffect(() => {
    const controller = new AbortController()
    setState((s) => (sameDeps(s.deps, deps) ? { ...s, loading: true } : { deps, loading: true }))
    load(controller.signal).then(
      (data) => !controller.signal.aborted && setState({ deps, data, loading: false }),
      (error: unknown) =>
        !controller.signal.aborted &&
        setState((s) => ({
          deps,
          data: sameDeps(s.deps, deps) ? s.data : undefined,
          error: error instanceof Error ? error : new Error(String(error)),
          loading: false,
        })),
    )
    return () => controller.abort()
  }, [...deps, tick])
  const reload = useCallback(() => setTick((t) => t + 1), [])
  if (!sameDeps(state.deps, deps)) return { data: undefined, error: undefined, loading: true, reload }
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
