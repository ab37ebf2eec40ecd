// The gate's refusals as the one error type the error handler renders (src/errors.ts): 401
// `unauthenticated` with the sign-in address and WWW-Authenticate, a machine client's refused token
// (401 `invalid_token`, 403 `insufficient_scope`, with RFC 6750's challenge), 403 `forbidden` (with what the
// gateway saw of the person and the refusing rule's name, and the "Use another account" address), 400
// `invalid_request`, the store's or provider's own 503/502 for `unavailable`, and 401
// `insufficient_user_authentication` for a sign-in too old for the route's `reauth` (RFC 9470). Shared by the
// proxy and forward-auth so that both answer a refusal the same way.
// @see https://www.rfc-editor.org/rfc/rfc6750#section-3 (WWW-Authenticate: Bearer)
// @see https://www.rfc-editor.org/rfc/rfc9470#section-3 (insufficient_user_authentication)
import { GatewayError, withOwn, type Refused } from '../errors.js'
import type { Credential } from '../ops/audit.js'
import type { Identity } from '../session/record.js'
import { unreachable, type Decision } from './gate.js'
import { PERSON_CONDITIONS } from './rules.js'
import { maxAgeSeconds } from '../oauth/step-up.js'

/** The decisions that end the request with an error. */
export type Refusal = Extract<Decision, { kind: 'unauthenticated' | 'step_up' | 'forbidden' | 'unavailable' | 'invalid_request' | 'token_refused' }>

export interface RefusalContext {
  /** What has no token, in the 401's message: "this route", "this provider". */
  subject: string
  /** On `unavailable`: where trying again may help (when the failure names no sign-in address). */
  retryUrl?: string
  /** On `unavailable`: the sign-in address to offer (when the failure names none). */
  loginUrl?: string
  /** On `unauthenticated` and `step_up`: response headers besides WWW-Authenticate; on `forbidden`, sent with the offer of another account. */
  headers?: Record<string, string>
  /** On `forbidden`: where "Use another account" POSTs (sign-out, then a sign-in that lets the person choose). */
  switchAccountUrl?: string
  /** The caller brought its own token (a machine client): never offered a sign-in or another account. */
  byToken?: boolean
}

/** The conditions about the account: a rule with one of them might not hold for another account. */
const ACCOUNT_CONDITIONS = new Set<string>(PERSON_CONDITIONS)

/**
 * What the 403 shows: the person's own identity and address and the refusing rule's name, never the
 * rule's values. `kinds`: the refusing rule's conditions (Judgement.refusedBy); `byAddress`: no allow
 * rule takes the address (Judgement.byAddress). `byNetwork` when the address refused whatever the
 * account: no allow rule takes it, or the refusing rule names networks and nothing about the account
 * (a deny on contractors' group outside the VPN does not hold for a staff account: an outside
 * tester's finding).
 */
export function refusedBy (identity: Identity | undefined, rule: string | undefined, address?: string, kinds?: string, provider?: string,
  refusedFor?: Refused['refusedFor'], byAddress = false): Refused {
  const seen = identity === undefined
    ? undefined
    : { user: identity.sub, email: identity.email, emailVerified: identity.emailVerified !== false, groups: identity.groups }
  const conditions = rule === undefined ? [] : kinds?.split('+') ?? []
  const byNetwork = byAddress || (conditions.includes('networks') && !conditions.some((condition) => ACCOUNT_CONDITIONS.has(condition)))
  return {
    seen,
    rule,
    ...(address === undefined ? {} : { address }),
    ...(byNetwork ? { byNetwork } : {}),
    ...(provider === undefined ? {} : { provider }),
    ...(refusedFor === undefined ? {} : { refusedFor }),
  }
}

/**
 * The 403's message in plain words: who, what was refused (the application, or only this request's
 * method and path where the person may use the rest), and what refused it ("no allow rule matched",
 * or the rule's name, and where from).
 */
function forbiddenMessage (refused: Refused): string {
  const who = refused.seen?.email ?? refused.seen?.user ?? 'This account'
  const why = refused.rule !== undefined ? `the rule ${refused.rule} refused` : refused.byNetwork === true ? 'no allow rule takes this address' : 'no allow rule matched'
  const from = refused.byNetwork === true && refused.address !== undefined ? ` from ${refused.address}` : ''
  if (refused.refusedFor !== undefined) {
    const { method, path } = refused.refusedFor
    return `${who} may not ${method} ${path}${from}: ${why}; other requests to this application stay open to this account.`
  }
  return `${who} may not use this application${from}: ${why}.`
}

/** 401: where to sign in (with several providers, each one's address too). */
function unauthenticated (decision: Extract<Refusal, { kind: 'unauthenticated' }>, context: RefusalContext): GatewayError {
  const headers = { 'www-authenticate': challenge(decision.realm, [], decision.resourceMetadata), ...context.headers }
  const loginUrls = decision.loginUrls === undefined ? {} : { loginUrls: decision.loginUrls }
  return new GatewayError('unauthenticated', `Sign in first: there is no access token for ${context.subject}.`, {
    details: { loginUrl: decision.loginUrl, ...loginUrls, headers },
  })
}

/**
 * A rules' 403: another account is offered to a person, unless the address refused (another account
 * would come from the same place) or only this request was (the account may use the rest).
 */
function forbidden (decision: Extract<Refusal, { kind: 'forbidden' }>, context: RefusalContext): GatewayError {
  const refused = refusedBy(decision.identity, decision.rule, decision.address, decision.refusedBy, decision.provider, decision.refusedFor, decision.byAddress)
  // Another account is a remedy only where this one is refused everything, from wherever it comes.
  const offer = context.switchAccountUrl === undefined || refused.byNetwork === true || refused.refusedFor !== undefined ? {} : { switchAccountUrl: context.switchAccountUrl, headers: context.headers }
  return new GatewayError('forbidden', forbiddenMessage(refused), {
    details: context.byToken === true ? { refused } : { loginUrl: decision.loginUrl, refused, ...offer },
  })
}

/**
 * A `Bearer` challenge: the realm, RFC 6750's parameters, and RFC 9728's `resource_metadata` where the
 * route has one. Values are the gateway's own (quoted-string safe: no quote or backslash, ASCII).
 * @see https://www.rfc-editor.org/rfc/rfc6750#section-3
 * @see https://www.rfc-editor.org/rfc/rfc9728#section-5.1
 */
function challenge (realm: string, parameters: ReadonlyArray<[string, string]>, resourceMetadata: string | undefined): string {
  const all: Array<[string, string]> = [['realm', realm], ...parameters, ...(resourceMetadata === undefined ? [] : [['resource_metadata', resourceMetadata] as [string, string]])]
  return `Bearer ${all.map(([name, value]) => `${name}="${value.replace(/["\\]/g, '')}"`).join(', ')}`
}

/**
 * 403 `forbidden` for an identity or claim header whose value cannot be sent whole: the caller is
 * known, but the application behind `subject` cannot be told who as
 * configured. Names the header, never the value (the provider's, maybe long or with control characters).
 * @param subject `This route` (the request is not forwarded) or `This host` (forward-auth: not allowed)
 */
export function unsendableHeader (subject: 'This route' | 'This host', header: string, problem: string): GatewayError {
  const outcome = subject === 'This route' ? 'forwarded' : 'allowed'
  return new GatewayError('forbidden', `${subject} sends your account's claim in the ${header} header, and its value ${problem}: it cannot be sent whole, so the request was not ${outcome}.`)
}

/** The error that answers a refusing decision (its message is safe to show; causes stay in the log). */
/**
 * Whether the caller brought its own token (a machine client's, or one the gateway issued to an
 * agent): its refusal offers no sign-in and no other account, which a token cannot use.
 */
export function broughtToken (credential: Credential | null): boolean {
  return credential === 'bearer' || credential === 'agent'
}

export function refusal (decision: Refusal, context: RefusalContext): Error {
  switch (decision.kind) {
    case 'unauthenticated':
      return unauthenticated(decision, context)
    case 'step_up': {
      const { reauth } = decision
      const maxAge = maxAgeSeconds(reauth)
      const parameters: Array<[string, string]> = [['error', 'insufficient_user_authentication'], ['max_age', String(maxAge)]]
      if (reauth.acr.length > 0) parameters.push(['acr_values', reauth.acr.join(' ')])
      const how = reauth.acr.length > 0 ? ` with one of: ${reauth.acr.join(', ')}` : ''
      return new GatewayError('insufficient_user_authentication', `Sign in again: ${context.subject} needs a sign-in no older than ${maxAge} seconds${how}.`, {
        details: { loginUrl: context.byToken === true ? undefined : decision.loginUrl, headers: { 'www-authenticate': challenge(decision.realm, parameters, undefined), ...context.headers } },
      })
    }
    case 'token_refused': {
      const insufficient = decision.problem === 'insufficient_scope'
      const parameters: Array<[string, string]> = insufficient
        ? [['error', 'insufficient_scope'], ['scope', decision.scopes.join(' ')]]
        : [['error', 'invalid_token'], ['error_description', decision.message]]
      return new GatewayError(insufficient ? 'insufficient_scope' : 'invalid_token', decision.message, {
        details: { headers: { 'www-authenticate': challenge(decision.realm, parameters, decision.resourceMetadata) } },
      })
    }
    case 'forbidden':
      return forbidden(decision, context)
    case 'invalid_request':
      return new GatewayError('invalid_request', `The request cannot be served: ${decision.reason}.`)
    case 'unavailable': {
      const error = decision.error
      // The store or the provider failed (503, 502): signing in again would not help, trying again may.
      // The request's own addresses go on a copy: one failure may be shared by the requests that
      // waited on one question (a refresh, a store read), and each offered the first one's address
      // to try again (a re-reader's finding).
      if (error instanceof GatewayError) {
        const signIn = error.details.loginUrl ?? context.loginUrl
        return withOwn(error, { loginUrl: context.loginUrl, retryUrl: signIn === undefined ? context.retryUrl : undefined })
      }
      // Anything else is a bug: the error handler answers 500 internal_error and logs the cause.
      return error instanceof Error ? error : new Error('the session could not be read', { cause: error })
    }
    default:
      return unreachable(decision)
  }
}
