/**
 * Signals. Every command ends on SIGTERM or SIGINT (exitOnSignals), even as the first process of a
 * container (PID 1), which the kernel gives no default action for them. A long-running command
 * takes them over with onShutdownSignal: the first signal runs `stop` (graceful), a second one exits
 * at once with status 130.
 */
import { constants } from 'node:os'

/** The signals every command ends on. */
const ENDING_SIGNALS: readonly NodeJS.Signals[] = ['SIGTERM', 'SIGINT']

/** Exits as a shell reports a process ended by `signal` (128 + its number: 143 for SIGTERM). */
function exitOnSignal(signal: NodeJS.Signals): void {
  process.exit(signalExitCode(signal))
}

/**
 * Ends the process on SIGTERM and SIGINT, as their default action would: as PID 1 (the image's
 * entrypoint) there is none, and `docker stop` would wait for its SIGKILL (a `migrate`, an admin
 * command, a worker still loading its handlers).
 */
export function exitOnSignals(): void {
  for (const signal of ENDING_SIGNALS) process.on(signal, exitOnSignal)
}

let stopping = false

/** Whether a signal's graceful stop is running (it ends the process when done). */
export function shutdownInProgress(): boolean {
  return stopping
}

/** The exit status a shell reports for a process ended by `signal` (143 for SIGTERM, 130 for SIGINT). */
export function signalExitCode(signal: NodeJS.Signals): number {
  return 128 + constants.signals[signal]
}

/**
 * Shutdown on SIGTERM/SIGINT (or the signals given): the first signal runs `stop`
 * (graceful), a second one exits at once with status 130.
 */
export function onShutdownSignal(stop: (signal: NodeJS.Signals) => Promise<void>, signals: readonly NodeJS.Signals[] = ['SIGTERM', 'SIGINT']): void {
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
  for (const signal of signals) {
    // the new listener first: with none left for a moment, Node would drop a signal received and not
    // yet delivered (one that came while the command's modules loaded), and the command run on
    process.on(signal, handler)
    process.removeListener(signal, exitOnSignal)
  }
}
