// `npm run demo`: the whole picture on loopback. Starts the demo authorization server, the sample
// app, and the gateway (the real CLI, as a child process, on the shipped gateway.yaml), prints the
// one URL to open, and stops everything on Ctrl-C. The gateway's log shows one line per request
// (readable on a terminal, JSON when piped: demo/log-view.ts). With REDIS_URL the gateway keeps sessions in
// Redis, otherwise in memory.
//
// `--without-gateway` (`npm run demo:provider`) starts only the authorization server and the sample
// app: a local provider for the operator's own gateway, and docker-compose.yml's demo container,
// where the gateway is its own container. It prints the client and the gateway.yaml blocks to paste
// (demo/instructions.ts). Flags and DEMO_* variables: demo/options.ts, `--help`.
import { spawn } from 'node:child_process'
import { randomBytes } from 'node:crypto'
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises'
import { createServer } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { parseDocument } from 'yaml'
import { startAuthorizationServer, type AuthorizationServer } from './authorization-server.js'
import { frontBinary, holdFrontPort, startFrontProxy, type FrontKind, type FrontProxy, type HeldPort } from './front-proxy.js'
import { localProviderText } from './instructions.js'
import { MACHINE_CLIENT, machineResources } from './machine.js'
import { showGatewayLogs } from './log-view.js'
import { DEMO_CLIENT_ID, DEMO_PROVIDER, DemoUsageError, USAGE, demoOptions, type DemoOptions } from './options.js'
import { startSampleApp, type SampleApp } from './sample-app.js'

const env = process.env

function port (name: string, fallback: number): number {
  const value = Number(env[name] ?? fallback)
  if (env[name] === '' || !Number.isInteger(value) || value < 0 || value > 65535) throw new DemoUsageError(`${name} must be a port number (0 picks a free one), got ${JSON.stringify(env[name])}`)
  return value
}

/**
 * `start()`, with a port already taken said in one line naming the variable that moves it, instead
 * of the listen error's stack.
 */
async function onPort<T> (what: string, variable: string, portNumber: number, start: () => Promise<T>): Promise<T> {
  try {
    return await start()
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code
    if (code === 'EADDRINUSE' || code === 'EACCES') {
      throw new DemoUsageError(`port ${portNumber} (${what}) is ${code === 'EADDRINUSE' ? 'in use' : 'not allowed'}: set ${variable} to another (0 picks a free one)`)
    }
    throw error
  }
}

async function freePort (): Promise<number> {
  const server = createServer()
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  const address = server.address()
  await new Promise<void>((resolve) => server.close(() => resolve()))
  return typeof address === 'object' && address ? address.port : 0
}

/** Fails with DemoUsageError when `portNumber` cannot be listened on (the gateway would fail later, less clearly). */
async function portIsFree (portNumber: number, what: string, variable: string): Promise<void> {
  const server = createServer()
  await onPort(what, variable, portNumber, async () => await new Promise<void>((resolve, reject) => {
    server.once('error', reject)
    server.listen(portNumber, '127.0.0.1', resolve)
  }))
  await new Promise<void>((resolve) => server.close(() => resolve()))
}

/** A fixed port the demo will listen on, what listens there, and the variable that moves it. */
interface PortUse { port: number, what: string, variable: string }

/**
 * Every fixed port in `uses` tried before anything starts: all of those taken said in one message
 * (a newcomer's reading: with 8080 and 9000 both taken, the demo said one, then the next).
 */
async function portsAreFree (uses: readonly PortUse[]): Promise<void> {
  const taken: string[] = []
  for (const { port: portNumber, what, variable } of uses) {
    if (portNumber === 0) continue
    await portIsFree(portNumber, what, variable).catch((error: unknown) => {
      if (!(error instanceof DemoUsageError)) throw error
      taken.push(error.message)
    })
  }
  if (taken.length > 0) throw new DemoUsageError(taken.join('; '))
}

async function waitForHealth (url: string, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs
  while (Date.now() < deadline) {
    if (await fetch(url).then((r) => r.ok, () => false)) return
    await new Promise((resolve) => setTimeout(resolve, 100))
  }
  throw new Error(`the gateway did not answer ${url} within ${timeoutMs / 1000}s`)
}

/**
 * The authorization server with the gateway(s) at `gatewayUrls` as its one client and a CI job's
 * machine client (./machine.ts), and the sample app.
 */
async function startServices (gatewayUrls: string[], clientSecret: string, options: DemoOptions, signOutUrl?: string): Promise<{ as: AuthorizationServer, app: SampleApp }> {
  const host = env.DEMO_HOST ?? '127.0.0.1'
  const issuerPort = port('DEMO_ISSUER_PORT', 9000)
  const appPort = port('DEMO_APP_PORT', 9100)
  const as = await onPort('the authorization server', 'DEMO_ISSUER_PORT', issuerPort, async () => await startAuthorizationServer({
    port: issuerPort,
    host,
    // Not the gateway's host name (localhost): browsers share cookies across the ports of one host,
    // and the sample app would show the authorization server's own cookies.
    publicHost: '127.0.0.1',
    issuer: env.DEMO_PUBLIC_ISSUER || undefined,
    clients: [{
      client_id: DEMO_CLIENT_ID,
      client_secret: clientSecret,
      redirect_uris: gatewayUrls.map((url) => `${url}/oauth/authorized/${DEMO_PROVIDER}/`),
      post_logout_redirect_uris: gatewayUrls.map((url) => `${url}/oauth/logout/${DEMO_PROVIDER}/`),
    }],
    // As real providers: it remembers the sign-in, signs out when the gateway asks. Without, every
    // sign-in asks for the user again. Either way an account chooser ("Use another account" on the
    // gateway's 403 page).
    logout: options.rememberSignIn,
    selectAccount: true,
    machineClients: [MACHINE_CLIENT],
    resources: machineResources(options.tokenTtl),
  }))
  try {
    // The sample app runs beside the authorization server, so it reaches userinfo on loopback.
    const app = await onPort('the sample app', 'DEMO_APP_PORT', appPort, async () => await startSampleApp({ port: appPort, host, userinfoUrl: `http://127.0.0.1:${as.port}/me`, ...(signOutUrl === undefined ? {} : { signOutUrl }) }))
    return { as, app }
  } catch (error) {
    await as.close()
    throw error
  }
}

/**
 * Stops on the first SIGINT or SIGTERM, and stays to finish on the next ones: under `npm run`, a
 * Ctrl-C reaches the demo twice (from the terminal and from npm), and the default action of the
 * second would end it before it removed its temporary files.
 */
function onSignals (stop: (code: number) => Promise<void>): void {
  let stopping = false
  const once = () => {
    if (stopping) return
    stopping = true
    stop(0).catch(() => process.exit(1))
  }
  process.on('SIGINT', once)
  process.on('SIGTERM', once)
}

/** The provider's and the sample app's ports, as startServices will take them. */
function servicePorts (): PortUse[] {
  return [
    { port: port('DEMO_ISSUER_PORT', 9000), what: 'the authorization server', variable: 'DEMO_ISSUER_PORT' },
    { port: port('DEMO_APP_PORT', 9100), what: 'the sample app', variable: 'DEMO_APP_PORT' },
  ]
}

async function withoutGateway (options: DemoOptions): Promise<void> {
  await portsAreFree(servicePorts())
  // One gateway named (--gateway-url): the sample app's "Sign out" goes there, wherever the app is
  // shown (through a forward-auth front on another host, `/oauth/logout/` is the front's own path).
  const [only, ...others] = options.gatewayUrls
  const { as, app } = await startServices(options.gatewayUrls, options.clientSecret, options, only !== undefined && others.length === 0 ? `${only}/oauth/logout/` : undefined)
  onSignals(async (code) => {
    await Promise.all([as.close(), app.close()])
    process.exit(code)
  })
  process.stdout.write(localProviderText({ issuer: as.issuer, clientSecret: options.clientSecret, gatewayUrls: options.gatewayUrls, appUrl: app.url, rememberSignIn: options.rememberSignIn, tokenTtl: options.tokenTtl }))
}

/** The shipped gateway.yaml. */
const SHIPPED_CONFIG = fileURLToPath(new URL('../../gateway.yaml', import.meta.url))

/** `--forward-auth`'s proxy, on its port (DEMO_FRONT_PORT), held until the proxy takes it over. */
interface Front { kind: FrontKind, port: HeldPort, url: string }

async function holdFront (kind: FrontKind): Promise<Front> {
  if (frontBinary(kind) === undefined) throw new DemoUsageError(`--forward-auth ${kind}: ${kind} is not installed (Debian: apt-get install -y ${kind === 'nginx' ? 'nginx-light' : 'caddy'})`)
  // Held with SO_REUSEPORT, which another demo's proxy shares: withGateway's portsAreFree bound it alone first, so a port in use said so.
  const requested = port('DEMO_FRONT_PORT', 8081)
  const held = await onPort(kind, 'DEMO_FRONT_PORT', requested, async () => await holdFrontPort(requested))
  return { kind, port: held, url: `http://localhost:${held.port}` }
}

/**
 * gateway.yaml as shipped, and with \`--forward-auth\` what the proxy in front needs (docs/forward-auth.md,
 * "The gateway's side"): its X-Forwarded-* trusted from loopback, and the app's address as a place a
 * sign-in may return to. The app is on the gateway's host name (localhost), so the session cookie
 * reaches it without session.cookieDomain: browsers share cookies across the ports of a host.
 */
async function gatewayConfig (front: Front | undefined): Promise<{ path: string, remove (): Promise<void> }> {
  if (front === undefined) return { path: SHIPPED_CONFIG, remove: async () => {} }
  const doc = parseDocument(await readFile(SHIPPED_CONFIG, 'utf8'))
  doc.setIn(['server', 'trustProxy'], doc.createNode(['127.0.0.1']))
  doc.setIn(['forwardAuth', 'allowedRedirectHosts'], doc.createNode([`localhost:${front.port.port}`]))
  const dir = await mkdtemp(join(tmpdir(), 'gateway-demo-'))
  const path = join(dir, 'gateway.yaml')
  await writeFile(path, doc.toString())
  return { path, remove: async () => await rm(dir, { recursive: true, force: true }) }
}

async function withGateway (options: DemoOptions): Promise<void> {
  const requested = port('DEMO_GATEWAY_PORT', 8080)
  const frontPort = options.forwardAuth === undefined ? [] : [{ port: port('DEMO_FRONT_PORT', 8081), what: options.forwardAuth, variable: 'DEMO_FRONT_PORT' }]
  await portsAreFree([{ port: requested, what: 'the gateway', variable: 'DEMO_GATEWAY_PORT' }, ...servicePorts(), ...frontPort])
  const gatewayPort = requested || await freePort()
  const baseUrl = `http://localhost:${gatewayPort}`
  // Only this demo's own gateway ever sees it: no reason for a known one.
  const clientSecret = randomBytes(24).toString('base64url')
  const front = options.forwardAuth === undefined ? undefined : await holdFront(options.forwardAuth)
  // The app's "Sign out" goes to this gateway, also from the proxy's address (another origin).
  const { as, app } = await startServices([baseUrl], clientSecret, options, front === undefined ? undefined : `${baseUrl}/oauth/logout/`)
  const config = await gatewayConfig(front)

  const gateway = spawn(process.execPath, [fileURLToPath(new URL('../src/main.js', import.meta.url)), '--config', config.path], {
    stdio: ['ignore', 'pipe', 'inherit'],
    env: {
      ...env,
      LOG_LEVEL: env.LOG_LEVEL ?? 'info',
      GATEWAY_HOST: '127.0.0.1',
      // The demo's provider and app run beside its gateway, in whatever container this is.
      GATEWAY_IN_CONTAINER: 'false',
      GATEWAY_PORT: String(gatewayPort),
      GATEWAY_BASE_URL: baseUrl,
      GATEWAY_SESSION_SECRET: env.GATEWAY_SESSION_SECRET ?? randomBytes(32).toString('base64url'),
      GATEWAY_STORE: env.REDIS_URL ? 'redis' : 'memory',
      DEMO_ISSUER: as.issuer,
      DEMO_CLIENT_ID,
      DEMO_CLIENT_SECRET: clientSecret,
      APP_UPSTREAM: app.url,
    },
  })

  showGatewayLogs(gateway.stdout, process.stdout)

  let stopping = false
  let proxy: FrontProxy | undefined
  const stop = async (code: number) => {
    if (stopping) return
    stopping = true
    await proxy?.stop()
    if (gateway.exitCode === null) {
      gateway.kill('SIGTERM')
      await new Promise((resolve) => gateway.once('exit', resolve))
    }
    await Promise.all([as.close(), app.close(), config.remove(), front?.port.release()])
    process.exit(code)
  }
  onSignals(stop)
  gateway.once('exit', (code) => {
    if (!stopping) {
      process.stderr.write(`demo: the gateway exited (code ${code}); stopping\n`)
      stop(1).catch(() => process.exit(1))
    }
  })

  await waitForHealth(`http://127.0.0.1:${gatewayPort}/healthz`, 15_000)
  if (front !== undefined) {
    try {
      proxy = await startFrontProxy(front.kind, { gateway: `127.0.0.1:${gatewayPort}`, upstream: new URL(app.url).host, host: 'localhost', port: front.port })
    } catch (error) {
      process.stderr.write(`demo: ${error instanceof Error ? error.message : String(error)}\n`)
      await stop(1)
    }
  }
  process.stdout.write(`
  Demo running (sessions in ${env.REDIS_URL ? 'Redis' : 'memory'}):
    gateway               ${baseUrl}
    authorization server  ${as.issuer}  (any username signs in; it keeps everything in memory, on purpose)
    sample app            ${app.url}  (behind the gateway at /app/${front ? `, and behind ${front.kind} at ${front.url}/` : ''})
${front ? `    ${front.kind.padEnd(21)} ${front.url}  (docs/forward-auth/${front.kind === 'nginx' ? 'nginx.conf' : 'Caddyfile'}, its addresses changed: it asks the gateway's /oauth/auth/demo/ first; it serves the name localhost only)\n` : ''}
  Open ${front ? `${front.url}/` : `${baseUrl}/app/`} in a browser.   Ctrl-C stops everything.
\n`)
}

async function main (): Promise<void> {
  const options = demoOptions(process.argv.slice(2), env)
  if (options.help) process.stdout.write(USAGE)
  else if (options.withGateway) await withGateway(options)
  else await withoutGateway(options)
}

main().catch((error: unknown) => {
  process.stderr.write(`demo: ${error instanceof Error ? error.message : String(error)}\n`)
  process.exit(error instanceof DemoUsageError ? 2 : 1)
})
