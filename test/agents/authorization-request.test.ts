// An agent's authorization request before oidc-provider sees it (src/routes/agent-authorization.ts):
// what a stranger's client may put in the URL, each refused with the gateway's own error (an error
// page, never a redirect to the client), and what is passed on: only the known parameters, the
// route's scope. The same requests through a gateway: attacks.test.ts.
import { describe, expect, it } from 'vitest'
import { AGENT_SCOPE } from '../../src/agents/endpoints.js'
import { STATE_MAX_LENGTH } from '../../src/http/agent-limits.js'
import { authorizationRequest } from '../../src/routes/agent-authorization.js'

const MCP = 'https://gw.example/mcp'
const ONE = new Set([MCP])
const TWO = new Set([MCP, 'https://gw.example/tools'])
const CHALLENGE = 'E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM'
const GOOD = { response_type: 'code', client_id: 'https://client.example/meta.json', redirect_uri: 'http://127.0.0.1:5000/cb', code_challenge: CHALLENGE, code_challenge_method: 'S256', state: 's1' }
const url = (params: Record<string, string>, extra = '') => `/oauth/agents/authorize?${new URLSearchParams(params).toString()}${extra}`
const without = (name: keyof typeof GOOD) => Object.fromEntries(Object.entries(GOOD).filter(([key]) => key !== name))

describe('an agent\'s authorization request', () => {
  it.each([
    ['a repeated parameter (the two readers could take different ones)', url(GOOD, '&redirect_uri=https://attacker.example/cb'), /repeats redirect_uri/],
    ['a repeated resource', url({ ...GOOD, resource: MCP }, `&resource=${encodeURIComponent(MCP)}`), /repeats resource/],
    ['an implicit-flow response type', url({ ...GOOD, response_type: 'token' }), /response_type=code/],
    ['no response type', url(without('response_type')), /response_type=code/],
    ['no PKCE', url(without('code_challenge')), /PKCE/],
    ['PKCE plain', url({ ...GOOD, code_challenge_method: 'plain' }), /PKCE/],
    ['a challenge too short', url({ ...GOOD, code_challenge: CHALLENGE.slice(0, 42) }), /PKCE/],
    ['a challenge with characters outside the unreserved set', url({ ...GOOD, code_challenge: `${CHALLENGE.slice(0, 42)}+` }), /PKCE/],
    ['a state longer than the gateway keeps', url({ ...GOOD, state: 'x'.repeat(STATE_MAX_LENGTH + 1) }), /state is at most/],
    ['a resource that is no agents route', url({ ...GOOD, resource: 'https://gw.example/admin' }), /must be one of the routes/],
    ['a resource spelt otherwise than the route', url({ ...GOOD, resource: `${MCP}/` }), /must be one of the routes/],
  ])('refuses %s', (_name, sent, message) => {
    expect(() => authorizationRequest(sent, ONE)).toThrow(expect.objectContaining({ code: 'invalid_request', message: expect.stringMatching(message) }))
  })

  it('needs a resource where agents may reach several routes', () => {
    expect(() => authorizationRequest(url(GOOD), TWO)).toThrow(/must be one of the routes agents may reach: https:\/\/gw\.example\/mcp, https:\/\/gw\.example\/tools/)
    expect(new URL(authorizationRequest(url({ ...GOOD, resource: 'https://gw.example/tools' }), TWO), 'https://gw.example').searchParams.get('resource')).toBe('https://gw.example/tools')
  })

  it('passes on only the parameters it knows, with the route\'s scope in place of any sent', () => {
    const passed = new URL(authorizationRequest(url({ ...GOOD, scope: 'admin', prompt: 'none', request_uri: 'https://attacker.example/r', max_age: '0' }), ONE), 'https://gw.example')
    expect(passed.pathname).toBe('/oauth/agents/authorize')
    expect(Object.fromEntries(passed.searchParams)).toEqual({ ...GOOD, scope: AGENT_SCOPE })
  })
})
