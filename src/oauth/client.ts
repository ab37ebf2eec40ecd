// Protocol steps of the authorization code grant, with no Fastify in them: the authorization URL
// (RFC 6749 §4.1.1), the code exchange (§4.1.3, client_secret_post) and its response checks (§5.1,
// §5.2) through oauth4webapi. oauth4webapi's errors are translated here, once.
import * as oauth from 'oauth4webapi'
import type { ProviderConfig } from '../config.js'
import { GatewayError } from '../errors.js'
import type { TokenSet } from '../session.js'

/** A PKCE pair (RFC 7636 §4.1-4.2, S256). */
export async function pkcePair (): Promise<{ verifier: string, challenge: string }> {
  const verifier = oauth.generateRandomCodeVerifier()
  return { verifier, challenge: await oauth.calculatePKCECodeChallenge(verifier) }
}

/** The {authorize_url} redirect. @see https://www.rfc-editor.org/rfc/rfc6749#section-4.1.1 */
export function authorizationUrl (provider: ProviderConfig, params: { redirectUri: string, state: string, codeChallenge?: string }): string {
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
  return url.href
}

/** The expected issuer: configured, else the authorize URL's origin (what most providers use). */
function authorizationServer (provider: ProviderConfig): oauth.AuthorizationServer {
  return { issuer: provider.issuer ?? new URL(provider.authorizeUrl).origin, token_endpoint: provider.tokenUrl }
}

const ERROR_CODE = /^[\w.-]{1,64}$/

/**
 * Checks the callback's parameters after the state: an `error=` from the provider becomes
 * `access_denied`, a missing `code` `invalid_request`, an `iss` from another issuer (RFC 9207)
 * `invalid_request`. @see https://www.rfc-editor.org/rfc/rfc6749#section-4.1.2
 */
export function checkCallback (provider: ProviderConfig, query: URLSearchParams): URLSearchParams {
  const error = query.get('error')
  if (error !== null) {
    const code = ERROR_CODE.test(error) ? error : 'unknown_error'
    throw new GatewayError('access_denied', `The provider answered "${code}".`)
  }
  if (!query.get('code')) throw new GatewayError('invalid_request', 'The callback has no code parameter.')
  try {
    return oauth.validateAuthResponse(authorizationServer(provider), { client_id: provider.clientId }, query, oauth.skipStateCheck)
  } catch (error) {
    throw new GatewayError('invalid_request', 'The authorization response came from an unexpected issuer.', { cause: error })
  }
}

function tokenExchangeError (provider: ProviderConfig, error: unknown): GatewayError {
  let message = 'The token endpoint did not return a usable access token.'
  if (error instanceof oauth.ResponseBodyError) {
    message = `The token endpoint refused the request (${ERROR_CODE.test(error.error) ? error.error : 'error'}).`
  } else if (error instanceof Error && (error.name === 'TimeoutError' || error.name === 'AbortError')) {
    message = `The token endpoint did not answer within ${provider.timeoutMs / 1000}s.`
  } else if (error instanceof TypeError) {
    message = 'The token endpoint could not be reached.'
  }
  return new GatewayError('token_exchange_failed', message, { cause: error })
}

/**
 * POSTs grant_type=authorization_code with client_id and client_secret in the form body and checks
 * the response. @see https://www.rfc-editor.org/rfc/rfc6749#section-4.1.3
 */
export async function exchangeCode (
  provider: ProviderConfig,
  callback: URLSearchParams,
  redirectUri: string,
  verifier: string | undefined
): Promise<TokenSet> {
  const as = authorizationServer(provider)
  const client: oauth.Client = { client_id: provider.clientId }
  try {
    const response = await oauth.authorizationCodeGrantRequest(
      as, client, oauth.ClientSecretPost(provider.clientSecret), callback, redirectUri, verifier ?? oauth.nopkce,
      { signal: AbortSignal.timeout(provider.timeoutMs), [oauth.allowInsecureRequests]: provider.tokenUrl.startsWith('http:') }
    )
    const result = await oauth.processAuthorizationCodeResponse(as, client, response)
    return toTokenSet(result)
  } catch (error) {
    throw tokenExchangeError(provider, error)
  }
}

/**
 * POSTs grant_type=refresh_token with the client credentials in the form body. Returns 'refused'
 * when the provider answers with an OAuth error (the refresh token is no good: sign in again);
 * throws `token_exchange_failed` when it cannot be asked (unreachable, timeout, bad answer).
 * @see https://www.rfc-editor.org/rfc/rfc6749#section-6
 */
export async function refreshTokens (provider: ProviderConfig, refreshToken: string): Promise<TokenSet | 'refused'> {
  const as = authorizationServer(provider)
  const client: oauth.Client = { client_id: provider.clientId }
  try {
    const response = await oauth.refreshTokenGrantRequest(
      as, client, oauth.ClientSecretPost(provider.clientSecret), refreshToken,
      { signal: AbortSignal.timeout(provider.timeoutMs), [oauth.allowInsecureRequests]: provider.tokenUrl.startsWith('http:') }
    )
    return toTokenSet(await oauth.processRefreshTokenResponse(as, client, response))
  } catch (error) {
    if (error instanceof oauth.ResponseBodyError) return 'refused'
    throw tokenExchangeError(provider, error)
  }
}

function toTokenSet (result: oauth.TokenEndpointResponse): TokenSet {
  return {
    access_token: result.access_token,
    token_type: result.token_type,
    ...(typeof result.expires_in === 'number' ? { expires_at: Math.floor(Date.now() / 1000) + result.expires_in } : {}),
    ...(result.refresh_token ? { refresh_token: result.refresh_token } : {}),
    ...(result.scope ? { scope: result.scope } : {}),
  }
}
