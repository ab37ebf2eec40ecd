// The sign-in endpoints: /oauth/login/<provider>/, /oauth/authorized/<provider>/, /oauth/logout/
// and /oauth/userinfo/, plus the one rule for where a browser may be sent afterwards (`safeNext`).
import cookie from '@fastify/cookie'
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify'
import type { GatewayConfig } from '../config.js'
import { wantsHtml } from '../error-handler.js'
import { signedOutPage } from '../pages.js'
import { GatewayError } from '../errors.js'
import { randomToken } from '../seal.js'
import type { Metrics } from '../metrics.js'
import type { Sessions } from '../session.js'
import { identityFrom } from '../identity.js'
import { authorizationUrl, checkCallback, exchangeCode, fetchUserinfo, pkcePair } from './client.js'
import type { Providers } from './providers.js'
import type { Flows } from './state.js'

/**
 * `next` only if it is a same-origin relative path; anything else (`//evil.example`,
 * `/\evil.example`, `https://evil.example`, control characters) falls back to `/`.
 */
export function safeNext (raw: unknown): string {
  if (typeof raw !== 'string' || !raw.startsWith('/') || raw.startsWith('//')) return '/'
  // Browsers treat `\` as `/` and drop tabs and newlines, so `/\evil` or `/\t/evil` would leave the origin.
  // eslint-disable-next-line no-control-regex -- control characters are exactly what is refused here
  if (/[\\\u0000-\u001f\u007f]/.test(raw)) return '/'
  const base = new URL('http://gateway.invalid')
  const url = new URL(raw, base)
  if (url.origin !== base.origin) return '/'
  return url.pathname + url.search + url.hash
}

export interface OAuthDeps {
  config: GatewayConfig
  providers: Providers
  sessions: Sessions
  flows: Flows
  metrics: Metrics
}

/** redirect_uri is exactly {base_url}/oauth/authorized/<remote_app_name>/. */
export function redirectUri (config: GatewayConfig, provider: string): string {
  return `${config.server.baseUrl}/oauth/authorized/${provider}/`
}

/** The login address with `next`, absolute so the whole flow runs on {base_url}'s host. */
export function loginUrl (config: GatewayConfig, provider: string, next: string): string {
  return `${config.server.baseUrl}/oauth/login/${provider}/?next=${encodeURIComponent(next)}`
}

export async function oauthRoutes (app: FastifyInstance, { config, providers, sessions, flows, metrics }: OAuthDeps): Promise<void> {
  // Cookies are parsed and set here only: proxied requests read the session cookie straight from the header.
  await app.register(cookie)
  const flowCookie = `${config.session.cookieName}_flow`
  const flowCookieOptions = {
    path: '/oauth/',
    httpOnly: true,
    sameSite: 'lax' as const,
    secure: config.session.cookieSecure,
    maxAge: Math.ceil(flows.ttlMs / 1000),
  }

  /** The provider named in the path; unknown names answer 404 before anything else. */
  function providerName (request: FastifyRequest<{ Params: { provider: string } }>): string {
    const name = request.params.provider
    if (!providers.has(name)) throw new GatewayError('unknown_provider', `No provider named "${name.slice(0, 64)}" is configured.`)
    return name
  }

  app.addHook('onSend', async (_request, reply) => {
    reply.header('cache-control', 'no-store')
  })

  app.get<{ Params: { provider: string }, Querystring: { next?: string } }>('/oauth/login/:provider/', async (request, reply) => {
    const provider = await providers.get(providerName(request))
    // One binding cookie per browser, shared by every tab's flow, so cookies do not pile up.
    const existing = request.cookies[flowCookie]
    const binding = existing && /^[A-Za-z0-9_-]{43}$/.test(existing) ? existing : randomToken()
    const pkce = provider.pkce ? await pkcePair() : undefined
    const nonce = provider.openid ? randomToken() : undefined
    const state = await flows.begin(binding, { provider: provider.name, next: safeNext(request.query.next), verifier: pkce?.verifier, nonce })
    metrics.signinsStarted.inc({ provider: provider.name })
    request.log.info({ provider: provider.name }, 'sign-in started')
    reply.setCookie(flowCookie, binding, flowCookieOptions)
    return reply.redirect(authorizationUrl(provider, { redirectUri: redirectUri(config, provider.name), state, codeChallenge: pkce?.challenge, nonce }), 302)
  })

  app.get<{ Params: { provider: string } }>('/oauth/authorized/:provider/', async (request, reply) => {
    const name = providerName(request)
    const queryStart = request.url.indexOf('?')
    const query = new URLSearchParams(queryStart === -1 ? '' : request.url.slice(queryStart + 1))
    let next = '/'
    try {
      const flow = await flows.complete(query.get('state') ?? undefined, name, request.cookies[flowCookie])
      next = flow.next
      const provider = await providers.get(name)
      const callback = checkCallback(provider, query)
      const { tokens, idClaims } = await exchangeCode(provider, callback, redirectUri(config, name), flow.verifier, flow.nonce)
      const userinfo = provider.userinfoUrl ? await fetchUserinfo(provider, tokens.access_token, idClaims?.sub) : {}
      const identity = identityFrom({ ...idClaims, ...userinfo }, provider.claims)
      const record = (await sessions.load(request))?.record ?? { createdAt: Date.now(), tokens: {} }
      record.tokens[name] = tokens
      record.identities = { ...record.identities }
      if (identity) record.identities[name] = identity
      else delete record.identities[name]
      await sessions.start(request, reply, record)
      metrics.signinsSucceeded.inc({ provider: name })
      request.log.info({ provider: name }, 'sign-in succeeded')
      return reply.redirect(flow.next, 302)
    } catch (error) {
      if (error instanceof GatewayError) {
        metrics.signinsFailed.inc({ provider: name, reason: error.code })
        request.log.info({ provider: name, reason: error.code }, 'sign-in failed')
        error.details.loginUrl ??= loginUrl(config, name, next)
      } else {
        metrics.signinsFailed.inc({ provider: name, reason: 'internal_error' })
      }
      throw error
    }
  })

  app.get('/oauth/userinfo/', async (request) => {
    const identities = (await sessions.load(request))?.record.identities ?? {}
    if (Object.keys(identities).length === 0) {
      throw new GatewayError('unauthenticated', 'No signed-in identity: sign in first.', { details: { headers: { 'www-authenticate': 'Bearer' } } })
    }
    return { identities }
  })

  /** Each provider's login, back to its first route: the links of the signed-out page. */
  const signInLinks = Object.keys(config.providers).map((name) => {
    const route = config.routes.find((r) => r.provider === name)
    return { name, href: loginUrl(config, name, route ? `${route.path.replace(/\/$/, '')}/` : '/') }
  })

  /** With `next`: 302 there (SPEC). Without, a browser gets the signed-out page; others 302 to /. */
  async function logout (request: FastifyRequest<{ Querystring: { next?: string } }>, reply: FastifyReply) {
    await sessions.end(request, reply)
    if (request.query.next === undefined && wantsHtml(request)) {
      return reply.type('text/html; charset=utf-8').send(signedOutPage(signInLinks))
    }
    return reply.redirect(safeNext(request.query.next), 302)
  }
  app.get('/oauth/logout/', logout)
  app.post('/oauth/logout/', logout)
}
