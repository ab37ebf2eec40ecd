// The request budgets of the agents' authorization server (src/routes/agents.ts), per client
// address and minute, each counted apart: the limiter's key is otherwise the address alone, which
// every budget of the gateway (the sign-in's included) would share, so an agent polling could lock
// its person out. IPv6 addresses count per /64, as the sign-in's. Registrations are also bounded
// from every address together, per hour. Over a budget: 429 `rate_limited` with Retry-After. And
// the sizes of what anyone may make the authorization server keep: a registration, a device code's
// request, an authorization request's `state`.
import { createHash } from 'node:crypto'
import querystring from 'node:querystring'
import { normalizeIP } from '@fastify/rate-limit'
import contentType from 'content-type'
import type { FastifyInstance, FastifyRequest } from 'fastify'
import { withoutPort } from '../config/networks.js'
import { GatewayError } from '../errors.js'

/** The largest registration accepted (10 redirect URIs of 2,000 characters fit twice over; oidc-provider's own bound is 56 KiB). */
export const REGISTRATION_MAX_BYTES = 8192
/**
 * The largest device authorization request accepted: its `client_id`, `scope` and `resource` fit
 * many times over. oidc-provider keeps the whole request with the device code for its 10 minutes,
 * free-text parameters too (`login_hint`, `acr_values`, ...), and anyone may ask for a code: up to
 * its own 56 KiB bound, a stranger's 20 requests a minute kept 13 MB in the store.
 */
export const DEVICE_REQUEST_MAX_BYTES = 1024
/**
 * The longest `state` an agent may send: oidc-provider keeps it with the authorization request for
 * `state.ttl`, whoever asked. A CSRF value needs a few dozen characters; one that carries the
 * client's own data, a few hundred.
 */
export const STATE_MAX_LENGTH = 512

/**
 * Requests per client address and minute: enough for a person's agents, not for a flood; a code
 * typed on the device page, enough for typos but not for guessing (20^8 codes, each alive 10 min);
 * the device page itself (each first visit is a record in the store). The token and revocation
 * endpoints' budgets are `tokenBudgets`, per credential and (agents.tokenRequestsPerMinute) per address.
 */
const PER_MINUTE = { registration: 10, authorization: 60, device: 20, codeEntry: 20, devicePage: 30 } as const
export type Budget = keyof typeof PER_MINUTE

/** What each budget is for, as its 429 says. */
const BUDGET_NAMES: Record<Budget, string> = {
  registration: 'client registrations',
  authorization: 'authorization requests',
  device: 'device codes',
  codeEntry: 'codes entered',
  devicePage: 'visits to the device page',
}

function tooMany (what: string) {
  return (_request: FastifyRequest, context: { ttl: number }): GatewayError => {
    const seconds = Math.max(1, Math.ceil(context.ttl / 1000))
    return new GatewayError('rate_limited', `Too many ${what}. Try again in ${seconds} second${seconds === 1 ? '' : 's'}.`, {
      details: { headers: { 'retry-after': String(seconds) } },
    })
  }
}

/**
 * The hooks of `scope` (where @fastify/rate-limit is registered): `limit(budget)` per address, and
 * `registrationsLeft`, the registrations of every address together within `perHour` (a client
 * nobody allows is kept an hour, so this bounds the clients the store holds that no person has
 * allowed; a CORS preflight is not a registration). The second is checked apart from the first:
 * the library runs one limiter hook per request.
 */
export function agentLimits (scope: FastifyInstance, perHour: number) {
  const limit = (budget: Budget) => scope.rateLimit({
    max: PER_MINUTE[budget],
    timeWindow: 60_000,
    keyGenerator: (request) => `agents-${budget}:${normalizeIP(withoutPort(request.ip), 64)}`,
    errorResponseBuilder: tooMany(`${BUDGET_NAMES[budget]} from your address`),
  })
  const everyAddress = scope.createRateLimit({ max: perHour, timeWindow: 3_600_000, keyGenerator: () => 'agents-registration:all' })
  const registrationsLeft = async (request: FastifyRequest): Promise<void> => {
    if (request.method !== 'POST') return
    const checked = await everyAddress(request)
    if (!checked.isAllowed && checked.isExceeded) throw tooMany('client registrations at this gateway this hour, from every address together')(request, checked)
  }
  return { limit, registrationsLeft }
}

/** The largest token or revocation request read (a client_id URL, a redirect URI and a resource of 2,000 characters each fit). */
export const TOKEN_REQUEST_MAX_BYTES = 8192
/**
 * Requests per minute that one code, refresh token or device code may take at the token and
 * revocation endpoints: a CLI polling at the 5 s interval takes 12, one that slows down fewer.
 */
export const PER_CREDENTIAL = 30

/** The parameter that carries each grant's credential, and revocation's. */
const CREDENTIAL_PARAMETER: Readonly<Record<string, string | undefined>> = {
  authorization_code: 'code',
  refresh_token: 'refresh_token',
  'urn:ietf:params:oauth:grant-type:device_code': 'device_code',
}

/**
 * The form as oidc-provider reads it (lib/shared/selective_body.js): decoded in the Content-Type's
 * charset as Koa reads it (`ctx.charset`: the content-type package, none when the header does not
 * parse), UTF-8 without one, then node:querystring with its first 1,000 parameters, so that the
 * credential budgeted and the resource judged are the ones it reads (outside testers' findings: with
 * URLSearchParams, a second `device_code` past the 1,000th parameter made two of it, and no budget
 * of its own; with a pattern of its own, a charset inside a quoted parameter was read, the form
 * decoded as UTF-16, and a `resource` oidc-provider read went unjudged).
 */
function formOf (body: Buffer, header: string | undefined): querystring.ParsedUrlQuery | undefined {
  try {
    const charset = koaCharset(header)
    return querystring.parse(charset === '' ? body.toString() : new TextDecoder(charset).decode(body))
  } catch {
    return undefined
  }
}

/** Koa's `request.charset` of a Content-Type header: its charset parameter, or '' (none, or a header that does not parse). */
function koaCharset (header: string | undefined): string {
  try {
    return contentType.parse(header ?? '').parameters.charset || ''
  } catch {
    return ''
  }
}

/** A token or revocation request's form as oidc-provider reads it (its body read as a Buffer), or undefined. */
export function tokenForm (request: FastifyRequest): querystring.ParsedUrlQuery | undefined {
  return Buffer.isBuffer(request.body) ? formOf(request.body, request.headers['content-type']) : undefined
}

/**
 * The credential a token or revocation request (its form body) carries, hashed (no code or token
 * becomes a store key): the key of its own budget. None when the body names no one grant type or
 * credential once; oidc-provider refuses such a request, counted for the address alone.
 */
export function credentialOf (request: FastifyRequest): string | undefined {
  const form = tokenForm(request)
  if (form === undefined) return undefined
  const type = form.grant_type
  const name = type === undefined ? 'token' : typeof type === 'string' && Object.hasOwn(CREDENTIAL_PARAMETER, type) ? CREDENTIAL_PARAMETER[type] : undefined
  const value = name === undefined ? undefined : form[name]
  return typeof value === 'string' && value !== '' ? createHash('sha256').update(value).digest('base64url') : undefined
}

/**
 * The token and revocation endpoints' budgets, checked once the body is read: each credential its
 * own PER_CREDENTIAL a minute, so that one runaway client (a CLI that ignores slow_down, an agent
 * refreshing in a loop) spends only its own, then `perAddress` a minute from every client at one
 * address together, which bounds what anyone there sends with made-up credentials. The credential's
 * count is read first and raised last: a request over its credential's budget is not counted for
 * the address, and one the address refuses leaves no key for its credential (an outside tester's
 * finding: made-up codes past the address's budget each left one in the store).
 */
export function tokenBudgets (scope: FastifyInstance, perAddress: number) {
  const credential = scope.createRateLimit({ max: PER_CREDENTIAL, timeWindow: 60_000, keyGenerator: (request) => `agents-credential:${credentialOf(request) ?? ''}` })
  const address = scope.createRateLimit({ max: perAddress, timeWindow: 60_000, keyGenerator: (request) => `agents-token:${normalizeIP(withoutPort(request.ip), 64)}` })
  return async (request: FastifyRequest): Promise<void> => {
    const carries = credentialOf(request) !== undefined
    if (carries) {
      const spent = await credential(request, { increment: false })
      if (!spent.isAllowed && spent.remaining === 0 && spent.ttl > 0) throw tooMany('requests with this code or token')(request, spent)
    }
    const checked = await address(request)
    if (!checked.isAllowed && checked.isExceeded) throw tooMany('token requests from your address')(request, checked)
    if (carries) await credential(request)
  }
}

/** Refuses a POST whose body could be larger than `max` bytes (one without a Content-Length too), before any of it is read. */
export function bounded (request: FastifyRequest, max: number, what: string): void {
  const length = Number(request.headers['content-length'] ?? Number.NaN)
  if (request.method === 'POST' && !(length <= max)) throw new GatewayError('payload_too_large', `${what} is at most ${max} bytes, with a Content-Length.`)
}
