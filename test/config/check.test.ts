/* eslint-disable no-template-curly-in-string -- the configs under test contain ${VAR} text */
// `--check` names one root cause per mistake: the table pins the exact problem (key path, line,
// message, hint) for broken files, then the CLI's output for a good and a bad file.
import { execFile, spawn } from 'node:child_process'
import { mkdtemp, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { promisify } from 'node:util'
import { createServer, type AddressInfo } from 'node:net'
import { createInterface } from 'node:readline'
import { describe, expect, it } from 'vitest'
import type { ConfigProblem } from '../../src/config/config.js'
import { configProblemList } from '../helpers/config.js'
import { refusedUrl } from '../helpers/net.js'

/**
 * Starts the gateway with `file`, stops it (SIGTERM) once it says "Server listening", and returns
 * every log line it wrote: what it logs once listening comes before it reads the signal.
 */
async function startLines (file: string, env: Record<string, string>): Promise<Array<Record<string, unknown>>> {
  const child = spawn('node', ['dist/src/main.js', '--config', file], { env: { ...process.env, GATEWAY_CONFIG: '', ...env }, stdio: ['ignore', 'pipe', 'inherit'] })
  const lines: Array<Record<string, unknown>> = []
  try {
    for await (const line of createInterface({ input: child.stdout })) {
      lines.push(JSON.parse(line) as Record<string, unknown>)
      if (String(lines.at(-1)!.msg).startsWith('Server listening')) child.kill('SIGTERM')
    }
  } finally {
    child.kill('SIGTERM')
  }
  return lines
}

const SECRET = 'q3Vt8mJ0bXcE1s7yKp2RzL9wH4dNfA6gUoTiC5eBvMk='

/** A valid base: one OIDC provider `demo` and one route; each case breaks one thing in it. */
function config (provider: string, route = '    provider: demo\n', extra = ''): string {
  return `session:
  secret: ${SECRET}
providers:
  demo:
${provider}routes:
  - path: /app/
    upstream: http://127.0.0.1:9100
${route}${extra}`
}
const OIDC = '    clientId: c\n    clientSecret: s\n    issuer: https://op.example.org\n    scope: openid\n'
/** Appended to a file whose --check output is read whole: a memory store is a warning of its own (processWarnings). */
const REDIS_STORE = 'store:\n  type: redis\n'
/** The base config with `session.previousSecrets: <list>` on line 3. */
const withPrevious = (list: string): string => config(OIDC).replace(`secret: ${SECRET}\n`, `secret: ${SECRET}\n  previousSecrets: ${list}\n`)
const PREVIOUS = 'Zp7Lq2Wx9Rt4Vb8Nc3Md6Kf1Jh5Gs0Ya='

const problems = configProblemList

type Case = [name: string, text: string, expected: ConfigProblem[]]
/** What "unknown key" lists under a route. */
const ROUTE_KEYS = 'path, upstream, provider, providers, rewritePrefix, timeout, maxConnections, auth, websocket, allow, deny, headers, public, identityHeaders, websocketMaxMessage, methodOverrideMaxBody, allowedOrigins, assertion, bearer, agents, reauth, preserveBody'
const p = (path: string, line: number | undefined, message: string, hint?: string): ConfigProblem => ({ path, line, message, ...(hint ? { hint } : {}) })

const CASES: Case[] = [
  ['a previous secret equal to the secret',
    withPrevious(`[${SECRET}]`),
    [p('session.previousSecrets[0]', 3, 'is the same as session.secret: a previous secret must be the one it replaced')]],
  ['a previous secret given twice',
    withPrevious(`[${PREVIOUS}, ${PREVIOUS}]`),
    [p('session.previousSecrets[1]', 3, 'repeats an earlier entry')]],
  ['a previous secret too short',
    withPrevious('[short-old-secret]'),
    [p('session.previousSecrets[0]', 3, 'must be at least 32 characters, got 16; generate one with "openssl rand -base64 32"')]],
  ['a previous secret that anyone can guess',
    withPrevious(`[${'ab'.repeat(20)}]`),
    [p('session.previousSecrets[0]', 3, 'is a 2-character pattern repeated, which anyone can guess; generate one with "openssl rand -base64 32"')]],
  ['previous secrets without a secret',
    withPrevious(`[${PREVIOUS}]`).replace(`  secret: ${SECRET}\n`, ''),
    [p('session.previousSecrets', 2, 'needs session.secret: previous secrets only open what they sealed, and new sessions must be sealed with a fixed secret')]],
  ['a misspelt provider key is one problem, not also "clientSecret is required"',
    config('    clientId: c\n    clientSecrt: s\n    issuer: https://op.example.org\n    scope: openid\n'),
    [p('providers.demo.clientSecrt', 6, 'unknown key', 'did you mean `clientSecret`?')]],
  ['a misspelt issuer is one problem, not also "authorizeUrl and tokenUrl are required"',
    config('    clientId: c\n    clientSecret: s\n    isuer: https://op.example.org\n    scope: openid\n'),
    [p('providers.demo.isuer', 7, 'unknown key', 'did you mean `issuer`?')]],
  ['an issuer that is not a URL is one problem, not three',
    config('    clientId: c\n    clientSecret: s\n    issuer: op.example.org\n    scope: openid\n'),
    [p('providers.demo.issuer', 7, 'must be a URL, got "op.example.org"')]],
  ['an issuer from a missing variable is one problem',
    config('    clientId: c\n    clientSecret: s\n    issuer: ${OP_ISSUER}\n    scope: openid\n'),
    [p('providers.demo.issuer', 7, 'environment variable OP_ISSUER is not set', 'set it, or write ${OP_ISSUER:-default} for a default')]],
  // A newcomer's finding: checked before the variable was exported, the misspelt key was reported
  // as a missing variable, and the key it was meant to be as missing too.
  ['a misspelt key whose variable is not set: the key, as once it is set',
    config('    clientId: c\n    clientSecrt: ${OP_CLIENT_SECRET}\n    issuer: https://op.example.org\n    scope: openid\n'),
    [p('providers.demo.clientSecrt', 6, 'unknown key', 'did you mean `clientSecret`?')]],
  // A newcomer's finding: --check passed it, and sign-ins went to <path>/oauth/..., which the gateway does not serve.
  ['an upstream written as a host and port, without its scheme',
    config(OIDC, '    provider: demo\n').replace('http://127.0.0.1:9100', '127.0.0.1:9100'),
    [p('routes[0].upstream', 11, 'must be a URL, got "127.0.0.1:9100"', 'did you mean `http://127.0.0.1:9100`?')]],
  ['an upstream written as localhost and a port, without its scheme',
    config(OIDC, '    provider: demo\n').replace('http://127.0.0.1:9100', 'localhost:9100'),
    [p('routes[0].upstream', 11, 'must be a http or https URL, got "localhost:9100"', 'did you mean `http://localhost:9100`?')]],
  ['a baseUrl with a path',
    `server:\n  baseUrl: https://gw.example.com/auth/\n${config(OIDC)}`,
    [p('server.baseUrl', 2, 'must be an origin (scheme, host and port), got the path /auth/', 'the gateway serves its own endpoints (/oauth/...) and the routes at the root of its host: give it a host name of its own')]],
  ['a misspelt section',
    `servr:\n  port: 8080\n${config(OIDC)}`,
    [p('servr', 1, 'unknown key', 'did you mean `server`?')]],
  ['a key with no near match lists what is allowed',
    config(OIDC, '    provider: demo\n    colour: blue\n'),
    [p('routes[0].colour', 13, `unknown key (expected one of: ${ROUTE_KEYS})`)]],
  // A newcomer's findings: `target:` for `upstream:` gave two unlinked lines, `redirectUri:` only the list of keys.
  ['a mapping\'s only unknown key where its only missing required key belongs is taken as meant to be it',
    config(OIDC).replace('    upstream: ', '    target: '),
    [p('routes[0].target', 11, 'unknown key', '`upstream` is required here and not given: is this it?')]],
  ['with two unknown keys, neither is taken as the missing required key',
    config(OIDC, '    provider: demo\n    colour: blue\n').replace('    upstream: ', '    target: '),
    [p('routes[0].upstream', 10, 'is required'), p('routes[0].target', 11, `unknown key (expected one of: ${ROUTE_KEYS})`), p('routes[0].colour', 13, `unknown key (expected one of: ${ROUTE_KEYS})`)]],
  ['a callback address, which the gateway makes from server.baseUrl',
    config(`${OIDC}    redirect_uri: https://gw.example.com/callback\n`),
    [p('providers.demo.redirect_uri', 9, 'unknown key', 'the callback address is not configured: it is `{server.baseUrl}/oauth/authorized/demo/` (register that at the provider; set server.baseUrl to the address browsers use)')]],
  ['a key in the wrong case',
    config(OIDC, '    provider: demo\n    rewriteprefix: /\n'),
    [p('routes[0].rewriteprefix', 13, 'unknown key', 'did you mean `rewritePrefix`?')]],
  ['a route naming a misspelt provider',
    config(OIDC, '    provider: dmeo\n'),
    [p('routes[0].provider', 12, 'names no configured provider', 'did you mean `demo`?')]],
  ['a route naming an unknown provider',
    config(OIDC, '    provider: github\n'),
    [p('routes[0].provider', 12, 'names no configured provider', 'known: demo')]],
  ['a misspelt choice',
    `store:\n  type: rediss\n${config(OIDC)}`,
    [p('store.type', 2, 'must be one of redis, memory, got "rediss"', 'did you mean `redis`?')]],
  ['an unknown preset, naming providers.<name>.preset',
    config('    preset: gihtub\n    clientId: c\n    clientSecret: s\n'),
    [p('providers.demo.preset', 5, 'must be one of github, gitlab, google, microsoft, keycloak, got "gihtub"', 'did you mean `github`?')]],
  ['a union (workers: integer or auto) gives one message, not one per branch',
    `server:\n  workers: lots\n${config(OIDC)}`,
    [p('server.workers', 2, 'must be an integer from 1 to 64 or auto, got "lots"')]],
  ['a union whose list branch fits reports the item',
    `server:\n  trustProxy: ["10.0.0.0/8", 7]\n${config(OIDC)}`,
    [p('server.trustProxy[1]', 2, 'must be an IP address or CIDR range such as 10.0.0.0/8 (or loopback, linklocal, uniquelocal), got 7')]],
  ['a union that fits no form',
    `server:\n  trustProxy: { a: 1 }\n${config(OIDC)}`,
    [p('server.trustProxy', 2, 'must be true, false or a list of addresses and CIDR ranges such as ["127.0.0.1", "10.0.0.0/8"], got a mapping')]],
  ['a number out of range',
    `server:\n  port: 99999\n${config(OIDC)}`,
    [p('server.port', 2, 'must be an integer from 0 to 65535, got 99999')]],
  ['a port from a variable that is not a number',
    `server:\n  port: \${PORT}\n${config(OIDC)}`,
    [p('server.port', 2, 'must be an integer from 0 to 65535, got "eighty"')]],
  ['a boolean that is not one',
    config(OIDC, '    provider: demo\n    websocket: yes please\n'),
    [p('routes[0].websocket', 13, 'must be true or false, got "yes please"')]],
  ['a duration without a unit it knows',
    config(OIDC, '    provider: demo\n    timeout: 30 seconds\n'),
    [p('routes[0].timeout', 13, 'must be a duration such as 300, 300s, 5m or 8h, got "30 seconds"')]],
  ['an empty client ID',
    config('    clientId: ""\n    clientSecret: s\n    issuer: https://op.example.org\n    scope: openid\n'),
    [p('providers.demo.clientId', 5, 'must not be empty')]],
  ['a missing required key of a route',
    config(OIDC, '    provider: demo\n').replace('    upstream: http://127.0.0.1:9100\n', ''),
    [p('routes[0].upstream', 10, 'is required')]],
  ['a plain OAuth 2.0 provider without endpoints',
    config('    clientId: c\n    clientSecret: s\n    scope: read\n'),
    [p('providers.demo.authorizeUrl', 4, 'is required without issuer', 'or set preset: github, gitlab, google, microsoft, keycloak'),
      p('providers.demo.tokenUrl', 4, 'is required without issuer', 'or set preset: github, gitlab, google, microsoft, keycloak')]],
  ['microsoft without a tenant',
    config('    preset: microsoft\n    clientId: c\n    clientSecret: s\n'),
    [p('providers.demo.tenant', 4, 'is required with preset microsoft: the directory (tenant) ID or a verified domain, from the app registration\'s overview page')]],
  ['keycloak with a base URL and no realm',
    config('    preset: keycloak\n    baseUrl: https://kc.example.org\n    clientId: c\n    clientSecret: s\n'),
    [p('providers.demo.realm', 4, 'is required with preset keycloak and baseUrl: the realm whose users sign in')]],
  ['a preset-only key without that preset',
    config(`${OIDC}    tenant: abc\n`),
    [p('providers.demo.tenant', 9, 'is only read by preset microsoft')]],
  ['routes written as a mapping of paths: the hint writes the first one as a list item',
    `session:\n  secret: ${SECRET}\nproviders:\n  demo:\n${OIDC}routes:\n  /app/:\n    upstream: http://127.0.0.1:9100\n    provider: demo\n`,
    [p('routes', 9, 'must be a list of routes, got a mapping', 'write each as an item of a list: `- path: /app/`, its other keys indented under it')]],
  ['providers written as a list with names: the hint writes the first one under its name',
    `session:\n  secret: ${SECRET}\nproviders:\n  - name: demo\n${OIDC}routes:\n  - path: /app/\n    upstream: http://127.0.0.1:9100\n    provider: demo\n`,
    [p('providers', 3, 'must be a mapping of provider name to settings, got a list', 'write each under its name: `demo:`, its keys indented under it (not `- name: demo`)')]],
  ['a mapping of routes whose first key no hint could quote as written: no hint',
    `session:\n  secret: ${SECRET}\nproviders:\n  demo:\n${OIDC}routes:\n  "/app/ \\u2028x":\n    upstream: http://127.0.0.1:9100\n`,
    [p('routes', 9, 'must be a list of routes, got a mapping')]],
  ['a file that is a list',
    '- a\n- b\n',
    [p('(top level)', undefined, 'must be a mapping of sections (server, session, providers, routes, ...), got a list')]],
]

describe('--check names one root cause per mistake', () => {
  it('has at least 15 cases', () => expect(CASES.length).toBeGreaterThanOrEqual(15))

  it.each(CASES)('%s', (_name, text, expected) => {
    expect(problems(text, { PORT: 'eighty' })).toEqual(expected)
  })

  it('the base config of the table is valid', () => {
    expect(problems(config(OIDC))).toEqual([])
  })

  // An attacker's finding on the first form: "under an unknown key" was judged on the path's text,
  // and host names hold dots: ADMIN_EMAIL of host `app.example.com` counted as under `app`'s `example`.
  it('an unset variable is named missing beside an unknown key whose path only spells like its start', () => {
    const text = config(OIDC) + 'server:\n  trustProxy: [10.0.0.5]\nforwardAuth:\n  hosts:\n    app:\n      example: x\n    app.example.com:\n      allow: [{ emails: ["${ADMIN_EMAIL}"] }]\n'
    expect(problems(text).map((problem) => `${problem.path}: ${problem.message}`)).toEqual([
      'forwardAuth.hosts.app.example: unknown key (expected one of: allow, deny, bearer)',
      'forwardAuth.hosts.app.example.com.allow[0].emails[0]: environment variable ADMIN_EMAIL is not set',
    ])
  })

  it('reports several independent mistakes, each once, in file order', () => {
    const text = config('    clientId: c\n    clientSecrt: s\n    issuer: https://op.example.org\n    scope: openid\n', '    provider: dmeo\n    timeout: soon\n')
    expect(problems(text).map((problem) => `${problem.path}:${problem.line}`)).toEqual(['providers.demo.clientSecrt:6', 'routes[0].provider:12', 'routes[0].timeout:13'])
  })
})

describe('the --check command', () => {
  // This machine may itself be a container: the runs below say where they are.
  const exec = promisify(execFile)
  const run = async (command: string, args: string[], env: Record<string, string> = {}) =>
    await exec(command, args, { env: { ...process.env, GATEWAY_IN_CONTAINER: 'false', ...env } })

  it('prints only "OK" for a good file, and one line per problem for a bad one', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'gw-check-'))
    await writeFile(join(dir, 'good.yaml'), config(OIDC, '    provider: demo\n', REDIS_STORE))
    await writeFile(join(dir, 'bad.yaml'), config('    clientId: c\n    clientSecrt: s\n    issuer: https://op.example.org\n    scope: openid\n', '    provider: dmeo\n'))
    const ok = await run('node', ['dist/src/main.js', '--check', '--config', join(dir, 'good.yaml')])
    expect(ok.stdout).toBe(`${join(dir, 'good.yaml')}: OK (1 provider, 1 route)\n`)
    expect(ok.stderr).toBe('')
    // Forward-auth hosts kept in the file are counted (a newcomer's point: a file of those alone read "0 routes" only).
    await writeFile(join(dir, 'hosts.yaml'), config(OIDC, '    provider: demo\n', 'forwardAuth:\n  hosts:\n    payroll.example.com:\n      allow: [{ groups: [payroll] }]\nserver:\n  trustProxy: [10.0.0.5]\n'))
    const hosts = await run('node', ['dist/src/main.js', '--check', '--config', join(dir, 'hosts.yaml')])
    expect(hosts.stdout).toBe(`${join(dir, 'hosts.yaml')}: OK (1 provider, 1 route, 1 forward-auth host)\n`)

    const bad = await run('node', ['dist/src/main.js', '--check', '--config', join(dir, 'bad.yaml')]).catch((e: unknown) => e) as { code: number, stdout: string, stderr: string }
    expect(bad.code).toBe(1)
    expect(bad.stdout).toBe('')
    expect(bad.stderr).toBe(`${join(dir, 'bad.yaml')}: 2 problems
  providers.demo.clientSecrt: unknown key; did you mean \`clientSecret\`? (line 6)
  routes[0].provider: names no configured provider; did you mean \`demo\`? (line 12)
`)
  })

  it('says what the start would warn about a process of its own: no session.secret, a memory store (a newcomer\'s finding: --check said only OK)', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'gw-check-'))
    await writeFile(join(dir, 'own.yaml'), config(OIDC).replace(`session:\n  secret: ${SECRET}\n`, ''))
    const own = await run('node', ['dist/src/main.js', '--check', '--config', join(dir, 'own.yaml')])
    expect(own.stdout).toBe(`${join(dir, 'own.yaml')}: OK (1 provider, 1 route)\n`)
    expect(own.stderr).toBe('warning: session.secret is not set: each start makes a random one, so sessions will not survive a restart and cannot be shared between instances; set one (openssl rand -base64 32)\n' +
      'warning: store.type is memory: sessions live in this process only (one instance, lost on restart); set store.type: redis (GATEWAY_STORE=redis and REDIS_URL in the shipped gateway.yaml) to keep them across restarts and instances\n')
  })

  it('prints the warning for a public route reaching part of a protected route\'s upstream and exits 0; full reach exits 1, naming both routes', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'gw-check-'))
    const routes = (publicPath: string) => `${config(OIDC, '    provider: demo\n    rewritePrefix: /\n')}  - path: ${publicPath}\n    upstream: http://127.0.0.1:9100\n    auth: none\n${REDIS_STORE}`
    await writeFile(join(dir, 'some.yaml'), routes('/public/'))
    await writeFile(join(dir, 'all.yaml'), routes('/'))
    const some = await run('node', ['dist/src/main.js', '--check', '--config', join(dir, 'some.yaml')])
    expect(some.stdout).toBe(`${join(dir, 'some.yaml')}: OK (1 provider, 2 routes)\n`)
    expect(some.stderr).toBe('warning: routes[1].path: reaches some of the paths of http://127.0.0.1:9100 that routes[0] (/app/) protects (through routes[0] (/app/) they need a sign-in), with no sign-in; make sure the upstream serves nothing private there\n')
    const all = await run('node', ['dist/src/main.js', '--check', '--config', join(dir, 'all.yaml')]).catch((e: unknown) => e) as { code: number, stderr: string }
    expect(all.code).toBe(1)
    expect(all.stderr).toBe(`${join(dir, 'all.yaml')}: 1 problem
  routes[1].path: reaches every path of http://127.0.0.1:9100 that routes[0] (/app/) protects, with no sign-in: give the routes different upstream paths (rewritePrefix) or the same protection (line 14)
`)
  })
})

describe('the CLI on the common slips', () => {
  const exec = promisify(execFile)
  const run = async (args: string[], env: Record<string, string> = {}) =>
    await exec('node', ['dist/src/main.js', ...args], { env: { ...process.env, GATEWAY_IN_CONTAINER: 'false', GATEWAY_CONFIG: '', ...env } }).catch((e: unknown) => e as { code: number, stdout: string, stderr: string })
  const GIVE = 'give the config file with --config PATH or the GATEWAY_CONFIG environment variable'

  it('GATEWAY_PORT=8081 on the shipped gateway.yaml without GATEWAY_BASE_URL: --check warns that sign-ins would return to 8080', async () => {
    const moved = await run(['--check', '--config', 'gateway.yaml'], { GATEWAY_PORT: '8081', GATEWAY_BASE_URL: '' })
    expect(moved).toMatchObject({ stdout: 'gateway.yaml: OK (1 provider, 1 route)\n' })
    expect((moved as { stderr: string }).stderr).toContain('warning: server.baseUrl: http://localhost:8080 names port 8080, but the gateway listens on port 8081 (server.port): ' +
      'after a sign-in, browsers would be sent to port 8080; set server.baseUrl (GATEWAY_BASE_URL in the shipped gateway.yaml) to http://localhost:8081\n')
    const both = await run(['--check', '--config', 'gateway.yaml'], { GATEWAY_PORT: '8081', GATEWAY_BASE_URL: 'http://localhost:8081' })
    expect((both as { stderr: string }).stderr).not.toContain('server.baseUrl')
  })

  // A re-reader's finding: on port 80 the warning's advice (http://localhost:80) was refused as no origin.
  it('GATEWAY_PORT=80 on the shipped gateway.yaml: the warning\'s advice is a value --check takes', async () => {
    const warned = await run(['--check', '--config', 'gateway.yaml'], { GATEWAY_PORT: '80', GATEWAY_BASE_URL: '' }) as { stderr: string }
    const advice = /set server\.baseUrl \(GATEWAY_BASE_URL in the shipped gateway\.yaml\) to (\S+)\n/.exec(warned.stderr)?.[1]
    expect(advice).toBe('http://localhost:80')
    expect(await run(['--check', '--config', 'gateway.yaml'], { GATEWAY_PORT: '80', GATEWAY_BASE_URL: advice! })).toMatchObject({ stdout: 'gateway.yaml: OK (1 provider, 1 route)\n' })
  })

  // A newcomer's findings: GATEWAY_PORT=0 said nothing, and sign-ins went to 8080; a busy port said
  // only "listen EADDRINUSE", and not last.
  it('GATEWAY_PORT=0 on the shipped gateway.yaml without GATEWAY_BASE_URL: the start warns, naming the port the OS picked', async () => {
    const lines = await startLines('gateway.yaml', { GATEWAY_PORT: '0', GATEWAY_BASE_URL: '', GATEWAY_IN_CONTAINER: 'false' })
    const picked = /listening at http:\/\/127\.0\.0\.1:(\d+)/.exec(String(lines.find((line) => String(line.msg).startsWith('Server listening'))?.msg))?.[1]
    expect(lines).toContainEqual(expect.objectContaining({
      level: 40,
      msg: `server.baseUrl: http://localhost:8080 names port 8080, but the gateway listens on port ${picked}, which the OS picked (server.port 0): ` +
        'after a sign-in, browsers would be sent to port 8080; give server.port a fixed port (GATEWAY_PORT in the shipped gateway.yaml) and server.baseUrl the same one (GATEWAY_BASE_URL)',
    }))
  })

  it('a port in use is the last line, saying what to set', async () => {
    const busy = createServer()
    await new Promise<void>((resolve) => busy.listen(0, '127.0.0.1', resolve))
    const port = (busy.address() as AddressInfo).port
    try {
      const started = await run(['--config', 'gateway.yaml'], { GATEWAY_PORT: String(port), GATEWAY_BASE_URL: `http://localhost:${port}` }) as { code: number, stderr: string }
      expect(started.code).toBe(1)
      expect(started.stderr.trimEnd().split('\n').at(-1)).toBe(`gateway: failed to start: server.port: 127.0.0.1:${port} is in use (EADDRINUSE): ` +
        'stop what listens there, or set server.port (GATEWAY_PORT in the shipped gateway.yaml) to another port, 0 for any free one')
    } finally {
      busy.close()
    }
  })

  it('a missing file, for --check and for start, is one line naming the path', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'gw-slips-'))
    const missing = join(dir, 'gateway.yaml')
    for (const args of [['--check', '--config', missing], ['--config', missing]]) {
      expect(await run(args)).toMatchObject({ code: 1, stdout: '', stderr: `${missing}: no such file; ${GIVE}\n` })
    }
    expect(await run([], { GATEWAY_CONFIG: missing })).toMatchObject({ code: 1, stderr: `${missing}: no such file; ${GIVE}\n` })
    expect(await run(['--check', '--config', dir])).toMatchObject({ code: 1, stderr: `${dir}: is a directory, not a config file; ${GIVE}\n` })
  })

  // A newcomer's findings: `gateway <file> --check` checked ./gateway.yaml and said OK, and
  // `npm start --check --config <file>` (no `--`: npm keeps both options) served ./gateway.yaml.
  it('a config file given without --config, or an unknown option, is exit 2 saying what to type', async () => {
    expect(await run(['my.yaml', '--check'])).toMatchObject({ code: 2, stdout: '', stderr: expect.stringMatching(/^unexpected argument "my\.yaml": a config file is given with --config my\.yaml \(with npm, after a --: npm start -- --config my\.yaml --check\)\n/) as string })
    expect(await run(['my.yaml'])).toMatchObject({ code: 2, stderr: expect.stringContaining('--config my.yaml') as string })
    expect(await run(['--chek'])).toMatchObject({ code: 2, stderr: expect.stringMatching(/^unknown option --chek; did you mean `--check`\?\n/) as string })
    expect(await run(['--configg=x.yaml'])).toMatchObject({ code: 2, stderr: expect.stringMatching(/^unknown option --configg; did you mean `--config`\?\n/) as string })
    // The name only: a value given with an option may be a secret (an attacker's finding).
    const secret = 'Zp7Lq2Wx9Rt4Vb8Nc3Md6Kf1Jh5Gs0Ya='
    const pasted = await run(['--check', `--client-secret=${secret}`]) as { code: number, stderr: string }
    expect(pasted.code).toBe(2)
    expect(pasted.stderr).toMatch(/^unknown option --client-secret\n/)
    expect(pasted.stderr).not.toContain(secret)
    expect(await run(['check', '--config', 'gateway.yaml'])).toMatchObject({ stdout: 'gateway.yaml: OK (1 provider, 1 route)\n' })
  })

  it('a config with no routes (and no forward-auth hosts) passes, with a warning that it protects nothing', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'gw-slips-'))
    const file = join(dir, 'gateway.yaml')
    await writeFile(file, config(OIDC).replace(/routes:[\s\S]*$/, '') + REDIS_STORE)
    const answer = await run(['--check', '--config', file])
    expect(answer).toMatchObject({ stdout: `${file}: OK (1 provider, 0 routes)\n` })
    expect((answer as { stderr: string }).stderr).toBe('warning: routes: none, and no forwardAuth hosts: the gateway protects nothing (only its own /oauth/ pages answer); add a route (routes: - path: /app/ ...)\n')
  })

  it('an indentation slip is one line', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'gw-slips-'))
    const file = join(dir, 'gateway.yaml')
    await writeFile(file, config('    clientId: c\n').replace('routes:\n', 'clientSecret: s\nissuer: https://op.example.org\nscope: openid\nroutes:\n'))
    expect(await run(['--check', '--config', file])).toMatchObject({
      code: 1,
      stdout: '',
      stderr: `${file}: 1 problem\n  clientSecret: is at the top level, but is a key of providers.demo (as are \`issuer\` and \`scope\` after it); probably indented too little: line them up with \`clientId\` on line 5 (line 6)\n`,
    })
  })

  it('at start, a loopback upstream in a container is logged as a warning', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'gw-slips-'))
    const file = join(dir, 'gateway.yaml')
    const provider = '    clientId: c\n    clientSecret: s\n    authorizeUrl: https://op.example.org/authorize\n    tokenUrl: https://op.example.org/token\n    scope: read\n'
    // Nothing listens at the upstream's address, for the whole run: not 9100, where `npm run demo`'s sample app does.
    await writeFile(file, `server:\n  host: 127.0.0.1\n  port: 0\n${config(provider).replace('http://127.0.0.1:9100', await refusedUrl())}`)
    const lines = await startLines(file, { GATEWAY_IN_CONTAINER: 'true' })
    expect(lines).toContainEqual(expect.objectContaining({ level: 40, msg: expect.stringMatching(/^routes\[0\]\.upstream: 127\.0\.0\.2 is this container itself/) as unknown }))
  })

  it('--check warns about a loopback upstream in a container and exits 0', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'gw-slips-'))
    const file = join(dir, 'gateway.yaml')
    // Nothing listens at the upstream's address: the warning is given (one that answers: none, test/config/slips-env-file.test.ts).
    await writeFile(file, config(OIDC, '    provider: demo\n', REDIS_STORE).replace('http://127.0.0.1:9100', await refusedUrl()))
    const inside = await run(['--check', '--config', file], { GATEWAY_IN_CONTAINER: 'true' })
    expect(inside).toMatchObject({ stdout: `${file}: OK (1 provider, 1 route)\n` })
    expect(inside.stderr).toBe('warning: routes[0].upstream: 127.0.0.2 is this container itself, not the machine it runs on, and nothing listens there in this container; use the service\'s name on the container network (or host.docker.internal), or set GATEWAY_IN_CONTAINER=false if it is meant (a sidecar)\n')
    expect((await run(['--check', '--config', file])).stderr).toBe('')
  })
})
