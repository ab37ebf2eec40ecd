// `npm run demo:provider`, the local provider of docs/getting-started.md: the command of the real
// npm script (read from package.json) as a child process on ports from the OS. It is node itself,
// started without npm: killing npm ended npm and left its node child running after the file. What it prints is pasted as the docs say (its gateway.yaml
// blocks read by the gateway's own parseConfig, its `export` line as the environment), and a real
// gateway built from that signs in there. With the provider's sign-in remembered (the default) a
// second sign-in skips its form and a sign-out at the gateway signs out there too; with
// --no-remember-sign-in every sign-in shows the form. A bad flag, a bad value or a taken port is
// one line on stderr.
import { spawn } from 'node:child_process'
import { randomUUID } from 'node:crypto'
import { readFileSync } from 'node:fs'
import { afterAll, describe, expect, it } from 'vitest'
import type { FastifyInstance } from 'fastify'
import { parseConfig } from '../src/config/config.js'
import type { Clock } from '../src/ops/clock.js'
import { buildGateway } from '../src/gateway.js'
import { DemoUsageError, demoOptions, shellWord } from '../demo/options.js'
import { Browser } from './helpers/browser.js'
import { TEST_SECRET, logCollector, reserveBaseUrl } from './helpers/gateway.js'
import { holdPort, releasePort } from './helpers/net.js'
import { walk } from './helpers/oidc.js'
import { Children, processesWithEnv } from './helpers/processes.js'

/** In the environment of every process this file starts, and so of whatever those start in turn. */
const MARK = { name: 'GATEWAY_TEST_DEMO_PROVIDER', value: randomUUID() }

const children = new Children()
afterAll(async () => {
  await children.end()
  // A test ends what it starts: no demo provider of this file is left running (a provider whose
  // parent was killed without it would be, with no test left to end it).
  expect(await processesWithEnv(MARK.name, MARK.value)).toEqual([])
})

const PORTS = { DEMO_ISSUER_PORT: '0', DEMO_APP_PORT: '0', [MARK.name]: MARK.value }

/** `npm run demo:provider`'s command, `exec node <script> <flags>`: node's arguments. */
const SCRIPT_ARGS = (() => {
  const { scripts } = JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8')) as { scripts: Record<string, string> }
  const words = scripts['demo:provider']!.split(' ')
  expect(words.slice(0, 2)).toEqual(['exec', 'node'])
  return words.slice(2)
})()

/** `npm run demo:provider -- ...args`, as node with the script's arguments (the npm script's own form). */
function startDemo (args: string[], env: Record<string, string>) {
  return children.add(spawn(process.execPath, [...SCRIPT_ARGS, ...args], { cwd: new URL('..', import.meta.url), env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] }))
}

/** Runs `npm run demo:provider -- ...args` until it exits; its exit code and output. */
async function runToExit (args: string[], env: Record<string, string> = PORTS): Promise<{ code: number | null, stdout: string, stderr: string }> {
  const child = startDemo(args, env)
  let stdout = ''
  let stderr = ''
  child.stdout.on('data', (chunk: Buffer) => { stdout += chunk.toString() })
  child.stderr.on('data', (chunk: Buffer) => { stderr += chunk.toString() })
  const code = await new Promise<number | null>((resolve) => child.once('exit', resolve))
  // oidc-provider's own line on a Node line it does not support (CI's extra Node 20 run) is not the demo's.
  return { code, stdout, stderr: stderr.replace(/^oidc-provider WARNING: Unsupported runtime\..*\n/m, '') }
}

/** What the provider printed, as the operator pastes it: the gateway.yaml blocks and the environment; and all of it. */
interface Printed { yaml: string, env: Record<string, string>, issuer: string, appUrl: string, output: string }

async function startProvider (args: string[]): Promise<Printed> {
  const child = startDemo(args, PORTS)
  let output = ''
  await new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`demo:provider printed nothing to paste within 20 s:\n${output}`)), 20_000)
    child.stdout.on('data', (chunk: Buffer) => {
      output += chunk.toString()
      if (output.includes('Ctrl-C stops it.')) { clearTimeout(timer); resolve() }
    })
    child.stderr.on('data', (chunk: Buffer) => { output += chunk.toString() })
    child.once('exit', (code) => { clearTimeout(timer); reject(new Error(`demo:provider exited (${code}):\n${output}`)) })
  })
  const yaml = /^(providers:\n[\s\S]*?)\n {2}and the gateway's environment:/m.exec(output)?.[1]
  const exported = /^export (.+)$/m.exec(output)?.[1]
  if (yaml === undefined || exported === undefined) throw new Error(`no gateway.yaml blocks or export line in:\n${output}`)
  const env = Object.fromEntries(exported.split(' ').map((pair) => pair.split(/=(.*)/s, 2) as [string, string]))
  return { yaml, env, issuer: /^ {4}issuer +(\S+)$/m.exec(output)![1]!, appUrl: /^ {4}sample app +(\S+)/m.exec(output)![1]!, output }
}

/** A real gateway from the printed blocks and environment, listening at `baseUrl` (reserved on `port`). */
async function gatewayFrom (printed: Printed, port: number, baseUrl: string): Promise<{ url: string, close (): Promise<void> }> {
  const text = `server: { host: 127.0.0.1, port: ${port}, baseUrl: "${baseUrl}" }\nsession: { secret: ${TEST_SECRET} }\nstore: { type: memory }\n${printed.yaml}`
  const config = parseConfig(text, printed.env, 'my-gateway.yaml')
  const app = await buildGateway(config, { logStream: logCollector().stream, logLevel: 'warn' })
  await app.ready()
  await releasePort(port)
  await app.listen({ host: '127.0.0.1', port })
  return { url: baseUrl, close: async () => { await app.close() } }
}

/** The gateway and the provider of one test, signed in once as `login` (the sample app greets them). */
async function signedIn (args: string[], login: string): Promise<{ browser: Browser, gateway: { url: string, close (): Promise<void> }, printed: Printed }> {
  const { port, baseUrl } = await reserveBaseUrl()
  const printed = await startProvider(['--gateway-url', baseUrl, ...args])
  const gateway = await gatewayFrom(printed, port, baseUrl)
  const browser = new Browser()
  const landed = await browser.navigate(`${gateway.url}/app/`, { login })
  expect(landed.status).toBe(200)
  const page = await landed.text()
  expect(page).toContain(`Hello, ${login.charAt(0).toUpperCase()}${login.slice(1)}`)
  // Its "Sign out" goes to the gateway named, also where the app is shown through a front on another host.
  expect(page).toContain(`<a class="button" href="${baseUrl}/oauth/logout/">Sign out</a>`)
  return { browser, gateway, printed }
}

describe('npm run demo:provider', () => {
  it('prints gateway.yaml blocks that parseConfig reads, with the issuer, client and secret from the printed environment', async () => {
    const { port, baseUrl } = await reserveBaseUrl()
    const printed = await startProvider(['--gateway-url', baseUrl])
    await releasePort(port)
    const config = parseConfig(`server: { baseUrl: "${baseUrl}" }\n${printed.yaml}`, printed.env, 'my-gateway.yaml')
    expect(config.providers.demo).toMatchObject({ issuer: printed.issuer, clientId: 'demo-client', clientSecret: 'demo-secret-change-me' })
    expect(config.routes[0]).toMatchObject({ path: '/app', provider: 'demo' })
    expect(printed.env.DEMO_ISSUER).toBe(printed.issuer)
    // docs/getting-started.md shows these blocks as printed (step 3, indented in its list).
    const page = readFileSync(new URL('../docs/getting-started.md', import.meta.url), 'utf8')
    const shown = /^ {3}```yaml\n( {3}providers:[\s\S]*?)^ {3}```$/m.exec(page)?.[1]?.replace(/^ {3}/gm, '')
    expect(shown).toBe(printed.yaml.replaceAll(printed.appUrl, 'http://127.0.0.1:9100'))
  }, 30_000)

  it('remembers its sign-in by default: a new gateway session skips its form, and a sign-out at the gateway signs out there too', async () => {
    const { browser, gateway } = await signedIn([], 'bob')
    try {
      browser.cookies.delete('gw_session')
      const again = await walk(browser, `${gateway.url}/app/`)
      expect(again.url.startsWith(gateway.url), `ended at ${again.url}`).toBe(true)
      expect(again.body).toContain('Hello, Bob')

      const out = await walk(browser, `${gateway.url}/oauth/logout/`, { method: 'POST' })
      expect(out.visited.some((url) => url.includes('/session/end'))).toBe(true)
      const afterSignOut = await walk(browser, `${gateway.url}/app/`)
      expect(afterSignOut.body).toContain('name="login"')
    } finally {
      await gateway.close()
    }
  }, 30_000)

  it('with --no-remember-sign-in shows its sign-in form at every sign-in', async () => {
    const { browser, gateway } = await signedIn(['--no-remember-sign-in'], 'alice')
    try {
      browser.cookies.delete('gw_session')
      const again = await walk(browser, `${gateway.url}/app/`)
      expect(again.url.startsWith(gateway.url)).toBe(false)
      expect(again.body).toContain('name="login"')
    } finally {
      await gateway.close()
    }
  }, 30_000)

  it('says in one line which ports are taken and which variables move them, all of them at once', async () => {
    const [taken, alsoTaken] = [await holdPort(), await holdPort()]
    try {
      const { code, stdout, stderr } = await runToExit([], { ...PORTS, DEMO_ISSUER_PORT: String(taken), DEMO_APP_PORT: String(alsoTaken) })
      expect(code).toBe(2)
      expect(stdout).toBe('')
      expect(stderr.split('\n').filter((line) => line.startsWith('demo:'))).toEqual([
        `demo: port ${taken} (the authorization server) is in use: set DEMO_ISSUER_PORT to another (0 picks a free one); ` +
        `port ${alsoTaken} (the sample app) is in use: set DEMO_APP_PORT to another (0 picks a free one)`,
      ])
    } finally {
      await Promise.all([releasePort(taken), releasePort(alsoTaken)])
    }
  }, 30_000)

  it('refuses an unknown flag in one line listing the flags, and prints them all with --help', async () => {
    const bad = await runToExit(['--remember'])
    expect(bad.code).toBe(2)
    expect(bad.stderr).toBe('demo: unknown flag "--remember"; flags: --without-gateway, --gateway-url <url>, --forward-auth <proxy>, --token-ttl <duration>, --remember-sign-in, --no-remember-sign-in, --help\n')
    const help = await runToExit(['--help'])
    expect(help.code).toBe(0)
    for (const flag of ['--gateway-url', '--token-ttl', 'DEMO_TOKEN_TTL', '--remember-sign-in', '--no-remember-sign-in', 'DEMO_ISSUER_PORT', 'DEMO_PROVIDER_REMEMBER']) expect(help.stdout).toContain(flag)
  }, 30_000)
})

describe('the demo\'s flags and variables', () => {
  it('defaults to the operator\'s gateway on both loopback spellings of port 8080, the shipped secret and a remembered sign-in', () => {
    expect(demoOptions(['--without-gateway'], {})).toEqual({
      help: false, withGateway: false, gatewayUrls: ['http://localhost:8080', 'http://127.0.0.1:8080'], clientSecret: 'demo-secret-change-me', rememberSignIn: true, tokenTtl: 3600,
    })
    expect(demoOptions(['--token-ttl', '30s'], {}).tokenTtl).toBe(30)
    expect(demoOptions(['--forward-auth=caddy'], {}).forwardAuth).toBe('caddy')
    expect(demoOptions(['--forward-auth', 'nginx'], {}).forwardAuth).toBe('nginx')
    expect(demoOptions([], {}).forwardAuth).toBeUndefined()
    expect(demoOptions(['--token-ttl=5m'], { DEMO_TOKEN_TTL: '1h' }).tokenTtl).toBe(300)
    expect(demoOptions([], { DEMO_TOKEN_TTL: '24h' }).tokenTtl).toBe(86_400)
    expect(demoOptions([], { DEMO_TOKEN_TTL: '90' }).tokenTtl).toBe(90)
    expect(demoOptions(['--without-gateway', '--gateway-url=https://gw.example.test/', '--no-remember-sign-in'], {})).toMatchObject({ gatewayUrls: ['https://gw.example.test'], rememberSignIn: false })
    expect(demoOptions(['--without-gateway'], { DEMO_GATEWAY_URL: 'http://127.0.0.1:9999', DEMO_PROVIDER_REMEMBER: '0', DEMO_CLIENT_SECRET: 's3' }))
      .toMatchObject({ gatewayUrls: ['http://127.0.0.1:9999'], rememberSignIn: false, clientSecret: 's3' })
  })

  it.each([
    [['--without-gateway', '--gateway-url'], '--gateway-url needs a URL, such as --gateway-url http://localhost:8080'],
    [['--without-gateway', '--gateway-url', 'localhost:8080'], '--gateway-url must be a gateway\'s base URL, http(s)://host[:port] with nothing after it, got "localhost:8080"'],
    [['--without-gateway', '--gateway-url', 'ftp://gw.example.test'], '--gateway-url must be a gateway\'s base URL, http(s)://host[:port] with nothing after it, got "ftp://gw.example.test"'],
    [['--without-gateway', '--gateway-url', 'javascript:alert(1)'], '--gateway-url must be a gateway\'s base URL, http(s)://host[:port] with nothing after it, got "javascript:alert(1)"'],
    [['--without-gateway', '--gateway-url', 'http://gw/app'], '--gateway-url must be a gateway\'s base URL, http(s)://host[:port] with nothing after it, got "http://gw/app"'],
    [['--without-gateway', '--gateway-url', 'http://gw/?next=//evil.test'], '--gateway-url must be a gateway\'s base URL, http(s)://host[:port] with nothing after it, got "http://gw/?next=//evil.test"'],
    [['--without-gateway', '--gateway-url', 'http://gw#x'], '--gateway-url must be a gateway\'s base URL, http(s)://host[:port] with nothing after it, got "http://gw#x"'],
    [['--without-gateway', '--gateway-url', 'http://user:pw@gw'], '--gateway-url must be a gateway\'s base URL, http(s)://host[:port] with nothing after it, got "http://user:pw@gw"'],
    [['--without-gateway', '--gateway-url', 'not a url'], '--gateway-url must be a URL such as http://localhost:8080, got "not a url"'],
    [['--gateway-url', 'http://gw'], '--gateway-url is for your own gateway: use it with --without-gateway (npm run demo:provider)'],
    [['--help=yes'], '--help takes no value, got "--help=yes"'],
    [['--token-ttl'], '--token-ttl needs a duration, such as --token-ttl 30s'],
    ...['0', '0s', '25h', '86401', '-5s', '1.5m', '10 s', '10d', '', 'ten', '1e3', '0x10', '9999999'].map((value) => [['--token-ttl', value], `--token-ttl must be a duration from 1s to 24h, such as 30s, 5m or 1h, got ${JSON.stringify(value)}`] as [string[], string]),
    ...[[], ['traefik'], ['Caddy'], [''], ['caddy nginx'], ['--without-gateway']].map((value) => [['--forward-auth', ...value], `--forward-auth needs caddy or nginx, got ${JSON.stringify(value[0] ?? '')}`] as [string[], string]),
    [['--forward-auth=nginx', '--without-gateway'], '--forward-auth puts the demo\'s gateway behind a proxy: leave out --without-gateway'],
    [['-x'], 'unknown flag "-x"; flags: --without-gateway, --gateway-url <url>, --forward-auth <proxy>, --token-ttl <duration>, --remember-sign-in, --no-remember-sign-in, --help'],
  ])('refuses %j: %s', (argv, message) => {
    expect(() => demoOptions(argv, {})).toThrow(new DemoUsageError(message))
  })

  it.each(['yes', 'true', ' 1', '2'])('refuses DEMO_PROVIDER_REMEMBER=%j', (value) => {
    expect(() => demoOptions([], { DEMO_PROVIDER_REMEMBER: value })).toThrow(`DEMO_PROVIDER_REMEMBER must be 1 or 0, got ${JSON.stringify(value)}`)
  })

  it('refuses a DEMO_GATEWAY_URL with a path', () => {
    expect(() => demoOptions([], { DEMO_GATEWAY_URL: 'http://gw/x' })).toThrow('DEMO_GATEWAY_URL must be a gateway\'s base URL')
  })

  it.each([
    ['demo-secret-change-me', 'demo-secret-change-me'],
    ['a b', '\'a b\''],
    ['it\'s', '\'it\'\\\'\'s\''],
    ['$(rm -rf ~)', '\'$(rm -rf ~)\''],
    ['`id`', '\'`id`\''],
    ['x;y', '\'x;y\''],
    ['', '\'\''],
  ])('prints the secret %j as the one shell word %s', (value, word) => {
    expect(shellWord(value)).toBe(word)
  })
})

/**
 * A gateway from docs/machine-clients.md's "Try it" gateway.yaml block (the operator's file), as the
 * page starts it, on `port`, its clock `clock` (tests move it).
 */
async function pageGateway (printed: Printed, port: number, baseUrl: string, clock: Clock): Promise<FastifyInstance> {
  const page = readFileSync(new URL('../docs/machine-clients.md', import.meta.url), 'utf8')
  const block = /^```yaml\n(server:[\s\S]*?)^```$/m.exec(page.slice(page.indexOf('## Try it on your machine\n')))![1]!
  const yaml = block.replace(/^server:.*$/m, `server: { host: 127.0.0.1, port: ${port}, baseUrl: "${baseUrl}" }\nsession: { secret: ${TEST_SECRET} }`).replaceAll('http://127.0.0.1:9100', printed.appUrl)
  const app = await buildGateway(parseConfig(yaml, printed.env, 'the page\'s gateway.yaml'), { logStream: logCollector().stream, logLevel: 'warn', clock })
  await app.ready()
  await releasePort(port)
  await app.listen({ host: '127.0.0.1', port })
  return app
}

describe('docs/machine-clients.md, "Try it on your machine", run as written against npm run demo:provider', () => {
  const page = readFileSync(new URL('../docs/machine-clients.md', import.meta.url), 'utf8')
  const section = page.slice(page.indexOf('## Try it on your machine\n'), page.indexOf('## The bearer block\n'))
  const [yamlBlock, shellBlock] = ['yaml', 'sh'].map((kind) => [...section.matchAll(new RegExp(`^\`\`\`${kind}\\n([\\s\\S]*?)^\`\`\`$`, 'gm'))].map(([, block]) => block!).find((block) => block.includes('TOKEN=') || block.startsWith('server:')))
  /** The page's addresses: the provider's and the sample app's defaults, and the operator's gateway. */
  const PAGE = { issuer: 'http://127.0.0.1:9000', app: 'http://127.0.0.1:9100', gateway: 'http://localhost:8080' }

  /** Each command of the shell block with its output, run in one bash in order (TOKEN carries over). */
  async function runCommands (commands: readonly string[], printed: Printed, gatewayUrl: string): Promise<string[]> {
    const live = (line: string) => line.replaceAll(PAGE.issuer, printed.issuer).replaceAll(PAGE.gateway, gatewayUrl)
    const script = commands.map((line) => `${live(line)}\necho "@@@ end of command"`).join('\n')
    // stderr holds only curl's progress meter (the page's calls without -s).
    const child = children.add(spawn('bash', ['-c', script], { stdio: ['ignore', 'pipe', 'ignore'] }))
    let output = ''
    child.stdout.on('data', (chunk: Buffer) => { output += chunk.toString() })
    await new Promise((resolve) => child.once('exit', resolve))
    return output.split('@@@ end of command\n').slice(0, commands.length)
  }

  it('the page\'s gateway.yaml is what the provider prints, and its commands get these answers; the token expires when the gateway\'s clock passes its exp', async () => {
    expect(yamlBlock, 'a yaml block starting with server:').toBeDefined()
    expect(shellBlock, 'a sh block with TOKEN=').toBeDefined()
    const { port, baseUrl } = await reserveBaseUrl()
    const printed = await startProvider(['--gateway-url', baseUrl])
    // The page shows the blocks as printed, after its one `server:` line.
    expect(yamlBlock!.replace(/^server:.*\n\n/, '')).toBe(printed.yaml.replaceAll(printed.appUrl, PAGE.app))
    const commands = shellBlock!.trimEnd().split('\n')
    // The token lines are the ones the provider printed for the operator's gateway.
    expect(printed.output).toContain(commands[0]!.replaceAll(PAGE.issuer, printed.issuer).replace(/ -d resource=api:\/\/orders -d scope=orders\.read/, ' -d resource=api://orders -d scope=orders.read'))

    const clock = { offset: 0, now: () => Date.now() + clock.offset }
    const app = await pageGateway(printed, port, baseUrl, clock)
    try {
      const outputs = await runCommands(commands, printed, baseUrl)
      expect(outputs.map((output, i) => [commands[i]!.slice(0, 40), output.length > 0])).toEqual(commands.map((line) => [line.slice(0, 40), !line.includes('=$(')]))
      const [, withToken, noToken, browser, metadata, nullToken, , opaque] = outputs
      expect(withToken).toMatch(/x-forwarded-user[^\n]*ci-deploy/)
      expect(noToken).toMatch(/^HTTP\/1\.1 401 /)
      expect(noToken).toContain('"error":"unauthenticated"')
      expect(browser).toMatch(/^HTTP\/1\.1 302 /)
      expect(JSON.parse(metadata!)).toMatchObject({ resource: `${baseUrl}/orders`, authorization_servers: [printed.issuer] })
      expect(nullToken).toMatch(/^HTTP\/1\.1 401 /)
      expect(nullToken).toContain('No token was sent: the header carries \\"null\\" where a token belongs')
      expect(opaque).toMatch(/x-forwarded-user[^\n]*ci-deploy/)

      // The page: "call again 70 seconds after getting the token" with --token-ttl 10s; here the
      // token lives the default hour, and the gateway's clock moves past its exp and the 60 s allowed.
      clock.offset = 3600_000 + 61_000
      const [, expired] = await runCommands(commands.slice(0, 2).map((line, i) => i === 1 ? line.replace('curl -H', 'curl -si -H') : line), printed, baseUrl)
      expect(expired).toMatch(/^HTTP\/1\.1 401 /)
      expect(expired).toContain('The token has expired.')
    } finally {
      await app.close()
    }
  }, 30_000)

  it('--token-ttl sets the lifetime of the machine client\'s tokens', async () => {
    const printed = await startProvider(['--token-ttl', '10s'])
    expect(printed.output).toContain('tokens live   10s')
    const line = /^TOKEN=\$\((curl [^|]+) \|/m.exec(printed.output)![1]!
    const answer = await new Promise<string>((resolve) => {
      const child = children.add(spawn('bash', ['-c', line], { stdio: ['ignore', 'pipe', 'inherit'] }))
      let out = ''
      child.stdout.on('data', (chunk: Buffer) => { out += chunk.toString() })
      child.once('exit', () => resolve(out))
    })
    const { access_token: token, expires_in: expiresIn } = JSON.parse(answer) as { access_token: string, expires_in: number }
    expect(expiresIn).toBe(10)
    const claims = JSON.parse(Buffer.from(token.split('.')[1]!, 'base64url').toString()) as { exp: number, iat: number }
    expect(claims.exp - claims.iat).toBe(10)
  }, 30_000)
})

describe('docs/agents.md, "Try it on your machine", run as written against npm run demo:provider', () => {
  const page = readFileSync(new URL('../docs/agents.md', import.meta.url), 'utf8')
  const section = page.slice(page.indexOf('## Try it on your machine\n'), page.indexOf('## Turn it on\n'))
  const script = /^```sh\n([\s\S]*?)^```$/m.exec(section)?.[1]

  it('a CLI signs in with the device flow as alice (the person allows it in a browser) and calls the sample app\'s MCP tool through the gateway', async () => {
    expect(script, 'a sh block under the heading').toBeDefined()
    expect(script!.startsWith('GW=http://localhost:8080\n')).toBe(true)
    const { port, baseUrl } = await reserveBaseUrl()
    const printed = await startProvider(['--gateway-url', baseUrl])
    // The gateway of machine-clients.md's try-it: the printed blocks, the /mcp route among them.
    const clock = { offset: 0, now: () => Date.now() + clock.offset }
    const app = await pageGateway(printed, port, baseUrl, clock)
    try {
      // The script as written, but its `sleep` waits for this test instead of the wall clock: the
      // test moves the gateway's clock by the interval asked for, then lets the script go on.
      const child = children.add(spawn('bash', ['-c', `sleep () { echo "@@sleep $1"; read -r _; }\n${script!.replace('GW=http://localhost:8080', `GW=${baseUrl}`)}`], { stdio: ['pipe', 'pipe', 'pipe'] }))
      let output = ''
      let person: Promise<void> | undefined
      const exited = new Promise<number | null>((resolve) => child.once('exit', resolve))
      child.stderr.on('data', (chunk: Buffer) => { output += chunk.toString() })
      child.stdout.on('data', (chunk: Buffer) => {
        output += chunk.toString()
        const open = /^Open (\S+) and allow demo-cli$/m.exec(output)
        if (open !== null && person === undefined) person = allowAs(open[1]!, 'alice', baseUrl)
        const sleeps = output.match(/^@@sleep (\d+)$/gm) ?? []
        if (sleeps.length > answered) {
          const seconds = Number(sleeps[answered]!.slice('@@sleep '.length))
          answered++
          void (person ?? Promise.resolve()).then(() => { clock.offset += seconds * 1000; child.stdin.write('\n') })
        }
      })
      let answered = 0
      expect(await exited, output).toBe(0)
      const answer = output.split('\n').filter((line) => line.startsWith('{')).at(-1)
      expect(answer, output).toBeDefined()
      const result = JSON.parse(answer!) as { result: { content: Array<{ text: string }> } }
      expect(JSON.parse(result.result.content[0]!.text)).toEqual({ user: 'alice', email: 'alice@example.test' })
    } finally {
      await app.close()
    }
  }, 30_000)
})

/** The person's part of the device flow: the address with the code, Continue, the sign-in as `login`, and Allow. */
async function allowAs (url: string, login: string, gatewayUrl: string): Promise<void> {
  const browser = new Browser()
  const confirmation = await (await browser.fetch(url)).text()
  const field = (name: string, html: string) => new RegExp(`name="${name}" value="([^"]+)"`).exec(html)?.[1] ?? ''
  const confirmed = await browser.fetch(`${gatewayUrl}/oauth/agents/device`, {
    method: 'POST',
    headers: { 'content-type': 'application/x-www-form-urlencoded', origin: gatewayUrl },
    body: new URLSearchParams({ xsrf: field('xsrf', confirmation), user_code: field('user_code', confirmation), confirm: 'yes' }),
  })
  expect(confirmed.status, confirmation).toBe(303)
  const consent = await (await browser.navigate(new URL(confirmed.headers.get('location')!, gatewayUrl).href, { login })).text()
  const action = new URL(/<form method="post" action="([^"]+)"/.exec(consent)![1]!, gatewayUrl).href
  let last = await browser.fetch(action, { method: 'POST', headers: { 'content-type': 'application/x-www-form-urlencoded', origin: gatewayUrl }, body: new URLSearchParams({ csrf: field('csrf', consent), decision: 'allow' }) })
  while (last.status === 302 || last.status === 303) last = await browser.fetch(new URL(last.headers.get('location')!, action).href)
  expect(last.status).toBe(200)
}
