// The folders of src/ as layers: what each may import. eslint.config.js turns this table into one
// no-restricted-imports block per folder, docs/architecture.md shows it (test/architecture.test.ts
// compares the two), and no-import-cycle (below) refuses a circle of imports inside a folder, type
// imports included. A folder may import itself, the errors catalogue (src/errors.ts, a leaf) and
// the folders listed; nothing imports src/gateway.ts or src/main.ts but main.ts.
import { existsSync, readFileSync } from 'node:fs'
import { dirname, relative, resolve } from 'node:path'
import ts from 'typescript'

/** Folder -> the folders it may import, lowest first. */
export const LAYERS = {
  config: [],
  ops: ['config'],
  store: ['config', 'ops'],
  session: ['config', 'ops', 'store'],
  assertion: ['config', 'ops', 'store', 'session'],
  oauth: ['config', 'ops', 'store', 'session'],
  access: ['config', 'ops', 'session', 'oauth'],
  http: ['config', 'ops', 'store', 'session', 'oauth'],
  proxy: ['config', 'ops', 'session', 'access', 'http'],
  agents: ['config', 'ops', 'store', 'session', 'assertion', 'oauth', 'access'],
  routes: ['config', 'ops', 'store', 'session', 'assertion', 'oauth', 'access', 'http', 'proxy', 'agents'],
}

/** Folders whose code knows nothing of the web framework: plain values and functions, testable without a server. */
export const WITHOUT_FASTIFY = ['config', 'store', 'session', 'assertion', 'oauth', 'access', 'agents']

/** The no-restricted-imports patterns of one folder: every other folder it may not import, and the composition root. */
export function restrictedFor (folder) {
  const allowed = new Set([folder, ...LAYERS[folder]])
  const patterns = Object.keys(LAYERS).filter((other) => !allowed.has(other)).map((other) => ({
    // From a folder's own subfolder (config/validate/) too.
    group: [`../${other}/*`, `../../${other}/*`],
    message: `src/${folder}/ may import only ${LAYERS[folder].map((name) => `src/${name}/`).join(', ') || 'nothing but src/errors.ts'} (eslint/layers.js, docs/architecture.md).`,
  }))
  patterns.push({ group: ['../gateway.js', '../main.js', '../../gateway.js', '../../main.js'], message: 'Only main.ts imports the composition root.' })
  if (WITHOUT_FASTIFY.includes(folder)) {
    patterns.push({ group: ['fastify', 'fastify/*', '@fastify/*'], message: `src/${folder}/ stays free of Fastify: take plain values, return values; the glue is in src/http/ and src/routes/.` })
  }
  return patterns
}

/** Relative imports of a file, resolved to files (`./x.js` is `./x.ts` here), type-only ones included. */
const importsOf = new Map()
function resolvedImports (file) {
  let found = importsOf.get(file)
  if (found) return found
  let text = ''
  try {
    text = readFileSync(file, 'utf8')
  } catch {}
  found = ts.preProcessFile(text, true, true).importedFiles
    .map((entry) => entry.fileName)
    .filter((name) => name.startsWith('.'))
    .map((name) => {
      const target = resolve(dirname(file), name)
      const source = target.replace(/\.js$/, '.ts')
      return existsSync(source) ? source : target
    })
  importsOf.set(file, found)
  return found
}

/** A path of imports from `start` back to `file`, or undefined. Depth-first, each file visited once. */
function pathBack (start, file) {
  const seen = new Set()
  const stack = [[start, [start]]]
  while (stack.length > 0) {
    const [current, path] = stack.pop()
    if (current === file) return path
    if (seen.has(current)) continue
    seen.add(current)
    for (const next of resolvedImports(current)) stack.push([next, [...path, next]])
  }
  return undefined
}

/** `no-import-cycle`: an import (value or type) from which the importing file can be reached again. */
const noImportCycle = {
  meta: { type: 'problem', messages: { cycle: 'Import cycle: {{path}}' }, schema: [] },
  create (context) {
    const file = context.physicalFilename
    const check = (node) => {
      const name = node.source?.value
      if (typeof name !== 'string' || !name.startsWith('.')) return
      const target = resolve(dirname(file), name)
      const source = existsSync(target.replace(/\.js$/, '.ts')) ? target.replace(/\.js$/, '.ts') : target
      const path = pathBack(source, file)
      if (path) context.report({ node, messageId: 'cycle', data: { path: [file, ...path].map((step) => relative(context.cwd, step)).join(' -> ') } })
    }
    return { ImportDeclaration: check, ExportNamedDeclaration: check, ExportAllDeclaration: check }
  },
}

export const layersPlugin = { rules: { 'no-import-cycle': noImportCycle } }
