// `npm run demo`: the whole picture on loopback. Starts the demo authorization server, the sample
// app, and the gateway (the real CLI, as a child process, on the shipped gateway.yaml), prints the
// one URL to open, and stops everything on Ctrl-C. With REDIS_URL the gateway keeps sessions in
// Redis, otherwise in memory. Ports: DEMO_GATEWAY_PORT (8080), DEMO_ISSUER_PORT (9000),
// DEMO_APP_PORT (9100); 0 takes one from the OS.
import { spawn } from 'node:child_process'
import { randomBytes } from 'node:crypto'
import { createServer } from 'node:net'
import { fileURLToPath } from 'node:url'
import { startAuthorizationServer } from './authorization-server.js'
import { startSampleApp } from './sample-app.js'

function port (name: string, fallback: number): number {
  const value = Number(process.env[name] ?? fallback)
  if (!Number.isInteger(value) || value < 0 || value > 65535) throw new Error(`${name} must be a port number, got ${process.env[name]}`)
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

async function main (): Promise<void> {
  const gatewayPort = port('DEMO_GATEWAY_PORT', 8080) || await freePort()
  const baseUrl = `http://localhost:${gatewayPort}`
  const clientSecret = randomBytes(24).toString('base64url')

  const as = await startAuthorizationServer({
    port: port('DEMO_ISSUER_PORT', 9000),
    publicHost: 'localhost',
    clients: [{ client_id: 'demo-client', client_secret: clientSecret, redirect_uris: [`${baseUrl}/oauth/authorized/demo/`] }],
  })
  const app = await startSampleApp({ port: port('DEMO_APP_PORT', 9100), userinfoUrl: `${as.issuer.replace('localhost', '127.0.0.1')}/me` })

  const gateway = spawn(process.execPath, [fileURLToPath(new URL('../src/main.js', import.meta.url)), '--config', fileURLToPath(new URL('../../gateway.yaml', import.meta.url))], {
    stdio: ['ignore', 'inherit', 'inherit'],
    env: {
      ...process.env,
      LOG_LEVEL: process.env.LOG_LEVEL ?? 'warn',
      GATEWAY_HOST: '127.0.0.1',
      GATEWAY_PORT: String(gatewayPort),
      GATEWAY_BASE_URL: baseUrl,
      GATEWAY_SESSION_SECRET: process.env.GATEWAY_SESSION_SECRET ?? randomBytes(32).toString('base64url'),
      GATEWAY_STORE: process.env.REDIS_URL ? 'redis' : 'memory',
      DEMO_ISSUER: as.issuer,
      DEMO_CLIENT_ID: 'demo-client',
      DEMO_CLIENT_SECRET: clientSecret,
      APP_UPSTREAM: app.url,
    },
  })

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
  process.once('SIGINT', () => { stop(0).catch(() => process.exit(1)) })
  process.once('SIGTERM', () => { stop(0).catch(() => process.exit(1)) })
  gateway.once('exit', (code) => {
    if (!stopping) {
      process.stderr.write(`demo: the gateway exited (code ${code}); stopping\n`)
      stop(1).catch(() => process.exit(1))
    }
  })

  await waitForHealth(`http://127.0.0.1:${gatewayPort}/healthz`, 15_000)
  process.stdout.write(`
  Demo running (sessions in ${process.env.REDIS_URL ? 'Redis' : 'memory'}):
    gateway               ${baseUrl}
    authorization server  ${as.issuer}  (any username signs in)
    sample app            ${app.url}  (behind the gateway at /app/)

  Open ${baseUrl}/app/ in a browser.   Ctrl-C stops everything.
\n`)
}

main().catch((error: unknown) => {
  process.stderr.write(`demo: ${error instanceof Error ? error.message : String(error)}\n`)
  process.exit(1)
})
