// The addresses and the scope of the authorization server for agents, apart from the server itself
// (authorization-server.ts loads oidc-provider, which only a gateway with agents routes needs).
import type { AgentsConfig } from '../config/types.js'
import { agentDevicePage } from '../oauth/urls.js'

/** Where oidc-provider's endpoints are mounted. */
export const AGENTS_PREFIX = '/oauth/agents'
export const AGENT_ENDPOINTS = {
  authorization: `${AGENTS_PREFIX}/authorize`,
  token: `${AGENTS_PREFIX}/token`,
  registration: `${AGENTS_PREFIX}/register`,
  revocation: `${AGENTS_PREFIX}/revoke`,
  /** The device flow (RFC 8628): where a CLI asks for a code, and the page where the person enters it. */
  device_authorization: `${AGENTS_PREFIX}/device/auth`,
  code_verification: agentDevicePage,
} as const
/** RFC 8628's grant type, at the token endpoint. */
export const DEVICE_CODE_GRANT = 'urn:ietf:params:oauth:grant-type:device_code'
/** The one scope of a route's tokens: a client that asks for none gets it (real MCP clients often ask for none). */
export const AGENT_SCOPE = 'access'

/** RFC 8414 metadata: the endpoints served, and what they accept. */
export function authorizationServerMetadata (base: string, agents: AgentsConfig): Record<string, unknown> {
  return {
    issuer: base,
    authorization_endpoint: `${base}${AGENT_ENDPOINTS.authorization}`,
    token_endpoint: `${base}${AGENT_ENDPOINTS.token}`,
    ...(agents.registration ? { registration_endpoint: `${base}${AGENT_ENDPOINTS.registration}` } : {}),
    revocation_endpoint: `${base}${AGENT_ENDPOINTS.revocation}`,
    jwks_uri: `${base}/.well-known/jwks.json`,
    scopes_supported: [AGENT_SCOPE],
    response_types_supported: ['code'],
    grant_types_supported: ['authorization_code', 'refresh_token', ...(agents.deviceFlow ? [DEVICE_CODE_GRANT] : [])],
    ...(agents.deviceFlow ? { device_authorization_endpoint: `${base}${AGENT_ENDPOINTS.device_authorization}` } : {}),
    code_challenge_methods_supported: ['S256'],
    ...(agents.clientMetadataDocuments ? { client_id_metadata_document_supported: true } : {}),
    token_endpoint_auth_methods_supported: ['none'],
    revocation_endpoint_auth_methods_supported: ['none'],
    authorization_response_iss_parameter_supported: true,
  }
}
