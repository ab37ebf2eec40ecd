// An agent's grant the way an MCP client gets one, for test files that need a token and nothing
// else of the flow: registration (RFC 7591), authorization with PKCE, the person's sign-in and
// Allow in a fetch browser, and the code exchanged at the token endpoint.
import { createHash, randomBytes } from 'node:crypto'
import type { OAuthClientProvider } from '@modelcontextprotocol/sdk/client/auth.js'
import type { OAuthClientInformationMixed, OAuthClientMetadata, OAuthTokens } from '@modelcontextprotocol/sdk/shared/auth.js'
import { expect } from 'vitest'
import { Browser } from './browser.js'

const REDIRECT = 'http://127.0.0.1:8976/callback'

export interface AgentTokens { access_token: string, refresh_token: string }

/** A PKCE verifier and its S256 challenge (RFC 7636). */
export function pkcePair (): { verifier: string, challenge: string } {
  const verifier = randomBytes(32).toString('base64url')
  return { verifier, challenge: createHash('sha256').update(verifier).digest('base64url') }
}

/** Follows the consent POST's answer (`response`, to `from`) through the redirects back to the client's `redirect`: where it lands, with the code or the error. */
export async function backToClient (browser: Browser, response: Response, from: string, redirect: string): Promise<URL> {
  let answer = response
  while (answer.status === 303 || answer.status === 302) {
    const location = new URL(answer.headers.get('location')!, from)
    if (location.href.startsWith(redirect)) return location
    answer = await browser.fetch(location.href)
  }
  throw new Error(`the consent ended with ${answer.status}: ${await answer.text()}`)
}

/** A grant for `login` on the resource `resource` at the gateway `gatewayUrl`: its client id and tokens. `beforeAllow` runs while the consent page is open. */
export async function agentGrant (gatewayUrl: string, login: string, resource: string, beforeAllow?: () => void): Promise<{ id: string, tokens: AgentTokens }> {
  const registered = await fetch(`${gatewayUrl}/oauth/agents/register`, { method: 'POST', headers: { 'content-type': 'application/json', 'x-forwarded-for': randomBytes(4).join('.') }, body: JSON.stringify({ client_name: 'Test agent', redirect_uris: [REDIRECT], token_endpoint_auth_method: 'none' }) })
  expect(registered.status).toBe(201)
  const id = (await registered.json() as { client_id: string }).client_id
  const { verifier, challenge } = pkcePair()
  const query = new URLSearchParams({ response_type: 'code', client_id: id, redirect_uri: REDIRECT, code_challenge: challenge, code_challenge_method: 'S256', resource })
  const browser = new Browser()
  const page = await browser.navigate(`${gatewayUrl}/oauth/agents/authorize?${query.toString()}`, { login })
  const body = await page.text()
  expect(page.status, body).toBe(200)
  const csrf = /name="csrf" value="([^"]+)"/.exec(body)![1]!
  const action = new URL(/<form method="post" action="([^"]+)"/.exec(body)![1]!, gatewayUrl).href
  beforeAllow?.()
  const response = await browser.fetch(action, { method: 'POST', headers: { 'content-type': 'application/x-www-form-urlencoded', origin: gatewayUrl }, body: new URLSearchParams({ csrf, decision: 'allow' }) })
  const code = (await backToClient(browser, response, action, REDIRECT)).searchParams.get('code')
  expect(code).toBeTruthy()
  const token = await fetch(`${gatewayUrl}/oauth/agents/token`, { method: 'POST', body: new URLSearchParams({ grant_type: 'authorization_code', code: code!, client_id: id, redirect_uri: REDIRECT, code_verifier: verifier, resource }) })
  expect(token.status).toBe(200)
  return { id, tokens: await token.json() as AgentTokens }
}

/**
 * The MCP SDK's OAuth client provider, kept in memory: what Claude Code keeps in its keychain. It
 * may start with a client registered and tokens held (a grant made by {@link agentGrant}).
 */
export class MemoryProvider implements OAuthClientProvider {
  verifier = ''
  authorizationUrl: URL | undefined
  constructor (readonly redirectUrl: string, public client?: OAuthClientInformationMixed, public saved?: OAuthTokens) {}
  get clientMetadata (): OAuthClientMetadata {
    return { client_name: 'Test MCP client', redirect_uris: [this.redirectUrl], grant_types: ['authorization_code', 'refresh_token'], response_types: ['code'], token_endpoint_auth_method: 'none' }
  }

  clientInformation (): OAuthClientInformationMixed | undefined { return this.client }
  saveClientInformation (info: OAuthClientInformationMixed): void { this.client = info }
  tokens (): OAuthTokens | undefined { return this.saved }
  saveTokens (tokens: OAuthTokens): void { this.saved = tokens }
  redirectToAuthorization (url: URL): void { this.authorizationUrl = url }
  saveCodeVerifier (verifier: string): void { this.verifier = verifier }
  codeVerifier (): string { return this.verifier }
}
