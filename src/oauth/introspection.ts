// RFC 7662 token introspection: the issuer's answer on one token, asked with the gateway's client
// credentials (client_secret_post) within the provider's timeout. Machine clients' opaque tokens are
// checked with it (access-tokens.ts), and a route may read a token's person claims from it
// (person-claims.ts).
// @see https://www.rfc-editor.org/rfc/rfc7662
import * as oauth from 'oauth4webapi'
import { GatewayError } from '../errors.js'
import { endpointFailed } from './client.js'
import { providerFetch } from './provider-http.js'
import type { ResolvedProvider } from './providers.js'

/** An introspection answer is reused at most this long (and never past the token's `exp`). */
export const INTROSPECTION_CACHE_MS = 60_000

/**
 * The issuer's RFC 7662 answer on `token`, asked with the gateway's client credentials within the
 * provider's timeout; throws `provider_unavailable` when it cannot be had.
 */
export async function introspection (provider: ResolvedProvider, token: string): Promise<oauth.IntrospectionResponse> {
  const as: oauth.AuthorizationServer = { issuer: provider.expectedIssuer, introspection_endpoint: provider.introspectionUrl }
  try {
    const response = await oauth.introspectionRequest(as, { client_id: provider.clientId }, oauth.ClientSecretPost(provider.clientSecret), token, {
      signal: AbortSignal.timeout(provider.timeoutMs),
      [oauth.allowInsecureRequests]: provider.introspectionUrl!.startsWith('http:'),
      [oauth.customFetch]: providerFetch,
    })
    return await oauth.processIntrospectionResponse(as, { client_id: provider.clientId }, response)
  } catch (error) {
    const message = `Provider "${provider.name}" did not answer the token introspection as expected.`
    throw new GatewayError('provider_unavailable', message, { cause: error, details: { log: endpointFailed('introspection', provider, provider.introspectionUrl!, error, message) } })
  }
}
