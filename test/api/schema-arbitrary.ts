/**
 * fast-check arbitraries derived from the JSON Schemas of an OpenAPI 3.1
 * document: every value generated is valid per the schema (types, enums,
 * patterns, lengths in code points, ranges, required and optional
 * properties, anyOf, and the document's formats). Covers the keywords the
 * pgsched document uses and throws on any other, so a new keyword in the
 * document fails the test instead of being ignored.
 */
import fc from 'fast-check'
import { TYPE_PATTERN } from '../../src/core/names.ts'

type Schema = Record<string, unknown>

const KNOWN = new Set([
  '$ref',
  '$id',
  'type',
  'enum',
  'const',
  'anyOf',
  'properties',
  'required',
  'additionalProperties',
  'items',
  'pattern',
  'format',
  'minLength',
  'maxLength',
  'minimum',
  'maximum',
  'minProperties',
  'default',
  'description',
  'title',
  'examples',
  'x-expected',
])

const LONE_SURROGATE = /\p{Cs}/u
const codePoints = (s: string) => [...s].length

/** A cron expression that fires: 5 fields, each `*`, a value, a range or a step, day of month at most 28. */
const cronArbitrary = (): fc.Arbitrary<string> => {
  const field = (min: number, max: number) =>
    fc.oneof(
      fc.constant('*'),
      fc.integer({ min, max }).map(String),
      fc.tuple(fc.integer({ min, max }), fc.integer({ min, max })).map(([a, b]) => `${Math.min(a, b)}-${Math.max(a, b)}`),
      fc.integer({ min: 1, max: Math.max(1, max - min) }).map((n) => `*/${n}`),
    )
  return fc.oneof(
    fc.tuple(field(0, 59), field(0, 23), field(1, 28), field(1, 12), field(0, 6)).map((f) => f.join(' ')),
    fc.constantFrom('@hourly', '@daily', '@weekly', '@monthly', '@yearly', '0 0 9 * * 1-5', '*/30 * * * * *'),
  )
}

const dateTimeArbitrary = (): fc.Arbitrary<string> =>
  fc
    .tuple(
      fc.date({ min: new Date('2000-01-01T00:00:00Z'), max: new Date('2100-01-01T00:00:00Z'), noInvalidDate: true }),
      fc.constantFrom('Z', '+02:00', '-05:30', 'ms'),
    )
    .map(([d, zone]) => {
      const iso = d.toISOString()
      if (zone === 'ms') return iso.replace(/\.\d{3}Z$/, 'Z')
      if (zone === 'Z') return iso
      const sign = zone.startsWith('-') ? -1 : 1
      const [h, m] = zone.slice(1).split(':').map(Number) as [number, number]
      const local = new Date(d.getTime() + sign * (h * 60 + m) * 60_000).toISOString().slice(0, -1)
      return `${local}${zone}`
    })

const durationArbitrary = (): fc.Arbitrary<string> =>
  fc.tuple(fc.integer({ min: 1, max: 366 * 86_400 }), fc.constantFrom('s', 'compact', 'iso')).map(([seconds, form]) => {
    if (form === 's') return `${seconds}s`
    const d = Math.floor(seconds / 86_400)
    const h = Math.floor((seconds % 86_400) / 3600)
    const m = Math.floor((seconds % 3600) / 60)
    const s = seconds % 60
    if (form === 'iso') return `P${d ? `${d}D` : ''}T${h}H${m}M${s}S`
    return `${d ? `${d}d` : ''}${h ? `${h}h` : ''}${m ? `${m}m` : ''}${s ? `${s}s` : ''}`
  })

const FORMATS: Record<string, () => fc.Arbitrary<string>> = {
  'date-time': dateTimeArbitrary,
  cron: cronArbitrary,
  'time-zone': () => fc.constantFrom(...Intl.supportedValuesOf('timeZone')),
  'pgsched-duration': durationArbitrary,
  // a type's pattern (checked by the caller's filter), not the reserved prefix
  'pgsched-job-type': () => fc.stringMatching(new RegExp(TYPE_PATTERN, 'u')).filter((s) => !s.startsWith('pgsched.')),
  uuid: () => fc.uuid(),
}

/** Arbitraries for the schemas of `doc` (its `components.schemas` resolve `$ref`s). */
export function schemaArbitrary(doc: { components: { schemas: Record<string, Schema> } }, root: Schema): fc.Arbitrary<unknown> {
  const of = (schema: Schema): fc.Arbitrary<unknown> => {
    for (const key of Object.keys(schema)) if (!KNOWN.has(key)) throw new Error(`schemaArbitrary: keyword ${key} is not supported`)
    if (typeof schema.$ref === 'string') {
      const target = doc.components.schemas[schema.$ref.replace('#/components/schemas/', '')]
      if (!target) throw new Error(`unresolved ${schema.$ref}`)
      return of(target)
    }
    if (schema.const !== undefined) return fc.constant(schema.const)
    if (Array.isArray(schema.enum)) return fc.constantFrom(...schema.enum)
    if (Array.isArray(schema.anyOf)) return fc.oneof(...(schema.anyOf as Schema[]).map(of))
    if (Array.isArray(schema.type)) return fc.oneof(...(schema.type as string[]).map((type) => of({ ...schema, type })))
    switch (schema.type) {
      case undefined:
        // any JSON value (the payload), within the documented depth
        return fc.jsonValue({ depthSize: 'small', maxDepth: 5 }).filter((v) => !LONE_SURROGATE.test(JSON.stringify(v) ?? ''))
      case 'null':
        return fc.constant(null)
      case 'boolean':
        return fc.boolean()
      case 'integer':
      case 'number': {
        const min = typeof schema.minimum === 'number' ? schema.minimum : -1e9
        const max = typeof schema.maximum === 'number' ? schema.maximum : 1e9
        return schema.type === 'integer' ? fc.oneof(fc.constantFrom(min, max), fc.integer({ min, max })) : fc.double({ min, max, noNaN: true })
      }
      case 'string': {
        const minLength = typeof schema.minLength === 'number' ? schema.minLength : 0
        const maxLength = typeof schema.maxLength === 'number' ? schema.maxLength : 300
        const pattern = typeof schema.pattern === 'string' ? new RegExp(schema.pattern, 'u') : undefined
        const format = typeof schema.format === 'string' ? FORMATS[schema.format] : undefined
        if (typeof schema.format === 'string' && !format) throw new Error(`schemaArbitrary: format ${schema.format} is not supported`)
        const base = format ? format() : pattern ? fc.stringMatching(pattern) : fc.string({ unit: 'grapheme', minLength, maxLength })
        return base.filter((s) => {
          const n = codePoints(s)
          return n >= minLength && n <= maxLength && (!pattern || pattern.test(s)) && !LONE_SURROGATE.test(s)
        })
      }
      case 'array':
        return fc.array(of((schema.items as Schema) ?? {}), { maxLength: 5 })
      case 'object': {
        const properties = (schema.properties ?? {}) as Record<string, Schema>
        const required = (schema.required ?? []) as string[]
        const model: Record<string, fc.Arbitrary<unknown>> = {}
        for (const [name, property] of Object.entries(properties)) model[name] = of(property)
        return fc.record(model, { requiredKeys: required })
      }
      default:
        throw new Error(`schemaArbitrary: type ${String(schema.type)} is not supported`)
    }
  }
  return of(root)
}
