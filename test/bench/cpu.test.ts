import { spawn } from 'node:child_process'
import { once } from 'node:events'
import pg from 'pg'
import { describe, expect, it } from 'vitest'
import { cpuMeter } from '../../src/bench/cpu.ts'
import { adminUrl } from '../db.ts'

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

  it("measures a PostgreSQL backend's few milliseconds of CPU finer than the 10 ms ticks of /proc/<pid>/stat", async () => {
    const client = new pg.Client({ connectionString: adminUrl() })
    await client.connect()
    try {
      await client.query('select 1')
      const meter = cpuMeter({})
      // a few milliseconds of work in one backend: in ticks, 0 or 10 ms
      await client.query('select count(*) from generate_series(1, 20000)')
      const { postgres } = meter.read()
      expect(postgres).toBeGreaterThan(0)
      // not a whole number of ticks: read to the nanosecond
      expect(Math.abs(postgres * 100 - Math.round(postgres * 100))).toBeGreaterThan(1e-6)
    } finally {
      await client.end()
    }
  })
})
