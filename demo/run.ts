// `npm run demo`: the whole picture on loopback. Starts the demo authorization server, the sample
// app, and the gateway (the real CLI, as a child process, on the shipped gateway.yaml), prints the
// one URL to open, and stops everything on Ctrl-C. The gateway's log shows one line per request
// (readable on a terminal, JSON when piped: demo/log-view.ts). With REDIS_URL the gateway keeps sessions in
// Redis, otherwise in memory. Ports: DEMO_GATEWAY_PORT (8080), DEMO_ISSUER_PORT (9000),
// DEMO_APP_PORT (9100); 0 takes one from the OS.
//
// `--without-gateway` starts only the authorization server and the sample app, for
// docker-compose.yml, where the gateway is its own container: DEMO_HOST (listen address),
// DEMO_PUBLIC_ISSUER, DEMO_GATEWAY_URL and DEMO_CLIENT_SECRET then say how the pieces see each other.
import { spawn } from 'node:child_process'
import { randomBytes } from 'node:crypto'
import { createServer } from 'node:net'
import { fileURLToPath } from 'node:url'
import { startAuthorizationServer, type AuthorizationServer } from './authorization-server.js'
import { showGatewayLogs } from './log-view.js'
import { startSampleApp, type SampleApp } from './sample-app.js'

const env = process.env

function port (name: string, fallback: number): number {
  const value = Number(env[name] ?? fallback)
  if (!Number.isInteger(value) || value < 0 || value > 65535) throw new Error(`${name} must be a port number, got ${env[name]}`)
  return value
}

async function freePort (): Promise<number> {
  const server = createServer()
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  const address = server.address()
  await new Promise<void>((resolve) => server.close(() => resolve()))
  return typeof address === 'object' && address ? address.port : 0
}

async function waitForHealth (url: string, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs
  while (Date.now() < deadline) {
    if (await fetch(url).then((r) => r.ok, () => false)) return
    await new Promise((resolve) => setTimeout(resolve, 100))
  }
  throw new Error(`the gateway did not answer ${url} within ${timeoutMs / 1000}s`)
}

/** The authorization server with the gateway as its one client, and the sample app. */
async function startServices (gatewayUrl: string, clientSecret: string): Promise<{ as: AuthorizationServer, app: SampleApp }> {
  const host = env.DEMO_HOST ?? '127.0.0.1'
  const as = await startAuthorizationServer({
    port: port('DEMO_ISSUER_PORT', 9000),
    host,
    // Not the gateway's host name (localhost): browsers share cookies across the ports of one host,
    // and the sample app would show the authorization server's own cookies.
    publicHost: '127.0.0.1',
    issuer: env.DEMO_PUBLIC_ISSUER,
    clients: [{
      client_id: 'demo-client',
      client_secret: clientSecret,
      redirect_uris: [`${gatewayUrl}/oauth/authorized/demo/`],
      post_logout_redirect_uris: [`${gatewayUrl}/oauth/logout/demo/`],
    }],
    // As real providers: it remembers the sign-in, signs out when the gateway asks, and offers an
    // account chooser ("Use another account" on the gateway's 403 page).
    logout: true,
    selectAccount: true,
  })
  // The sample app runs beside the authorization server, so it reaches userinfo on loopback.
  const app = await startSampleApp({ port: port('DEMO_APP_PORT', 9100), host, userinfoUrl: `http://127.0.0.1:${as.port}/me` })
  return { as, app }
}

function onSignals (stop: (code: number) => Promise<void>): void {
  process.once('SIGINT', () => { stop(0).catch(() => process.exit(1)) })
  process.once('SIGTERM', () => { stop(0).catch(() => process.exit(1)) })
}

async function withoutGateway (): Promise<void> {
  if (!env.DEMO_GATEWAY_URL || !env.DEMO_CLIENT_SECRET) throw new Error('--without-gateway needs DEMO_GATEWAY_URL and DEMO_CLIENT_SECRET')
  const { as, app } = await startServices(env.DEMO_GATEWAY_URL.replace(/\/+$/, ''), env.DEMO_CLIENT_SECRET)
  onSignals(async (code) => {
    await Promise.all([as.close(), app.close()])
    process.exit(code)
  })
  process.stdout.write(`demo authorization server ${as.issuer}, sample app on port ${new URL(app.url).port}\n`)
}

async function withGateway (): Promise<void> {
  const gatewayPort = port('DEMO_GATEWAY_PORT', 8080) || await freePort()
  const baseUrl = `http://localhost:${gatewayPort}`
  const clientSecret = randomBytes(24).toString('base64url')
  const { as, app } = await startServices(baseUrl, clientSecret)

  const gateway = spawn(process.execPath, [fileURLToPath(new URL('../src/main.js', import.meta.url)), '--config', fileURLToPath(new URL('../../gateway.yaml', import.meta.url))], {
    stdio: ['ignore', 'pipe', 'inherit'],
    env: {
      ...env,
      LOG_LEVEL: env.LOG_LEVEL ?? 'info',
      GATEWAY_HOST: '127.0.0.1',
      GATEWAY_PORT: String(gatewayPort),
      GATEWAY_BASE_URL: baseUrl,
      GATEWAY_SESSION_SECRET: env.GATEWAY_SESSION_SECRET ?? randomBytes(32).toString('base64url'),
      GATEWAY_STORE: env.REDIS_URL ? 'redis' : 'memory',
      DEMO_ISSUER: as.issuer,
      DEMO_CLIENT_ID: 'demo-client',
      DEMO_CLIENT_SECRET: clientSecret,
      APP_UPSTREAM: app.url,
    },
  })

  showGatewayLogs(gateway.stdout, process.stdout)

  let stopping = false
  const stop = async (code: number) => {
    if (stopping) return
    stopping = true
    if (gateway.exitCode === null) {
      gateway.kill('SIGTERM')
      await new Promise((resolve) => gateway.once('exit', resolve))
    }
    await Promise.all([as.close(), app.close()])
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
  process.stdout.write(`
  Demo running (sessions in ${env.REDIS_URL ? 'Redis' : 'memory'}):
    gateway               ${baseUrl}
    authorization server  ${as.issuer}  (any username signs in)
    sample app            ${app.url}  (behind the gateway at /app/)

  Open ${baseUrl}/app/ in a browser.   Ctrl-C stops everything.
\n`)
}

(process.argv.includes('--without-gateway') ? withoutGateway() : withGateway()).catch((error: unknown) => {
  process.stderr.write(`demo: ${error instanceof Error ? error.message : String(error)}\n`)
  process.exit(1)
})
