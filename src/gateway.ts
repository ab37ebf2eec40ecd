// buildGateway(config): the app as a Fastify instance with its plugins in order (error
// handler, probes and metrics, sign-in routes, proxy routes). It never listens: main.ts does, and tests build it.
import Fastify, { type FastifyInstance } from 'fastify'
import type { DestinationStream } from 'pino'
import type { GatewayConfig, StoreConfig } from './config.js'
import { registerErrorHandler } from './error-handler.js'
import { BatchedDestination } from './log-destination.js'
import { loggerOptions } from './logger.js'
import { Metrics } from './metrics.js'
import { Providers } from './oauth/providers.js'
import { TokenRefresher } from './oauth/refresh.js'
import { oauthRoutes } from './oauth/routes.js'
import { Flows } from './oauth/state.js'
import { probes } from './probes.js'
import { proxyRoutes } from './proxy.js'
import { RequestEnd } from './request-end.js'
import { Sealer, deriveKey, randomToken } from './seal.js'
import { Sessions } from './session.js'
import { MemoryStore } from './store/memory.js'
import { RedisStore } from './store/redis.js'
import type { SessionStore } from './store/store.js'

export interface GatewayDeps {
  /** Where log lines go (default: stdout). Tests capture them here. */
  logStream?: DestinationStream
  logLevel?: string
}

function createStore (config: StoreConfig, app: FastifyInstance, metrics: Metrics): SessionStore {
  if (config.type === 'memory') {
    app.log.warn('store.type is memory: sessions live in this process only (one instance, lost on restart)')
    return new MemoryStore()
  }
  return new RedisStore(config, app.log, () => metrics.storeErrors.inc())
}

export async function buildGateway (config: GatewayConfig, deps: GatewayDeps = {}): Promise<FastifyInstance> {
  const logStream = deps.logStream ?? new BatchedDestination()
  const app = Fastify({
    // Buffered, asynchronous writes to stdout, batched per 25 ms window and flushed at exit.
    logger: { ...loggerOptions(deps.logLevel), stream: logStream },
    // One log line and the route's metrics per request, when the response has finished.
    logController: new RequestEnd(),
    trustProxy: config.server.trustProxy,
    routerOptions: { ignoreTrailingSlash: true },
    requestTimeout: 120_000,
  })

  let secret = config.session.secret
  if (!secret) {
    secret = randomToken()
    app.log.warn('session.secret is not set: using a random one, so sessions will not survive a restart and cannot be shared between instances')
  }

  const metrics = new Metrics()
  const store = createStore(config.store, app, metrics)
  const sealer = new Sealer(secret)
  const sessions = new Sessions(store, sealer, config.session)
  const flows = new Flows(store, sealer, deriveKey(secret, 'state'), config.state.ttlMs)
  const providers = new Providers(config.providers, app.log)
  const refresher = new TokenRefresher(store, sessions, providers, metrics, app.log)

  app.addHook('onReady', async () => {
    providers.warmUp()
    await sessions.listen()
    if (store instanceof RedisStore && !(await store.waitUntilReady(2000))) {
      app.log.warn('session store not reachable at start; /readyz answers 503 until it is')
    }
  })
  app.addHook('onClose', async () => store.close())

  registerErrorHandler(app)
  await app.register(probes, { store, metrics })
  await app.register(oauthRoutes, { config, providers, sessions, flows, metrics })
  await app.register(proxyRoutes, { config, sessions, refresher, metrics })
  return app
}
