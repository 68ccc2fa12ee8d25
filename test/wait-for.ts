/** Polls `check` until it returns a truthy value or the deadline passes (then throws with `what`). */
export async function waitFor<T>(
  check: () => Promise<T> | T,
  options: { timeoutMs?: number; intervalMs?: number; what?: string } = {},
): Promise<NonNullable<T>> {
  const deadline = Date.now() + (options.timeoutMs ?? 20_000)
  let last: T | undefined
  for (;;) {
    last = await check()
    if (last) return last as NonNullable<T>
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${options.what ?? 'condition'} (last value: ${JSON.stringify(last)})`)
    await new Promise((r) => setTimeout(r, options.intervalMs ?? 25))
  }
}
