// The layers as the linter keeps them: docs/architecture.md's table says what eslint/layers.js
// says; the folder rule refuses an upward import (type-only ones too) and Fastify below the edge;
// the cycle rule finds a circle of type imports; and eslint.config.js applies them to every folder.
import { mkdtempSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { ESLint, Linter } from 'eslint'
import tseslint from 'typescript-eslint'
import { afterAll, describe, expect, it } from 'vitest'
// @ts-expect-error eslint/layers.js is plain JavaScript for eslint.config.js, without types
import { LAYERS, WITHOUT_FASTIFY, layersPlugin, restrictedFor } from '../eslint/layers.js'

const layers = LAYERS as Record<string, string[]>
const withoutFastify = WITHOUT_FASTIFY as string[]
const restricted = restrictedFor as (folder: string) => unknown[]

/** The folder rule of `folder` alone, run over `code` as if it were a file in that folder. */
function importProblems (folder: string, code: string): string[] {
  const linter = new Linter({ configType: 'flat' })
  const messages = linter.verify(code, [{
    files: ['**/*.ts'],
    languageOptions: { parser: tseslint.parser as Linter.Parser },
    rules: { 'no-restricted-imports': ['error', { patterns: restricted(folder) }] },
  }], `src/${folder}/probe.ts`)
  return messages.map((message) => message.message)
}

describe('the layers', () => {
  it('docs/architecture.md lists exactly what eslint/layers.js lets each folder import', () => {
    const page = readFileSync(new URL('../docs/architecture.md', import.meta.url), 'utf8')
    const rows = [...page.matchAll(/^\| `(\w+)` \| [^|]+ \| ([^|]+) \|$/gm)]
    const documented = Object.fromEntries(rows.map(([, folder, imports]) => [folder, [...imports!.matchAll(/`(\w+)`/g)].map((match) => match[1])]))
    expect(documented).toEqual(layers)
  })

  it('every folder of src/ has a row, and every row a folder', async () => {
    const { readdir } = await import('node:fs/promises')
    const folders = (await readdir(new URL('../src/', import.meta.url), { withFileTypes: true })).filter((entry) => entry.isDirectory()).map((entry) => entry.name)
    expect(folders.sort()).toEqual(Object.keys(layers).sort())
  })

  it('refuses an import from a higher folder, a type-only one too, and allows the lower ones', () => {
    expect(importProblems('oauth', "import { Access } from '../access/authorize.js'\n")).toHaveLength(1)
    expect(importProblems('session', "import type { Verdict } from '../access/authorize.js'\n")).toHaveLength(1)
    expect(importProblems('store', "import { buildGateway } from '../gateway.js'\n")).toHaveLength(1)
    expect(importProblems('access', "import type { Sessions } from '../session/session.js'\nimport { GatewayError } from '../errors.js'\n")).toEqual([])
    // A file of a folder's subfolder (src/config/validate/) is held to its folder's rule.
    expect(importProblems('config', "import { Access } from '../../access/authorize.js'\n")).toHaveLength(1)
    expect(importProblems('config', "import { buildGateway } from '../../gateway.js'\n")).toHaveLength(1)
    expect(importProblems('config', "import { GatewayError } from '../../errors.js'\n")).toEqual([])
  })

  it('keeps Fastify out of the folders below the edge, and only those', () => {
    for (const folder of Object.keys(layers)) {
      const problems = importProblems(folder, "import type { FastifyRequest } from 'fastify'\n")
      expect(problems.length, folder).toBe(withoutFastify.includes(folder) ? 1 : 0)
    }
  })
})

describe('no-import-cycle', () => {
  const dir = mkdtempSync(join(tmpdir(), 'cycle-'))
  afterAll(() => rmSync(dir, { recursive: true, force: true }))

  async function lintFiles (files: Record<string, string>): Promise<string[]> {
    mkdirSync(dir, { recursive: true })
    for (const [name, text] of Object.entries(files)) writeFileSync(join(dir, name), text)
    const eslint = new ESLint({
      cwd: dir,
      overrideConfigFile: true,
      overrideConfig: [{ files: ['**/*.ts'], languageOptions: { parser: tseslint.parser as Linter.Parser }, plugins: { layers: layersPlugin }, rules: { 'layers/no-import-cycle': 'error' } }],
    })
    const results = await eslint.lintFiles(Object.keys(files).map((name) => join(dir, name)))
    return results.flatMap((result) => result.messages.map((message) => message.message))
  }

  it('finds a circle of type-only imports through three files', async () => {
    const messages = await lintFiles({
      'a.ts': "import type { B } from './b.js'\nexport interface A { b?: B }\n",
      'b.ts': "import type { C } from './c.js'\nexport interface B { c?: C }\n",
      'c.ts': "import type { A } from './a.js'\nexport interface C { a?: A }\n",
    })
    expect(messages).toHaveLength(3)
    expect(messages[0]).toMatch(/^Import cycle: a\.ts -> b\.ts -> c\.ts -> a\.ts$/)
  })

  it('says nothing of a chain without a circle', async () => {
    expect(await lintFiles({
      'd.ts': "import type { E } from './e.js'\nexport type D = E\n",
      'e.ts': 'export type E = string\n',
    })).toEqual([])
  })
})

describe('eslint.config.js', () => {
  // That src/ meets these rules is `npm run lint`'s to say (CI runs it before the tests); this says
  // that the lint applies them, to every folder, as the rules tested above.
  const eslint = new ESLint({ cwd: new URL('..', import.meta.url).pathname })
  const rulesFor = async (file: string) => ((await eslint.calculateConfigForFile(file)) as { rules: Record<string, unknown[]> }).rules

  it.each(Object.keys(layers))('gives src/%s/ its folder rule, the cycle rule and the size limits', async (folder) => {
    const rules = await rulesFor(`src/${folder}/probe.ts`)
    expect(rules['no-restricted-imports']).toEqual([2, { patterns: restricted(folder) }])
    expect(rules['layers/no-import-cycle']).toEqual([2])
    expect(rules.complexity).toEqual([2, 20])
    expect(rules['max-lines-per-function']).toEqual([2, { max: 60, skipBlankLines: true, skipComments: true }])
    expect(rules['max-lines']).toEqual([2, { max: 400 }])
  })
})
