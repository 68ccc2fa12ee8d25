/**
 * The shapes of handlers module loadHandlerModule takes: named exports, an array, and a default
 * export that is an object of handlers (ES module or CommonJS), each handler once.
 */
import { mkdtemp, rm, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join, resolve } from 'node:path'
import { pathToFileURL } from 'node:url'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { loadHandlerModule } from '../../src/worker/handlers.ts'

let dir = ''
// the module users import, as a file URL: the test modules live outside the project
const pgsched = pathToFileURL(resolve('src/worker/handlers.ts')).href

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'pgsched-exports-'))
})
afterAll(async () => {
  await rm(dir, { recursive: true, force: true })
})

async function typesOf(name: string, source: string): Promise<string[]> {
  const file = join(dir, name)
  await writeFile(file, source)
  return (await loadHandlerModule(file)).map((h) => h.type).sort()
}

describe('loadHandlerModule', () => {
  it('takes named exports and arrays of handlers', async () => {
    const source = `import { defineHandler } from '${pgsched}'
export const a = defineHandler('a', async () => undefined)
export const more = [defineHandler('b', async () => undefined), defineHandler('c', async () => undefined)]
export const notAHandler = 1
`
    expect(await typesOf('named.mjs', source)).toEqual(['a', 'b', 'c'])
  })

  it('takes a default export that is an object of handlers', async () => {
    const source = `import { defineHandler } from '${pgsched}'
const sendEmail = defineHandler('email.send', async () => undefined)
const sync = defineHandler('sync', async () => undefined)
export default { sendEmail, sync }
`
    expect(await typesOf('default-object.mjs', source)).toEqual(['email.send', 'sync'])
  })

  it('takes each handler of a module that exports it twice (named and in its default) once', async () => {
    const source = `import { defineHandler } from '${pgsched}'
export const sendEmail = defineHandler('email.send', async () => undefined)
export default { sendEmail }
`
    expect(await typesOf('both.mjs', source)).toEqual(['email.send'])
  })
})
