// Starts the gateway for a test: config built as YAML (so the real config path is exercised),
// listening on a loopback port from the OS, log lines captured.
import type { FastifyInstance } from 'fastify'
import { Writable } from 'node:stream'
import { stringify } from 'yaml'
import { parseConfig } from '../../src/config/config.js'
import type { GatewayConfig } from '../../src/config/types.js'
import { buildGateway, type GatewayDeps } from '../../src/gateway.js'
import { holdAgain, holdPort, releasePort, waitFor } from './net.js'
import { startOidcProvider, type ProviderOptions, type TestProvider } from './oidc.js'
import { startRedis } from './redis.js'
import { startUpstream, type Upstream } from './upstream.js'
import { signIn } from './browser.js'

export const TEST_SECRET = 'test-session-secret-0123456789-abcdefghij'

export interface TestGateway {
  url: string
  app: FastifyInstance
  config: GatewayConfig
  /** Every log line written, as text. */
  logs: string[]
  close (): Promise<void>
}

/** Collects pino's output lines. */
export function logCollector (): { stream: Writable, lines: string[] } {
  const lines: string[] = []
  const stream = new Writable({
    write (chunk: Buffer, _encoding, callback) {
      lines.push(...chunk.toString().split('\n').filter(Boolean))
      callback()
    },
  })
  return { stream, lines }
}

/** What a test may set besides gateway.yaml: whether to listen, and buildGateway's injected parts (not the log stream). */
export interface StartOptions {
  listen?: boolean
  deps?: Omit<GatewayDeps, 'logStream' | 'logLevel'>
}

/** `raw` is gateway.yaml as an object; server.port/baseUrl are filled in unless given. */
export async function startGateway (raw: Record<string, unknown>, options: StartOptions = {}): Promise<TestGateway> {
  // A port of its own is held from here to the bind, as a reserved one is (test/helpers/net.ts).
  const given = (raw.server as { port?: number } | undefined)?.port
  const port = given ?? await holdPort()
  const server = { host: '127.0.0.1', port, baseUrl: `http://127.0.0.1:${port}`, ...(raw.server as object | undefined) }
  const session = { secret: TEST_SECRET, ...(raw.session as object | undefined) }
  const config = parseConfig(stringify({ ...raw, server, session }), {}, 'test.yaml')
  const { stream, lines } = logCollector()
  const app = await buildGateway(config, { ...options.deps, logStream: stream, logLevel: 'debug' })
  // A port reserved with reserveBaseUrl() is held until this moment, and held again after close.
  const reserved = reservedPorts.has(config.server.port)
  try {
    // Ready first: its hooks connect to Redis and the provider, and each outgoing connection takes a
    // local port from the range the reserved one came from. Released only once they are made, the
    // port is free for the moment between the release and the bind, not for the whole start.
    await app.ready()
    if (options.listen !== false) {
      await releasePort(config.server.port)
      await app.listen({ host: '127.0.0.1', port: config.server.port })
    }
  } catch (error) {
    await app.close()
    // A reserved port goes back to its hold (the next start on it, such as the shared stack's next
    // file, relies on it); any other is let go.
    if (reserved) await holdAgainOrSay(config.server.port)
    else await releasePort(config.server.port)
    throw error
  }
  const close = async () => {
    await app.close()
    if (reserved) await holdAgainOrSay(config.server.port)
  }
  return { url: config.server.baseUrl, app, config, logs: lines, close }
}

/** Ports handed out by reserveBaseUrl(): held in between, see test/helpers/net.ts. */
const reservedPorts = new Set<number>()

/** Holds a reserved port again; says so when another socket took it meanwhile (the next start on it may then fail with EADDRINUSE). */
async function holdAgainOrSay (port: number): Promise<void> {
  if (!await holdAgain(port)) console.warn(`test/helpers/gateway.ts: the reserved port ${port} was taken before it could be held again`)
}

/** A loopback port from the OS for a gateway, and the base URL it will have (needed before it starts). */
export async function reserveBaseUrl (): Promise<{ port: number, baseUrl: string }> {
  const port = await holdPort()
  reservedPorts.add(port)
  return { port, baseUrl: `http://127.0.0.1:${port}` }
}

/** A gateway.yaml provider entry for a client of the test authorization server (by discovery). */
export function oidcClient (issuer: string, clientId: string, clientSecret: string, scope = 'openid'): Record<string, string> {
  return { clientId, clientSecret, issuer, scope }
}

/**
 * The common test setup: a real authorization server with one client, and a gateway whose provider
 * `demo` signs in there. `store` and `routes` are gateway.yaml's; `close` stops both. `provider`:
 * the authorization server's options (`logout: true` for one that sends back-channel logout tokens).
 */
export async function startGatewayWithProvider (raw: { store: Record<string, unknown>, routes: unknown[], [key: string]: unknown }, options: StartOptions = {}, provider: ProviderOptions = {}): Promise<{ gateway: TestGateway, op: TestProvider, close (): Promise<void> }> {
  // The port is reserved (held) before the provider starts, since its redirect URI names it.
  const { port, baseUrl } = await reserveBaseUrl()
  const op = await startOidcProvider([{ client_id: 'c', client_secret: 's', redirect_uris: [`${baseUrl}/oauth/authorized/demo/`] }], provider)
  try {
    const gateway = await startGateway({ server: { port, baseUrl }, ...raw, providers: { demo: oidcClient(op.issuer, 'c', 's') } }, options)
    return { gateway, op, close: async () => { await gateway.close(); await op.close() } }
  } catch (error) {
    await op.close()
    throw error
  }
}

/** The status `gateway` answers an API client's GET of `path` with the session cookie whose value is `value` (signIn's `value`, not its `cookie`). */
export async function sessionStatus (gateway: TestGateway, value: string, path = '/app/x'): Promise<number> {
  const response = await fetch(`${gateway.url}${path}`, { headers: { accept: 'application/json', cookie: `gw_session=${value}` } })
  await response.arrayBuffer()
  return response.status
}

/**
 * Resolves once `gateway`, an instance that did not handle the sign-out or sign-in that ended the
 * session, answers 401 for it, and still does when asked again. Such an instance hears of it
 * through the store's broadcast (Redis pub/sub), which can arrive a moment after the instance that
 * handled it answered. Within a second: the tests that use this keep sessions cached for 10 s, so
 * a broadcast that never arrives still fails them.
 */
export async function endedElsewhere (gateway: TestGateway, cookie: string): Promise<void> {
  await waitFor(async () => await sessionStatus(gateway, cookie) === 401, 1000, 'the other instance to hear that the session ended')
  const again = await sessionStatus(gateway, cookie)
  if (again !== 401) throw new Error(`the other instance answered ${again} again for an ended session`)
}

/** A gateway with a protected `/app/` inside a public `/`, one echo upstream behind both. */
export interface NestedRoutes {
  gateway: TestGateway
  upstream: Upstream
  port: number
  close (): Promise<void>
}

/**
 * Starts a real Redis, an upstream and a gateway whose protected `/app/` (with these `public`
 * rules; its provider is never reached) sits inside a public `/`: where a path spelled another way
 * could slip from the protected route to the public one (the edge's and the router's tests).
 */
export async function startNestedRoutes (publicRules: string[]): Promise<NestedRoutes> {
  const redis = await startRedis()
  const upstream = await startUpstream()
  const gateway = await startGateway({
    store: { type: 'redis', url: redis.url },
    providers: { demo: { clientId: 'c', clientSecret: 's', authorizeUrl: 'http://127.0.0.1:9/authorize', tokenUrl: 'http://127.0.0.1:9/token', scope: 'read' } },
    routes: [
      { path: '/app/', upstream: upstream.url, provider: 'demo', public: publicRules },
      { path: '/', upstream: upstream.url, auth: 'none' },
    ],
  })
  return {
    gateway,
    upstream,
    port: Number(new URL(gateway.url).port),
    async close () {
      await gateway.close()
      await upstream.close()
      await redis.release()
    },
  }
}

/**
 * A gateway answering forward-auth for a proxy in front on loopback (trusted), whose provider `demo`
 * signs in at a real authorization server; `rest` is the rest of gateway.yaml (its `forwardAuth`,
 * an `assertion`); `opOptions` the authorization server's own (machine clients, resources). `close`
 * stops both.
 */
export async function startForwardAuthGateway (redisUrl: string, rest: Record<string, unknown>, opOptions: Parameters<typeof startOidcProvider>[1] = {}): Promise<{ gateway: TestGateway, op: TestProvider, close (): Promise<void> }> {
  const server = await reserveBaseUrl()
  const op = await startOidcProvider([{ client_id: 'fa', client_secret: 'fa-secret', redirect_uris: [`${server.baseUrl}/oauth/authorized/demo/`] }], opOptions)
  try {
    const gateway = await startGateway({
      server: { ...server, trustProxy: ['127.0.0.1'] },
      store: { type: 'redis', url: redisUrl },
      providers: { demo: oidcClient(op.issuer, 'fa', 'fa-secret', 'openid email groups') },
      routes: [],
      ...rest,
    })
    return { gateway, op, close: async () => { await gateway.close(); await op.close() } }
  } catch (error) {
    await op.close()
    throw error
  }
}

/** The session cookie (`gw_session=...`) of `login` signed in at `gateway`'s provider `demo`. */
export async function sessionCookie (gateway: TestGateway, login: string): Promise<string> {
  return (await signIn(`${gateway.url}/oauth/login/demo/?next=/oauth/`, login)).cookie
}
