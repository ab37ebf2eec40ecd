// Protocol steps of the authorization code grant, with no Fastify in them: the authorization URL
// (RFC 6749 §4.1.1), the code exchange (§4.1.3, client_secret_post) and its response checks (§5.1,
// §5.2) through oauth4webapi, ID token validation (OIDC Core §3.1.3.7: JWKS signature with jose;
// iss, aud, exp and nonce), userinfo, and the refresh grant (§6). Library errors are translated
// here, once.
import { errors as joseErrors, type JWTPayload } from 'jose'
import { KeysUnavailable, verifiedClaims } from './issuer-keys.js'
import * as oauth from 'oauth4webapi'
import { describeCause, GatewayError } from '../errors.js'
import { loggedEndpoint } from './discovery-failure.js'
import type { Clock } from '../ops/clock.js'
import type { TokenSet } from '../session/record.js'
import { fetchGitHubUser } from './github.js'
import { providerFetch, UnreadableAnswer } from './provider-http.js'
import type { ResolvedProvider } from './providers.js'

export interface AuthorizationParams {
  redirectUri: string
  state: string
  codeChallenge?: string
  /** OIDC nonce, echoed in the ID token. */
  nonce?: string
  /** "Use another account": the provider must ask who signs in instead of reusing its own session. */
  prompt?: AccountPrompt
  /** Step-up: the sign-in at the provider may be at most this many seconds old (`max_age`). */
  maxAge?: number
  /** Step-up: the authentication context classes asked for, in order of preference (`acr_values`). */
  acrValues?: readonly string[]
}

/**
 * The only `prompt` values the gateway ever sends: `select_account` where the provider lists it,
 * else `login`. Never taken from a request.
 * @see https://openid.net/specs/openid-connect-core-1_0.html#AuthRequest
 */
export type AccountPrompt = 'select_account' | 'login'

/** The prompt that makes `provider` ask for the account again. */
export function accountPrompt (provider: Pick<ResolvedProvider, 'selectAccount'>): AccountPrompt {
  return provider.selectAccount ? 'select_account' : 'login'
}

/**
 * The {authorize_url} redirect.
 * @see https://www.rfc-editor.org/rfc/rfc6749#section-4.1.1
 * @see https://openid.net/specs/openid-connect-core-1_0.html#AuthRequest (nonce, prompt, max_age, acr_values)
 */
export function authorizationUrl (provider: ResolvedProvider, params: AuthorizationParams): string {
  const url = new URL(provider.authorizeUrl)
  url.searchParams.set('response_type', 'code')
  url.searchParams.set('client_id', provider.clientId)
  url.searchParams.set('redirect_uri', params.redirectUri)
  url.searchParams.set('scope', provider.scope)
  url.searchParams.set('state', params.state)
  if (params.codeChallenge) {
    url.searchParams.set('code_challenge', params.codeChallenge)
    url.searchParams.set('code_challenge_method', 'S256')
  }
  if (params.nonce) url.searchParams.set('nonce', params.nonce)
  if (params.prompt) url.searchParams.set('prompt', params.prompt)
  if (params.maxAge !== undefined) url.searchParams.set('max_age', String(params.maxAge))
  if (params.acrValues !== undefined && params.acrValues.length > 0) url.searchParams.set('acr_values', params.acrValues.join(' '))
  return url.href
}

function authorizationServer (provider: ResolvedProvider): oauth.AuthorizationServer {
  return {
    issuer: provider.expectedIssuer,
    token_endpoint: provider.tokenUrl,
    // With this flag oauth4webapi's validateAuthResponse refuses a callback without `iss` (RFC 9207 §2.4).
    authorization_response_iss_parameter_supported: provider.issParameterSupported,
  }
}

function requestOptions (provider: ResolvedProvider, url: string) {
  return { signal: AbortSignal.timeout(provider.timeoutMs), [oauth.allowInsecureRequests]: url.startsWith('http:'), [oauth.customFetch]: providerFetch }
}

/**
 * The error codes of the IANA OAuth Extensions Error Registry a provider may answer a sign-in or a
 * token request with (RFC 6749, RFC 6750, OpenID Connect, RFC 8707, RFC 8628, RFC 9449, RFC 9396),
 * and GitHub's: only these are repeated to the person and the log. Anything else is a provider's own word, which
 * could carry what it was sent (an outside tester put a value of their own in the callback's `error`).
 * @see https://www.iana.org/assignments/oauth-parameters/oauth-parameters.xhtml#extensions-error
 */
const ERROR_CODES = new Set([
  'invalid_request', 'unauthorized_client', 'access_denied', 'unsupported_response_type', 'invalid_scope', 'server_error',
  'temporarily_unavailable', 'invalid_client', 'invalid_grant', 'unsupported_grant_type', 'invalid_token', 'insufficient_scope',
  'interaction_required', 'login_required', 'account_selection_required', 'consent_required', 'invalid_request_uri',
  'invalid_request_object', 'request_not_supported', 'request_uri_not_supported', 'registration_not_supported', 'invalid_target',
  'authorization_pending', 'slow_down', 'expired_token', 'invalid_dpop_proof', 'use_dpop_nonce', 'invalid_authorization_details',
  'unmet_authentication_requirements',
  // GitHub's own, as its documentation lists them (token and authorization errors).
  // @see https://docs.github.com/en/apps/oauth-apps/maintaining-oauth-apps/troubleshooting-oauth-app-access-token-request-errors
  'bad_verification_code', 'incorrect_client_credentials', 'redirect_uri_mismatch', 'unverified_user_email', 'application_suspended',
])

/** `value` when it is a registered OAuth error code, else `fallback`. */
const knownError = (value: unknown, fallback: string): string => typeof value === 'string' && ERROR_CODES.has(value) ? value : fallback

/** Callback parameters that must appear at most once; a second copy is refused before any is used. */
const SINGLE_PARAMETERS = ['code', 'state', 'iss'] as const

/**
 * The callback's query string, parsed once. A repeated `code`, `state` or `iss` is `invalid_request`:
 * which copy counts would be a guess, and parts of the flow could read different ones.
 * @see https://www.rfc-editor.org/rfc/rfc6749#section-3.1 (request and response parameters must not be included more than once)
 */
export function callbackParameters (search: string): URLSearchParams {
  const query = new URLSearchParams(search)
  for (const name of SINGLE_PARAMETERS) {
    if (query.getAll(name).length > 1) throw new GatewayError('invalid_request', `The callback has more than one ${name} parameter.`)
  }
  return query
}

/**
 * Checks the callback's parameters after the state: an `error=` from the provider becomes
 * `access_denied`, a missing `code` `invalid_request`; `iss` (RFC 9207) must be the provider's
 * issuer when present, and present when the provider advertises it, else `invalid_request`.
 * @see https://www.rfc-editor.org/rfc/rfc6749#section-4.1.2
 * @see https://www.rfc-editor.org/rfc/rfc9207#section-2.4
 */
export function checkCallback (provider: ResolvedProvider, query: URLSearchParams): URLSearchParams {
  const error = query.get('error')
  if (error !== null) {
    throw new GatewayError('access_denied', `The provider answered "${knownError(error, 'unknown_error')}".`)
  }
  if (!query.get('code')) throw new GatewayError('invalid_request', 'The callback has no code parameter.')
  try {
    return oauth.validateAuthResponse(authorizationServer(provider), { client_id: provider.clientId }, query, oauth.skipStateCheck)
  } catch (error) {
    const message = query.get('iss')
      ? 'The authorization response came from an unexpected issuer.'
      : 'The authorization response has no iss parameter, which this provider always sends.'
    throw new GatewayError('invalid_request', message, { cause: error })
  }
}

const ID_TOKEN_INVALID = 'The ID token is invalid.'
const NOT_USABLE = 'The token endpoint did not return a usable access token.'

/** The decoded parts of a JWT that oauth4webapi hands over in the `cause` of a claim or header check. */
function aboutJwt (cause: unknown): boolean {
  return typeof cause === 'object' && cause !== null && ('claims' in cause || 'header' in cause)
}

type Describe = (provider: ResolvedProvider, error: Error) => string

/**
 * What a failed code exchange or refresh tells the user, by the library's error class and code
 * (oauth4webapi's and jose's `code`, a DOMException's `name`; `*` is any code of that class). The
 * first row that matches wins. The only JWT in a token response is the ID token, so oauth4webapi's
 * claim comparisons and timestamp checks, and its type and presence checks that carry the decoded
 * claims or header in their `cause`, are about the ID token; jose is used here only to verify it.
 */
const TOKEN_ERRORS: ReadonlyArray<readonly [type: abstract new (...args: never[]) => Error, code: string, describe: Describe]> = [
  [oauth.ResponseBodyError, oauth.RESPONSE_BODY_ERROR, (_provider, error) =>
    `The token endpoint refused the request (${knownError((error as oauth.ResponseBodyError).error, 'error')}).`],
  [DOMException, 'TimeoutError', (provider) => `The token endpoint did not answer within ${provider.timeoutMs / 1000}s.`],
  [DOMException, 'AbortError', (provider) => `The token endpoint did not answer within ${provider.timeoutMs / 1000}s.`],
  [joseErrors.JOSEError, '*', () => ID_TOKEN_INVALID],
  [oauth.OperationProcessingError, oauth.JWT_CLAIM_COMPARISON, () => ID_TOKEN_INVALID],
  [oauth.OperationProcessingError, oauth.JWT_TIMESTAMP_CHECK, () => ID_TOKEN_INVALID],
  [oauth.OperationProcessingError, oauth.INVALID_RESPONSE, (_provider, error) => aboutJwt(error.cause) ? ID_TOKEN_INVALID : NOT_USABLE],
  [UnreadableAnswer, '*', () => 'The token endpoint\'s answer could not be read (too large, or cut off).'],
  [TypeError, '*', () => 'The token endpoint could not be reached.'],
]

/** An error's identifier as its library defines it: the `code` string of oauth4webapi and jose, a DOMException's `name`. */
function codeOf (error: Error): string | undefined {
  if (error instanceof DOMException) return error.name
  const code = (error as { code?: unknown }).code
  return typeof code === 'string' ? code : undefined
}

/** The message of {@link TOKEN_ERRORS} for `error`; anything else did not give a usable token. */
function tokenErrorMessage (provider: ResolvedProvider, error: unknown): string {
  if (!(error instanceof Error)) return NOT_USABLE
  const code = codeOf(error)
  const row = TOKEN_ERRORS.find(([type, rowCode]) => error instanceof type && (rowCode === '*' || rowCode === code))
  return row ? row[2](provider, error) : NOT_USABLE
}

/** `token_exchange_failed` for a library error met in the code exchange or a refresh, the error as its cause. */
export function tokenExchangeError (provider: ResolvedProvider, error: unknown): GatewayError {
  // The ID token may be good: its keys could not be read (the provider's JWKS is down, and the set
  // held has no key for it). Not "the ID token is invalid". That outage is logged once, by the keys.
  if (error instanceof KeysUnavailable) return new GatewayError('provider_unavailable', error.message, { cause: error, details: { log: keysOutage(provider.name) } })
  const message = tokenErrorMessage(provider, error)
  return new GatewayError('token_exchange_failed', message, { cause: error, details: { log: endpointFailed('token', provider, provider.tokenUrl, error, message) } })
}

/** A request failed while a provider's keys cannot be read: at debug, since the keys log the outage once and its end once. */
export function keysOutage (provider: string): { msg: string, fields: Record<string, unknown>, level: 'debug' } {
  return { msg: 'request failed: the provider\'s signing keys could not be read, or do not hold the token\'s key yet', fields: { provider }, level: 'debug' }
}

/**
 * The one line of a provider endpoint that failed a request: which provider, which endpoint, and
 * why (an operator with several providers could not tell which was down: an outside tester's finding).
 */
export function endpointFailed (endpoint: 'token' | 'userinfo' | 'introspection', provider: ResolvedProvider, url: string, error: unknown, reason: string): { msg: string, fields: Record<string, unknown> } {
  return { msg: `${endpoint} request to the provider failed`, fields: { provider: provider.name, url: loggedEndpoint(url), reason, cause: describeCause(error) } }
}

/**
 * A token answer with HTTP 200 and an `error` member but no `access_token` is a refusal sent with the
 * wrong status (GitHub answers every token error so): it is given 400, which RFC 6749 §5.2 names, so
 * that oauth4webapi reads it as the error response it is. Any other answer passes unchanged.
 * @see https://docs.github.com/en/apps/oauth-apps/maintaining-oauth-apps/troubleshooting-oauth-app-access-token-request-errors
 */
async function errorWithStatus200 (response: Response): Promise<Response> {
  if (response.status !== 200 || !/[/+]json\b/i.test(response.headers.get('content-type') ?? '')) return response
  // Read once and handed on as a new Response: clone() would tee the body stream, which costs more
  // than the rest of this check together (see docs/performance.md).
  const text = await response.text()
  let body: unknown
  try {
    body = JSON.parse(text)
  } catch {
    body = undefined
  }
  const refusal = typeof body === 'object' && body !== null && typeof (body as { error?: unknown }).error === 'string' &&
    (body as { access_token?: unknown }).access_token === undefined
  return new Response(text, { status: refusal ? 400 : 200, headers: response.headers })
}

export interface CodeExchangeResult {
  tokens: TokenSet
  /** The validated ID token's claims (OIDC providers only). */
  idClaims: JWTPayload | undefined
  /** The ID token itself (OIDC providers only): sign-out sends it back as `id_token_hint`. */
  idToken: string | undefined
}

/**
 * POSTs grant_type=authorization_code with client_id and client_secret in the form body and checks
 * the response; for OIDC providers the ID token is required and validated (JWKS signature, iss,
 * aud, exp, nonce). The tokens' `expires_at` is counted from `clock`.
 * @see https://www.rfc-editor.org/rfc/rfc6749#section-4.1.3
 */
export async function exchangeCode (
  provider: ResolvedProvider,
  callback: URLSearchParams,
  redirectUri: string,
  verifier: string | undefined,
  nonce: string | undefined,
  clock: Clock
): Promise<CodeExchangeResult> {
  const as = authorizationServer(provider)
  const client: oauth.Client = { client_id: provider.clientId }
  try {
    const response = await errorWithStatus200(await oauth.authorizationCodeGrantRequest(
      as, client, oauth.ClientSecretPost(provider.clientSecret), callback, redirectUri, verifier ?? oauth.nopkce,
      requestOptions(provider, provider.tokenUrl)
    ))
    const result = await oauth.processAuthorizationCodeResponse(as, client, response,
      provider.openid ? { expectedNonce: nonce, requireIdToken: true } : undefined)
    let idClaims: JWTPayload | undefined
    if (provider.openid) {
      // oauth4webapi checked iss, aud, exp and nonce; the signature is checked against the JWKS here.
      if (provider.keys === undefined) throw new Error('the provider publishes no signing keys (jwks_uri)')
      idClaims = await verifiedClaims(result.id_token!, provider.keys, { issuer: as.issuer, audience: provider.clientId })
    }
    return { tokens: toTokenSet(result, clock), idClaims, idToken: provider.openid ? result.id_token : undefined }
  } catch (error) {
    throw tokenExchangeError(provider, error)
  }
}

/**
 * The userinfo JSON for an access token (GET with the bearer), once at sign-in. For OIDC its `sub`
 * must be the ID token's. `preset: github` reads GitHub's REST API instead (./github.ts).
 * @see https://openid.net/specs/openid-connect-core-1_0.html#UserInfo
 */
export async function fetchUserinfo (provider: ResolvedProvider, accessToken: string, expectedSub: string | undefined): Promise<Record<string, unknown>> {
  if (provider.preset === 'github' && !provider.openid) return await fetchGitHubUser(provider, accessToken)
  const url = provider.userinfoUrl!
  let body: unknown
  try {
    const response = await providerFetch(url, { headers: { authorization: `Bearer ${accessToken}`, accept: 'application/json' }, signal: AbortSignal.timeout(provider.timeoutMs) })
    if (!response.ok) throw new Error(`userinfo answered ${response.status}`)
    body = await response.json()
  } catch (error) {
    const message = 'The provider\'s userinfo endpoint did not answer as expected.'
    throw new GatewayError('token_exchange_failed', message, { cause: error, details: { log: endpointFailed('userinfo', provider, url, error, message) } })
  }
  if (typeof body !== 'object' || body === null || Array.isArray(body)) {
    throw new GatewayError('token_exchange_failed', 'The provider\'s userinfo endpoint did not answer with a JSON object.')
  }
  const claims = body as Record<string, unknown>
  if (expectedSub !== undefined && claims.sub !== expectedSub) {
    throw new GatewayError('token_exchange_failed', 'The userinfo subject does not match the ID token.')
  }
  return claims
}

/**
 * POSTs grant_type=refresh_token with the client credentials in the form body. Returns 'refused'
 * when the provider's answer is a verdict on the grant (the refresh token is no good: sign in
 * again); throws `token_exchange_failed` for anything else, and the token is kept for a retry:
 * unreachable, a timeout, a bad answer, and an OAuth error that says nothing of the token (an
 * attacker's finding: a 429, the gateway's own `invalid_client` when its secret expired, or a
 * `temporarily_unavailable` dropped every session's tokens).
 * The new `expires_at` is counted from `clock`.
 * @see https://www.rfc-editor.org/rfc/rfc6749#section-5.2
 */
export async function refreshTokens (provider: ResolvedProvider, refreshToken: string, clock: Clock): Promise<TokenSet | 'refused'> {
  const as = authorizationServer(provider)
  const client: oauth.Client = { client_id: provider.clientId }
  try {
    const response = await errorWithStatus200(await oauth.refreshTokenGrantRequest(
      as, client, oauth.ClientSecretPost(provider.clientSecret), refreshToken, requestOptions(provider, provider.tokenUrl)
    ))
    return toTokenSet(await oauth.processRefreshTokenResponse(as, client, response), clock)
  } catch (error) {
    if (error instanceof oauth.ResponseBodyError && error.status !== 429 && GRANT_VERDICTS.has(error.error)) return 'refused'
    const failed = tokenExchangeError(provider, error)
    // Too many requests: how long the provider asked the gateway to leave its refreshes alone.
    if (error instanceof oauth.ResponseBodyError && error.status === 429) failed.details.headers = { 'retry-after': String(retryAfterS(error.response.headers.get('retry-after'), clock)) }
    throw failed
  }
}

/** A 429's Retry-After (seconds, or an HTTP date) in whole seconds, 1 to 60; 5 when it gives none. */
function retryAfterS (value: string | null, clock: Clock): number {
  const seconds = value === null ? NaN : /^\d+$/.test(value.trim()) ? Number(value.trim()) : (Date.parse(value) - clock.now()) / 1000
  return Number.isFinite(seconds) ? Math.min(60, Math.max(1, Math.ceil(seconds))) : 5
}

/**
 * The errors that are about the grant itself, so this refresh token will not be taken again without
 * the person: RFC 6749's, OpenID Connect's that ask for a sign-in (Microsoft Entra answers a refresh
 * that Conditional Access or MFA now blocks with `interaction_required`: an attacker's finding, kept
 * at 502 until the session's maxAge), and GitHub's `bad_refresh_token` (which it answers with HTTP 200).
 * @see https://openid.net/specs/openid-connect-core-1_0.html#AuthError
 * @see https://docs.github.com/en/apps/creating-github-apps/authenticating-with-a-github-app/refreshing-user-access-tokens
 */
const GRANT_VERDICTS = new Set(['invalid_grant', 'invalid_scope', 'unauthorized_client', 'interaction_required', 'login_required', 'consent_required', 'bad_refresh_token'])

/**
 * Revokes one token at the provider's revocation endpoint, the client authenticated as at the
 * token endpoint (client_secret_post). Throws on any failure; the caller decides what it costs.
 * @see https://www.rfc-editor.org/rfc/rfc7009#section-2.1
 */
export async function revokeToken (provider: ResolvedProvider, token: string, hint: 'refresh_token' | 'access_token'): Promise<void> {
  const as: oauth.AuthorizationServer = { issuer: provider.expectedIssuer, revocation_endpoint: provider.revocationUrl }
  const response = await oauth.revocationRequest(as, { client_id: provider.clientId }, oauth.ClientSecretPost(provider.clientSecret), token, {
    ...requestOptions(provider, provider.revocationUrl ?? ''),
    additionalParameters: { token_type_hint: hint },
  })
  await oauth.processRevocationResponse(response)
}

/**
 * What a session keeps of a token response: the access token, when it expires, the refresh token.
 * Not `token_type` (the gateway sends every token as `Bearer`) nor `scope` (nothing reads it): each
 * session would carry them in the store for nothing (bench/results/session-bytes.md). `expires_in`
 * counts from when the answer arrived, on the gateway's clock (the one expiry is later judged by).
 */
function toTokenSet (result: oauth.TokenEndpointResponse, clock: Clock): TokenSet {
  return {
    access_token: result.access_token,
    ...(typeof result.expires_in === 'number' ? { expires_at: Math.floor(clock.now() / 1000) + result.expires_in } : {}),
    ...(result.refresh_token ? { refresh_token: result.refresh_token } : {}),
  }
}
