/**
 * A time-series chart (uPlot, bundled) with its figures also given as a table for screen
 * readers and keyboard users (the canvas itself is marked as an image with a summary label), its
 * minutes in the browser's zone as every time of the dashboard is: the table names it on each
 * minute, the time axis (and the summary label) once.
 */
import { useEffect, useRef } from 'preact/hooks'
import uPlot from 'uplot'
import 'uplot/dist/uPlot.min.css'
import { minuteOf, zoneOf } from '../format.ts'

export interface Series {
  label: string
  values: Array<number | null>
  color: string
}

export interface ChartProps {
  title: string
  /** Unix seconds, one per point. */
  times: number[]
  series: Series[]
  unit: string
}

/** The zone of the chart's minutes: its first minute's, and its last's too when a clock change comes between ("CEST/CET"). */
function zoneOfMinutes(times: number[]): string {
  const first = zoneOf(new Date((times[0] ?? Date.now() / 1000) * 1000))
  const last = zoneOf(new Date((times[times.length - 1] ?? Date.now() / 1000) * 1000))
  return first === last ? first : `${first}/${last}`
}

/** The chart's height with its axes: 180 px, and 30 more for the time axis's label (uPlot's labelSize), so the plot keeps its height. */
const HEIGHT_PX = 210

function width(el: HTMLElement): number {
  return Math.max(260, Math.min(el.clientWidth || 600, 1200))
}

export function Chart({ title, times, series, unit }: ChartProps) {
  const box = useRef<HTMLDivElement>(null)
  // uPlot draws its time axis in the browser's zone (its default tzDate), as minuteOf writes the table's
  const zone = zoneOfMinutes(times)
  useEffect(() => {
    const el = box.current
    if (!el) return
    const plot = new uPlot(
      {
        width: width(el),
        height: HEIGHT_PX,
        // Points as well as lines: a minute with figures between two without still shows.
        series: [{}, ...series.map((s) => ({ label: s.label, stroke: s.color, width: 2, spanGaps: false, points: { show: true, size: 5, fill: s.color } }))],
        axes: [{ label: `Minute (${zone})` }, { label: unit, size: 60 }],
        legend: { live: false },
        cursor: { show: false },
      },
      [times, ...series.map((s) => s.values)] as uPlot.AlignedData,
      el,
    )
    const resize = () => plot.setSize({ width: width(el), height: HEIGHT_PX })
    addEventListener('resize', resize)
    return () => {
      removeEventListener('resize', resize)
      plot.destroy()
    }
  }, [times, series, unit, zone])
  const totals = series.map((s) => {
    const vals = s.values.filter((v): v is number => v !== null)
    return `${s.label}: latest ${vals.length ? vals[vals.length - 1] : 'none'}`
  })
  return (
    <figure class="chart">
      <figcaption>{title}</figcaption>
      <div ref={box} role="img" aria-label={`${title} over the last ${times.length} minutes, in ${zone} (${unit}). ${totals.join('; ')}`} />
      <details>
        <summary>{title} as a table</summary>
        <div class="table-wrap">
          <table>
            <thead>
              <tr>
                <th scope="col">Minute</th>
                {series.map((s) => (
                  <th key={s.label} scope="col">
                    {s.label}
                  </th>
                ))}
              </tr>
            </thead>
            <tbody>
              {times.map((t, i) => (
                <tr key={t}>
                  <th scope="row">{minuteOf(new Date(t * 1000))}</th>
                  {series.map((s) => (
                    <td key={s.label}>{s.values[i] ?? '—'}</td>
                  ))}
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      </details>
    </figure>
  )
}
