/**
 * A time-series chart (uPlot, bundled) with its figures also given as a table for screen
 * readers and keyboard users (the canvas itself is marked as an image with a summary label), its
 * minutes named in the browser's zone as every time of the dashboard is.
 */
import { useEffect, useRef } from 'preact/hooks'
import uPlot from 'uplot'
import 'uplot/dist/uPlot.min.css'
import { minuteOf } from '../format.ts'

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

function width(el: HTMLElement): number {
  return Math.max(260, Math.min(el.clientWidth || 600, 1200))
}

export function Chart({ title, times, series, unit }: ChartProps) {
  const box = useRef<HTMLDivElement>(null)
  useEffect(() => {
    const el = box.current
    if (!el) return
    const plot = new uPlot(
      {
        width: width(el),
        height: 180,
        // Points as well as lines: a minute with figures between two without still shows.
        series: [{}, ...series.map((s) => ({ label: s.label, stroke: s.color, width: 2, spanGaps: false, points: { show: true, size: 5, fill: s.color } }))],
        axes: [{}, { label: unit, size: 60 }],
        legend: { live: false },
        cursor: { show: false },
      },
      [times, ...series.map((s) => s.values)] as uPlot.AlignedData,
      el,
    )
    const resize = () => plot.setSize({ width: width(el), height: 180 })
    addEventListener('resize', resize)
    return () => {
      removeEventListener('resize', resize)
      plot.destroy()
    }
  }, [times, series, unit])
  const totals = series.map((s) => {
    const vals = s.values.filter((v): v is number => v !== null)
    return `${s.label}: latest ${vals.length ? vals[vals.length - 1] : 'none'}`
  })
  return (
    <figure class="chart">
      <figcaption>{title}</figcaption>
      <div ref={box} role="img" aria-label={`${title} over the last ${times.length} minutes (${unit}). ${totals.join('; ')}`} />
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
