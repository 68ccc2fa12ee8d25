/**
 * A reader of the Prometheus text format for tests: samples with their labels, the metric families
 * declared (# TYPE lines), and an HTTP scrape.
 */
import { get } from 'node:http'

export interface Sample {
  name: string
  labels: Record<string, string>
  value: number
}

export interface Scrape {
  samples: Sample[]
  /** Metric family name → type, from the # TYPE lines. */
  types: Map<string, string>
  /** Sum of the samples named `name` whose labels include `labels`. */
  sum(name: string, labels?: Record<string, string>): number
}

const SAMPLE = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})?\s+(\S+)$/
const LABEL = /([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/g

export function parsePrometheusText(text: string): Scrape {
  const samples: Sample[] = []
  const types = new Map<string, string>()
  for (const line of text.split('\n')) {
    if (line.startsWith('# TYPE ')) {
      const [name, type] = line.slice(7).split(' ')
      if (name && type) types.set(name, type)
      continue
    }
    if (line === '' || line.startsWith('#')) continue
    const m = SAMPLE.exec(line)
    if (!m) throw new Error(`not a sample line: ${line}`)
    const labels: Record<string, string> = {}
    for (const l of (m[2] ?? '').matchAll(LABEL)) labels[l[1] as string] = (l[2] as string).replace(/\\(.)/g, (_, c: string) => (c === 'n' ? '\n' : c))
    const raw = m[3] as string
    samples.push({ name: m[1] as string, labels, value: raw === '+Inf' ? Number.POSITIVE_INFINITY : raw === '-Inf' ? Number.NEGATIVE_INFINITY : Number(raw) })
  }
  return {
    samples,
    types,
    sum: (name, labels = {}) =>
      samples.filter((s) => s.name === name && Object.entries(labels).every(([k, v]) => s.labels[k] === v)).reduce((a, s) => a + s.value, 0),
  }
}

/** GET http://127.0.0.1:{port}/metrics, parsed; rejects on a status other than 200. */
export function scrape(port: number, path = '/metrics'): Promise<Scrape & { contentType: string }> {
  return new Promise((resolve, reject) => {
    get({ host: '127.0.0.1', port, path }, (res) => {
      let body = ''
      res.setEncoding('utf8')
      res.on('data', (chunk: string) => (body += chunk))
      res.on('end', () => {
        if (res.statusCode !== 200) return reject(new Error(`GET ${path}: ${res.statusCode} ${body}`))
        resolve({ ...parsePrometheusText(body), contentType: String(res.headers['content-type']) })
      })
    }).on('error', reject)
  })
}
