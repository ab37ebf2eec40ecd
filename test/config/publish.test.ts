/* eslint-disable no-template-curly-in-string -- environment variable names in ${VAR} form */
// The schema's outputs stay current (gateway.schema.json, the reference in docs/configuration.md,
// the gateway's validators that `npm run build` writes to src/config/schema.generated.ts),
// and every example config in the repository validates: through the gateway's own checks, and
// through the published schema as an editor reads it (`${VAR}` unreplaced).
import { readFile } from 'node:fs/promises'
import { Ajv } from 'ajv'
import { describe, expect, it } from 'vitest'
import { parse } from 'yaml'
import { ConfigError, parseConfig } from '../../src/config/config.js'
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

/**
 * The rules on one value that live in the schema: an editor validating gateway.yaml against
 * gateway.schema.json refuses each of these values where --check does, and --check says it there
 * in the schema's words ("must be <expected>, got ...").
 */
describe('an editor reports what --check reports', () => {
  const BASE = { session: { secret: GOOD_SECRET }, providers: { demo: { clientId: 'id', clientSecret: 'secret', issuer: 'http://127.0.0.1:9000', scope: 'openid' } } }
  const route = (extra: Record<string, unknown>) => ({ ...BASE, routes: [{ path: '/app/', upstream: 'http://127.0.0.1:9100', provider: 'demo', ...extra }] })
  it.each<[string, Record<string, unknown>, string, string]>([
    ['a cookie name with a space', { ...BASE, session: { secret: GOOD_SECRET, cookieName: 'gw session' } }, 'session.cookieName', 'must be a cookie name'],
    ['a cookie name with ;', { ...BASE, session: { secret: GOOD_SECRET, cookieName: 'gw;x=1' } }, 'session.cookieName', 'must be a cookie name'],
    ['a provider name with a space', { ...BASE, providers: { 'bad name': BASE.providers.demo } }, 'providers.bad name', 'must be a provider name'],
    ['a provider name with a dot', { ...BASE, providers: { 'a.b': BASE.providers.demo } }, 'providers.a.b', 'must be a provider name'],
    ['a route path without /', route({ path: 'app/' }), 'routes[0].path', 'must be a path prefix'],
    ['a route path with a glob', route({ path: '/app/*' }), 'routes[0].path', 'must be a path prefix'],
    ['a route path with a query', route({ path: '/app?x' }), 'routes[0].path', 'must be a path prefix'],
    ['a route path under /oauth/', route({ path: '/oauth/app/' }), 'routes[0].path', 'outside the gateway\'s own /oauth/'],
    ['the route path /healthz/', route({ path: '/healthz//' }), 'routes[0].path', 'outside the gateway\'s own'],
    ['the route path /metrics', route({ path: '/metrics' }), 'routes[0].path', 'outside the gateway\'s own'],
    ['a rewritePrefix without /', route({ rewritePrefix: 'api' }), 'routes[0].rewritePrefix', 'must be a path that starts with /'],
    ['a public entry without a method', route({ public: ['/app/static/*'] }), 'routes[0].public[0]', 'must be "METHOD /path/glob"'],
    ['a public entry with an unknown method', route({ public: ['FETCH /app/x'] }), 'routes[0].public[0]', 'must be "METHOD /path/glob"'],
    ['a public entry with a third word', route({ public: ['GET /app/x y'] }), 'routes[0].public[0]', 'must be "METHOD /path/glob"'],
    ['a method with a digit', route({ allow: [{ methods: ['GET2'] }] }), 'routes[0].allow[0].methods[0]', 'must be a request method'],
    ['two methods in one entry', route({ deny: [{ methods: ['GET POST'] }] }), 'routes[0].deny[0].methods[0]', 'must be a request method'],
    ['a wildcard e-mail address', route({ allow: [{ emails: ['*@example.com'] }] }), 'routes[0].allow[0].emails[0]', 'must be one e-mail address'],
    ['an e-mail address with two @', route({ allow: [{ emails: ['a@b@example.com'] }] }), 'routes[0].allow[0].emails[0]', 'must be one e-mail address'],
    ['a domain written as a URL', route({ allow: [{ domains: ['https://example.com'] }] }), 'routes[0].allow[0].domains[0]', 'must be a domain'],
    ['a wildcard domain', route({ allow: [{ domains: ['*.example.com'] }] }), 'routes[0].allow[0].domains[0]', 'must be a domain'],
    ['an identity header with _', route({ identityHeaders: { user: 'X_App_User' } }), 'routes[0].identityHeaders.user', 'must be a header name of letters, digits and "-" only'],
    ['a claim header with .', route({ headers: { 'X.Roles': 'claims.roles' } }), 'routes[0].headers.X.Roles', 'must be a header name of letters, digits and "-" only'],
    ['an assertion header with a space', { ...BASE, assertion: { header: 'X Bad' } }, 'assertion.header', 'must be a header name of letters, digits and "-" only'],
    ['an acr with a space', route({ reauth: { maxAge: '15m', acr: ['a b'] } }), 'routes[0].reauth.acr[0]', 'must be printable ASCII'],
    ['an acr with a quote', route({ reauth: { maxAge: '15m', acr: ['a"b'] } }), 'routes[0].reauth.acr[0]', 'must be printable ASCII'],
  ])('%s', (_case, config, path, message) => {
    expect(editorCheck(config), 'the published schema refuses it').toBe(false)
    let error: unknown
    try { parseConfig(JSON.stringify(config), {}, 'gateway.yaml') } catch (caught) { error = caught }
    expect(error).toBeInstanceOf(ConfigError)
    expect((error as ConfigError).problems).toContainEqual(expect.objectContaining({ path, message: expect.stringContaining(message) }))
  })

  it('gives no pass to a ${VAR} inside a value with a form, only to one that is the whole value', () => {
    expect(editorCheck(route({ path: '/oauth/${X}' }))).toBe(false)
    expect(editorCheck(route({ identityHeaders: { user: 'X_User${X}' } }))).toBe(false)
    expect(editorCheck({ ...BASE, session: { secret: GOOD_SECRET, cookieName: 'gw;${X}' } })).toBe(false)
    expect(editorCheck(route({ path: '${APP_PATH}', timeout: '${TIMEOUT:-30s}' })), JSON.stringify(editorCheck.errors)).toBe(true)
  })

  it('and passes what both accept, written with spaces around it and in any case', () => {
    const config = route({ public: [' get /app/static/* ', 'OPTIONS *'], allow: [{ methods: [' post '], emails: [' Alice@Example.com '], domains: ['@example.org'] }], rewritePrefix: '/' })
    expect(editorCheck(config), JSON.stringify(editorCheck.errors)).toBe(true)
    expect(() => parseConfig(JSON.stringify(config), {}, 'gateway.yaml')).not.toThrow()
  })
})
