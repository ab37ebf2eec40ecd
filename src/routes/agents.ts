// The gateway as the authorization server of MCP clients and CLIs (src/agents/), on Fastify:
// - GET /.well-known/oauth-authorization-server: RFC 8414 metadata (only the endpoints served);
// - /oauth/agents/{authorize,token,register,revoke}: oidc-provider, given the request untouched (its
//   body unread), registration charged per client address;
// - GET /oauth/agents/interaction/<uid>: where an authorization waits for the person: a sign-in at
//   the route's provider (whose session becomes the grant's, never the browser's), then the consent
//   page; POST there: Allow or Deny, from this page only (same origin, and its CSRF token).
// A sign-in for an agent ends in this browser with a cookie sealed to the interaction, so a consent
// page shows only the person who signed in in this browser (no one can bring someone else's sign-in).
import rateLimit from '@fastify/rate-limit'
import cookie from '@fastify/cookie'
import { timingSafeEqual } from 'node:crypto'
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify'
import { compileGate, decide, signedIn } from '../access/gate.js'
import type { GrantGuard } from '../access/authorize.js'
import { AuthorizationServer } from '../agents/authorization-server.js'
import { AGENT_ENDPOINTS, AGENT_SCOPE, AGENTS_PREFIX } from '../agents/endpoints.js'
import { AgentGrants } from '../agents/grants.js'
import { GrantTokens } from '../agents/grant-tokens.js'
import type { KeyRing } from '../assertion/keys.js'
import type { GatewayConfig, RouteConfig } from '../config/types.js'
import { GatewayError } from '../errors.js'
import { escapeHtml, renderPage } from '../http/pages.js'
import { fromOwnPage } from '../http/request-site.js'
import type { SessionIndex } from '../oauth/session-index.js'
import { agentInteractionUrl, cookieNames, loginUrl, parseInteractionId, resourceIdentifier } from '../oauth/urls.js'
import type { Clock } from '../ops/clock.js'
import type { Logger } from '../ops/logger.js'
import type { PersonIndex } from '../session/person-index.js'
import { emptyRecord, withSignIn, type SignIn } from '../session/record.js'
import type { Sealer } from '../session/seal.js'
import type { Session, Sessions } from '../session/session.js'
import type { SessionStore } from '../store/store.js'
import type { AgentSignIns } from './oauth-context.js'

const PENDING_PURPOSE = 'agents-pending'
const CONSENT_PURPOSE = 'agents-consent'
/** Registrations per client address and minute: enough for a person's agents, not for a flood. */
const REGISTRATIONS_PER_MINUTE = 10

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
}

/** What an interaction is about: its client, where the client wants the browser back, the route. */
interface Pending {
  uid: string
  clientId: string
  clientName: string
  redirectHost: string
  route: RouteConfig
  resource: string
}

export class Agents implements AgentSignIns {
  private readonly server: AuthorizationServer
  private readonly tokens: GrantTokens
  private readonly grants: AgentGrants
  private readonly routes: ReadonlyMap<string, RouteConfig>
  private readonly pendingCookie: string
  private readonly ownOrigin: string

  constructor (private readonly deps: AgentsDeps) {
    const { config } = deps
    this.routes = new Map(config.routes.filter((route) => route.agents).map((route) => [resourceIdentifier(config.server.baseUrl, route.path), route]))
    this.grants = new AgentGrants(deps.store, deps.sealer, deps.sessions)
    this.tokens = new GrantTokens(config.server.baseUrl, deps.keys, this.grants, deps.clock)
    this.server = new AuthorizationServer({
      issuer: config.server.baseUrl,
      agents: config.agents,
      resources: [...this.routes.keys()],
      interactionTtlMs: config.state.ttlMs,
      store: deps.store,
      sealer: deps.sealer,
      keys: deps.keys,
      grants: this.grants,
      clock: deps.clock,
      log: deps.log,
      renderError: (_status, error, description) => messagePage('This authorization cannot go on', `${description ?? error}. Start it again from the agent or CLI.`),
    })
    this.pendingCookie = `${cookieNames(config).session}_agent`
    this.ownOrigin = new URL(config.server.baseUrl).origin
  }

  /** The token check of an `agents: true` route. */
  guardFor (route: RouteConfig): GrantGuard | undefined {
    return route.agents ? this.tokens.forResource(resourceIdentifier(this.deps.config.server.baseUrl, route.path)) : undefined
  }

  /**
   * A sign-in started for interaction `uid` completed: a session of its own (the grant's, once the
   * person allows the client), indexed as every session is, and a cookie sealed to the interaction
   * that lets this browser, and only it, show the consent page for it.
   */
  async signedIn (_request: FastifyRequest, reply: FastifyReply, uid: string, provider: string, signIn: SignIn): Promise<void> {
    const { sessions, sessionIndex, personIndex, sealer, config, clock } = this.deps
    const started = await sessions.start(undefined, withSignIn(emptyRecord(clock.now()), provider, signIn))
    try {
      for (const [known, claims] of Object.entries(started.record.providerSessions ?? {})) await sessionIndex.add(known, claims, started.id)
      await personIndex.add(started, 'agent (MCP client or CLI)')
    } catch (error) {
      await sessions.endById(started.id).catch(() => {})
      throw error
    }
    reply.setCookie(this.pendingCookie, sealer.seal(PENDING_PURPOSE, uid, started.cookie), {
      ...sessions.cookieOptions, path: `${AGENTS_PREFIX}/interaction/`, maxAge: Math.ceil(config.state.ttlMs / 1000),
    })
  }

  async register (app: FastifyInstance): Promise<void> {
    app.get('/.well-known/oauth-authorization-server', async (_request, reply) => {
      return reply.header('cache-control', 'public, max-age=300').header('access-control-allow-origin', '*').send(this.metadata())
    })
    await app.register(async (scope) => { await this.endpoints(scope) })
    await app.register(async (scope) => { await this.interactions(scope) })
  }

  /** RFC 8414 metadata: the endpoints served, and what they accept. */
  private metadata (): Record<string, unknown> {
    const base = this.deps.config.server.baseUrl
    return {
      issuer: base,
      authorization_endpoint: `${base}${AGENT_ENDPOINTS.authorization}`,
      token_endpoint: `${base}${AGENT_ENDPOINTS.token}`,
      ...(this.deps.config.agents.registration ? { registration_endpoint: `${base}${AGENT_ENDPOINTS.registration}` } : {}),
      revocation_endpoint: `${base}${AGENT_ENDPOINTS.revocation}`,
      jwks_uri: `${base}/.well-known/jwks.json`,
      scopes_supported: [AGENT_SCOPE],
      response_types_supported: ['code'],
      grant_types_supported: ['authorization_code', 'refresh_token'],
      code_challenge_methods_supported: ['S256'],
      token_endpoint_auth_methods_supported: ['none'],
      revocation_endpoint_auth_methods_supported: ['none'],
      authorization_response_iss_parameter_supported: true,
    }
  }

  /** oidc-provider's endpoints: the request as it came (the edge's canonical target), its body unread. */
  private async endpoints (scope: FastifyInstance): Promise<void> {
    scope.removeAllContentTypeParsers()
    scope.addContentTypeParser('*', (_request, _payload, done) => { done(null) })
    await scope.register(rateLimit, { global: false, skipOnError: true, redis: this.deps.store.redis, nameSpace: 'rate-limit:agents-register:' })
    const pass = async (request: FastifyRequest, reply: FastifyReply) => {
      request.raw.url = this.withDefaults(request.url)
      reply.hijack()
      await this.server.handle(request.raw, reply.raw)
    }
    scope.route({ method: ['GET', 'POST'], url: AGENT_ENDPOINTS.authorization, handler: pass })
    scope.get(`${AGENT_ENDPOINTS.authorization}/:uid`, pass)
    for (const url of [AGENT_ENDPOINTS.token, AGENT_ENDPOINTS.revocation]) scope.route({ method: ['POST', 'OPTIONS'], url, handler: pass })
    if (this.deps.config.agents.registration) {
      scope.route({
        method: ['POST', 'OPTIONS'],
        url: AGENT_ENDPOINTS.registration,
        config: { rateLimit: { max: REGISTRATIONS_PER_MINUTE, timeWindow: 60_000 } },
        onRequest: scope.rateLimit({ max: REGISTRATIONS_PER_MINUTE, timeWindow: 60_000 }),
        handler: pass,
      })
    }
  }

  /**
   * An authorization request that names no scope gets the route's one (`access`): MCP clients send
   * none unless configured, and oidc-provider grants nothing that was not asked for.
   */
  private withDefaults (url: string): string {
    if (!url.startsWith(`${AGENT_ENDPOINTS.authorization}?`)) return url
    const query = new URLSearchParams(url.slice(url.indexOf('?') + 1))
    if (query.has('scope')) return url
    query.set('scope', AGENT_SCOPE)
    return `${AGENT_ENDPOINTS.authorization}?${query.toString()}`
  }

  private async interactions (scope: FastifyInstance): Promise<void> {
    await scope.register(cookie)
    scope.addHook('onSend', async (_request, reply) => { reply.header('cache-control', 'no-store') })
    scope.addContentTypeParser('application/x-www-form-urlencoded', { parseAs: 'string', bodyLimit: 4096 }, (_request, body, done) => {
      done(null, Object.fromEntries(new URLSearchParams(body as string)))
    })
    scope.get<{ Params: { uid: string } }>(`${AGENTS_PREFIX}/interaction/:uid`, async (request, reply) => {
      const pending = await this.pending(request, reply)
      const session = await this.signedInSession(request, pending.uid)
      if (session === null) return await reply.redirect(`${loginUrlFor(this.deps.config, pending.route)}&agent=${pending.uid}`, 302)
      const identity = this.admitted(pending, session)
      return await reply.type('text/html; charset=utf-8').send(consentPage(pending, identity, this.csrf(pending.uid, request)))
    })
    scope.post<{ Params: { uid: string }, Body: Record<string, unknown> | undefined }>(`${AGENTS_PREFIX}/interaction/:uid`, async (request, reply) => {
      if (!fromOwnPage(request, this.ownOrigin)) throw new GatewayError('forbidden', 'An agent is allowed only from this gateway\'s own consent page.')
      const pending = await this.pending(request, reply)
      const session = await this.signedInSession(request, pending.uid)
      const sent = typeof request.body?.csrf === 'string' ? request.body.csrf : ''
      if (session === null || !sameText(sent, this.csrf(pending.uid, request))) throw new GatewayError('forbidden', 'This consent page has expired or was not this gateway\'s: start the authorization again from the agent.')
      const identity = this.admitted(pending, session)
      reply.clearCookie(this.pendingCookie, { ...this.deps.sessions.cookieOptions, path: `${AGENTS_PREFIX}/interaction/` })
      const provider = await this.server.provider()
      if (request.body?.decision !== 'allow') {
        await this.deps.sessions.end(session)
        request.log.info({ client: pending.clientId, route: pending.route.path }, 'agents: the person refused a client')
        reply.hijack()
        await provider.interactionFinished(request.raw, reply.raw, { error: 'access_denied', error_description: 'The person did not allow this client.' }, { mergeWithLastSubmission: false })
        return reply
      }
      const grant = new provider.Grant({ accountId: identity, clientId: pending.clientId })
      grant.addResourceScope(pending.resource, AGENT_SCOPE)
      const grantId = await grant.save()
      await this.grants.bind(grantId, this.sessionCookie(request, pending.uid)!, this.deps.config.session.maxAgeMs)
      request.log.info({ client: pending.clientId, route: pending.route.path }, 'agents: the person allowed a client')
      reply.hijack()
      await provider.interactionFinished(request.raw, reply.raw, { login: { accountId: identity }, consent: { grantId } }, { mergeWithLastSubmission: false })
      return reply
    })
  }

  /** The interaction named in the path, as oidc-provider holds it for this browser (its interaction cookie). */
  private async pending (request: FastifyRequest<{ Params: { uid: string } }>, reply: FastifyReply): Promise<Pending> {
    const uid = parseInteractionId(request.params.uid)
    const provider = await this.server.provider()
    let details: Awaited<ReturnType<typeof provider.interactionDetails>>
    try {
      if (uid === undefined) throw new Error('not an interaction id')
      details = await provider.interactionDetails(request.raw, reply.raw)
    } catch (cause) {
      throw new GatewayError('invalid_request', 'This authorization has expired or was started in another browser: start it again from the agent.', { cause })
    }
    if (details.uid !== uid) throw new GatewayError('invalid_request', 'This authorization was started in another tab or browser: start it again from the agent.')
    const params = details.params as Record<string, unknown>
    const resource = typeof params.resource === 'string' ? params.resource : this.routes.size === 1 ? [...this.routes.keys()][0]! : ''
    const route = this.routes.get(resource)
    const client = await provider.Client.find(String(params.client_id))
    if (route === undefined || client === undefined) throw new GatewayError('invalid_request', 'This authorization names no route of this gateway that agents may reach.')
    const redirect = URL.parse(String(params.redirect_uri))
    return {
      uid,
      clientId: client.clientId,
      clientName: typeof client.clientName === 'string' && client.clientName !== '' ? client.clientName : 'An unnamed client',
      redirectHost: redirect === null ? '' : redirect.host === '' ? `${redirect.protocol}//` : redirect.host,
      route,
      resource,
    }
  }

  /** The grant-to-be's session cookie, from this browser's cookie sealed to the interaction. */
  private sessionCookie (request: FastifyRequest, uid: string): string | undefined {
    const sealed = request.cookies[this.pendingCookie]
    return sealed === undefined ? undefined : this.deps.sealer.open(PENDING_PURPOSE, uid, sealed) ?? undefined
  }

  private async signedInSession (request: FastifyRequest, uid: string): Promise<Session | null> {
    const value = this.sessionCookie(request, uid)
    return value === undefined ? null : await this.deps.sessions.load(`${this.deps.sessions.cookieName}=${value}`)
  }

  /** The person's name for the grant, once the route's rules admit them at all; otherwise 403. */
  private admitted (pending: Pending, session: Session): string {
    const provider = pending.route.provider!
    const identity = session.record.identities?.[provider]
    const token = session.record.tokens[provider]?.access_token
    if (identity === undefined || token === undefined) throw new GatewayError('forbidden', 'The sign-in gave no identity this gateway can name.')
    const gate = compileGate(pending.route, (next) => loginUrl(this.deps.config, provider, next))
    const decision = decide(gate, 'GET', pending.route.path, false, signedIn(token, identity))
    if (decision.kind === 'forbidden') throw new GatewayError('forbidden', `This account may not use ${pending.route.path}, so it cannot allow an agent there.`)
    return identity.sub
  }

  /** The consent form's token: bound to the interaction and to this browser's sign-in for it. */
  private csrf (uid: string, request: FastifyRequest): string {
    return this.deps.sealer.idFor(CONSENT_PURPOSE, `${uid}.${this.sessionCookie(request, uid) ?? ''}`)
  }
}

function loginUrlFor (config: GatewayConfig, route: RouteConfig): string {
  // Where the sign-in goes after is decided by its `agent` binding, not by `next`.
  return loginUrl(config, route.provider!, '/oauth/')
}

function sameText (a: string, b: string): boolean {
  const left = Buffer.from(a)
  const right = Buffer.from(b)
  return left.length === right.length && timingSafeEqual(left, right)
}

function messagePage (title: string, text: string): string {
  return renderPage(title, `<h1>${escapeHtml(title)}</h1>\n<p>${escapeHtml(text)}</p>`)
}

/** The consent page: which client, where it sends the browser back, which route, as whom; Allow or Deny. */
function consentPage (pending: Pending, person: string, csrf: string): string {
  const title = 'Allow an agent?'
  return renderPage(title, `<h1>${escapeHtml(title)}</h1>
<p><strong>${escapeHtml(pending.clientName)}</strong> asks to use <code>${escapeHtml(pending.route.path)}</code> as <strong>${escapeHtml(person)}</strong>.</p>
<dl class="seen"><dt>Client</dt><dd>${escapeHtml(pending.clientName)}</dd><dt>Sends you back to</dt><dd><code>${escapeHtml(pending.redirectHost)}</code></dd><dt>Application</dt><dd><code>${escapeHtml(pending.route.path)}</code></dd><dt>As</dt><dd>${escapeHtml(person)}</dd></dl>
<p>It can then call this application as you until you sign out everywhere or end it on <a href="/oauth/sessions/">your sessions</a>. Allow it only if you started this from that client.</p>
<form method="post" action="${escapeHtml(agentInteractionUrl(pending.uid))}">
<input type="hidden" name="csrf" value="${escapeHtml(csrf)}">
<button class="button" type="submit" name="decision" value="allow">Allow</button>
<button class="button" type="submit" name="decision" value="deny" style="background:#777">Deny</button>
</form>`)
}
