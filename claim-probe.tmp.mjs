// Trickle loop: submit k jobs, claim them, complete them; pg_stat_statements gives the per-statement cost.
import pg from 'pg'
const root = '/work/main/dist/src'
const { migrate } = await import(`${root}/db/migrate.js`)
const { createDb } = await import(`${root}/db/pool.js`)
const { createClient } = await import(`${root}/client.js`)
const { executionClaimBatch } = await import(`${root}/db/queries/claim.js`)
const { executionCompleteMany } = await import(`${root}/db/queries/lease.js`)
const [partitions, k, rounds] = process.argv.slice(2).map(Number)
const base = 'postgres://postgres@127.0.0.1:5441'
const name = `claimprobe_${partitions}`
const admin = new pg.Client({ connectionString: `${base}/postgres` })
await admin.connect()
await admin.query(`drop database if exists ${name} with (force)`)
await admin.query(`create database ${name}`)
const url = `${base}/${name}`
await migrate({ databaseUrl: url, partitions })
if (process.env.DOMAINS) {
  const c = new pg.Client({ connectionString: url }); await c.connect()
  const doms = [
    ['tenant', 'text', 'length(value) between 1 and 128', 'jobs_tenant_check'],
    ['priority', 'smallint', 'value between -1000 and 1000', 'jobs_priority_check'],
    ['max_attempts', 'integer', 'value between 1 and 1000', 'jobs_max_attempts_check'],
    ['timeout_ms', 'integer', 'value between 1 and 86400000', 'jobs_timeout_ms_check'],
    ['idempotency_key', 'text', 'length(value) between 1 and 255', 'jobs_idempotency_key_check'],
    ['state', 'text', "value in ('active', 'paused', 'cancelled')", 'jobs_state_check'],
    ['concurrency_key', 'text', 'length(value) between 1 and 255', 'jobs_concurrency_key_check'],
    ['start_deadline_ms', 'integer', 'value between 1000 and 604800000', 'jobs_start_deadline_ms_check'],
    ['type', 'text', "value ~ '^[A-Za-z0-9][A-Za-z0-9_.:/-]*$' and length(value) <= 128", 'jobs_type_check'],
    ['queue', 'text', "value ~ '^[A-Za-z0-9][A-Za-z0-9_.:/-]*$' and length(value) <= 64", 'jobs_queue_check'],
    ['traceparent', 'text', "value ~ '^00-[0-9a-f]+-[0-9a-f]+-[0-9a-f]+$' and length(value) = 55", 'jobs_traceparent_check'],
  ]
  const types = Object.fromEntries((await c.query(`select attname, format_type(atttypid, atttypmod) t from pg_attribute where attrelid = 'pgsched.jobs'::regclass and attnum > 0`)).rows.map((r) => [r.attname, r.t]))
  for (const [col, , check, con] of doms) {
    await c.query(`alter table pgsched.jobs drop constraint ${con}`)
    await c.query(`create domain pgsched.d_${col} as ${types[col]} constraint ${con} check (${check})`)
  }
  // views depend on the columns: drop and skip (probe only)
  const deps = (await c.query(`select distinct v.oid::regclass::text as v from pg_depend d join pg_rewrite r on r.oid = d.objid join pg_class v on v.oid = r.ev_class
     where d.refobjid = 'pgsched.jobs'::regclass and v.oid <> 'pgsched.jobs'::regclass`)).rows
  for (const d of deps) await c.query(`drop view if exists ${d.v} cascade`)
  for (const [col] of doms) await c.query(`alter table pgsched.jobs alter column ${col} type pgsched.d_${col}`)
  console.log('dropped views', deps.map((d) => d.v).join(','))
  await c.end()
}
const { db } = createDb({ databaseUrl: url, poolSize: 2, genericPlans: true, indexPlans: true })
const client = createClient({ db, tenant: 't' })
const W = '00000000-0000-7000-8000-00000000a001'
await db.insertInto('pgsched.workers').values({ id: W, host: 'h', pid: 1, queues: ['default'], types: ['k'], concurrency: 10 }).execute()
const dbid = (await admin.query('select oid from pg_database where datname = $1', [name])).rows[0].oid
const run = async (n) => {
  for (let i = 0; i < n; i++) {
    await client.submitJobs(Array.from({ length: k }, () => ({ type: 'k' })))
    const claimed = await executionClaimBatch(db, { workerId: W, queues: ['default'], types: ['k'], limit: k, leaseMs: 60_000 })
    await executionCompleteMany(db, { workerId: W, completions: claimed.map((c) => ({ id: c.id, jobId: c.jobId, attempt: c.attempt, resultJson: 'null', outputUri: null })) })
  }
}
await run(100) // warm-up
await admin.query('select pg_stat_statements_reset(0, $1)', [dbid])
await run(rounds)
const { rows } = await admin.query(
  `select calls, mean_exec_time, left(regexp_replace(query, '\\s+', ' ', 'g'), 60) as q from pg_stat_statements
    where dbid = $1 and toplevel and calls >= $2 order by total_exec_time desc limit 6`, [dbid, rounds])
const label = (q) => q.includes('with input') ? 'submit' : q.includes('with ended') ? 'complete' : q.includes('with due') ? 'claim' : null
console.log(rows.filter((r) => label(r.q)).map((r) => `${label(r.q)} ${(r.mean_exec_time * 1000).toFixed(0)}`).sort().join('  '))
await db.destroy()
await admin.query(`drop database ${name} with (force)`)
await admin.end()
