// The sign-in endpoints: /oauth/login/<provider>/, /oauth/authorized/<provider>/ and
// /oauth/logout/, plus the one rule for where a browser may be sent afterwards (`safeNext`).
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify'
import type { GatewayConfig, ProviderConfig } from '../config.js'
import { wantsHtml } from '../error-handler.js'
import { signedOutPage } from '../pages.js'
import { GatewayError } from '../errors.js'
import { randomToken } from '../seal.js'
import type { Metrics } from '../metrics.js'
import type { Sessions } from '../session.js'
import { authorizationUrl, checkCallback, exchangeCode, pkcePair } from './client.js'
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

export async function oauthRoutes (app: FastifyInstance, { config, sessions, flows, metrics }: OAuthDeps): Promise<void> {
  const flowCookie = `${config.session.cookieName}_flow`
  const flowCookieOptions = {
    path: '/oauth/',
    httpOnly: true,
    sameSite: 'lax' as const,
    secure: config.session.cookieSecure,
    maxAge: Math.ceil(flows.ttlMs / 1000),
  }

  function providerOf (request: FastifyRequest<{ Params: { provider: string } }>): ProviderConfig {
    const name = request.params.provider
    const provider = Object.hasOwn(config.providers, name) ? config.providers[name] : undefined
    if (!provider) throw new GatewayError('unknown_provider', `No provider named "${name.slice(0, 64)}" is configured.`)
    return provider
  }

  app.addHook('onSend', async (_request, reply) => {
    reply.header('cache-control', 'no-store')
  })

  app.get<{ Params: { provider: string }, Querystring: { next?: string } }>('/oauth/login/:provider/', async (request, reply) => {
    const provider = providerOf(request)
    // One binding cookie per browser, shared by every tab's flow, so cookies do not pile up.
    const existing = request.cookies[flowCookie]
    const binding = existing && /^[A-Za-z0-9_-]{43}$/.test(existing) ? existing : randomToken()
    const pkce = provider.pkce ? await pkcePair() : undefined
    const state = await flows.begin(binding, { provider: provider.name, next: safeNext(request.query.next), verifier: pkce?.verifier })
    metrics.signinsStarted.inc({ provider: provider.name })
    request.log.info({ provider: provider.name }, 'sign-in started')
    reply.setCookie(flowCookie, binding, flowCookieOptions)
    return reply.redirect(authorizationUrl(provider, { redirectUri: redirectUri(config, provider.name), state, codeChallenge: pkce?.challenge }), 302)
  })

  app.get<{ Params: { provider: string } }>('/oauth/authorized/:provider/', async (request, reply) => {
    const provider = providerOf(request)
    const queryStart = request.url.indexOf('?')
    const query = new URLSearchParams(queryStart === -1 ? '' : request.url.slice(queryStart + 1))
    let next = '/'
    try {
      const flow = await flows.complete(query.get('state') ?? undefined, provider.name, request.cookies[flowCookie])
      next = flow.next
      const callback = checkCallback(provider, query)
      const tokens = await exchangeCode(provider, callback, redirectUri(config, provider.name), flow.verifier)
      const record = (await sessions.load(request))?.record ?? { createdAt: Date.now(), tokens: {} }
      record.tokens[provider.name] = tokens
      await sessions.start(request, reply, record)
      metrics.signinsSucceeded.inc({ provider: provider.name })
      request.log.info({ provider: provider.name }, 'sign-in succeeded')
      return reply.redirect(flow.next, 302)
    } catch (error) {
      if (error instanceof GatewayError) {
        metrics.signinsFailed.inc({ provider: provider.name, reason: error.code })
        request.log.info({ provider: provider.name, reason: error.code }, 'sign-in failed')
        error.details.loginUrl ??= loginUrl(config, provider.name, next)
      } else {
        metrics.signinsFailed.inc({ provider: provider.name, reason: 'internal_error' })
      }
      throw error
    }
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
