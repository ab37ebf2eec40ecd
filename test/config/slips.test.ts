// One indentation slip gives one problem that says which way the key slipped and what to line it
// up with: a table of the usual slips with their exact problems, then the rule checked against the
// schema itself: every key of every section, written one level too far left, is one problem that
// names the section, and nothing else is reported.
import { describe, expect, it } from 'vitest'
import { ConfigError, parseConfig, type ConfigProblem } from '../../src/config/config.js'
import { schema } from '../../src/config/schema.generated.js'

/** A variable as gateway.yaml writes one. */
const PREVIOUS = ['$', '{GATEWAY_PREVIOUS_SECRET}'].join('')
const SECRET = 'q3Vt8mJ0bXcE1s7yKp2RzL9wH4dNfA6gUoTiC5eBvMk='

function problems (text: string): ConfigProblem[] {
  try {
    parseConfig(text, {})
  } catch (error) {
    if (error instanceof ConfigError) return error.problems
    throw error
  }
  return []
}

const p = (path: string, line: number | undefined, message: string, hint?: string): ConfigProblem => ({ path, line, message, ...(hint ? { hint } : {}) })

const SESSION = `session:\n  secret: ${SECRET}\n`
const PROVIDERS = 'providers:\n  demo:\n    clientId: c\n    clientSecret: s\n    issuer: https://op.example.org\n    scope: openid\n'
const ROUTES = 'routes:\n  - path: /app/\n    upstream: http://127.0.0.1:9100\n    provider: demo\n'

const CASES: Array<[name: string, text: string, expected: ConfigProblem[]]> = [
  ['provider keys dedented to the top level',
    `${SESSION}providers:\n  demo:\n    clientId: c\nclientSecret: s\nissuer: https://op.example.org\nscope: openid\n${ROUTES}`,
    [p('clientSecret', 6, 'is at the top level, but is a key of providers.demo (as are `issuer` and `scope` after it)', 'probably indented too little: line them up with `clientId` on line 5')]],
  ['provider keys dedented to the level of the provider names',
    `${SESSION}providers:\n  demo:\n  clientId: c\n  clientSecret: s\n  issuer: https://op.example.org\n  scope: openid\n${ROUTES}`,
    [p('providers.clientId', 5, 'is in providers, but is a key of providers.demo (as are `clientSecret`, `issuer` and `scope` after it)', 'probably indented too little: indent them under `demo:` on line 4')]],
  ['the only key of a section dedented',
    `session:\nsecret: ${SECRET}\n${PROVIDERS}${ROUTES}`,
    [p('secret', 2, 'is at the top level, but is a key of session', 'probably indented too little: indent it under `session:` on line 1')]],
  ['route keys dedented to the top level',
    `${SESSION}${PROVIDERS}routes:\n  - path: /app/\nupstream: http://127.0.0.1:9100\nprovider: demo\n`,
    [p('upstream', 11, 'is at the top level, but is a key of routes[0] (as is `provider` after it)', 'probably indented too little: line them up with `path` on line 10')]],
  ['a section indented into the one above it',
    `session:\n  secret: ${SECRET}\n  providers:\n    demo:\n      clientId: c\n      clientSecret: s\n      issuer: https://op.example.org\n      scope: openid\n${ROUTES}`,
    [p('session.providers', 3, 'is in session, but is a key of the top level', 'probably indented too far: line it up with `session` on line 1')]],
  ['only a section\'s header indented into the section above it, its keys left where they were',
    `server:\n  port: 8080\n  session:\n  cookieName: gw\n  secret: ${SECRET}\n  ttl: 8h\n${PROVIDERS}${ROUTES}`,
    [p('server.session', 3, 'is in server, but is a key of the top level; `cookieName`, `secret` and `ttl` after it belong to session', 'probably indented too far: line it up with `server` on line 1')]],
  ['only the providers: header indented into the section above it',
    `${SESSION}state:\n  ttl: 5m\n  providers:\n  demo:\n    clientId: c\n    clientSecret: s\n    issuer: https://op.example.org\n    scope: openid\n${ROUTES}`,
    [p('state.providers', 5, 'is in state, but is a key of the top level; `demo` after it belongs to providers', 'probably indented too far: line it up with `state` on line 3')]],
  ['a key of a section indented into a mapping inside it',
    `${SESSION}${PROVIDERS}${ROUTES}store:\n  type: redis\n  sentinel:\n    name: mymaster\n    nodes: ["10.0.0.1:26379"]\n    keyPrefix: "gw:"\n`,
    [p('store.sentinel.keyPrefix', 18, 'is in store.sentinel, but is a key of store', 'probably indented too far: line it up with `sentinel` on line 15')]],
  ['providers: misspelt as provider: is one problem, not also each route\'s provider',
    `${SESSION}provider:\n  demo:\n    clientId: c\n    clientSecret: s\n    issuer: https://op.example.org\n    scope: openid\n${ROUTES}`,
    [p('provider', 3, 'unknown key', 'did you mean `providers`?')]],
  ['a route key indented under the one before it',
    `${SESSION}${PROVIDERS}routes:\n  - path: /app/\n      upstream: http://127.0.0.1:9100\n    provider: demo\n`,
    [p('YAML syntax', 11, '`upstream` starts at column 7, right of `path` on line 10 (column 5)', 'a key under `path` needs `path:` to end its line; if it is another key of the same mapping, line it up with `path`')]],
  ['one key in the middle of a provider dedented (the keys around it are in line)',
    `${SESSION}providers:\n  demo:\n    scope: openid\n  issuer: https://op.example.org\n    clientId: c\n    clientSecret: s\n${ROUTES}`,
    [p('YAML syntax', 6, '`issuer` starts at column 3, left of `scope` on line 5 and `clientId` on line 7 (column 5)', 'line it up with `scope` and `clientId`')]],
  // A newcomer's finding: the message counted the tab as one column, where the editor showed it lined up.
  ['a provider key indented with a tab',
    `${SESSION}providers:\n  demo:\n    clientId: c\n    clientSecret: s\n\tissuer: https://op.example.org\n    scope: openid\n${ROUTES}`,
    [p('YAML syntax', 7, 'line 7 is indented with a tab, and YAML indents with spaces only', 'indent it with spaces, lined up with the key it belongs beside')]],
  // A newcomer's finding (rotating the session secret): YAML's own message said nothing of what to write.
  ['a variable in a [ ] list',
    `session:\n  secret: ${SECRET}\n  previousSecrets: [${PREVIOUS}]\n${PROVIDERS}${ROUTES}`,
    [p('YAML syntax', 3, `Missing , or : between flow sequence items: ${PREVIOUS} inside [ ] or { } reads as a mapping`, `quote it ("${PREVIOUS}"), or write the list one item a line (- ${PREVIOUS})`)]],
  ['route keys dedented inside the list item',
    `${SESSION}${PROVIDERS}routes:\n  - path: /app/\n  upstream: http://127.0.0.1:9100\n  provider: demo\n`,
    [p('YAML syntax', 11, '`upstream` starts at column 3, left of `path` on line 10 (column 5)', 'line it up with `path`, or with the key of the mapping it belongs to')]],
  ['a top-level key indented under a route',
    `${SESSION}${PROVIDERS}${ROUTES}  server:\n    port: 8080\n`,
    [p('YAML syntax', 13, '`server` starts at column 3, left of `provider` on line 12 (column 5)', 'line it up with `provider`, or with the key of the mapping it belongs to')]],
  ['a key of a section written without its section',
    `port: 1\n${SESSION}${PROVIDERS}${ROUTES}`,
    [p('port', 1, 'unknown key here: it is a key of server', 'write it under `server`')]],
  ['a key of several sections written without one',
    `timeout: 5s\n${SESSION}${PROVIDERS}${ROUTES}`,
    [p('timeout', 1, 'unknown key here: it is a key of store or routes[] or providers.<name>', 'write it under the one it belongs to')]],
  ['a misspelt key is still "did you mean", not a slip',
    `${SESSION}${PROVIDERS}${ROUTES}servr:\n  port: 8080\n`,
    [p('servr', 13, 'unknown key', 'did you mean `server`?')]],
  ['a key that belongs nowhere above it is still an unknown key',
    `${SESSION}${PROVIDERS}${ROUTES}colour: blue\n`,
    [p('colour', 13, 'unknown key (expected one of: server, session, store, state, providers, routes, metrics, rateLimit, assertion, agents, tracing, forwardAuth)')]],
]

describe('an indentation slip is one problem', () => {
  it('the base of the table is valid', () => expect(problems(`${SESSION}${PROVIDERS}${ROUTES}`)).toEqual([]))

  it.each(CASES)('%s', (_name, text, expected) => {
    expect(problems(text)).toEqual(expected)
  })
})

interface Node { type?: string, properties?: Record<string, Node>, patternProperties?: Record<string, Node>, items?: Node }
const root = schema as Node
const topKeys = Object.keys(root.properties!)
/** Sections whose keys are fixed (not a mapping of names such as forwardAuth.hosts). */
const sections = topKeys.filter((name) => root.properties![name]!.properties !== undefined)

// A re-reading's finding: a variable in a comment or a quoted scalar of the line was blamed too.
describe('a variable on a line YAML refuses for another reason', () => {
  it.each([
    ['a block list item with a comment naming a [variable]', `  previousSecrets:\n    - "x" "y"   # was [${PREVIOUS}]\n`],
    ['a flow list of quoted items missing a comma, its comment naming a [variable]', `  previousSecrets: ["a" "b"]   # was [${PREVIOUS}]\n`],
    ['a quoted string that holds a comma and a variable', `  previousSecrets: ["a,${PREVIOUS}" "b"]\n`],
    ['a single-quoted one', `  previousSecrets: ['a,${PREVIOUS}' 'b']\n`],
  ])('%s: not blamed on the variable', (_name, lines) => {
    const found = problems(`session:\n  secret: ${SECRET}\n${lines}${PROVIDERS}${ROUTES}`)
    expect(found).toHaveLength(1)
    expect(found[0]!.message).not.toMatch(/reads as a mapping/)
  })
})

describe('the rule agrees with the schema', () => {
  const cases = sections.flatMap((section) => Object.keys(root.properties![section]!.properties!)
    // A key that is also a section's name at the top level is that section there: not a slip.
    .filter((key) => !topKeys.includes(key))
    .map((key) => [section, key] as const))

  it('covers every section', () => expect(new Set(cases.map(([section]) => section)).size).toBe(sections.length))

  it.each(cases)('%s.%s dedented to the top level is one problem naming %s', (section, key) => {
    const rest = section === 'session' ? '' : SESSION
    const text = `${rest}${PROVIDERS}${ROUTES}${section}:\n${key}: x\n`
    const found = problems(text)
    expect(found).toHaveLength(1)
    expect(found[0]).toMatchObject({ path: key, message: `is at the top level, but is a key of ${section}` })
  })

  /** A valid provider and route, as `key: value` lines, with `key` taken out to be written dedented. */
  const BASE_PROVIDER: Record<string, string> = { clientId: 'c', clientSecret: 's', issuer: 'https://op.example.org', scope: 'openid' }
  const BASE_ROUTE: Record<string, string> = { path: '/app/', upstream: 'http://127.0.0.1:9100', provider: 'demo' }
  const without = (base: Record<string, string>, key: string, indent: string): string =>
    Object.entries(base).filter(([name]) => name !== key).map(([name, value], i) => `${indent.replace(/- $/, i === 0 ? '- ' : '  ')}${name}: ${value}\n`).join('')

  const provider = root.properties!.providers!.patternProperties!
  const providerKeys = Object.keys(Object.values(provider)[0]!.properties!).filter((key) => !topKeys.includes(key))
  it.each(providerKeys)('providers.demo.%s dedented to the top level is one problem naming providers.demo', (key) => {
    const found = problems(`${SESSION}providers:\n  demo:\n${without(BASE_PROVIDER, key, '    ')}${key}: x\n${ROUTES}`)
    expect(found).toHaveLength(1)
    expect(found[0]).toMatchObject({ path: key, message: 'is at the top level, but is a key of providers.demo' })
  })

  const routeKeys = Object.keys(root.properties!.routes!.items!.properties!).filter((key) => !topKeys.includes(key))
  it.each(routeKeys)('routes[0].%s dedented to the top level is one problem naming routes[0]', (key) => {
    const found = problems(`${SESSION}${PROVIDERS}routes:\n${without(BASE_ROUTE, key, '  - ')}${key}: x\n`)
    expect(found).toHaveLength(1)
    expect(found[0]).toMatchObject({ path: key, message: 'is at the top level, but is a key of routes[0]' })
  })
})
