/* eslint-disable no-template-curly-in-string -- environment variable names in ${VAR} form */
// The schema's outputs stay current (gateway.schema.json, the reference in docs/configuration.md,
// the gateway's validators that `npm run build` writes to src/config/schema.generated.ts),
// and every example config in the repository validates: through the gateway's own checks, and
// through the published schema as an editor reads it (`${VAR}` unreplaced).
import { readFile } from 'node:fs/promises'
import { Ajv } from 'ajv'
import { describe, expect, it } from 'vitest'
import { parse } from 'yaml'
import { parseConfig } from '../../src/config/config.js'
import { GENERATED_VALIDATORS, generatedValidators } from '../../scripts/compile-validators.js'
import { publishedSchema, withReference } from '../../scripts/publish-config.js'

const GOOD_SECRET = 'q3Vt8mJ0bXcE1s7yKp2RzL9wH4dNfA6gUoTiC5eBvMk='
/** What a deployment supplies for variables without a default; the others keep their defaults. */
const ENV = new Proxy<Record<string, string | undefined>>({}, {
  get: (_target, name: string) => name === 'REDIS_URL' ? 'redis://127.0.0.1:6379/0' : /SESSION_SECRET/.test(name) ? GOOD_SECRET : /CLIENT_(ID|SECRET)$|TENANT_ID$/.test(name) ? 'from-the-environment' : /ISSUER$/.test(name) ? 'http://127.0.0.1:9000' : undefined,
})

const SECTIONS = ['server', 'session', 'store', 'state', 'providers', 'routes', 'metrics', 'rateLimit', 'assertion', 'tracing', 'forwardAuth']

/**
 * The YAML blocks of the docs that are whole gateway.yaml files: every top-level key a section, at
 * least one provider, each with its client ID (the others are fragments of one section).
 */
async function docExamples (): Promise<Array<[string, string]>> {
  const pages = ['README.md', ...['assertion', 'configuration', 'forward-auth', 'getting-started', 'operations', 'providers', 'security', 'upstreams'].map((p) => `docs/${p}.md`)]
  const out: Array<[string, string]> = []
  for (const page of pages) {
    const text = await readFile(page, 'utf8')
    for (const [i, match] of [...text.matchAll(/```yaml\n([\s\S]*?)```/g)].entries()) {
      let value: unknown
      try { value = parse(match[1]!) } catch { continue }
      if (isWholeFile(value)) {
        out.push([`${page} block ${i + 1}`, match[1]!])
      }
    }
  }
  return out
}

function isWholeFile (value: unknown): boolean {
  if (typeof value !== 'object' || value === null || Array.isArray(value) || !Object.keys(value).every((key) => SECTIONS.includes(key))) return false
  const providers = Object.values((value as { providers?: Record<string, { clientId?: unknown }> }).providers ?? {})
  return providers.length > 0 && providers.every((provider) => provider?.clientId !== undefined)
}

const FILES = ['gateway.yaml', 'deploy/kubernetes/base/gateway.yaml']
const editorCheck = new Ajv({ allErrors: true, strict: false }).compile(JSON.parse(publishedSchema()))

describe('published from the schema', () => {
  it('gateway.schema.json is current (npm run docs:config)', async () => {
    expect(await readFile('gateway.schema.json', 'utf8')).toBe(publishedSchema())
  })

  it('the validators compiled ahead of time are current (npm run build)', async () => {
    expect(await readFile(GENERATED_VALIDATORS, 'utf8')).toBe(generatedValidators())
  })

  it('the reference in docs/configuration.md is current (npm run docs:config)', async () => {
    const text = await readFile('docs/configuration.md', 'utf8')
    expect(text).toBe(withReference(text))
  })

  it('the reference names every key of the shipped gateway.yaml', async () => {
    const text = await readFile('docs/configuration.md', 'utf8')
    for (const key of ['server.baseUrl', 'providers.<name>.preset', 'providers.<name>.endSession', 'routes[].allow.groups', 'rateLimit.login']) expect(text).toContain(`| \`${key}\` |`)
  })
})

describe('every example config validates', async () => {
  const docs = await docExamples()

  it('finds the docs examples', () => expect(docs.length).toBeGreaterThanOrEqual(3))

  it.each(FILES)('%s passes the gateway\'s checks and the published schema', async (file) => {
    const text = await readFile(file, 'utf8')
    expect(() => parseConfig(text, ENV, file)).not.toThrow()
    expect(editorCheck(parse(text)), JSON.stringify(editorCheck.errors)).toBe(true)
  })

  it.each(docs)('%s passes the gateway\'s checks and the published schema', (name, text) => {
    expect(() => parseConfig(text, ENV, name)).not.toThrow()
    expect(editorCheck(parse(text)), JSON.stringify(editorCheck.errors)).toBe(true)
  })

  it('the published schema flags a misspelt key as an editor would', () => {
    expect(editorCheck({ providers: { demo: { clientId: '${ID}', clientSecrt: 'x' } } })).toBe(false)
    expect(editorCheck({ server: { port: '${GATEWAY_PORT:-8080}', workers: 'auto' } })).toBe(true)
  })
})
