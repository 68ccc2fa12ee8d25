/**
 * The steady scenario's reference server: what an HTTP submit costs on this machine with nothing of
 * pgsched in it. A Fastify server with one route, `POST /v1/jobs`: the JSON body parsed, one
 * database round trip (`select 1`) shared by the requests of a loop turn and those that arrive while
 * one is made (as the API's group commit shares an insert), and a small JSON reply. Run as its own process
 * (`node bare-http.js --port N`, given `{ databaseUrl }` as its first IPC message: bench/processes.ts
 * spawnBareHttp); prints `listening` once ready.
 */
import { randomUUID } from 'node:crypto'
import { parseArgs } from 'node:util'
import Fastify from 'fastify'
import pg from 'pg'

async function main(): Promise<void> {
  const { values } = parseArgs({ options: { port: { type: 'string' } } })
  const port = Number(values.port)
  // the database URL comes over the IPC channel: not in the command line, which `ps` shows
  const databaseUrl = await new Promise<string>((resolve) => process.once('message', (m: { databaseUrl: string }) => resolve(m.databaseUrl)))
  const pool = new pg.Pool({ connectionString: databaseUrl, max: 2 })
  // One round trip in flight at a time; the requests of a loop turn, and those that come while one
  // is in flight, share the next (the API's group commit, with the write deferred to the turn's end).
  let waiting: Array<{ resolve: () => void; reject: (err: unknown) => void }> = []
  let inFlight = false
  let scheduled = false
  const flush = (): void => {
    if (inFlight || waiting.length === 0) return
    const batch = waiting
    waiting = []
    inFlight = true
    pool
      .query('select 1')
      .then(
        () => {
          for (const w of batch) w.resolve()
        },
        (err: unknown) => {
          for (const w of batch) w.reject(err)
        },
      )
      .finally(() => {
        inFlight = false
        flush()
      })
  }
  const roundTrip = (): Promise<void> =>
    new Promise((resolve, reject) => {
      waiting.push({ resolve, reject })
      if (scheduled) return
      scheduled = true
      setImmediate(() => {
        scheduled = false
        flush()
      })
    })
  const app = Fastify({ logger: false })
  app.post('/v1/jobs', async (request, reply) => {
    await roundTrip()
    const body = request.body as { type?: unknown }
    return reply.code(202).send({ id: randomUUID(), type: body.type, state: 'pending' })
  })
  await app.listen({ port, host: '127.0.0.1' })
  process.stdout.write('listening\n')
  process.once('SIGTERM', () => {
    void app
      .close()
      .then(() => pool.end())
      .then(() => process.exit(0))
  })
}

await main()
