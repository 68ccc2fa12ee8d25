import { execFile } from 'node:child_process'
import { readFileSync } from 'node:fs'
import { promisify } from 'node:util'
import { Command } from 'commander'
import { describe, expect, it } from 'vitest'
import { COMMANDS } from '../../src/cli/main.ts'

const run = promisify(execFile)

describe('scheduler (the command line)', () => {
  it('prints the package version for --version and -V', async () => {
    const { version } = JSON.parse(readFileSync('package.json', 'utf8')) as { version: string }
    expect((await run('node', ['bin/scheduler', '--version'])).stdout).toBe(`${version}\n`)
    expect((await run('node', ['bin/scheduler', '-V'])).stdout).toBe(`${version}\n`)
  })

  it('answers --help quickly, listing every command without loading them', async () => {
    const startedAt = performance.now()
    const { stdout } = await run('node', ['bin/scheduler', '--help'])
    const elapsedMs = performance.now() - startedAt
    for (const [name, entry] of Object.entries(COMMANDS)) expect(stdout).toMatch(new RegExp(`\\n  ${name}${entry.options ? ' \\[options\\]' : ''} `))
    // Under 1 s on a quiet machine (about 0.1 s); the bound is loose because the machine is shared.
    expect(elapsedMs).toBeLessThan(3_000)
  })

  it('shows one command’s own help, loading only that command', async () => {
    const { stdout } = await run('node', ['bin/scheduler', 'help', 'migrate'])
    expect(stdout).toContain('Usage: scheduler migrate [options]')
    expect(stdout).toContain('--partitions <n>')
    expect((await run('node', ['bin/scheduler', 'migrate', '--help'])).stdout).toBe(stdout)
  })

  it.each(Object.keys(COMMANDS))('describes %s in the overview as its module does', async (name) => {
    const entry = COMMANDS[name]
    if (!entry) throw new Error(name)
    const program = new Command()
    ;(await entry.load())(program)
    const command = program.commands.find((c) => c.name() === name)
    expect(command?.description()).toBe(entry.summary)
    expect(command !== undefined && command.options.length > 0).toBe(entry.options)
  })

  it('refuses bench --write-docs for a quick or partial run, before measuring anything', async () => {
    for (const args of [['--quick'], ['--only', 'latency']]) {
      const err = await run('node', ['bin/scheduler', 'bench', ...args, '--write-docs'], {
        env: { ...process.env, DATABASE_URL: 'postgres://nobody@127.0.0.1:1/none' },
      }).catch((e: unknown) => e)
      expect(err).toMatchObject({ code: 2, stderr: expect.stringContaining('--write-docs needs a full run') })
    }
  })

  it('refuses an unwritable --json or --write-docs file and a hex or exponent count before measuring anything', async () => {
    const refused = async (args: string[]) =>
      run('node', ['bin/scheduler', 'bench', ...args], { env: { ...process.env, DATABASE_URL: 'postgres://nobody@127.0.0.1:1/none' } }).catch((e: unknown) => e)
    expect(await refused(['--quick', '--only', 'ceiling', '--json', '/nonexistent/dir/r.json'])).toMatchObject({
      code: 2,
      stderr: 'scheduler: --json /nonexistent/dir/r.json: its folder does not exist\n',
    })
    expect(await refused(['--write-docs', '/nonexistent/dir/b.md'])).toMatchObject({
      code: 2,
      stderr: 'scheduler: --write-docs /nonexistent/dir/b.md: its folder does not exist\n',
    })
    for (const reps of ['0x2', '1e1']) {
      expect(await refused(['--quick', '--reps', reps])).toMatchObject({ code: 2, stderr: `scheduler: --reps must be a positive integer (got "${reps}")\n` })
    }
  })
})
