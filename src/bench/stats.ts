/** Small statistics for benchmark figures. */

export function quantile(values: readonly number[], q: number): number {
  if (values.length === 0) return Number.NaN
  const sorted = [...values].sort((a, b) => a - b)
  const index = Math.min(sorted.length - 1, Math.max(0, Math.ceil(q * sorted.length) - 1))
  return sorted[index] as number
}

export function median(values: readonly number[]): number {
  if (values.length === 0) return Number.NaN
  const sorted = [...values].sort((a, b) => a - b)
  const mid = Math.floor(sorted.length / 2)
  return sorted.length % 2 ? (sorted[mid] as number) : ((sorted[mid - 1] as number) + (sorted[mid] as number)) / 2
}

/** Median with the range of repeated measurements. */
export interface Figure {
  median: number
  min: number
  max: number
  runs: number[]
}

export function figure(runs: readonly number[]): Figure {
  return { median: median(runs), min: Math.min(...runs), max: Math.max(...runs), runs: [...runs] }
}
