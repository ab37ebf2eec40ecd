// The addresses and the scope of the authorization server for agents, apart from the server itself
// (authorization-server.ts loads oidc-provider, which only a gateway with agents routes needs).

/** Where oidc-provider's endpoints are mounted. */
export const AGENTS_PREFIX = '/oauth/agents'
export const AGENT_ENDPOINTS = {
  authorization: `${AGENTS_PREFIX}/authorize`,
  token: `${AGENTS_PREFIX}/token`,
  registration: `${AGENTS_PREFIX}/register`,
  revocation: `${AGENTS_PREFIX}/revoke`,
} as const
/** The one scope of a route's tokens: a client that asks for none gets it (real MCP clients often ask for none). */
export const AGENT_SCOPE = 'access'
