// The gateway as the authorization server of MCP clients and CLIs (src/agents/), on Fastify:
// - GET /.well-known/oauth-authorization-server: RFC 8414 metadata (only the endpoints served);
// - /oauth/agents/{authorize,token,register,revoke}: oidc-provider, given the request untouched (its
//   body unread but the token and revocation forms, read to count each credential apart), each
//   charged per client address; an authorization request is checked first (./agent-authorization.ts), so that a request no person has seen never sends the browser to a client's address;
// - GET /oauth/agents/interaction/<uid>: where an authorization waits for the person: a sign-in at the route's
//   provider (kept apart, agents/pending.ts, until they decide; it becomes the grant's session, never the
//   browser's), then the consent page; POST there: Allow or Deny, from this page only (same origin, CSRF token).
// A sign-in for an agent leaves this browser a cookie sealed to the interaction: its consent page shows only who signed in here.
import rateLimit from '@fastify/rate-limit'
import cookie from '@fastify/cookie'
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify'
import type { GrantGuard } from '../access/authorize.js'
import { AuthorizationServer } from '../agents/authorization-server.js'
import { authorizationRequest } from './agent-authorization.js'
import { clientName } from '../agents/device-flow.js'
import type { AgentsCount } from '../agents/provider-events.js'
import { redirectShown } from '../agents/clients.js'
import { AGENT_ENDPOINTS, AGENT_SCOPE, AGENTS_PREFIX, authorizationServerMetadata } from '../agents/endpoints.js'
import { AgentGrants, type GrantLabel } from '../agents/grants.js'
import { GrantTokens } from '../agents/grant-tokens.js'
import { PendingSignIns, type PendingSignIn } from '../agents/pending.js'
import { requestSteps } from '../agents/request-undo.js'
import { foreignTarget } from '../agents/token-target.js'
import type { KeyRing } from '../assertion/keys.js'
import type { GatewayConfig, RouteConfig } from '../config/types.js'
import { GatewayError, storeFailureIn } from '../errors.js'
import { openToPages } from '../http/cors.js'
import { withBody } from '../http/replayed-request.js'
import { agentLimits, bounded, DEVICE_REQUEST_MAX_BYTES, REGISTRATION_MAX_BYTES, TOKEN_REQUEST_MAX_BYTES, tokenBudgets, tokenForm } from '../http/agent-limits.js'
import { consentPage, DEVICE_PAGES, messagePage } from '../http/agent-pages.js'
import { PAGE_HEADERS } from '../http/pages.js'
import { checkCodeEntry, fromOwnPage } from '../http/request-site.js'
import type { SessionIndex } from '../oauth/session-index.js'
import { cookieNames, parseInteractionId, resourceIdentifier } from '../oauth/urls.js'
import type { Clock } from '../ops/clock.js'
import type { Logger } from '../ops/logger.js'
import type { Metrics } from '../ops/metrics.js'
import type { PersonIndex } from '../session/person-index.js'
import { AGENT_FAMILY } from '../session/browser-family.js'
import { emptyRecord, withSignIn, type SignIn } from '../session/record.js'
import { sameText, type Sealer } from '../session/seal.js'
import type { Sessions } from '../session/session.js'
import type { SessionStore } from '../store/store.js'
import type { CookieOptions } from '../session/cookie.js'
import type { AgentSignIns } from './oauth-context.js'
import { admittedAs, loginUrlFor } from './agent-admission.js'

const CONSENT_PURPOSE = 'agents-consent'

export interface AgentsDeps {
  config: GatewayConfig
  store: SessionStore
  sealer: Sealer
  sessions: Sessions
  keys: KeyRing
  sessionIndex: SessionIndex
  personIndex: PersonIndex
  clock: Clock
  log: Logger
  metrics: Metrics
  /** A certificate authority the hosts of agents.clientMetadataPrivateHosts may be signed by, besides Node's (tests: their own). */
  extraCa?: string | undefined
}

/** What an interaction is about: its client, where the client wants the browser back, the route. */
interface Pending {
  uid: string
  clientId: string
  clientName: string
  /** The host of a client named by its metadata document's URL (which vouches for the name); none for a registered one. */
  clientSite: string | undefined
  /** Where the browser goes back to; none in the device flow. */
  redirectHost: string | undefined
  route: RouteConfig
  resource: string
}

export class Agents implements AgentSignIns {
  private readonly server: AuthorizationServer
  private readonly tokens: GrantTokens
  private readonly grants: AgentGrants
  private readonly pendings: PendingSignIns
  private readonly routes: ReadonlyMap<string, RouteConfig>
  private readonly pendingCookie: string
  /**
   * Host-only, as the sign-in's flow cookie: no `session.cookieDomain`, so that no sibling host (nor
   * an application behind forward-auth there) gets it; under /oauth/ unless a `__Host-` name needs Path=/.
   */
  private readonly pendingCookieOptions: CookieOptions
  private readonly ownOrigin: string
  private readonly count: AgentsCount = (event, result) => { this.deps.metrics.countAgents(event, result) }
  private readonly withSteps = requestSteps()

  constructor (private readonly deps: AgentsDeps) {
    const { config } = deps
    this.routes = new Map(config.routes.filter((route) => route.agents).map((route) => [resourceIdentifier(config.server.baseUrl, route.path), route]))
    this.grants = new AgentGrants(deps.store, deps.sealer, deps.sessions)
    this.pendings = new PendingSignIns(deps.store, deps.sealer, config.state.ttlMs, deps.clock)
    this.tokens = new GrantTokens(config.server.baseUrl, deps.keys, this.grants, deps.clock, this.count)
    this.server = new AuthorizationServer({
      issuer: config.server.baseUrl,
      agents: config.agents,
      resources: new Map([...this.routes].map(([resource, route]) => [resource, route.path])),
      cookieNames: cookieNames(config).agentsServer,
      interactionTtlMs: config.state.ttlMs,
      store: deps.store,
      sealer: deps.sealer,
      keys: deps.keys,
      grants: this.grants,
      count: this.count,
      clock: deps.clock,
      log: deps.log,
      renderError: (_status, error, description) => messagePage('This authorization cannot go on', `${description ?? error}. Start it again from the agent or CLI.`),
      devicePages: DEVICE_PAGES,
      pageHeaders: PAGE_HEADERS,
      extraCa: deps.extraCa,
    })
    this.pendingCookie = cookieNames(config).agent
    this.pendingCookieOptions = { path: /^__host-/i.test(this.pendingCookie) ? '/' : '/oauth/', httpOnly: true, sameSite: 'lax', secure: config.session.cookieSecure }
    this.ownOrigin = new URL(config.server.baseUrl).origin
  }

  /** The token check of an `agents: true` route. */
  guardFor (route: RouteConfig): GrantGuard | undefined {
    return route.agents ? this.tokens.forResource(resourceIdentifier(this.deps.config.server.baseUrl, route.path)) : undefined
  }

  /**
   * A sign-in started for interaction `uid` completed: kept apart until the person decides (no
   * session yet), and a cookie sealed to the interaction that lets this browser, and only it, show
   * the consent page for it.
   */
  async signedIn (_request: FastifyRequest, reply: FastifyReply, uid: string, provider: string, signIn: SignIn, began: number): Promise<void> {
    const { cookie, key } = await this.pendings.keep(uid, provider, signIn, began)
    // Listed as a session would be: a back-channel logout of this provider session before the person
    // allows deletes it (an outside tester's finding), and one that read the list before, its mark ends it.
    const { providerSessions } = withSignIn(emptyRecord(began), provider, signIn)
    if (await this.deps.sessionIndex.addSignIn(providerSessions, key, began) !== undefined) {
      await this.deps.store.delete(key)
      throw new GatewayError('invalid_state', `You were signed out at ${provider} (its back-channel logout) while this sign-in was being completed: start the authorization again from the agent.`)
    }
    reply.setCookie(this.pendingCookie, cookie, { ...this.pendingCookieOptions, maxAge: Math.ceil(this.deps.config.state.ttlMs / 1000) })
  }

  /** Which client on which route a grant's session is (the sessions page). */
  async labelOf (sessionId: string): Promise<{ client: string, route: string } | undefined> {
    return await this.grants.labelOf(sessionId)
  }

  /** The grant's session: the kept sign-in made a session, indexed as every session is (sign-out everywhere, back-channel logout, the list), with its label for the list; refused when its person signed out everywhere since that sign-in (listed, then asked: sign out everywhere finds it listed or marked the person first). */
  private async startGrantSession (pending: PendingSignIn, began: number, label: GrantLabel): Promise<{ id: string, cookie: string }> {
    const { sessions, sessionIndex, personIndex, clock, config } = this.deps
    const started = await sessions.start(undefined, withSignIn(emptyRecord(pending.at ?? clock.now()), pending.provider, pending.signIn))
    try {
      await this.grants.label(started.id, label, config.session.maxAgeMs)
      if (await sessionIndex.addSignIn(started.record.providerSessions, started.id, began) !== undefined) throw new GatewayError('forbidden', 'This sign-in was ended by its provider (a back-channel logout) before it was allowed: start the authorization again from the agent.')
      await personIndex.add(started, AGENT_FAMILY)
      if (await personIndex.signedOutSince(started.record, began)) throw new GatewayError('forbidden', 'This sign-in was made before its person signed out everywhere: start the authorization again from the agent.')
    } catch (error) {
      await sessions.endById(started.id).catch(() => {})
      throw error
    }
    return started
  }

  async register (app: FastifyInstance): Promise<void> {
    app.get('/.well-known/oauth-authorization-server', async (_request, reply) => {
      return reply.header('cache-control', 'public, max-age=300').header('access-control-allow-origin', '*').send(authorizationServerMetadata(this.deps.config.server.baseUrl, this.deps.config.agents))
    })
    await app.register(async (scope) => { await this.endpoints(scope) })
    await app.register(async (scope) => { await this.interactions(scope) })
  }

  /** oidc-provider's endpoints: the request as it came (the edge's canonical target), its body unread (but tokenEndpoints'). */
  private async endpoints (scope: FastifyInstance): Promise<void> {
    scope.removeAllContentTypeParsers()
    scope.addContentTypeParser('*', (_request, _payload, done) => { done(null) })
    await scope.register(rateLimit, { global: false, skipOnError: true, redis: this.deps.store.redis, nameSpace: 'rate-limit:agents-register:' })
    const pass = async (request: FastifyRequest, reply: FastifyReply, url = request.url, body?: Buffer) => {
      request.raw.url = url
      // The endpoints a client calls answer JSON (RFC 6749 §5.2), whatever it accepts: oidc-provider
      // would answer a browser's Accept with an HTML page, which the device flow's pace reads past.
      if (request.method === 'POST' && request.routeOptions.url !== AGENT_ENDPOINTS.code_verification) request.raw.headers.accept = 'application/json'
      reply.hijack()
      await this.server.handle(body === undefined ? request.raw : withBody(request.raw, body), reply.raw)
    }
    const { limit, registrationsLeft } = agentLimits(scope, this.deps.config.agents.registrationsPerHour)
    scope.get(AGENT_ENDPOINTS.authorization, { onRequest: limit('authorization') }, async (request, reply) => {
      await pass(request, reply, this.counted(() => authorizationRequest(request.url, this.routes)))
    })
    scope.get(`${AGENT_ENDPOINTS.authorization}/:uid`, async (request, reply) => { await pass(request, reply) })
    await scope.register(async (tokens) => { this.tokenEndpoints(tokens, pass) })
    if (this.deps.config.agents.deviceFlow) {
      scope.route({
        method: ['POST', 'OPTIONS'],
        url: AGENT_ENDPOINTS.device_authorization,
        onRequest: limit('device'),
        handler: async (request, reply) => {
          bounded(request, DEVICE_REQUEST_MAX_BYTES, 'A device authorization request')
          await pass(request, reply)
        },
      })
      // The person's pages: the code's entry (each POST a guess, so counted apart) and, after the
      // sign-in and consent, the page that says the CLI is allowed.
      // Refused before it is counted: another site cannot spend a person's budget.
      const ownPage = async (request: FastifyRequest) => { checkCodeEntry(request, this.ownOrigin) }
      const devicePage = limit('devicePage')
      scope.get(AGENT_ENDPOINTS.code_verification, { onRequest: devicePage }, async (request, reply) => { await pass(request, reply) })
      scope.post(AGENT_ENDPOINTS.code_verification, { onRequest: [ownPage, limit('codeEntry')] }, async (request, reply) => { await pass(request, reply) })
      scope.get(`${AGENT_ENDPOINTS.code_verification}/:uid`, { onRequest: devicePage }, async (request, reply) => { await pass(request, reply) })
    }
    if (!this.deps.config.agents.registration) return
    scope.route({
      method: ['POST', 'OPTIONS'],
      url: AGENT_ENDPOINTS.registration,
      onRequest: [openToPages('POST'), limit('registration'), registrationsLeft],
      handler: async (request, reply) => {
        bounded(request, REGISTRATION_MAX_BYTES, 'A registration')
        await pass(request, reply)
      },
    })
  }

  /**
   * The token and revocation endpoints: the form read here (at most TOKEN_REQUEST_MAX_BYTES) so
   * that each code, refresh token or device code is counted apart (tokenBudgets), and handed to
   * oidc-provider as it came. Any other body goes on unread (oidc-provider refuses it).
   */
  private tokenEndpoints (scope: FastifyInstance, pass: (request: FastifyRequest, reply: FastifyReply, url: string, body?: Buffer) => Promise<void>): void {
    scope.addContentTypeParser('application/x-www-form-urlencoded', { parseAs: 'buffer', bodyLimit: TOKEN_REQUEST_MAX_BYTES }, (_request, body, done) => { done(null, body) })
    const budgets = tokenBudgets(scope, this.deps.config.agents.tokenRequestsPerMinute)
    for (const url of [AGENT_ENDPOINTS.token, AGENT_ENDPOINTS.revocation]) {
      scope.route({
        method: ['POST', 'OPTIONS'],
        url,
        preHandler: budgets,
        // A request answered 5xx (the store failed) gives back the code or token it claimed: its retry is no second use (withSteps: agents/request-undo.ts).
        handler: async (request, reply) => {
          if (url === AGENT_ENDPOINTS.token && await foreignTarget(await this.server.provider(), tokenForm(request))) return this.invalidTarget(reply)
          await this.withSteps(async () => { await pass(request, reply, request.url, Buffer.isBuffer(request.body) ? request.body : undefined) }, () => reply.raw.statusCode >= 500)
        },
      })
    }
  }

  /** A token request naming a resource its credential was not granted for (agents/token-target.ts): refused as oidc-provider refuses it, nothing spent. */
  private invalidTarget (reply: FastifyReply): FastifyReply {
    this.count('token', 'invalid_target')
    return reply.code(400).header('cache-control', 'no-store').send({ error: 'invalid_target', error_description: 'the resource is not the one this code or token was granted for: name that route, or no resource' })
  }

  /** The gateway's own refusals of an authorization request, counted as oidc-provider's are. */
  private counted (check: () => string): string {
    try {
      return check()
    } catch (error) {
      this.count('authorization', 'invalid_request')
      throw error
    }
  }

  private async interactions (scope: FastifyInstance): Promise<void> {
    await scope.register(cookie)
    scope.addHook('onSend', async (_request, reply) => {
      reply.header('cache-control', 'no-store').headers(PAGE_HEADERS)
    })
    scope.addContentTypeParser('application/x-www-form-urlencoded', { parseAs: 'string', bodyLimit: 4096 }, (_request, body, done) => {
      done(null, Object.fromEntries(new URLSearchParams(body as string)))
    })
    scope.get<{ Params: { uid: string } }>(`${AGENTS_PREFIX}/interaction/:uid`, async (request, reply) => {
      const pending = await this.pending(request, reply)
      const signIn = await this.pendings.open(pending.uid, request.cookies[this.pendingCookie])
      if (signIn === undefined) return await reply.redirect(`${loginUrlFor(this.deps.config, pending.route)}&agent=${pending.uid}`, 302)
      const identity = admittedAs(this.deps.config, pending.route, signIn, request.ip)
      const view = { uid: pending.uid, clientName: pending.clientName, clientSite: pending.clientSite, redirectHost: pending.redirectHost, routePath: pending.route.path }
      return await reply.type('text/html; charset=utf-8').send(consentPage(view, identity, this.csrfs(pending.uid, request)[0]!))
    })
    scope.post<{ Params: { uid: string }, Body: Record<string, unknown> | undefined }>(`${AGENTS_PREFIX}/interaction/:uid`, async (request, reply) => {
      if (!fromOwnPage(request, this.ownOrigin)) throw new GatewayError('forbidden', 'An agent is allowed only from this gateway\'s own consent page.')
      const pending = await this.pending(request, reply)
      const sent = typeof request.body?.csrf === 'string' ? request.body.csrf : ''
      if (!this.csrfs(pending.uid, request).some((csrf) => sameText(sent, csrf))) throw new GatewayError('forbidden', 'This consent page has expired or was not this gateway\'s: start the authorization again from the agent.')
      const answer = await this.pendings.answer(pending.uid, request.cookies[this.pendingCookie])
      if (answer === undefined) throw new GatewayError('forbidden', 'This consent page has expired, was answered already, or its sign-in was ended at the provider: start the authorization again from the agent.')
      const allowed = request.body?.decision === 'allow'
      let made: { result: Parameters<AuthorizationServer['finish']>[2], sessionId?: string } | undefined
      try {
        made = allowed ? await this.allow(pending, answer.signIn, answer.began, request.ip) : { result: { error: 'access_denied', error_description: 'The person did not allow this client.' } }
        // Set on the raw reply: oidc-provider answers (it saves the result, then redirects), and Fastify's cookie hook does not run.
        reply.raw.appendHeader('set-cookie', request.server.serializeCookie(this.pendingCookie, '', { ...this.pendingCookieOptions, maxAge: 0 }))
        await this.server.finish(request.raw, reply.raw, made.result)
      } catch (error) {
        // Nothing is kept of an answer that could not be given (an outside tester's finding: a late
        // reply while oidc-provider saved it left a grant no client got, and the retry 403): its
        // session ends, the sign-in is the retry's, and the error is the answer (a 503), unless
        // oidc-provider had begun its own.
        if (made?.sessionId !== undefined) await this.deps.sessions.endById(made.sessionId).catch(() => {})
        await answer.giveBack()
        if (!reply.raw.headersSent) {
          reply.raw.removeHeader('set-cookie')
          throw error
        }
        reply.hijack()
        reply.raw.destroy()
        return reply
      }
      reply.hijack()
      await answer.given()
      request.log.info({ client: pending.clientId, route: pending.route.path }, allowed ? 'agents: the person allowed a client' : 'agents: the person refused a client')
      this.count('consent', allowed ? 'allowed' : 'denied')
      return reply
    })
  }

  /** The person's Allow written: the grant's session, the grant, the client kept; a failure leaves no session behind. */
  private async allow (pending: Pending, signIn: PendingSignIn, began: number, address: string): Promise<{ result: Parameters<AuthorizationServer['finish']>[2], sessionId: string }> {
    const identity = admittedAs(this.deps.config, pending.route, signIn, address)
    const provider = await this.server.provider()
    const session = await this.startGrantSession(signIn, began, { client: pending.clientName, route: pending.route.path })
    try {
      const grant = new provider.Grant({ accountId: identity, clientId: pending.clientId })
      grant.addResourceScope(pending.resource, AGENT_SCOPE)
      const grantId = await grant.save()
      await this.grants.bind(grantId, session.cookie, this.deps.config.session.maxAgeMs)
      await this.server.keepClient(pending.clientId)
      return { result: { login: { accountId: identity }, consent: { grantId } }, sessionId: session.id }
    } catch (error) {
      await this.deps.sessions.endById(session.id).catch(() => {})
      throw error
    }
  }

  /** The interaction named in the path, as oidc-provider holds it for this browser (its interaction cookie). */
  private async pending (request: FastifyRequest<{ Params: { uid: string } }>, reply: FastifyReply): Promise<Pending> {
    const uid = parseInteractionId(request.params.uid)
    const provider = await this.server.provider()
    let details: Awaited<ReturnType<AuthorizationServer['interaction']>>
    try {
      if (uid === undefined) throw new Error('not an interaction id')
      details = await this.server.interaction(request.raw, reply.raw)
    } catch (cause) {
      // The store failing is a 503 to try again after, not an authorization to start over (an outside tester's finding).
      throw storeFailureIn(cause) ?? new GatewayError('invalid_request', 'This authorization has expired or was started in another browser: start it again from the agent.', { cause })
    }
    if (details.uid !== uid) throw new GatewayError('invalid_request', 'This authorization was started in another tab or browser: start it again from the agent.')
    const params = details.params as Record<string, unknown>
    const resource = typeof params.resource === 'string' ? params.resource : this.routes.size === 1 ? [...this.routes.keys()][0]! : ''
    const route = this.routes.get(resource)
    const client = await provider.Client.find(String(params.client_id))
    if (route === undefined || client === undefined) throw new GatewayError('invalid_request', 'This authorization names no route of this gateway that agents may reach.')
    // A document's URL in any letter case of its scheme (oidc-provider takes `HTTPS://` too: an outside tester's finding).
    const document = URL.parse(client.clientId)
    return {
      uid,
      clientId: client.clientId,
      clientName: clientName(client),
      clientSite: document?.protocol === 'https:' ? document.host : undefined,
      redirectHost: redirectShown(params.redirect_uri),
      route,
      resource,
    }
  }

  /** The consent form's token, bound to the interaction and to this browser's sign-in for it: under each secret (the page from an instance before a rotation), current first. */
  private csrfs (uid: string, request: FastifyRequest): string[] {
    return this.deps.sealer.idsFor(CONSENT_PURPOSE, `${uid}.${this.pendings.binding(uid, request.cookies[this.pendingCookie]) ?? ''}`)
  }
}
