// buildGateway(config): the app as a Fastify instance with its plugins in order (error
// handler, probes and metrics, sign-in routes, forward-auth, proxy routes). It never listens: main.ts does, and tests build it.
import { timeOwnBodies } from './routes/own-bodies.js'
import { fastifyTrustProxy } from './http/trust-proxy.js'
import Fastify, { type FastifyInstance, type FastifyReply } from 'fastify'
import type { DestinationStream } from 'pino'
import { Access } from './access/authorize.js'
import { BearerReports } from './access/bearer-report.js'
import { Assertions } from './assertion/assertions.js'
import { KeyRing } from './assertion/keys.js'
import { configWarnings, processWarnings } from './config/config.js'
import type { GatewayConfig, StoreConfig } from './config/types.js'
import { registerErrorHandler, type OnErrorAnswer } from './http/error-handler.js'
import { GatewayError } from './errors.js'
import { edgeRewriter, registerEdge } from './http/edge.js'
import { spelledPrefixPasses } from './config/route-reach.js'
import { guardUpgrades } from './http/upgrades.js'
import { BatchedDestination } from './ops/log-destination.js'
import { loggerOptions } from './ops/logger.js'
import { Metrics } from './ops/metrics.js'
import { serveMetricsApart } from './ops/metrics-listener.js'
import type { Tracing } from './ops/tracing.js'
import { tracingSettings, type Spans } from './ops/tracing-settings.js'
import { AccessTokens } from './oauth/access-tokens.js'
import { Providers } from './oauth/providers.js'
import { BackchannelLogout, clientSiblings } from './oauth/backchannel.js'
import { SignOuts } from './oauth/logout.js'
import { TokenRefresher } from './oauth/refresh.js'
import { SessionIndex } from './oauth/session-index.js'
import { Flows } from './oauth/state.js'
import { signinRateLimit } from './http/rate-limit.js'
import { RequestEnd } from './http/request-end.js'
import { drainOnClose } from './http/drain.js'
import { Sealer, randomToken } from './session/seal.js'
import { issuerSiblings, PersonIndex } from './session/person-index.js'
import { Sessions } from './session/session.js'
import { MemoryStore } from './store/memory.js'
import type { Hysteresis } from './store/outage-log.js'
import { RedisStore } from './store/redis.js'
import { TracedStore } from './store/traced-store.js'
import { COMMAND_REFUSAL_REASONS, type CommandRefusalReason, type SessionStore } from './store/store.js'
import { systemClock, type Clock, type Timers } from './ops/clock.js'
import type { Agents, AgentsDeps } from './routes/agents.js'
import { forwardAuth } from './routes/forward-auth.js'
import { jwksRoute } from './routes/jwks.js'
import { oauthRoutes } from './routes/oauth.js'
import { probes, READINESS_PATH } from './routes/probes.js'
import { protectedResources } from './routes/protected-resource.js'
import { proxyRoutes } from './routes/proxy.js'
import { FormReplay } from './routes/form-replay.js'
import { PreservedBodies } from './oauth/preserved-body.js'
import { SessionSockets } from './proxy/session-sockets.js'
import { SessionStreams } from './proxy/session-streams.js'
import { BearerSockets } from './proxy/bearer-sockets.js'

export interface GatewayDeps {
  /** Where log lines go (default: stdout). Tests capture them here. */
  logStream?: DestinationStream
  logLevel?: string
  /** What "now" is for token expiry, the session cache window, the identity assertions and the refusal lines' windows (the store's, machine clients' tokens') (default: the wall clock): tests move it. */
  clock?: Clock
  /** How long a Redis store's outage (and recovery) must persist before it is logged (default 1 s each). */
  storeHysteresis?: Hysteresis
  /** The timers of open websockets' session deadlines (default Node's, unref'd): tests fire them as they move `clock`. */
  timers?: Timers
  /** Where the OTEL_* variables are read (default process.env). */
  env?: NodeJS.ProcessEnv
  /** A certificate authority the hosts of agents.clientMetadataPrivateHosts may be signed by, besides Node's (tests: their own; operators use NODE_EXTRA_CA_CERTS). */
  extraCa?: string
}

declare module 'fastify' {
  interface FastifyInstance {
    /** The signed identity assertions (undefined when no `assertion` section nor route asks for them). */
    assertions: Assertions | undefined
    /** The sessions (cookie -> sealed record in the store, and this instance's cache of them). */
    sessions: Sessions
    /** The open websockets of each session on this instance, closed when it ends. */
    sessionSockets: SessionSockets
    /** OpenTelemetry, when `tracing` or the OTEL_* variables turn it on. */
    tracing: Tracing | undefined
  }
}

/**
 * Tracing, when gateway.yaml or the OTEL_* variables turn it on: only then is OpenTelemetry loaded
 * and a hook added. Its plugin goes first, so that its hook starts the request's span before the
 * gateway's own hooks run (their store reads are its children); the spans still queued are sent at
 * close (bounded).
 */
async function startTracing (config: GatewayConfig, app: FastifyInstance, env: NodeJS.ProcessEnv): Promise<Spans | undefined> {
  const settings = tracingSettings(config.tracing, env)
  app.decorate('tracing', undefined)
  if (settings === undefined) return undefined
  const tracing = (await import('./ops/tracing.js')).startTracing(settings, app.log)
  app.tracing = tracing
  await app.register(tracing.plugin)
  app.addHook('onClose', async () => tracing.shutdown())
  app.log.info({ collector: settings.tracesUrl, sampleRatio: settings.sampleRatio }, 'tracing: spans go to the collector')
  return tracing.spans
}

function createStore (config: StoreConfig, app: FastifyInstance, metrics: Metrics, { hysteresis, clock, spans, endedLiveMs }: { hysteresis?: Hysteresis, clock?: Clock, spans?: Spans, endedLiveMs: number }): SessionStore {
  // Every reason shows in /metrics from the start, at 0.
  for (const reason of COMMAND_REFUSAL_REASONS) metrics.storeRefusals.inc({ reason }, 0)
  if (config.type === 'memory') {
    const memory = new MemoryStore()
    return spans === undefined ? memory : new TracedStore(memory, spans, 'memory')
  }
  const onCommandError = (refusal?: CommandRefusalReason) => {
    metrics.storeErrors.inc()
    if (refusal) metrics.storeRefusals.inc({ reason: refusal })
  }
  const redis = new RedisStore(config, app.log, { onCommandError, hysteresis, clock, endedLiveMs })
  return spans === undefined ? redis : new TracedStore(redis, spans, 'redis')
}

/** session.secret, or a random one for this process (processWarnings says so: sessions then die with it). */
function sessionSecret (config: GatewayConfig): string {
  return config.session.secret ?? randomToken()
}

/** Before serving: the providers' discovery begun, the invalidation channels listened to, the store asked once; at close, the store closed. */
function startAndStop (app: FastifyInstance, { providers, sessions, assertions, store }: { providers: Providers, sessions: Sessions, assertions: Assertions | undefined, store: SessionStore }): void {
  app.addHook('onReady', async () => {
    providers.warmUp()
    await sessions.listen()
    await assertions?.listen()
    if (!(await store.ready(2000))) {
      app.log.warn('session store not reachable at start; /readyz answers 503 until it is')
    }
    assertions?.keys.warmUp()
  })
  drainOnClose(app)
  app.addHook('onClose', async () => store.close())
}

/**
 * The two indexes that find sessions by who signed in: by the provider's `sid`/`sub` (back-channel
 * logout) and by person (the sessions list, revoke, sign out everywhere). Both are renewed with
 * the sessions they list.
 */
function sessionIndexes (app: FastifyInstance, { store, sealer, sessions, ttlMs, clock, siblings }: { store: SessionStore, sealer: Sealer, sessions: Sessions, ttlMs: number, clock: Clock, siblings: (provider: string) => readonly string[] }): { sessionIndex: SessionIndex, personIndex: PersonIndex } {
  const sessionIndex = new SessionIndex(store, sealer, ttlMs, clock)
  const personIndex = new PersonIndex(store, (id) => sessions.endById(id), sealer, ttlMs, clock, siblings)
  sessions.onRenewed((session) => {
    // Best effort, off the request's path: a failed extension only shortens the entry to its last renewal.
    sessionIndex.touch(session.record.providerSessions).catch((error: unknown) => app.log.debug({ err: error }, 'logout index not renewed'))
    personIndex.touch(session.record).catch((error: unknown) => app.log.debug({ err: error }, 'person index not renewed'))
  })
  return { sessionIndex, personIndex }
}

/** One key ring signs the identity assertions and the agents' access tokens: made when either is on. */
function signing (config: GatewayConfig, app: FastifyInstance, store: SessionStore, sealer: Sealer, clock: Clock): { keys: KeyRing | undefined, assertions: Assertions | undefined } {
  if (!config.assertion.enabled && !config.agents.enabled) return { keys: undefined, assertions: undefined }
  const keys = new KeyRing(store, sealer, { rotateEveryMs: config.assertion.rotateEveryMs, clock, log: app.log })
  const assertions = config.assertion.enabled ? new Assertions(keys, { issuer: config.server.baseUrl, ttlMs: config.assertion.ttlMs, clock }) : undefined
  return { keys, assertions }
}

/**
 * The authorization server for agents, loaded only where a route has `agents: true` (oidc-provider
 * stays unloaded otherwise). `ownKeys`: no assertions share its key ring, so it follows the ring's rotations itself.
 */
async function agentsServer (app: FastifyInstance, config: GatewayConfig, deps: Omit<AgentsDeps, 'config'>, ownKeys: boolean): Promise<Agents | undefined> {
  if (!config.agents.enabled) return undefined
  const agents = new (await import('./routes/agents.js')).Agents({ config, ...deps })
  if (ownKeys) app.addHook('onReady', async () => { await deps.keys.listen(); deps.keys.warmUp() })
  return agents
}

/** What a store outage costs the clients. The readiness probe's 503 reports the outage; it is not a request failed. */
function countStoreUnavailable (metrics: Metrics): OnErrorAnswer {
  return (request, code) => {
    if (code === 'session_store_unavailable' && request.routeOptions.url !== READINESS_PATH) metrics.storeUnavailableRequests.inc()
  }
}

export async function buildGateway (config: GatewayConfig, deps: GatewayDeps = {}): Promise<FastifyInstance> {
  const logStream = deps.logStream ?? new BatchedDestination()
  const app = Fastify({
    // Buffered, asynchronous writes to stdout, batched per 5 ms window (as bytes outside the heap) and flushed at exit.
    logger: { ...loggerOptions(deps.logLevel), stream: logStream },
    // One log line and the route's metrics per request, when the response has finished.
    logController: new RequestEnd(),
    // The one test forward-auth and the proxy ask too (http/trust-proxy.ts); `true` trusts the peer only.
    trustProxy: fastifyTrustProxy(config.server.trustProxy),
    routerOptions: { ignoreTrailingSlash: true },
    requestTimeout: 120_000,
    // One canonical target before routing: see src/config/canonical.ts.
    rewriteUrl: edgeRewriter([...config.routes.map((route) => route.path), '/oauth'], spelledPrefixPasses(config)),
    // What the router itself cannot decode is answered like any other bad target, never with its text.
    frameworkErrors: (error, _request, reply) => {
      (reply as FastifyReply).send(new GatewayError('invalid_request', 'The request cannot be served: the target cannot be decoded.', { cause: error }))
    },
  })

  for (const warning of [...processWarnings(config), ...configWarnings(config)]) app.log.warn(warning)
  const spans = await startTracing(config, app, deps.env ?? process.env)

  const secret = sessionSecret(config)

  const metrics = new Metrics()
  const clock = deps.clock ?? systemClock
  const store = createStore(config.store, app, metrics, { hysteresis: deps.storeHysteresis, clock, spans, endedLiveMs: config.session.ttlMs })
  // Every key is derived from session.secret (writes) and previousSecrets (opening what they sealed).
  const sealer = new Sealer(secret, config.session.previousSecrets)
  const sessions = new Sessions(store, sealer, config.session, clock)
  metrics.countPreviousSecretSessions(() => sessions.previousSecretSessions())
  const flows = new Flows(store, sealer, config.state.ttlMs, clock)
  const providers = new Providers(config.providers, app.log, clock)
  const signOuts = new SignOuts(store, sealer, providers, config.state.ttlMs, config.server.baseUrl, app.log, clock)
  const { sessionIndex, personIndex } = sessionIndexes(app, { store, sealer, sessions, ttlMs: config.session.ttlMs, clock, siblings: issuerSiblings(config.providers) })
  const backchannel = new BackchannelLogout(store, sessionIndex, sessions, app.log, clock, clientSiblings(config.providers))
  const refresher = new TokenRefresher(store, sessions, providers, metrics, app.log, clock)
  const { keys, assertions } = signing(config, app, store, sealer, clock)
  const access = new Access(sessions, refresher, clock)
  const accessTokens = new AccessTokens(providers, clock)
  const bearerReports = new BearerReports(metrics, app.log, clock)
  app.decorate('assertions', assertions).decorate('sessions', sessions)
  // Set on protected requests (the proxy's and forward-auth's), read by RequestEnd's log line.
  app.decorateRequest('audit', undefined)

  startAndStop(app, { providers, sessions, assertions, store })
  const agents = keys && await agentsServer(app, config, { store, sealer, sessions, keys, sessionIndex, personIndex, clock, log: app.log, metrics, extraCa: deps.extraCa }, assertions === undefined)

  registerErrorHandler(app, config.server.baseUrl, countStoreUnavailable(metrics))
  registerEdge(app)
  timeOwnBodies(app, deps.timers)
  // With metrics.listen, /metrics is served apart (and answers 404 on the public port).
  if (config.metrics.listen) serveMetricsApart(app, config.metrics.listen, metrics)
  await app.register(probes, { store, metrics, servesMetrics: config.metrics.listen === undefined, readiness: config.store.readiness })
  const signinLimit = await signinRateLimit(app, config.rateLimit.login, store)
  const forms = config.routes.some((route) => route.preserveBodyBytes !== undefined)
    ? new FormReplay(new PreservedBodies(store, sealer, config.state.ttlMs, clock), sessions, config, app.log, signinLimit)
    : undefined
  await app.register(oauthRoutes, { config, providers, sessions, flows, metrics, signOuts, backchannel, sessionIndex, personIndex, signinLimit, clock, forms, agents, refreshes: refresher })
  if (keys) await app.register(jwksRoute, { keys })
  if (agents) await agents.register(app)
  await app.register(forwardAuth, { config, providers, access, accessTokens, bearerReports, assertions, metrics })
  await app.register(protectedResources, { config })
  // Websockets end with their session: its ending on any instance, its deadlines (proxy/session-sockets.ts).
  const sockets = new SessionSockets({ sessions, usableToken: (session, provider) => refresher.usableToken(session, provider), maxAgeMs: config.session.maxAgeMs, clock, timers: deps.timers, log: app.log })
  app.decorate('sessionSockets', sockets)
  app.addHook('onClose', async () => sockets.close())
  // Machine clients' websockets end with their token: its exp, or its revocation (proxy/bearer-sockets.ts).
  const bearerSockets = new BearerSockets({ clock, timers: deps.timers, log: app.log })
  app.addHook('onClose', async () => bearerSockets.close())
  // An agent's answers in flight and a browser's event streams end with their session (proxy/session-streams.ts).
  const streams = new SessionStreams(sessions, app.log, clock, deps.timers)
  await app.register(proxyRoutes, { config, access, accessTokens, metrics, bearerReports, assertions, forms, sockets, bearerSockets, traced: spans !== undefined, grants: agents && ((route) => agents.guardFor(route)), streams })
  // Once every route (and so every websocket proxy's upgrade listener) is registered.
  app.addHook('onReady', async () => guardUpgrades(app, config.routes))
  return app
}
