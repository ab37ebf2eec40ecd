// The agents' authorization server when the store is slow (a reply later than store.timeout): the
// MCP client or CLI gets 503 `temporarily_unavailable` naming the store, an OAuth error it retries,
// and its refresh token works at the retry (an outside tester's findings: it got `server_error`,
// "oops! something went wrong", which the MCP SDK takes for a refresh that failed for good, and
// sent its person back to sign in over a store blip). The store's replies are held by a proxy.
import { auth, type OAuthClientProvider } from '@modelcontextprotocol/sdk/client/auth.js'
import type { OAuthClientInformationMixed, OAuthClientMetadata, OAuthTokens } from '@modelcontextprotocol/sdk/shared/auth.js'
import { afterAll, expect } from 'vitest'
import { agentGrant } from '../helpers/agent-grant.js'
import type { TestGateway } from '../helpers/gateway.js'
import { startHoldProxy, type HoldProxy } from '../helpers/hold-proxy.js'
import { test as it } from '../helpers/stack.js'

const STORE_TIMEOUT_MS = 300
const clock = { offset: 0, now: () => Date.now() + clock.offset }

let gateway: TestGateway
let proxy: HoldProxy

it.beforeAll(async ({ startStack, upstream, redis }) => {
  proxy = await startHoldProxy(redis.url)
  gateway = await startStack({
    store: { type: 'redis', url: proxy.url, timeout: `${STORE_TIMEOUT_MS}ms` },
    session: { cacheTtl: 0 },
    routes: [{ path: '/other/', upstream: upstream.url, provider: 'demo', agents: true }],
  }, { deps: { clock } })
})

afterAll(async () => {
  await gateway?.close()
  await proxy?.close()
})

async function post (path: string, form: Record<string, string>): Promise<{ status: number, type: string, retryAfter: string | null, body: Record<string, unknown> }> {
  const answer = await fetch(`${gateway.url}${path}`, { method: 'POST', headers: { accept: 'application/json' }, body: new URLSearchParams(form) })
  const text = await answer.text()
  let body: Record<string, unknown>
  try { body = JSON.parse(text) as Record<string, unknown> } catch { body = { text } }
  return { status: answer.status, type: answer.headers.get('content-type') ?? '', retryAfter: answer.headers.get('retry-after'), body }
}

it('a refresh whose claim is answered late: 503 temporarily_unavailable naming the store, and the retry refreshes', async () => {
  const { id, tokens } = await agentGrant(gateway.url, 'late-refresh-code', `${gateway.url}/other`)
  const before = gateway.logs.length
  const held = proxy.armReplies(['consumed', 'nx'])
  const first = await post('/oauth/agents/token', { grant_type: 'refresh_token', refresh_token: tokens.refresh_token, client_id: id })
  await held
  proxy.release()
  const logged = gateway.logs.slice(before).join('\n')
  expect(logged).not.toContain(tokens.refresh_token)
  expect({ status: first.status, error: first.body.error, description: first.body.error_description }, JSON.stringify(first.body))
    .toEqual({ status: 503, error: 'temporarily_unavailable', description: 'The session store cannot be reached right now; try again shortly.' })
  const retry = await post('/oauth/agents/token', { grant_type: 'refresh_token', refresh_token: tokens.refresh_token, client_id: id })
  expect(retry.status, JSON.stringify(retry.body)).toBe(200)
})

/** The SDK's OAuth client provider, in memory (as test/agents/mcp-client.test.ts). */
class MemoryProvider implements OAuthClientProvider {
  verifier = ''
  authorizationUrl: URL | undefined
  constructor (readonly redirectUrl: string, public client: OAuthClientInformationMixed, public saved: OAuthTokens) {}
  get clientMetadata (): OAuthClientMetadata {
    return { client_name: 'Test agent', redirect_uris: [this.redirectUrl], grant_types: ['authorization_code', 'refresh_token'], response_types: ['code'], token_endpoint_auth_method: 'none' }
  }

  clientInformation (): OAuthClientInformationMixed { return this.client }
  saveClientInformation (info: OAuthClientInformationMixed): void { this.client = info }
  tokens (): OAuthTokens { return this.saved }
  saveTokens (tokens: OAuthTokens): void { this.saved = tokens }
  redirectToAuthorization (url: URL): void { this.authorizationUrl = url }
  saveCodeVerifier (verifier: string): void { this.verifier = verifier }
  codeVerifier (): string { return this.verifier }
}

it('the MCP SDK refreshing while the store answers late is not sent back to an interactive sign-in (its refresh token works at the retry)', async () => {
  const { id, tokens } = await agentGrant(gateway.url, 'late-refresh-sdk', `${gateway.url}/other`)
  const provider = new MemoryProvider('http://127.0.0.1:8976/callback', { client_id: id, redirect_uris: ['http://127.0.0.1:8976/callback'] }, { ...tokens, token_type: 'Bearer' })
  const serverUrl = `${gateway.url}/other/`
  const held = proxy.armReplies(['consumed', 'nx'])
  let outcome: string
  try {
    outcome = await auth(provider, { serverUrl })
  } catch (error) {
    outcome = `threw ${(error as Error).constructor.name}: ${(error as Error).message}`
  }
  await held
  proxy.release()
  // A store blip: the SDK should get an error it surfaces (temporarily_unavailable), not start a new sign-in in the person's browser.
  const afterwards = await auth(provider, { serverUrl })
  expect({ outcome, sentToSignIn: provider.authorizationUrl !== undefined, afterwards }).toMatchObject({ sentToSignIn: false, afterwards: 'AUTHORIZED' })
})
