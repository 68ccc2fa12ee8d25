/**
 * Shutdown on SIGTERM/SIGINT (or the signals given): the first signal runs `stop`
 * (graceful), a second one exits at once with status 130.
 */
export function onShutdownSignal(stop: (signal: string) => Promise<void>, signals: readonly NodeJS.Signals[] = ['SIGTERM', 'SIGINT']): void {
  let stopping = false
  const handler = (signal: NodeJS.Signals) => {
    if (stopping) {
      process.stderr.write(`scheduler: second ${signal}, exiting now\n`)
      process.exit(130)
    }
    stopping = true
    stop(signal).then(
      () => process.exit(process.exitCode ?? 0),
      (err: unknown) => {
        process.stderr.write(`scheduler: shutdown failed: ${err instanceof Error ? err.message : String(err)}\n`)
        process.exit(1)
      },
    )
  }
  for (const signal of signals) process.on(signal, handler)
}
