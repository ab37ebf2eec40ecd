/* eslint-disable no-template-curly-in-string -- the configs under test contain ${VAR} text */
// The usual first-run slips besides indentation: a pasted discovery URL as the issuer, a variable
// that is empty or not set (and no default offered for a secret), a config file that cannot be
// read, and loopback addresses inside a container. Each is one problem or one line, pinned exactly.
import { createServer, type AddressInfo } from 'node:net'
import { describe, expect, it } from 'vitest'
import { ConfigFileError, containerWarnings, inContainer, parseConfig } from '../../src/config/config.js'
import { configProblemList } from '../helpers/config.js'
import { refusedUrl } from '../helpers/net.js'

const SECRET = 'q3Vt8mJ0bXcE1s7yKp2RzL9wH4dNfA6gUoTiC5eBvMk='

const problems = configProblemList

/** A valid config whose provider's issuer, client secret and the store are given. */
function config ({ issuer = 'https://op.example.org', clientSecret = 's', store = '', upstream = 'http://127.0.0.1:9100', secret = SECRET } = {}): string {
  return `session:\n  secret: ${secret}\nproviders:\n  demo:\n    clientId: c\n    clientSecret: ${clientSecret}\n    issuer: ${issuer}\n    scope: openid\n` +
    `routes:\n  - path: /app/\n    upstream: ${upstream}\n    provider: demo\n${store}`
}

describe('an issuer pasted as its discovery URL', () => {
  it.each([
    ['https://op.example.org/.well-known/openid-configuration', 'https://op.example.org'],
    ['https://kc.example.org/realms/demo/.well-known/openid-configuration', 'https://kc.example.org/realms/demo'],
    ['https://op.example.org/.well-known/oauth-authorization-server', 'https://op.example.org'],
    ['https://op.example.org/.well-known/oauth-authorization-server/tenant', 'https://op.example.org/tenant'],
    ['https://op.example.org/t/.well-known/openid-configuration?api_key=hunter2', 'https://op.example.org/t'],
    ['http://127.0.0.1:9000/.well-known/openid-configuration', 'http://127.0.0.1:9000'],
    ['https://op.example.org/t/.well-known/openid-configuration/', 'https://op.example.org/t'],
  ])('%s -> issuer %s', (pasted, issuer) => {
    expect(problems(config({ issuer: pasted }))).toEqual([
      { path: 'providers.demo.issuer', line: 7, message: 'is the URL of the discovery document, not the issuer', hint: `use issuer: ${issuer}` },
    ])
  })

  it.each([
    'https://op.example.org/.well-known/openid-configuration-v2',
    'https://op.example.org/well-known/openid-configuration',
    'https://op.example.org/realms/.well-known',
    'https://op.example.org/?x=/.well-known/openid-configuration',
  ])('%s is an issuer like any other', (issuer) => {
    expect(problems(config({ issuer }))).toEqual([])
  })
})

describe('a variable that is empty or not set', () => {
  const SECRET_HINT = (name: string) => `set ${name} in the environment; a default written in the file would be the same secret wherever the file is used`
  it.each([
    ['an empty secret', config({ secret: '${GW_SECRET}' }), { GW_SECRET: '' }, 'session.secret', 2, 'environment variable GW_SECRET is empty', SECRET_HINT('GW_SECRET')],
    ['an unset secret', config({ secret: '${GW_SECRET}' }), {}, 'session.secret', 2, 'environment variable GW_SECRET is not set', SECRET_HINT('GW_SECRET')],
    ['an empty client secret', config({ clientSecret: '${X}' }), { X: '' }, 'providers.demo.clientSecret', 6, 'environment variable X is empty', SECRET_HINT('X')],
    ['a password inside a URL', config({ store: 'store:\n  type: redis\n  url: redis://:${REDIS_PASSWORD}@redis:6379\n' }), {}, 'store.url', 15, 'environment variable REDIS_PASSWORD is not set', SECRET_HINT('REDIS_PASSWORD')],
    ['a previous secret in a list', config({ secret: `${SECRET}\n  previousSecrets: ["\${OLD}"]` }), { OLD: '' }, 'session.previousSecrets[0]', 3, 'environment variable OLD is empty', SECRET_HINT('OLD')],
    ['a sentinel password', config({ store: 'store:\n  type: redis\n  sentinel:\n    name: m\n    nodes: ["10.0.0.1:26379"]\n    password: ${P}\n' }), {}, 'store.sentinel.password', 18, 'environment variable P is not set', SECRET_HINT('P')],
    ['an empty issuer', config({ issuer: '${OP_ISSUER}' }), { OP_ISSUER: '' }, 'providers.demo.issuer', 7, 'environment variable OP_ISSUER is empty', 'set it, or write ${OP_ISSUER:-default} for a default'],
    ['an unset upstream', config({ upstream: '${UPSTREAM}' }), {}, 'routes[0].upstream', 11, 'environment variable UPSTREAM is not set', 'set it, or write ${UPSTREAM:-default} for a default'],
  ])('%s', (_name, text, env, path, line, message, hint) => {
    expect(problems(text, env as Record<string, string>)).toEqual([{ path, line, message, hint }])
  })

  it('an empty variable with a default takes the default', () => {
    expect(problems(config({ issuer: '${OP_ISSUER:-https://op.example.org}' }), { OP_ISSUER: '' })).toEqual([])
  })
})

describe('a config file that cannot be read', () => {
  const GIVE = 'give the config file with --config PATH or the GATEWAY_CONFIG environment variable'
  it.each([
    ['ENOENT', `gw.yaml: no such file; ${GIVE}`],
    ['EACCES', 'gw.yaml: cannot be read by this user (permission denied); make it readable, or give another file'],
    ['EPERM', 'gw.yaml: cannot be read by this user (permission denied); make it readable, or give another file'],
    ['EISDIR', `gw.yaml: is a directory, not a config file; ${GIVE}`],
    ['EMFILE', 'gw.yaml: cannot read the file (EMFILE)'],
  ])('%s is one line', (code, line) => {
    const error = new ConfigFileError('gw.yaml', Object.assign(new Error('raw'), { code }))
    expect(error.message).toBe(line)
  })
})

describe('a loopback address in a container', () => {
  const probe = (files: string[], env: Record<string, string> = {}) => ({ exists: (path: string) => files.includes(path), env })
  it.each([
    ['Docker', probe(['/.dockerenv']), true],
    ['Podman', probe(['/run/.containerenv']), true],
    ['Kubernetes', probe([], { KUBERNETES_SERVICE_HOST: '10.0.0.1' }), true],
    ['an empty Kubernetes variable', probe([], { KUBERNETES_SERVICE_HOST: '' }), false],
    ['no container', probe([]), false],
    ['told it is not', probe(['/.dockerenv'], { GATEWAY_IN_CONTAINER: 'false' }), false],
    ['told it is', probe([], { GATEWAY_IN_CONTAINER: 'TRUE' }), true],
    ['told something else', probe(['/.dockerenv'], { GATEWAY_IN_CONTAINER: 'maybe' }), true],
  ])('%s', (_name, given, expected) => {
    expect(inContainer(given)).toBe(expected)
  })

  const warning = (key: string, host: string) => `${key}: ${host} is this container itself, not the machine it runs on, and nothing listens there in this container; ` +
    'use the service\'s name on the container network (or host.docker.internal), or set GATEWAY_IN_CONTAINER=false if it is meant (a sidecar)'
  const loaded = (text: string) => parseConfig(text, {})
  const nothingListens = async () => false
  it.each([
    ['localhost', 'http://localhost:9000', 'localhost'],
    ['127.0.0.1', 'http://127.0.0.1:9000', '127.0.0.1'],
    ['[::1]', 'http://[::1]:9000', '[::1]'],
    ['a name under localhost', 'http://op.localhost:9000', 'op.localhost'],
  ])('an issuer on %s', async (_name, issuer, host) => {
    const text = config({ issuer, upstream: 'http://app:8080' })
    expect(await containerWarnings(loaded(text), true, nothingListens)).toEqual([warning('providers.demo.issuer', host)])
    expect(await containerWarnings(loaded(text), false, nothingListens)).toEqual([])
  })

  it('an upstream, a Redis URL and Redis cluster nodes', async () => {
    const text = config({ issuer: 'https://op.example.org', store: 'store:\n  type: redis\n  cluster: ["redis://127.0.0.1:7000", "redis://redis-1:7000"]\n' })
    expect(await containerWarnings(loaded(text), true, nothingListens)).toEqual([warning('routes[0].upstream', '127.0.0.1'), warning('store.cluster[0]', '127.0.0.1')])
    const url = config({ upstream: 'http://app:8080', store: 'store:\n  type: redis\n  url: redis://localhost:6379\n' })
    expect(await containerWarnings(loaded(url), true, nothingListens)).toEqual([warning('store.url', 'localhost')])
  })

  it('asks each loopback address at its own port, the scheme\'s default where the URL has none', async () => {
    const asked: string[] = []
    const text = config({ issuer: 'http://op.localhost', upstream: 'https://[::1]', store: 'store:\n  type: redis\n  url: redis://localhost\n' })
    await containerWarnings(loaded(text), true, async (host, port) => { asked.push(`${host} ${port}`); return false })
    expect(asked.sort()).toEqual(['127.0.0.1 80', '::1 443', 'localhost 6379'])
  })

  it('nothing where a process in this container listens on the address (the demo, a sidecar): the real probe', async () => {
    const server = createServer()
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
    const { port } = server.address() as AddressInfo
    try {
      expect(await containerWarnings(loaded(config({ upstream: `http://127.0.0.1:${port}` })), true)).toEqual([])
    } finally {
      await new Promise((resolve) => server.close(resolve))
    }
    expect(await containerWarnings(loaded(config({ upstream: await refusedUrl() })), true)).toEqual([warning('routes[0].upstream', '127.0.0.2')])
  })

  it('nothing for names on the container network', async () => {
    expect(await containerWarnings(loaded(config({ upstream: 'http://app:8080' })), true, nothingListens)).toEqual([])
  })
})

describe('rateLimit.login turned off', () => {
  it.each(['off', 'false', '" off "', '"off"'])('login: %s is no limit', (value) => {
    expect(parseConfig(`${config()}rateLimit:\n  login: ${value}\n`, {}).rateLimit.login).toBeUndefined()
  })

  it('the generated reference names both spellings, in the type and in the text', async () => {
    const { readFile } = await import('node:fs/promises')
    const row = (await readFile('docs/configuration.md', 'utf8')).split('\n').find((line) => line.startsWith('| `rateLimit.login`'))
    expect(row).toContain('string or `off` or `false`')
    expect(row).toContain('`off` (or `false`): no limit')
  })
})
