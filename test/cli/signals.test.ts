/**
 * A SIGTERM that arrives while a command starts (its modules loading) is not lost when the command
 * takes the signals over for its graceful stop: it runs the stop.
 */
import { spawn } from 'node:child_process'
import { once } from 'node:events'
import { resolve } from 'node:path'
import { pathToFileURL } from 'node:url'
import { describe, expect, it } from 'vitest'

describe('onShutdownSignal', () => {
  it('runs the graceful stop for a SIGTERM received, not yet delivered, when it takes the signals over', { timeout: 20_000 }, async () => {
    const signals = pathToFileURL(resolve('dist/src/cli/signals.js')).href
    const script = `
      import { exitOnSignals, onShutdownSignal } from ${JSON.stringify(signals)}
      exitOnSignals()
      process.kill(process.pid, 'SIGTERM')
      // busy, as while modules load: the signal waits for the event loop
      const until = Date.now() + 300
      while (Date.now() < until) {}
      onShutdownSignal(async () => { process.stdout.write('stopped') })
      setTimeout(() => process.exit(99), 3000)   // still running: the signal was lost
    `
    const child = spawn(process.execPath, ['--input-type=module', '-e', script], { stdio: ['ignore', 'pipe', 'inherit'] })
    let stdout = ''
    child.stdout.on('data', (chunk: Buffer) => {
      stdout += chunk.toString()
    })
    const [code] = (await once(child, 'exit')) as [number | null]
    expect({ code, stdout }).toEqual({ code: 0, stdout: 'stopped' })
  })
})
