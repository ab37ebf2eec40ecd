// What the gateway loads when it runs is in package.json's `dependencies`: the image installs those
// only (`npm prune --omit=dev`), so a module the built gateway imports from a devDependency would
// start in every test here and fail in the container. Follows dist/src/main.js's imports, static
// and dynamic, through the built files (types are erased there, so type-only imports do not count).
import { existsSync, readFileSync } from 'node:fs'
import { builtinModules, createRequire } from 'node:module'
import { dirname, resolve } from 'node:path'
import ts from 'typescript'
import { describe, expect, it } from 'vitest'

const root = new URL('..', import.meta.url).pathname

/** The packages the built gateway imports, by the built file that imports each first. */
function runtimePackages (entry: string): Map<string, string> {
  const packages = new Map<string, string>()
  const seen = new Set<string>()
  const queue = [entry]
  while (queue.length > 0) {
    const file = queue.pop()!
    if (seen.has(file)) continue
    seen.add(file)
    for (const { fileName } of ts.preProcessFile(readFileSync(file, 'utf8'), true, true).importedFiles) {
      if (fileName.startsWith('.')) {
        const target = resolve(dirname(file), fileName)
        if (existsSync(target)) queue.push(target)
        continue
      }
      const name = fileName.startsWith('@') ? fileName.split('/').slice(0, 2).join('/') : fileName.split('/')[0]!
      if (fileName.startsWith('node:') || builtinModules.includes(name)) continue
      if (!packages.has(name)) packages.set(name, file.slice(root.length))
    }
  }
  return packages
}

describe('the built gateway', () => {
  it('imports only packages listed in dependencies (the image has no devDependencies)', () => {
    const manifest = JSON.parse(readFileSync(`${root}package.json`, 'utf8')) as { dependencies: Record<string, string> }
    const packages = runtimePackages(`${root}dist/src/main.js`)
    expect(packages.size).toBeGreaterThan(5)
    const missing = [...packages].filter(([name]) => manifest.dependencies[name] === undefined).map(([name, file]) => `${name} (imported by ${file})`)
    expect(missing).toEqual([])
  })

  it('loads the one proxy-addr Fastify uses, so the two agree on who is a trusted proxy (src/http/trust-proxy.ts)', () => {
    const ours = createRequire(import.meta.url).resolve('@fastify/proxy-addr')
    const fastifys = createRequire(createRequire(import.meta.url).resolve('fastify')).resolve('@fastify/proxy-addr')
    expect(fastifys).toBe(ours)
  })
})
