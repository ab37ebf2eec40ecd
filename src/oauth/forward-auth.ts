// Forward-auth for a proxy in front (nginx auth_request, Caddy forward_auth, Traefik ForwardAuth,
// ingress-nginx auth-url): GET /oauth/auth/<provider>/ answers 200 with the bearer token and the
// identity headers in the response, 401 `unauthenticated` with the sign-in address, 403 `forbidden`
// when the allow rules in the query, or the rules forwardAuth.hosts keeps for the host a trusted
// proxy names in X-Forwarded-Host, do not admit the user (both must). It never proxies: the proxy in front copies what
// it needs from this answer onto the request it sends its application.
// @see https://nginx.org/en/docs/http/ngx_http_auth_request_module.html
// @see https://caddyserver.com/docs/caddyfile/directives/forward_auth
import type { FastifyInstance, FastifyRequest } from 'fastify'
import type { AllowRules, GatewayConfig } from '../config/types.js'
import { GatewayError } from '../http/errors.js'
import { trustTest } from '../http/trust-proxy.js'
import { compileGate, decide, failed, NO_SESSION, signedIn, unreachable, type SessionState } from '../access/gate.js'
import { normalisedRule, rulesAdmit } from '../access/identity.js'
import { refusal } from '../access/refusal.js'
import type { Session, Sessions } from '../session/session.js'
import type { Providers } from './providers.js'
import { hostKey, RedirectHosts } from './redirect-hosts.js'
import type { TokenRefresher } from './refresh.js'
import { NEXT_FALLBACK, loginUrl, safeNext } from './routes.js'

/** The response header that carries the login URL of a 401, for the proxy in front to redirect a browser to. */
export const LOGIN_URL_HEADER = 'x-login-url'

/** The route-independent identity headers of a 200 (a route's `identityHeaders` defaults). */
const IDENTITY_HEADERS = { user: 'x-forwarded-user', email: 'x-forwarded-email', groups: 'x-forwarded-groups' } as const

/**
 * Headers added to a 200 besides the token and identity, such as a signed identity assertion.
 * `audience` is the origin of the original URL when a trusted proxy named it, else undefined (the
 * callback decides which audiences get anything: see forwardAuthAssertion).
 */
export type ExtraHeaders = (session: Session, provider: string, audience: string | undefined) => Promise<Record<string, string>>

export interface ForwardAuthDeps {
  config: GatewayConfig
  providers: Providers
  sessions: Sessions
  refresher: TokenRefresher
  /** Optional: see {@link ExtraHeaders}. */
  extraHeaders?: ExtraHeaders
}

/** The one value of a header sent once; undefined when absent or repeated (which to trust would be a guess). */
function single (request: FastifyRequest, name: string): string | undefined {
  const values = request.raw.headersDistinct[name]
  return values?.length === 1 ? values[0] : undefined
}

/** A comma-separated list from one or more query parameters of that name; undefined when absent. */
function listParameter (value: string | string[] | undefined): string[] | undefined {
  if (value === undefined) return undefined
  return (Array.isArray(value) ? value : [value]).flatMap((item) => item.split(',')).map((item) => item.trim()).filter(Boolean)
}

/**
 * The allow rules given as query parameters (`emails`, `domains`, `groups`, comma-separated), read
 * as a route's `allow`: undefined when none is given (any signed-in user passes); given but empty,
 * they allow nobody.
 */
function allowRules (query: Record<string, string | string[] | undefined>): AllowRules | undefined {
  const emails = listParameter(query.emails)
  const domains = listParameter(query.domains)
  const groups = listParameter(query.groups)
  if (emails === undefined && domains === undefined && groups === undefined) return undefined
  return normalisedRule({ emails, domains, groups })
}

export async function forwardAuth (app: FastifyInstance, { config, providers, sessions, refresher, extraHeaders }: ForwardAuthDeps): Promise<void> {
  const trusted = trustTest(config.server.trustProxy)
  const redirectHosts = new RedirectHosts(config.forwardAuth.allowedRedirectHosts)
  const ownOrigin = new URL(config.server.baseUrl).origin

  /**
   * The URL the user asked the proxy in front for, from X-Forwarded-Proto/-Host and X-Forwarded-Uri
   * (else X-Original-URI), only when the peer is a proxy trustProxy admits; anyone else could send
   * these headers. `text` is the URL as given (what `next` will be checked as), `url` as parsed.
   * Undefined when it cannot be told.
   */
  function originalUrl (request: FastifyRequest): { text: string, uri: string, url: URL } | undefined {
    if (!trusted(request.socket.remoteAddress ?? '', 0)) return undefined
    const uri = single(request, 'x-forwarded-uri') ?? single(request, 'x-original-uri')
    if (uri === undefined || !uri.startsWith('/') || (request.protocol !== 'http' && request.protocol !== 'https')) return undefined
    const text = `${request.protocol}://${request.host}${uri}`
    try {
      return { text, uri, url: new URL(text) }
    } catch {
      return undefined
    }
  }

  /**
   * The host a trusted proxy says the request is for (X-Forwarded-Host, else Host), as
   * forwardAuth.hosts names hosts (see hostKey), read by the parser that reads the original URL;
   * undefined when the peer is no trusted proxy (its word names nothing), null when the value is
   * not a host (which rules apply could not be told: refused).
   */
  function forwardedHost (request: FastifyRequest): string | undefined | null {
    if (!trusted(request.socket.remoteAddress ?? '', 0)) return undefined
    try {
      const url = new URL(`http://${request.host}/`)
      return url.hostname === '' ? null : hostKey(url)
    } catch {
      return null
    }
  }

  /**
   * Where the sign-in returns: the path itself when the original URL is on the gateway's own
   * origin, else the absolute URL when its host is allowed; otherwise /oauth/. Either way the
   * value as sent, checked by safeNext (which refuses what the URL parser would have changed).
   */
  function returnTo (original: { text: string, uri: string, url: URL } | undefined): string {
    if (!original) return NEXT_FALLBACK
    const { text, uri, url } = original
    if (url.origin === ownOrigin && url.username === '' && url.password === '') return safeNext(uri)
    return safeNext(text, redirectHosts)
  }

  app.addHook('onSend', async (_request, reply) => {
    reply.header('cache-control', 'no-store')
  })

  app.get<{ Params: { provider: string }, Querystring: Record<string, string | string[] | undefined> }>('/oauth/auth/:provider/', async (request, reply) => {
    const provider = request.params.provider
    if (!providers.has(provider)) throw new GatewayError('unknown_provider', `No provider named "${provider.slice(0, 64)}" is configured.`)
    const original = originalUrl(request)
    const login = loginUrl(config, provider, returnTo(original))
    const host = forwardedHost(request)
    if (host === null) throw refusal({ kind: 'invalid_request', reason: 'the forwarded host is not a host name' }, { subject: 'this provider' })
    const hostRules = host === undefined ? undefined : config.forwardAuth.hosts.get(host)
    // The rules come with each request; compiling them is cheap (no `public` rules, no patterns).
    // No path to judge, and never a redirect: the proxy in front answers a browser (X-Login-URL).
    const gate = compileGate({ path: undefined, auth: 'required', provider, allow: allowRules(request.query), public: [] }, () => login)
    let session: Session | undefined
    let state: SessionState
    try {
      session = await sessions.load(request.headers.cookie) ?? undefined
      const token = session ? await refresher.usableToken(session, provider) : undefined
      state = session && token ? signedIn(token.access_token, session.record.identities?.[provider]) : NO_SESSION
    } catch (error) {
      state = failed(error)
    }
    const decision = decide(gate, request.method, request.url, false, state)
    switch (decision.kind) {
      case 'allow':
        break
      case 'unauthenticated':
        throw refusal(decision, { subject: 'this provider', headers: { [LOGIN_URL_HEADER]: decision.loginUrl } })
      case 'forbidden':
      case 'unavailable':
      case 'invalid_request':
        throw refusal(decision, { subject: 'this provider', loginUrl: login })
      case 'public':
      case 'read_session':
      case 'sign_in':
        // A gate with no public rules, fed a read session and html false, never answers these.
        throw new Error(`forward-auth's gate answered ${decision.kind}`)
      default:
        unreachable(decision)
    }
    const identity = decision.identity
    // The host's rules from gateway.yaml hold besides the query's: a caller that leaves out the
    // query (or a proxy configured without it) gets no more than the host allows.
    if (hostRules && !rulesAdmit(identity, hostRules.allow, hostRules.deny)) {
      throw refusal({ kind: 'forbidden', identity, loginUrl: login }, { subject: 'this provider' })
    }
    reply.header('authorization', `Bearer ${decision.accessToken}`)
    if (identity) {
      reply.header(IDENTITY_HEADERS.user, identity.sub)
      // An address the provider did not verify is not vouched for (as on proxied requests).
      if (identity.email && identity.emailVerified !== false) reply.header(IDENTITY_HEADERS.email, identity.email)
      if (identity.groups.length > 0) reply.header(IDENTITY_HEADERS.groups, identity.groups.join(','))
    }
    // EXTRA HEADERS: the one place where headers from an optional callback join a 200 (the signed
    // identity assertion, when configured, is added here).
    if (extraHeaders && session) {
      for (const [name, value] of Object.entries(await extraHeaders(session, provider, original?.url.origin))) reply.header(name, value)
    }
    return reply.code(200).send()
  })
}
