// The layers as the linter keeps them: docs/architecture.md's table says what eslint/layers.js
// says; the folder rule refuses an upward import (type-only ones too) and Fastify below the edge;
// the cycle rule finds a circle of type imports; and src/ as it is passes all of them.
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

describe('src/ as it is', () => {
  /**
   * eslint.config.js's own blocks, each with only the rules of the layers (its `files` and
   * `ignores` as they are), parsed without type information: what `npm run lint` also checks,
   * in a fraction of its time.
   */
  async function layerBlocks (): Promise<Linter.Config[]> {
    // @ts-expect-error eslint.config.js is plain JavaScript, without types
    const { default: config } = await import('../eslint.config.js') as { default: Linter.Config[] }
    const kept = new Set(['no-restricted-imports', 'layers/no-import-cycle', 'complexity', 'max-lines-per-function'])
    return config.flatMap((block) => {
      // A block of ignores alone is the config's global ignores (the generated validators).
      if (block.ignores && Object.keys(block).length === 1) return [block]
      const rules = Object.fromEntries(Object.entries(block.rules ?? {}).filter(([name]) => kept.has(name)))
      if (Object.keys(rules).length === 0) return []
      return [{ ...(block.files ? { files: block.files } : {}), ...(block.ignores ? { ignores: block.ignores } : {}), ...(block.plugins ? { plugins: block.plugins } : {}), rules }]
    })
  }

  it('passes the folder rules, the cycle rule and the size limits of eslint.config.js', async () => {
    const blocks = await layerBlocks()
    expect(blocks.length).toBeGreaterThan(Object.keys(layers).length)
    const eslint = new ESLint({
      cwd: new URL('..', import.meta.url).pathname,
      overrideConfigFile: true,
      overrideConfig: [{ files: ['**/*.ts'], languageOptions: { parser: tseslint.parser as Linter.Parser }, linterOptions: { reportUnusedDisableDirectives: 'off' } }, ...blocks],
    })
    const results = await eslint.lintFiles(['src/**/*.ts'])
    const problems = results.flatMap((result) => result.messages.map((message) => `${result.filePath}:${message.line} ${message.message}`))
    expect(problems).toEqual([])
  })
})
