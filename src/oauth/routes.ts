// The sign-in endpoints: /oauth/login/<provider>/, /oauth/authorized/<provider>/, /oauth/logout/
// (and /oauth/logout/<provider>/, where providers send the browser back after signing out),
// /oauth/backchannel-logout/<provider>/ and /oauth/userinfo/, plus the one rule for where a browser may be sent afterwards (`safeNext`):
// a plain same-origin path, or an absolute URL on a host in forwardAuth.allowedRedirectHosts.
import cookie from '@fastify/cookie'
import type { FastifyInstance, FastifyReply, FastifyRequest, onRequestAsyncHookHandler } from 'fastify'
import type { GatewayConfig } from '../config/config.js'
import { wantsHtml } from '../http/error-handler.js'
import { homePage, signOutConfirmPage, signedOutPage } from '../http/pages.js'
import { GatewayError } from '../http/errors.js'
import { endSession, startSession } from '../http/session-cookie.js'
import type { Metrics } from '../ops/metrics.js'
import { emptyRecord, withSignIn } from '../session/record.js'
import type { Sessions } from '../session/session.js'
import { identityFrom, unverifiedUser } from '../access/identity.js'
import { authorizationUrl, callbackParameters, checkCallback, exchangeCode, fetchUserinfo } from './client.js'
import type { BackchannelLogout } from './backchannel.js'
import type { SignOuts } from './logout.js'
import type { Providers } from './providers.js'
import type { SessionIndex } from './session-index.js'
import { RedirectHosts } from './redirect-hosts.js'
import { formatFlowCookie, parseFlowCookie, type FlowRecord, type Flows } from './state.js'
import type { Clock } from '../ops/clock.js'

/** Where a refused `next` sends the browser: the gateway's own home page (SPEC.md, Endpoints). */
export const NEXT_FALLBACK = '/oauth/'
const NEXT_MAX_LENGTH = 2048

/** A path segment that climbs or stays (`.`, `..`, `%2e`, `.%2E`, ...), also before a `;` parameter. */
function isDotSegment (segment: string): boolean {
  const name = segment.split(';', 1)[0]!.replace(/%2e/gi, '.')
  return name === '.' || name === '..'
}

/**
 * Whether the path part of a redirect target reads as the same single path however a server
 * decodes it: valid percent-encoding of valid UTF-8, no encoded `/`, `\` or control character, no
 * dot segment, and none appearing after Unicode compatibility folding either (`%EF%BC%8F`, U+FF0F,
 * folds to `/`).
 */
function isPlainPath (path: string): boolean {
  if (/%(?![0-9a-f]{2})|%2f|%5c|%[01][0-9a-f]|%7f/i.test(path)) return false
  if (path.split('/').some(isDotSegment)) return false
  let decoded: string
  try {
    decoded = decodeURIComponent(path)
  } catch {
    return false
  }
  const folded = decoded.normalize('NFKC')
  if (folded === decoded) return true
  return !folded.includes('\\') && !folded.startsWith('//') && !folded.split('/').some(isDotSegment)
}

/**
 * An absolute `next` exactly as given when it is on an allowed host, else `/oauth/`. Printable
 * ASCII only (an IDN host comes as punycode, and so never equals a listed name by accident), no
 * `\`, and the WHATWG URL parser's own serialisation must be the value itself (a bare origin may
 * leave out the final `/`): anything the parser would change (case, a default port, dot segments,
 * IPv4 in another notation, a trailing dot...) is refused rather than normalised. No userinfo; the
 * path follows the same rules as a relative `next` (one `/` first, then not `/`).
 */
function safeAbsoluteNext (raw: string, hosts: RedirectHosts): string {
  if (hosts.empty || !/^[\x21-\x7e]+$/.test(raw) || raw.includes('\\')) return NEXT_FALLBACK
  let url: URL
  try {
    url = new URL(raw)
  } catch {
    return NEXT_FALLBACK
  }
  if (url.href !== raw && url.href !== `${raw}/`) return NEXT_FALLBACK
  if (url.username !== '' || url.password !== '' || !hosts.allows(url)) return NEXT_FALLBACK
  return !url.pathname.startsWith('//') && isPlainPath(url.pathname) ? raw : NEXT_FALLBACK
}

/**
 * `next` exactly as given when it is a plain same-origin path, or (with `hosts`) an http(s) URL on
 * a host in forwardAuth.allowedRedirectHosts; else `/oauth/`. The value checked is the value
 * returned, and so the `Location` sent: nothing is normalised. A path is accepted as printable ASCII
 * (0x21-0x7E; a caller percent-encodes anything else), at most 2048 characters, one `/` then
 * neither `/` nor `\`, no `\` anywhere, and a path part (before `?` or `#`) without dot segments
 * or encoded `/`, `\` or control characters. Query and fragment are kept as they are.
 * @see https://www.rfc-editor.org/rfc/rfc3986#section-4.2 (relative reference, absolute path)
 * @see https://url.spec.whatwg.org/#url-serializing (the form an absolute URL must already have)
 * @see https://www.rfc-editor.org/rfc/rfc9700#section-4.11 (open redirection)
 */
export function safeNext (raw: unknown, hosts?: RedirectHosts): string {
  if (typeof raw !== 'string' || raw.length > NEXT_MAX_LENGTH) return NEXT_FALLBACK
  if (hosts && /^https?:\/\//.test(raw)) return safeAbsoluteNext(raw, hosts)
  // Browsers read `\` as `/` and drop tabs and newlines, so `/\evil` or `/\t/evil` would leave the origin;
  // anything outside printable ASCII could be read differently by the browser and the gateway.
  if (!/^\/[\x21-\x7e]*$/.test(raw) || raw[1] === '/' || raw.includes('\\')) return NEXT_FALLBACK
  const pathEnd = raw.search(/[?#]/)
  return isPlainPath(pathEnd === -1 ? raw : raw.slice(0, pathEnd)) ? raw : NEXT_FALLBACK
}

export interface OAuthDeps {
  config: GatewayConfig
  providers: Providers
  sessions: Sessions
  flows: Flows
  metrics: Metrics
  /** Sign-out at the providers: revocation and RP-initiated logout. */
  signOuts: SignOuts
  /** Back-channel logout: verifies logout tokens and ends the sessions they name. */
  backchannel: BackchannelLogout
  /** Which sessions belong to a provider's `sid` / `sub` (written at sign-in). */
  sessionIndex: SessionIndex
  /** Charges the sign-in endpoints' budget per client address (absent: no limit). */
  signinLimit?: onRequestAsyncHookHandler
  /** When a new session record begins (its sign-in time). */
  clock: Clock
}

/** redirect_uri is exactly {base_url}/oauth/authorized/<remote_app_name>/. */
export function redirectUri (config: GatewayConfig, provider: string): string {
  return `${config.server.baseUrl}/oauth/authorized/${provider}/`
}

/** The login address with `next`, absolute so the whole flow runs on {base_url}'s host. */
export function loginUrl (config: GatewayConfig, provider: string, next: string): string {
  return `${config.server.baseUrl}/oauth/login/${provider}/?next=${encodeURIComponent(next)}`
}

export async function oauthRoutes (app: FastifyInstance, { config, providers, sessions, flows, metrics, signOuts, backchannel, sessionIndex, signinLimit, clock }: OAuthDeps): Promise<void> {
  // Cookies are parsed and set here only: proxied requests read the session cookie straight from the header.
  await app.register(cookie)
  const redirectHosts = new RedirectHosts(config.forwardAuth.allowedRedirectHosts)
  const flowCookie = `${config.session.cookieName}_flow`
  const flowCookieOptions = {
    // A `__Host-` name is only kept by browsers with Path=/ (and Secure, no Domain: see config).
    path: /^__host-/i.test(config.session.cookieName) ? '/' : '/oauth/',
    httpOnly: true,
    sameSite: 'lax' as const,
    secure: config.session.cookieSecure,
    maxAge: Math.ceil(flows.ttlMs / 1000),
  }
  // Binds a sign-out that walks through the providers to this browser (see logout.ts).
  const signOutCookie = `${config.session.cookieName}_signout`
  const signOutCookieOptions = { ...flowCookieOptions, maxAge: Math.ceil(signOuts.ttlMs / 1000) }

  /** The provider named in the path; unknown names answer 404 before anything else. */
  function providerName (request: FastifyRequest<{ Params: { provider: string } }>): string {
    const name = request.params.provider
    if (!providers.has(name)) throw new GatewayError('unknown_provider', `No provider named "${name.slice(0, 64)}" is configured.`)
    return name
  }

  app.addHook('onSend', async (_request, reply) => {
    reply.header('cache-control', 'no-store')
  })

  app.get<{ Params: { provider: string }, Querystring: { next?: string } }>('/oauth/login/:provider/', { onRequest: signinLimit }, async (request, reply) => {
    const provider = await providers.get(providerName(request))
    // One binding cookie per browser, shared by every tab's flow, so cookies do not pile up.
    const flow = await flows.begin(parseFlowCookie(request.cookies[flowCookie]), {
      provider: provider.name, next: safeNext(request.query.next, redirectHosts), pkce: provider.pkce, openid: provider.openid,
    })
    metrics.signinsStarted.inc({ provider: provider.name })
    request.log.info({ provider: provider.name }, 'sign-in started')
    reply.setCookie(flowCookie, formatFlowCookie(flow.cookie), flowCookieOptions)
    return reply.redirect(authorizationUrl(provider, { redirectUri: redirectUri(config, provider.name), state: flow.state, codeChallenge: flow.codeChallenge, nonce: flow.nonce }), 302)
  })

  /** The callback's state, checked against this browser's flow cookie and marked used. */
  async function completeFlow (request: FastifyRequest, name: string, state: string | undefined): Promise<FlowRecord> {
    const { pkce, openid } = config.providers[name]!
    return await flows.complete(state, name, parseFlowCookie(request.cookies[flowCookie]), { pkce, openid })
  }

  app.get<{ Params: { provider: string } }>('/oauth/authorized/:provider/', { onRequest: signinLimit }, async (request, reply) => {
    const name = providerName(request)
    const queryStart = request.url.indexOf('?')
    let next = NEXT_FALLBACK
    try {
      const query = callbackParameters(queryStart === -1 ? '' : request.url.slice(queryStart + 1))
      const flow = await completeFlow(request, name, query.get('state') ?? undefined)
      next = flow.next
      const provider = await providers.get(name)
      const callback = checkCallback(provider, query)
      const { tokens, idClaims, idToken } = await exchangeCode(provider, callback, redirectUri(config, name), flow.verifier, flow.nonce, clock)
      const userinfo = provider.userinfoUrl ? await fetchUserinfo(provider, tokens.access_token, idClaims?.sub) : {}
      const claims = { ...idClaims, ...userinfo }
      // A user name that is an address nobody verified is anyone's to claim: no session is made.
      if (unverifiedUser(claims, provider.claims)) throw new GatewayError('forbidden', 'the provider has not verified this e-mail address')
      const identity = identityFrom(claims, provider.claims)
      // The ID token only where sign-out will send it back (id_token_hint): it is the largest part.
      // sid and sub only where a back-channel logout may name them (and find them in the index).
      const listed = provider.backchannelLogout
      const providerSession = idClaims
        ? {
            ...(provider.endSessionUrl && idToken ? { idToken } : {}),
            ...(listed && typeof idClaims.sid === 'string' ? { sid: idClaims.sid } : {}),
            ...(listed && typeof idClaims.sub === 'string' ? { sub: idClaims.sub } : {}),
          }
        : undefined
      const signIn = { tokens, identity, providerSession }
      const fresh = () => withSignIn(emptyRecord(clock.now()), name, signIn)
      const previous = (await sessions.load(request.headers.cookie))?.record
      // Built on the browser's session, so one session holds every provider; rebuilt alone should
      // that session end before the new one replaces it (nothing it held may come back).
      const started = previous
        ? await startSession(sessions, request, reply, withSignIn(previous, name, signIn), fresh)
        : await startSession(sessions, request, reply, fresh())
      // The new id replaces the old one for every provider of the session, not only this one.
      for (const [known, claims] of Object.entries(started.record.providerSessions ?? {})) await sessionIndex.add(known, claims, started.id)
      metrics.signinsSucceeded.inc({ provider: name })
      request.log.info({ provider: name }, 'sign-in succeeded')
      // Checked again on the way out: the Location sent is the value checked, whatever the flow held.
      return reply.redirect(safeNext(flow.next, redirectHosts), 302)
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
    const identities = (await sessions.load(request.headers.cookie))?.record.identities ?? {}
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

  // The home page: the userinfo shape for API clients (an empty one when nobody is signed in).
  app.get('/oauth/', async (request, reply) => {
    const identities = (await sessions.load(request.headers.cookie))?.record.identities ?? {}
    if (!wantsHtml(request)) return { identities }
    return reply.type('text/html; charset=utf-8').send(homePage(identities, signInLinks))
  })
  // `/` leads there, unless a route serves it.
  if (!config.routes.some((route) => route.path === '/')) app.get('/', async (_request, reply) => reply.redirect('/oauth/', 302))

  const ownOrigin = new URL(config.server.baseUrl).origin

  /**
   * A request another site made the browser send (login/logout CSRF): Sec-Fetch-Site other than
   * same-origin or none, or an Origin that is not {base_url}'s. Neither header counts as our own.
   * @see https://www.w3.org/TR/fetch-metadata/#sec-fetch-site-header
   */
  function fromAnotherSite (request: FastifyRequest): boolean {
    const site = request.headers['sec-fetch-site']
    if (site !== undefined && site !== 'same-origin' && site !== 'none') return true
    const origin = request.headers.origin
    return origin !== undefined && origin !== ownOrigin
  }

  // A plain browser form can POST the sign-out; parsed in this scope only, so proxied bodies stream untouched.
  app.addContentTypeParser('application/x-www-form-urlencoded', { parseAs: 'string', bodyLimit: 8192 }, (_request, body, done) => {
    done(null, Object.fromEntries(new URLSearchParams(body as string)))
  })

  /**
   * From another site: a confirmation page whose button POSTs here. Otherwise the session ends;
   * with `next` (form field or query): 302 there (SPEC); without, a browser gets the signed-out
   * page and others 302 to /.
   */
  async function logout (request: FastifyRequest<{ Querystring: { next?: unknown }, Body: { next?: unknown } | undefined }>, reply: FastifyReply) {
    const next = request.body?.next ?? request.query.next
    if (fromAnotherSite(request)) {
      return reply.type('text/html; charset=utf-8')
        .header('content-security-policy', "frame-ancestors 'none'")
        .header('x-frame-options', 'DENY')
        .send(signOutConfirmPage(next === undefined ? undefined : safeNext(next, redirectHosts)))
    }
    // The gateway's session ends first, whatever the providers then do.
    const session = await sessions.load(request.headers.cookie)
    await endSession(sessions, session, reply)
    if (session) {
      await signOuts.revoke(session.record)
      const walk = await signOuts.begin(session.record, next === undefined ? undefined : safeNext(next, redirectHosts))
      if (walk) {
        request.log.info('signed out; signing out at the providers')
        reply.setCookie(signOutCookie, walk.cookie, signOutCookieOptions)
        return reply.redirect(walk.url, 302)
      }
    }
    return finishSignOut(request, reply, next)
  }

  /** The end of a sign-out: `next`, or (none given, a browser) the signed-out page. */
  function finishSignOut (request: FastifyRequest, reply: FastifyReply, next: unknown) {
    if (next === undefined && wantsHtml(request)) {
      return reply.type('text/html; charset=utf-8').send(signedOutPage(signInLinks))
    }
    return reply.redirect(safeNext(next, redirectHosts), 302)
  }
  app.get('/oauth/logout/', logout)
  app.post('/oauth/logout/', logout)

  // A provider sends the browser back here after its own sign-out (post_logout_redirect_uri).
  app.get<{ Params: { provider: string }, Querystring: { state?: unknown } }>('/oauth/logout/:provider/', async (request, reply) => {
    const name = providerName(request)
    const state = typeof request.query.state === 'string' ? request.query.state : undefined
    const step = await signOuts.resume(name, state, request.cookies[signOutCookie])
    if ('url' in step) return reply.redirect(step.url, 302)
    reply.clearCookie(signOutCookie, signOutCookieOptions)
    return finishSignOut(request, reply, step.next)
  })

  // OIDC Back-Channel Logout: the provider, server to server; 200 or 400 invalid_request (§2.8).
  app.post<{ Params: { provider: string }, Body: Record<string, unknown> | undefined }>('/oauth/backchannel-logout/:provider/', async (request, reply) => {
    const provider = await providers.get(providerName(request))
    if (!/^application\/x-www-form-urlencoded\b/i.test(request.headers['content-type'] ?? '')) {
      throw new GatewayError('invalid_request', 'A logout token comes as a form field (application/x-www-form-urlencoded).')
    }
    await backchannel.logout(provider, request.body?.logout_token)
    return reply.code(200).send()
  })
}
