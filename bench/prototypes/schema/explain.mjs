// Per-statement cost of one schema's hot path, deterministic figures only.
//   node explain.mjs <a|b|b2> <database> <cycles>
// Each cycle: submit 500 one-time jobs, claim 500 (priority order, SKIP LOCKED), heartbeat them,
// complete them. Each statement runs once as EXPLAIN (ANALYZE, BUFFERS, WAL, TIMING OFF) EXECUTE
// of a prepared statement with a generic plan (as the worker's pool does), in its own transaction,
// whose xid is recorded; afterwards the WAL of the whole run is read back with pg_walinspect and
// attributed to the statements by xid (records of this database without an xid, e.g. page
// pruning, are reported as "no xid"). Prints JSON: per statement, per job.
import { readFileSync } from 'node:fs'
import pg from 'pg'

const [schema, database, cyclesArg] = process.argv.slice(2)
const cycles = Number(cyclesArg ?? 20)
const dir = new URL('./stmts/', import.meta.url)
const text = (name) => readFileSync(new URL(`${schema}_${name}.sql`, dir), 'utf8')
const withParams = (s) => s.replaceAll(':ids', '$1').replaceAll(':jids', '$2').replaceAll(':atts', '$3')
const W = '00000000-0000-7000-8000-00000000b001'
const client = new pg.Client({ host: '127.0.0.1', user: 'postgres', database })
await client.connect()
await client.query('set plan_cache_mode = force_generic_plan')
await client.query(`prepare p_submit as ${text('submit')}`)
await client.query(`prepare p_claim as ${text('claim')}`)
await client.query(`prepare p_heartbeat(text, text, text) as ${withParams(text('heartbeat'))}`)
await client.query(`prepare p_complete(text, text, text) as ${withParams(text('complete'))}`)
const heldQuery =
  schema === 'a'
    ? `select array_agg(id)::text ids, array_agg(job_id)::text jids, array_agg(attempt)::text atts from pgsched.executions where state = 'running' and worker_id = '${W}'`
    : `select array_agg(execution_id)::text ids, array_agg(job_id)::text jids, array_agg(attempt)::text atts from pgsched.runs where worker_id = '${W}'`

const stats = {} // label -> { n, jobs, hit, read, dirtied, written, walRecords, walFpi, walBytes, execMs[] }
const xids = new Map() // xid -> label
async function measure(label, exec, jobs) {
  await client.query('begin')
  const { rows } = await client.query(`explain (analyze, buffers, wal, timing off, format json) ${exec}`)
  const { rows: x } = await client.query('select pg_current_xact_id_if_assigned()::text as xid')
  await client.query('commit')
  if (x[0].xid) xids.set(x[0].xid, label)
  const top = rows[0]['QUERY PLAN'][0]
  const p = top.Plan
  const s = (stats[label] ??= { n: 0, jobs: 0, hit: 0, read: 0, dirtied: 0, written: 0, walRecords: 0, walFpi: 0, walBytes: 0, execMs: [] })
  s.n++
  s.jobs += jobs
  s.hit += p['Shared Hit Blocks']
  s.read += p['Shared Read Blocks']
  s.dirtied += p['Shared Dirtied Blocks']
  s.written += p['Shared Written Blocks']
  s.walRecords += p['WAL Records']
  s.walFpi += p['WAL FPI']
  s.walBytes += p['WAL Bytes']
  s.execMs.push(top['Execution Time'])
}
const lit = (v) => `'${v}'`
const { rows: db } = await client.query('select oid::text from pg_database where datname = current_database()')
const walBy = {}
// The WAL of one cycle, read at once (the server's other work recycles segments within minutes).
async function collectWal(from) {
  const { rows: endRows } = await client.query('select pg_current_wal_flush_lsn()::text as lsn')
  const { rows: wal } = await client.query(
    `select xid::text as xid, resource_manager as rm, record_type as type, count(*)::int as n,
            sum(record_length)::bigint as bytes, sum(fpi_length)::bigint as fpi_bytes
       from pg_get_wal_records_info($1, $2)
      where (block_ref like $3 or xid::text = any($4::text[]))
      group by 1, 2, 3`,
    [from, endRows[0].lsn, `%/${db[0].oid}/%`, [...xids.keys()]],
  )
  for (const r of wal) {
    const label = xids.get(r.xid) ?? (r.xid === '0' ? 'no xid' : 'other xid')
    const w = (walBy[label] ??= { bytes: 0, fpiBytes: 0, records: 0, types: {} })
    w.bytes += Number(r.bytes)
    w.fpiBytes += Number(r.fpi_bytes)
    w.records += r.n
    const k = `${r.rm}/${r.type}`
    w.types[k] = (w.types[k] ?? 0) + r.n
  }
}
let claimed = 0
for (let c = 0; c < cycles; c++) {
  const { rows: startRows } = await client.query('select pg_current_wal_insert_lsn()::text as lsn')
  await measure('submit', 'execute p_submit', 500)
  await measure('claim', 'execute p_claim', 500)
  const { rows } = await client.query(heldQuery)
  const { ids, jids, atts } = rows[0]
  const n = ids ? ids.split(',').length : 0
  claimed += n
  const args = `(${lit(ids ?? '{}')}, ${lit(jids ?? '{}')}, ${lit(atts ?? '{}')})`
  await measure('heartbeat', `execute p_heartbeat${args}`, n)
  await measure('complete', `execute p_complete${args}`, n)
  await collectWal(startRows[0].lsn)
}
const median = (a) => [...a].sort((x, y) => x - y)[Math.floor(a.length / 2)]
const per = (v, jobs) => Math.round((v / jobs) * 100) / 100
const out = { schema, database, cycles, claimed }
for (const [label, s] of Object.entries(stats)) {
  const w = walBy[label] ?? { bytes: 0, fpiBytes: 0, records: 0, types: {} }
  const idx = Object.entries(w.types)
    .filter(([k]) => /^Btree\/(INSERT_LEAF|INSERT_POST|SPLIT_L|SPLIT_R)/.test(k))
    .reduce((a, [, v]) => a + v, 0)
  out[label] = {
    perJob: {
      sharedHit: per(s.hit, s.jobs), sharedRead: per(s.read, s.jobs), dirtied: per(s.dirtied, s.jobs), written: per(s.written, s.jobs),
      walBytesStatement: per(s.walBytes, s.jobs), walBytesWithCommit: per(w.bytes, s.jobs), walBytesNoFpi: per(w.bytes - w.fpiBytes, s.jobs),
      walRecords: per(w.records, s.jobs), fpi: per(s.walFpi, s.jobs), btreeInserts: per(idx, s.jobs),
    },
    medianExecMsPerBatch: Math.round(median(s.execMs) * 100) / 100,
    walRecordTypes: Object.fromEntries(Object.entries(w.types).sort((a, b) => b[1] - a[1]).map(([k, v]) => [k, per(v, s.jobs)])),
  }
}
for (const label of ['no xid', 'other xid']) if (walBy[label]) out[label] = { ...walBy[label], types: walBy[label].types }
console.log(JSON.stringify(out, null, 1))
await client.end()
