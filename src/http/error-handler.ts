// The only renderer of errors: a small HTML page for browsers, JSON for everyone else. Messages
// come from GatewayError (safe by construction); anything else is a generic 500 whose details go
// to the log only.
import type { IncomingHttpHeaders } from 'node:http'
import type { FastifyError, FastifyInstance, FastifyReply, FastifyRequest } from 'fastify'
import { describeCause, GatewayError, isGatewayError, storeFailureIn, type ErrorCode, type ErrorDetails } from '../errors.js'
import { canonicalTarget } from '../config/canonical.js'
import { FORWARD_AUTH_ROUTE, HOME } from '../oauth/urls.js'
import { errorPage, sendUnframed, signInRemedy } from './pages.js'

/** A browser navigation asks for HTML; API clients, `*\/*` and no Accept get JSON. */
export function wantsHtml (request: FastifyRequest): boolean {
  return (request.headers.accept ?? '').includes('text/html')
}

/** Turns anything thrown into a GatewayError: Fastify's own 4xx keep their status (a body over a route's bodyLimit is `payload_too_large`, as the gateway's own size checks say). */
function toGatewayError (error: FastifyError | Error): GatewayError {
  if (isGatewayError(error)) return error
  const storeFailure = storeFailureIn(error)
  if (storeFailure !== undefined) return storeFailure
  const status = (error as FastifyError).statusCode
  if (status === 413) return new GatewayError('payload_too_large', error.message, { cause: error })
  if (status !== undefined && status >= 400 && status < 500) {
    return new GatewayError('invalid_request', error.message, { cause: error, status })
  }
  return new GatewayError('internal_error', 'An unexpected error occurred.', { cause: error })
}

/**
 * Where a person came from, when going back there is safe: a same-origin Referer (the gateway's own
 * origin), a plain path, not the page that failed, and none of the sign-in and sign-out endpoints
 * (their addresses carry one-time codes or end a session). Otherwise undefined: the page then offers
 * the home page.
 */
export function cameFrom (referer: string | undefined, ownOrigin: string, failedUrl: string): string | undefined {
  if (referer === undefined || referer.length > 2048) return undefined
  let url: URL
  try {
    url = new URL(referer)
  } catch {
    return undefined
  }
  if (url.origin !== ownOrigin || url.username !== '' || url.password !== '') return undefined
  const raw = url.pathname + url.search
  if (!/^\/[\x21-\x7e]*$/.test(raw) || raw.startsWith('//') || raw.includes('\\')) return undefined
  // Judged as the gateway would route it: `/%6Fauth/logout/` is the sign-out endpoint too.
  const target = canonicalTarget(raw)
  if (!target.ok) return undefined
  const back = target.url
  const path = back.split('?', 1)[0]!
  if (back === failedUrl || (path.toLowerCase().startsWith('/oauth/') && path !== HOME)) return undefined
  return back
}

/** Told of every error answer, with its code, before it is sent (the gateway counts some in /metrics). */
export type OnErrorAnswer = (request: FastifyRequest, code: ErrorCode) => void

/** Whether the request says a body follows (a declared length above 0, or a chunked one). */
export function bodyFollows (headers: IncomingHttpHeaders): boolean {
  return headers['transfer-encoding'] !== undefined || (headers['content-length'] !== undefined && headers['content-length'] !== '0')
}

/**
 * An answer sent before the request's body has arrived (a refusal, a redirect to sign in, a 404)
 * closes its connection: Node would keep it open for the rest of the body, as long as the client
 * trickles it (an outside tester held sockets so past a 404 and a 401).
 */
export function closeIfBodyUnread (request: FastifyRequest, reply: FastifyReply): void {
  if (!request.raw.complete && bodyFollows(request.headers)) reply.header('connection', 'close')
}

function sendError (request: FastifyRequest, reply: FastifyReply, thrown: FastifyError | Error, ownOrigin: string, onAnswer: OnErrorAnswer): FastifyReply {
  const error = toGatewayError(thrown)
  refusedAfterAdmission(request, error)
  closeIfBodyUnread(request, reply)
  onAnswer(request, error.code)
  const { log } = error.details
  const fields = { error: error.code, message: error.message, cause: describeCause(error.cause) }
  // An upstream failure brings its own one line; a store outage is logged once by the store itself
  // (src/store/outage-log.ts), and such requests are counted in gateway_store_unavailable_requests_total:
  // one error line per failed request would bury either.
  if (log?.level === 'debug') request.log.debug({ error: error.code, ...log.fields }, log.msg)
  else if (log) request.log.warn({ error: error.code, ...log.fields }, log.msg)
  else if (error.code === 'session_store_unavailable') request.log.debug(fields, 'request failed: session store unavailable')
  // Logged once when an issuer's keys cannot be read and once when they can again (oauth/issuer-keys.ts).
  else if (error.code === 'issuer_keys_unavailable') request.log.debug(fields, 'request failed: issuer keys unavailable')
  // A rolling restart's every upgrade under way: expected, and the client retries elsewhere.
  else if (error.code === 'shutting_down') request.log.info(fields, 'request failed: the gateway is shutting down')
  else if (error.statusCode >= 500) request.log.error(fields, 'request failed')
  else request.log.info(fields, 'request rejected')

  // nosniff: a JSON answer is never read as a page or a script, whatever a value in it looks like.
  reply.code(error.statusCode).header('cache-control', 'no-store').header('x-content-type-options', 'nosniff')
  for (const [name, value] of Object.entries(error.details.headers ?? {})) reply.header(name, value)
  if (wantsHtml(request)) {
    // Through forward-auth the page shows at the application's address: a path would lead there.
    const home = request.routeOptions.url === FORWARD_AUTH_ROUTE ? `${ownOrigin}${HOME}` : HOME
    // Unframed: a 401's "Sign in" and a 403's "Use another account" are buttons another page could
    // lay a decoy over. Another site never learns the page's address (a callback's code and state).
    return sendUnframed(reply, errorPage(error, cameFrom(request.headers.referer, ownOrigin, request.url) ?? home))
  }
  return reply.type('application/json; charset=utf-8').send({
    error: error.code,
    message: error.message,
    ...(signInRemedy(error) ? { login_url: signInRemedy(error) } : {}),
    ...(error.details.loginUrls === undefined ? {} : { login_urls: error.details.loginUrls }),
    ...refusedFields(error.details),
  })
}

/**
 * An error answered to a request the access hook had allowed, by the gateway itself and so never
 * passed to the upstream (a websocket whose token or session ended before it was made, a body the
 * route cannot read for its `_method`, a shutdown under way): its log line says the refusal, never
 * the access hook's `allow`, which an audit selecting on `decision` would list as admitted (a new
 * user's and an attacker's findings). The error's own audit fields where it has them, else the
 * refusal its status is. One place for every such answer, so that the next one cannot be logged as
 * admitted either. The upstream's own failure (502, 504) and the gateway's (500) stay `allow`.
 */
function refusedAfterAdmission (request: FastifyRequest, error: GatewayError): void {
  const audit = request.audit
  // Refused before anyone was judged (a websocket from another site's page, forward-auth asked by no proxy).
  if (audit === undefined && error.details.audit !== undefined) request.audit = { user: null, rule: 'none', credential: null, ...error.details.audit }
  if (audit?.decision !== 'allow') return
  const refused = error.details.audit ?? refusalOf(error)
  if (refused !== undefined) request.audit = { ...audit, ...refused }
}

/** The `decision` of the gateway's own answer `error` (ops/audit.ts); undefined for a failure that is not a refusal. */
function refusalOf (error: GatewayError): { decision: string } | undefined {
  if (error.code === 'bad_gateway' || error.code === 'gateway_timeout' || error.code === 'internal_error') return undefined
  if (error.statusCode === 401) return { decision: 'unauthenticated' }
  if (error.statusCode === 403) return { decision: 'forbidden' }
  return { decision: error.statusCode >= 500 ? 'unavailable' : 'invalid_request' }
}

/**
 * A rules' 403 in JSON: `seen` (the person's own user, e-mail and groups), `address` (the client
 * address the rules judged), `rule` (the refusing rule's name, null when no allow rule matched),
 * `by_network` (that rule names networks), `refused_for` (only this method and path were refused:
 * the person may use the rest) and `switch_account_url` (POST: "Use another account").
 */
function refusedFields ({ refused, switchAccountUrl }: ErrorDetails): Record<string, unknown> {
  if (refused === undefined) return {}
  const { seen, rule, address, byNetwork, provider, refusedFor } = refused
  return {
    ...(provider === undefined ? {} : { provider }),
    seen: seen === undefined ? null : { user: seen.user, email: seen.email ?? null, email_verified: seen.email === undefined ? null : seen.emailVerified, groups: seen.groups },
    ...(address === undefined ? {} : { address }),
    rule: rule ?? null,
    ...(byNetwork === true ? { by_network: true } : {}),
    ...(refusedFor === undefined ? {} : { refused_for: { method: refusedFor.method, path: refusedFor.path } }),
    ...(switchAccountUrl === undefined ? {} : { switch_account_url: switchAccountUrl }),
  }
}

/** `baseUrl`: the gateway's public address; only its origin's pages count as somewhere to go back to. */
export function registerErrorHandler (app: FastifyInstance, baseUrl: string, onAnswer: OnErrorAnswer = () => {}): void {
  const ownOrigin = new URL(baseUrl).origin
  app.setErrorHandler((error: FastifyError, request, reply) => sendError(request, reply, error, ownOrigin, onAnswer))
  app.setNotFoundHandler(async () => {
    throw new GatewayError('not_found', 'Nothing is served at this address.')
  })
}
