/**
 * The pairing of burn-down variants (src/bench/variants.ts): the order of each repetition's runs, and
 * the shares reported against the plain burn-down or a variant's own pair.
 */
import { describe, expect, it } from 'vitest'
import type { Row } from '../../src/bench/report.ts'
import { addVariantRows, runOrder, type BurnDownRun, type BurnDownVariant } from '../../src/bench/variants.ts'

const limit: BurnDownVariant = { name: 'limit', what: 'a limit' }
const fair: BurnDownVariant = { name: 'fair', what: 'fair share', pairedWith: 'tenants' }
const tenants: BurnDownVariant = { name: 'tenants', what: 'the same submits, fair share off', target: null }
const names = (order: Array<BurnDownVariant | undefined>) => order.map((v) => v?.name ?? 'plain')

describe('burn-down variants', () => {
  it('rotates the runs of each repetition, and swaps a variant with its pair every other repetition', () => {
    const variants = [limit, fair, tenants]
    expect(names(runOrder(variants, 0))).toEqual(['plain', 'limit', 'fair', 'tenants'])
    expect(names(runOrder(variants, 1))).toEqual(['limit', 'tenants', 'fair', 'plain'])
    expect(names(runOrder(variants, 2))).toEqual(['fair', 'tenants', 'plain', 'limit'])
    // the rotation alone would put fair first here too (tenants, plain, limit, fair wraps round)
    expect(names(runOrder(variants, 3))).toEqual(['tenants', 'plain', 'limit', 'fair'])
    expect(names(runOrder(variants, 5))).toEqual(['limit', 'tenants', 'fair', 'plain'])
    // over the repetitions, each of the pair runs first as often as the other
    const fairFirst = [0, 1, 2, 3, 4, 5].filter((i) => {
      const order = names(runOrder(variants, i))
      return order.indexOf('fair') < order.indexOf('tenants')
    })
    expect(fairFirst).toEqual([0, 2, 4])
    // without pairs, only the rotation
    expect(names(runOrder([limit], 1))).toEqual(['limit', 'plain'])
  })

  it("reports a paired variant's share of its pair's run of the same repetition, with the goal, and of the plain run without", () => {
    const run = (jobsPerS: number): BurnDownRun => ({ jobsPerS, workerUs: 10, postgresUs: 20 })
    const rows: Row[] = []
    addVariantRows({
      variants: [limit, fair, tenants],
      plain: [run(100), run(200), run(400)],
      runs: new Map([
        ['limit', [run(95), run(190), run(380)]],
        ['fair', [run(45), run(180), run(160)]],
        ['tenants', [run(50), run(150), run(200)]],
      ]),
      what: 'jobs',
      processes: 2,
      ceiling: 1000,
      target: '≥ 90',
      add: (r) => rows.push(r),
    })
    const shares = rows.filter((r) => r.unit.startsWith('%')).map((r) => [r.scenario, r.unit, r.figure.median, r.figure.min, r.figure.max, r.target])
    expect(shares).toEqual([
      ['limit', '% of burn-down', 95, 95, 95, '≥ 90'],
      // fair against tenants run by run: 90 %, 120 %, 80 %
      ['fair', '% of tenants', 90, 80, 120, '≥ 90'],
      ['fair', '% of burn-down', 45, 40, 90, undefined],
      ['tenants', '% of burn-down', 50, 50, 75, undefined],
    ])
  })

  it('refuses to report a variant whose pair did not run beside it', () => {
    const run: BurnDownRun = { jobsPerS: 1, workerUs: 1, postgresUs: 1 }
    expect(() =>
      addVariantRows({ variants: [fair], plain: [run], runs: new Map([['fair', [run]]]), what: 'jobs', processes: 1, ceiling: 1, add: () => undefined }),
    ).toThrow('fair is paired with tenants, which did not run beside it')
  })

  it("reports the benchmark process's own CPU per job for a variant with work of its own there, and only for it", () => {
    const run = (benchUs: number): BurnDownRun => ({ jobsPerS: 100, workerUs: 10, postgresUs: 20, benchUs })
    const rows: Row[] = []
    addVariantRows({
      variants: [limit, { name: 'sse', what: 'a client', inBench: 'the SSE client' }],
      plain: [run(0.2), run(0.4), run(0.3)],
      runs: new Map([
        ['limit', [run(0.3), run(0.3), run(0.3)]],
        ['sse', [run(2.5), run(2.1), run(3.0)]],
      ]),
      what: 'jobs',
      processes: 1,
      ceiling: 1000,
      add: (r) => rows.push(r),
    })
    const own = rows.filter((r) => r.metric.includes("benchmark's own process"))
    expect(own.map((r) => [r.scenario, r.figure.median, r.figure.min, r.figure.max])).toEqual([['sse', 2.5, 2.1, 3.0]])
    expect(own[0]?.metric).toContain('with the SSE client, over the burn-down, not counted above (burn-down: 0.30 µs)')
  })
})
