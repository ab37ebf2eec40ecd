/* eslint-disable no-template-curly-in-string -- these tests are about ${VAR} text in config values */
// gateway.yaml loading: substitution, durations, defaults, and every problem reported with its key
// path and line; the CLI's --check.
import { execFile } from 'node:child_process'
import { mkdtemp, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { promisify } from 'node:util'
import { describe, expect, it } from 'vitest'
import { configProblems } from '../helpers/config.js'
import { growth } from '../helpers/cost.js'
import { loadConfig, parseConfig, parseDuration, parseSize } from '../../src/config/config.js'

const GOOD = `
server:
  port: 8081
  baseUrl: https://gw.example.org/
session:
  secret: \${SECRET}
store:
  type: redis
  url: redis://127.0.0.1:6380/1
providers:
  demo:
    clientId: \${CLIENT_ID:-demo}
    clientSecret: "\${CLIENT_SECRET}"
    issuer: https://op.example.org
    authorizeUrl: https://op.example.org/auth
    tokenUrl: https://op.example.org/token
    scope: openid profile
routes:
  - path: /app/
    upstream: http://127.0.0.1:9100
    provider: demo
    timeout: 5m
  - path: /public
    upstream: http://127.0.0.1:9101
    auth: none
`
const SECRET = 'q3Vt8mJ0bXcE1s7yKp2RzL9wH4dNfA6gUoTiC5eBvMk='
const ENV = { SECRET, CLIENT_SECRET: 'has # and : inside' }

const problems = (text: string, env: Record<string, string> = ENV): string[] => configProblems(text, env)

describe('config: a good file', () => {
  it('loads with substitution, defaults and normalised values', () => {
    const config = parseConfig(GOOD, ENV)
    expect(config.server).toEqual({ host: '0.0.0.0', port: 8081, baseUrl: 'https://gw.example.org', trustProxy: false, shutdownTimeoutMs: 10_000, workers: 1 })
    expect(config.session).toEqual({ cookieName: 'gw_session', secret: SECRET, ttlMs: 8 * 3_600_000, cookieSecure: true, cacheTtlMs: 1000, cookieDomain: undefined, maxAgeMs: 7 * 86_400_000, previousSecrets: [] })
    expect(config.state.ttlMs).toBe(300_000)
    expect(config.providers.demo).toMatchObject({ name: 'demo', clientId: 'demo', clientSecret: 'has # and : inside', pkce: true, timeoutMs: 10_000 })
    expect(config.routes[0]).toMatchObject({ path: '/app', timeoutMs: 300_000, maxConnections: 128, auth: 'required', provider: 'demo' })
    expect(config.routes[1]).toMatchObject({ path: '/public', auth: 'none', provider: undefined })
  })

  it('reads a route\'s pool limit (maxConnections)', () => {
    const config = parseConfig('routes: [{ path: /a, upstream: "http://127.0.0.1:1", auth: none, maxConnections: 10 }]', ENV)
    expect(config.routes[0]!.maxConnections).toBe(10)
  })

  it('reads a Sentinel store\'s users, passwords from variables, and TLS', () => {
    const text = 'store: { type: redis, sentinel: { name: m, nodes: ["10.0.0.1:26379"], username: gw, password: "${REDIS_PASSWORD}", sentinelUsername: watcher, sentinelPassword: "${SENTINEL_PASSWORD}", tls: true } }'
    expect(parseConfig(text, { REDIS_PASSWORD: 'r-pass', SENTINEL_PASSWORD: 's-pass' }).store.sentinel).toEqual({
      name: 'm', nodes: ['10.0.0.1:26379'], username: 'gw', password: 'r-pass', sentinelUsername: 'watcher', sentinelPassword: 's-pass', tls: true,
    })
  })

  it('refuses every value still holding the deployment placeholder REPLACE-ME, once each', () => {
    const text = [
      'session: { secret: REPLACE-ME }',
      'store: { type: redis, url: "redis://REPLACE-ME:6379/0" }',
      'providers: { demo: { clientId: gateway, clientSecret: REPLACE-ME, authorizeUrl: "https://id.example.com/a", tokenUrl: "https://id.example.com/t", scope: read } }',
      'routes: [{ path: /app/, upstream: "http://127.0.0.1:1", provider: demo }]',
    ].join('\n')
    const hint = 'still holds the placeholder REPLACE-ME: set the real value (see docs/deployment.md, "Secrets")'
    expect(problems(text)).toEqual([
      `session.secret: ${hint} (line 1)`,
      `store.url: ${hint} (line 2)`,
      `providers.demo.clientSecret: ${hint} (line 3)`,
    ])
  })

  it('signs identity assertions only when the file has an assertion section or a route asks for them (never by a default)', () => {
    const route = 'routes: [{ path: /a, upstream: "http://127.0.0.1:1", auth: none }]'
    expect(parseConfig(route, ENV).assertion.enabled).toBe(false)
    expect(parseConfig(`${route}\nassertion: {}`, ENV).assertion.enabled).toBe(true)
    expect(parseConfig(GOOD.replace(/provider: demo/, 'provider: demo\n    assertion: true'), ENV).assertion.enabled).toBe(true)
  })

  it('a secret containing "#" or ": " cannot change the structure', () => {
    const config = parseConfig(GOOD, { ...ENV, CLIENT_ID: 'a: b # c\nroutes: []' })
    expect(config.providers.demo!.clientId).toBe('a: b # c\nroutes: []')
    expect(config.routes).toHaveLength(2)
  })

  it('numbers and booleans may come from variables', () => {
    const config = parseConfig('server: { host: 127.0.0.1, port: "${P}", trustProxy: "${T}" }', { P: '9000', T: 'true' })
    expect(config.server.port).toBe(9000)
    expect(config.server.trustProxy).toBe(true)
  })

  it('an empty file is the zero-setup default: memory store, random secret, no routes', () => {
    const config = parseConfig('', {})
    expect(config.store.type).toBe('memory')
    expect(config.store.timeoutMs).toBe(500)
    expect(parseConfig('store: { timeout: 2s }', {}).store.timeoutMs).toBe(2000)
    expect(config.session.secret).toBeUndefined()
    expect(config.routes).toEqual([])
  })

  it('the shipped gateway.yaml is valid with no environment at all', async () => {
    const config = await loadConfig('gateway.yaml', {})
    expect(config.routes.map((r) => r.path)).toEqual(['/app'])
    expect(config.store.type).toBe('memory')
  })

  it.each([
    ['300', 300_000], [300, 300_000], ['300s', 300_000], ['5m', 300_000], ['8h', 28_800_000], ['250ms', 250], ['1d', 86_400_000],
  ])('duration %j is %d ms', (input, ms) => {
    expect(parseDuration(input)).toBe(ms)
  })
})

describe('config: every problem names its key path', () => {
  it.each([
    ['an unknown key (a typo)', 'server:\n  prot: 80\n', ['server.prot: unknown key; did you mean `port`? (line 2)']],
    ['a missing variable', 'session:\n  secret: ${NOPE}\n', ['session.secret: environment variable NOPE is not set; set NOPE in the environment; a default written in the file would be the same secret wherever the file is used (line 2)']],
    ['a port out of range', 'server: { port: 70000 }', ['server.port: must be an integer from 0 to 65535, got 70000 (line 1)']],
    ['a short secret', 'session: { secret: short }', ['session.secret: must be at least 32 characters, got 5; generate one with "openssl rand -base64 32" (line 1)']],
    ['a bad duration', 'state: { ttl: soon }', ['state.ttl: must be a duration such as 300, 300s, 5m or 8h, got "soon" (line 1)']],
    ['a duration out of range', 'state: { ttl: 2h }', ['state.ttl: must be between 10s and 1h, got "2h" (line 1)']],
    ['a lifetime beyond its range, said in days as the docs say it', 'session: { maxAge: 500d }', ['session.maxAge: must be between 5m and 400d, got "500d" (line 1)']],
    ['a bad store type', 'store: { type: mongo }', ['store.type: must be one of redis, memory, got "mongo" (line 1)']],
    ['a non-redis store url', 'store: { type: redis, url: "http://x" }', ['store.url: must be a redis or rediss URL, got "http://x" (line 1)']],
    ['a store timeout too short', 'store: { timeout: 10ms }', ['store.timeout: must be between 50ms and 30s, got "10ms" (line 1)']],
    ['a store timeout too long', 'store: { timeout: 1m }', ['store.timeout: must be between 50ms and 30s, got "1m" (line 1)']],
    ['two store forms', 'store: { type: redis, url: "redis://a", cluster: ["redis://b:7000"] }', ['store: give only one of url, cluster or sentinel (got url and cluster) (line 1)']],
    // Said of the node, not of its type ("must be a string", of a string), and without its password.
    ['a sentinel node with credentials', 'store: { type: redis, sentinel: { name: m, nodes: ["default:s3cret@10.0.0.1:26379"] } }',
      ['store.sentinel.nodes[0]: must be "host:port" (a password goes in sentinelPassword, not here), got "default:***@10.0.0.1:26379" (line 1)']],
    ['a store url with a password that is not redis', 'store: { type: redis, url: "http://u:s3cret@x" }', ['store.url: must be a redis or rediss URL, got "http://u:***@x" (line 1)']],
    ['a store url whose password holds a / (no URL, its password still masked)', 'store: { type: redis, url: "redis://:Zx9/Qw+Lk3PASS@redis:6379/0" }', ['store.url: must be a URL, got "redis://:***@redis:6379/0" (line 1)']],
    ['a store url whose password holds a / and an @', 'store: { type: redis, url: "redis://u:a/b@c@redis:6379/0" }', ['store.url: must be a URL, got "redis://u:***@redis:6379/0" (line 1)']],
    ['a sentinel user without a password', 'store: { type: redis, sentinel: { name: m, nodes: ["a:1"], username: gw, sentinelUsername: watcher } }',
      ['store.sentinel.password: is required with username (line 1)', 'store.sentinel.sentinelPassword: is required with sentinelUsername (line 1)']],
    ['a bad base URL', 'server: { baseUrl: "ftp://x" }', ['server.baseUrl: must be a http or https URL, got "ftp://x" (line 1)']],
    ['providers not a mapping', 'providers: [a]', ['providers: must be a mapping of provider name to settings, got a list (line 1)']],
    ['routes not a list', 'routes: {}', ['routes: must be a list of routes, got a mapping (line 1)']],
    ['a route pool of no connections', 'routes: [{ path: /a, upstream: "http://127.0.0.1:1", auth: none, maxConnections: 0 }]', ['routes[0].maxConnections: must be an integer from 1 to 10000, got 0 (line 1)']],
  ])('%s', (_name, text, expected) => {
    expect(problems(text)).toEqual(expected)
  })

  it('collects every problem of a provider and a route at once', () => {
    const text = `
providers:
  "bad name":
    clientId: ""
    authorizeUrl: not-a-url
    tokenUrl: ftp://op/token
    pkce: maybe
routes:
  - path: app
    upstream: ftp://x
    provider: nope
  - path: /oauth/x
    upstream: http://127.0.0.1:1/base
    auth: none
    websocket: maybe
`
    expect(problems(text)).toEqual([
      'providers.bad name: must be a provider name (letters, digits, - and _), got "bad name" (line 3)',
      'providers.bad name.clientSecret: is required with clientId; leave out both for a provider whose tokens machine clients bring (a token-only issuer) (line 3)',
      'providers.bad name.scope: is required; or set preset: github, gitlab, google, microsoft, keycloak (line 3)',
      'providers.bad name.clientId: must not be empty (line 4)',
      'providers.bad name.authorizeUrl: must be a URL, got "not-a-url" (line 5)',
      'providers.bad name.tokenUrl: must be a http or https URL, got "ftp://op/token" (line 6)',
      'providers.bad name.pkce: must be true or false, got "maybe" (line 7)',
      'routes[0].path: must be a path prefix such as /app/, outside the gateway\'s own /oauth/, /healthz, /readyz and /metrics, got "app" (line 9)',
      'routes[0].upstream: must be a http or https URL, got "ftp://x" (line 10)',
      'routes[0].provider: names no configured provider; known: bad name (line 11)',
      "routes[1].path: must be a path prefix such as /app/, outside the gateway's own /oauth/, /healthz, /readyz and /metrics, got \"/oauth/x\" (line 12)",
      'routes[1].upstream: must be an origin such as http://127.0.0.1:9100 (map paths with rewritePrefix), got "http://127.0.0.1:1/base" (line 13)',
      'routes[1].websocket: must be true or false, got "maybe" (line 15)',
    ])
  })

  it('reports YAML syntax errors', () => {
    expect(problems('server: [unclosed')[0]).toMatch(/^YAML syntax: /)
  })

  it('reports an unreadable file', async () => {
    await expect(loadConfig('/nonexistent/gateway.yaml')).rejects.toThrow('/nonexistent/gateway.yaml: no such file; give the config file with --config PATH or the GATEWAY_CONFIG environment variable')
  })
})

describe('config: sizes (parseSize, shared by every size key)', () => {
  it.each([
    [0, 0], [1048576, 1_048_576], ['1048576', 1_048_576], ['64KiB', 65_536], ['64kib', 65_536], ['1MiB', 1_048_576], [' 1 MiB ', 1_048_576],
    ['1GiB', 1024 ** 3], ['1.5MiB', 1_572_864], ['1KB', 1000], ['2MB', 2_000_000], ['1GB', 1e9], ['512B', 512], ['512b', 512], ['1024GiB', 1024 ** 4],
  ])('%j is %d bytes', (input, bytes) => {
    expect(parseSize(input)).toBe(bytes)
  })

  it.each([
    ['a negative number', -1], ['a fraction of a byte', 0.5], ['a fraction of a byte from a unit', '1.5B'], ['NaN', Number.NaN], ['Infinity', Infinity],
    ['a number past 2^53', 2 ** 60], ['more than 1 TiB', '1025GiB'], ['an exponent', '1e6'], ['hex', '0x100'], ['a sign', '+1MiB'], ['a minus', '-1MiB'],
    ['an unknown unit', '1TiB'], ['a unit alone', 'MiB'], ['bits', '1Mbit'], ['two numbers', '1 2MiB'], ['two units', '1KiBMiB'],
    ['a trailing dot', '1.MiB'], ['empty', ''], ['spaces', '   '], ['17 digits', '1'.repeat(17)], ['a comma', '1,024'], ['an underscore', '1_024'],
    ['a fullwidth digit', '１MiB'], ['a NUL', '1\u0000MiB'], ['a newline inside', '1\nMiB'], ['an object', { bytes: 1 }], ['a list', [1]], ['null', null], ['true', true],
  ])('refuses %s (%j)', (_name, input) => {
    expect(parseSize(input)).toBeUndefined()
  })

  it('runs in linear time on a long hostile value', () => {
    // 4 times the input: about 4 times the CPU when linear, about 16 when quadratic.
    const hostile = (n: number) => `${'1'.repeat(n)}.${'1'.repeat(n)}x`
    expect(growth(parseSize, hostile(4000), hostile(16_000))).toBeLessThan(8)
  })
})

describe('config: routes[].websocketMaxMessage', () => {
  const route = (value?: unknown) => `routes: [{ path: /live, upstream: "http://127.0.0.1:1", auth: none, websocket: true${value === undefined ? '' : `, websocketMaxMessage: ${JSON.stringify(value)}`} }]`

  it('is 1 MiB by default', () => {
    expect(parseConfig(route(), ENV).routes[0]!.websocketMaxMessage).toBe(1_048_576)
  })

  it.each([[65536, 65_536], ['64KiB', 65_536], ['16MiB', 16_777_216], ['1KiB', 1024], ['1GiB', 1024 ** 3]])('reads %j as %d bytes', (value, bytes) => {
    expect(parseConfig(route(value), ENV).routes[0]!.websocketMaxMessage).toBe(bytes)
  })

  it('reads a size from a variable', () => {
    expect(parseConfig('routes: [{ path: /live, upstream: "http://127.0.0.1:1", auth: none, websocketMaxMessage: "${MAX}" }]', { MAX: '2MiB' }).routes[0]!.websocketMaxMessage).toBe(2_097_152)
  })

  it.each([
    ['lots', 'routes[0].websocketMaxMessage: must be a size such as 65536, 64KiB or 1MiB, got "lots" (line 1)'],
    ['1TiB', 'routes[0].websocketMaxMessage: must be a size such as 65536, 64KiB or 1MiB, got "1TiB" (line 1)'],
    [-5, 'routes[0].websocketMaxMessage: must be a size such as 65536, 64KiB or 1MiB, got -5 (line 1)'],
    [1.5, 'routes[0].websocketMaxMessage: must be a size such as 65536, 64KiB or 1MiB, got 1.5 (line 1)'],
    ['100B', 'routes[0].websocketMaxMessage: must be between 1KiB and 1GiB, got "100B" (line 1)'],
    ['2GiB', 'routes[0].websocketMaxMessage: must be between 1KiB and 1GiB, got "2GiB" (line 1)'],
  ])('refuses %j', (value, expected) => {
    expect(problems(route(value))).toEqual([expected])
  })
})

// An attacker's finding: the check read the URL parser's path, the gateway used the text as
// written; spellings the parser normalises away passed, and went into every redirect_uri.
describe('config: server.baseUrl is an origin, and used as the one it names', () => {
  const read = (baseUrl: string): { baseUrl: string } | { problems: string[] } => {
    const text = `server:\n  baseUrl: \${GATEWAY_BASE_URL}\nsession:\n  secret: ${SECRET}\n`
    try {
      return { baseUrl: parseConfig(text, { GATEWAY_BASE_URL: baseUrl }).server.baseUrl }
    } catch (error) {
      return { problems: (error as { problems: Array<{ path: string, message: string }> }).problems.filter((p) => p.path === 'server.baseUrl').map((p) => p.message) }
    }
  }
  // And a re-reader's: used as the parser's origin, capitals, a default port or an IDN host were sent
  // in another spelling than the one registered at the provider. Each is refused, naming the origin.
  it.each([
    ['a dot segment', 'https://gw.example.com/.'],
    ['a dot-dot segment', 'https://gw.example.com/..'],
    ['a percent-encoded dot segment', 'https://gw.example.com/%2e'],
    ['a carriage return (a .env file written on Windows)', 'https://gw.example.com\r'],
    ['a tab', 'https://gw.example.com\t'],
    ['a backslash (browsers read it as /)', 'https://gw.example.com\\'],
    ['capitals and the default port', 'HTTPS://GW.example.com:443/'],
  ])('%s: refused, naming the origin to write', (_name, text) => {
    expect(read(text)).toEqual({ problems: [`must be written as the origin it names, https://gw.example.com, got ${JSON.stringify(text)}`] })
  })

  it('an IDN host: refused, naming its ASCII form', () => {
    expect(read('https://bücher.example')).toEqual({ problems: ['must be written as the origin it names, https://xn--bcher-kva.example, got "https://bücher.example"'] })
  })

  it('refuses a user name or password (sent in every redirect_uri), a path, a query; passes an IPv6 origin', () => {
    expect(read('https://gw:hunter2secret@gw.example.com')).toEqual({ problems: ['must not carry a user name or password: it is sent in every redirect_uri and Location'] })
    expect(read('https://gw.example.com/auth')).toMatchObject({ problems: [expect.stringContaining('must be an origin') as string] })
    expect(read('https://gw.example.com/?')).toEqual({ problems: ['must not have a query or fragment'] })
    expect(read('https://[::1]:8443/')).toEqual({ baseUrl: 'https://[::1]:8443' })
    expect(read('https://gw.example.com/')).toEqual({ baseUrl: 'https://gw.example.com' })
    expect(read('http://localhost:8080')).toEqual({ baseUrl: 'http://localhost:8080' })
    // The default port written out, as the port warning and docker-compose.yml write it (a re-reader's finding): taken, and sent as written.
    expect(read('http://localhost:80')).toEqual({ baseUrl: 'http://localhost:80' })
    expect(read('https://gw.example.com:443/')).toEqual({ baseUrl: 'https://gw.example.com:443' })
  })
})

describe('config: server.trustProxy', () => {
  it.each([
    ['true', true],
    ['false', false],
    ['["127.0.0.1", "10.0.0.0/8", "::1", "fd00::/8", loopback]', ['127.0.0.1', '10.0.0.0/8', '::1', 'fd00::/8', 'loopback']],
    ['"127.0.0.1, 10.0.0.0/8"', ['127.0.0.1', '10.0.0.0/8']],
    ['[]', false],
  ])('trustProxy: %s is passed to Fastify as %j', (value, expected) => {
    expect(parseConfig(`server: { host: 127.0.0.1, trustProxy: ${value} }`, {}).server.trustProxy).toEqual(expected)
  })

  it('names each malformed entry', () => {
    expect(problems('server:\n  trustProxy: ["10.0.0/8", "10.0.0.0/33", "proxy.example.org", 5, "::1/129"]\n')).toEqual([0, 1, 2, 3, 4].map((i) =>
      `server.trustProxy[${i}]: must be an IP address or CIDR range such as 10.0.0.0/8 (or loopback, linklocal, uniquelocal), got ${['"10.0.0/8"', '"10.0.0.0/33"', '"proxy.example.org"', '5', '"::1/129"'][i]} (line 2)`))
    expect(problems('server: { trustProxy: 5 }')).toEqual(['server.trustProxy: must be true, false or a list of addresses and CIDR ranges such as ["127.0.0.1", "10.0.0.0/8"], got 5 (line 1)'])
  })
})

describe('config: tracing', () => {
  it('is off by default: no endpoint, the service name and every trace', () => {
    expect(parseConfig('', {}).tracing).toEqual({ otlp: undefined, serviceName: 'oauth-gateway', sampleRatio: 1 })
  })

  it('takes an OTLP/HTTP endpoint without its trailing slash', () => {
    expect(parseConfig('tracing: { otlp: "http://collector:4318/", serviceName: edge, sampleRatio: 0.25 }', {}).tracing)
      .toEqual({ otlp: 'http://collector:4318', serviceName: 'edge', sampleRatio: 0.25 })
  })

  it.each([
    ['collector:4318', 'tracing.otlp: must be a http or https URL, got "collector:4318"; did you mean `http://collector:4318`? (line 1)'],
    ['not a url', 'tracing.otlp: must be a URL, got "not a url" (line 1)'],
    ['grpc://collector:4317', 'tracing.otlp: must be a http or https URL, got "grpc://collector:4317" (line 1)'],
    ['https://collector:4318/?token=x', 'tracing.otlp: must have no query or fragment, got "https://collector:4318/?token=***" (line 1)'],
    ['https://user:hunter2@collector:4318', 'tracing.otlp: must not carry a user name or password (they would be logged), got "https://user:***@collector:4318"; give the collector\'s token in OTEL_EXPORTER_OTLP_HEADERS, such as Authorization=Bearer%20<token> (line 1)'],
  ])('refuses otlp %s', (otlp, expected) => {
    expect(problems(`tracing: { otlp: "${otlp}" }`)).toEqual([expected])
  })

  it.each([[-0.1], [1.5], ['"all"']])('refuses sampleRatio %s', (ratio) => {
    expect(problems(`tracing: { sampleRatio: ${ratio} }`)).toHaveLength(1)
    expect(problems(`tracing: { sampleRatio: ${ratio} }`)[0]).toMatch(/^tracing\.sampleRatio: /)
  })
})

describe('config: metrics.listen', () => {
  it.each([
    ['127.0.0.1:9090', { host: '127.0.0.1', port: 9090 }],
    ['[::1]:9090', { host: '::1', port: 9090 }],
    ['localhost:9100', { host: 'localhost', port: 9100 }],
  ])('%s listens on %j', (listen, expected) => {
    expect(parseConfig(`metrics: { listen: "${listen}" }`, {}).metrics.listen).toEqual(expected)
  })

  it('is unset by default: /metrics stays on the public port', () => {
    expect(parseConfig('', {}).metrics).toEqual({ listen: undefined })
  })

  it.each([
    ['9090'], ['127.0.0.1:70000'], ['127.0.0.1:0'], ['[not-v6]:9090'], ['::1:9090'], ['http://127.0.0.1:9090'],
  ])('refuses %s with the form it wants', (listen) => {
    expect(problems(`metrics: { listen: "${listen}" }`)).toEqual([`metrics.listen: must be "host:port" such as 127.0.0.1:9090 or [::1]:9090, got "${listen}" (line 1)`])
  })

  it('refuses the gateway\'s own address', () => {
    expect(problems('server: { port: 8080 }\nmetrics: { listen: "127.0.0.1:8080" }')).toEqual([
      "metrics.listen: is the gateway's own address (server.host and server.port); give /metrics another port, such as 127.0.0.1:9090 (line 2)",
    ])
  })
})

describe('config: the --check command', () => {
  const run = promisify(execFile)

  it('exits 0 on a valid file and 1 with the problems on an invalid one', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'gw-config-'))
    await writeFile(join(dir, 'good.yaml'), GOOD)
    await writeFile(join(dir, 'bad.yaml'), 'server: { prot: 1 }\n')
    const ok = await run('node', ['dist/src/main.js', '--check', '--config', join(dir, 'good.yaml')], { env: { ...process.env, ...ENV } })
    expect(ok.stdout).toContain('good.yaml: OK (1 provider, 2 routes)')

    const bad = await run('node', ['dist/src/main.js', 'check'], { env: { ...process.env, GATEWAY_CONFIG: join(dir, 'bad.yaml') } }).catch((e: unknown) => e)
    expect(bad).toMatchObject({ code: 1 })
    expect((bad as { stderr: string }).stderr).toContain('server.prot: unknown key')
  })
})
