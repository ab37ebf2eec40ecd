// An agent's authorization request as the gateway takes it, before oidc-provider sees it: only the
// parameters it knows, a PKCE S256 code request for a route agents may reach, a short `state`.
// Refused here with an error page and no redirect: a request no person has seen must never send
// the browser to a client's address, nor keep more than a few kilobytes.
import { GatewayError } from '../errors.js'
import { STATE_MAX_LENGTH } from '../http/agent-limits.js'
import { AGENT_ENDPOINTS, AGENT_SCOPE } from '../agents/endpoints.js'

/** The authorization request's parameters the gateway takes; any other is dropped before oidc-provider sees it. */
const AUTHORIZATION_PARAMETERS = ['response_type', 'client_id', 'redirect_uri', 'code_challenge', 'code_challenge_method', 'resource', 'state']
/** RFC 7636 §4.1: 43 to 128 characters of the unreserved set. */
const CODE_CHALLENGE = /^[A-Za-z0-9._~-]{43,128}$/

/**
 * The authorization request `url` as oidc-provider gets it: only the parameters the gateway takes
 * and the route's scope (MCP clients send none unless configured; the consent grants that one).
 * `resources`: the resource identifiers of the routes agents may reach; one of them, or none when
 * there is only one.
 */
export function authorizationRequest (url: string, resources: ReadonlySet<string> | ReadonlyMap<string, unknown>): string {
  const sent = new URLSearchParams(url.slice(url.indexOf('?') + 1))
  const query = new URLSearchParams()
  for (const name of AUTHORIZATION_PARAMETERS) {
    const values = sent.getAll(name)
    if (values.length > 1) throw new GatewayError('invalid_request', `The authorization request repeats ${name}.`)
    if (values.length === 1) query.set(name, values[0]!)
  }
  if (query.get('response_type') !== 'code') throw new GatewayError('invalid_request', 'An agent asks for a code: response_type=code.')
  if ((query.get('state') ?? '').length > STATE_MAX_LENGTH) throw new GatewayError('invalid_request', `The state is at most ${STATE_MAX_LENGTH} characters.`)
  if (!CODE_CHALLENGE.test(query.get('code_challenge') ?? '') || query.get('code_challenge_method') !== 'S256') {
    throw new GatewayError('invalid_request', 'An agent proves its requests with PKCE: code_challenge and code_challenge_method=S256.')
  }
  const resource = query.get('resource')
  if (resource === null ? resources.size !== 1 : !resources.has(resource)) {
    throw new GatewayError('invalid_request', `The resource must be one of the routes agents may reach: ${[...resources.keys()].join(', ')}.`)
  }
  query.set('scope', AGENT_SCOPE)
  return `${AGENT_ENDPOINTS.authorization}?${query.toString()}`
}
