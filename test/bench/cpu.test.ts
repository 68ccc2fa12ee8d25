import { spawn } from 'node:child_process'
import { once } from 'node:events'
import { describe, expect, it } from 'vitest'
import { cpuMeter } from '../../src/bench/cpu.ts'

describe.runIf(process.platform === 'linux')('cpuMeter', () => {
  it("counts a watched process's children: while they run and after they exited", async () => {
    const meter = cpuMeter({ me: process.pid })
    // the child says when it has burnt 0.1 s of CPU, then burns on to 0.4 s
    const burn = 'while (process.cpuUsage().user < 100_000); process.stdout.write("x"); while (process.cpuUsage().user < 400_000);'
    const child = spawn(process.execPath, ['-e', burn], { stdio: ['ignore', 'pipe', 'inherit'] })
    await once(child.stdout, 'data')
    const whileRunning = meter.read().processes.me as number
    await once(child, 'exit')
    const after = meter.read().processes.me as number
    // the child burns 0.4 s of CPU (and more to start), on a busy machine over a longer time; this process mostly waits
    expect(whileRunning).toBeGreaterThanOrEqual(0.09)
    expect(after).toBeGreaterThanOrEqual(0.4)
    expect(after).toBeGreaterThanOrEqual(whileRunning)
  })
})
