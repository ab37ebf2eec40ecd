// The addresses and the scope of the authorization server for agents, apart from the server itself
// (authorization-server.ts loads oidc-provider, which only a gateway with agents routes needs).

/** Where oidc-provider's endpoints are mounted. */
export const AGENTS_PREFIX = '/oauth/agents'
export const AGENT_ENDPOINTS = {
  authorization: `${AGENTS_PREFIX}/authorize`,
  token: `${AGENTS_PREFIX}/token`,
  registration: `${AGENTS_PREFIX}/register`,
  revocation: `${AGENTS_PREFIX}/revoke`,
  /** The device flow (RFC 8628): where a CLI asks for a code, and the page where the person enters it. */
  device_authorization: `${AGENTS_PREFIX}/device/auth`,
  code_verification: `${AGENTS_PREFIX}/device`,
} as const
/** RFC 8628's grant type, at the token endpoint. */
export const DEVICE_CODE_GRANT = 'urn:ietf:params:oauth:grant-type:device_code'
/** The one scope of a route's tokens: a client that asks for none gets it (real MCP clients often ask for none). */
export const AGENT_SCOPE = 'access'
