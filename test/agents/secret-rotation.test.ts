// An agent's grant through a rolling rotation of session.secret (operations.md, "Rotating the
// session secret"): instances at step 1 (`secret: s1, previousSecrets: [s2]`) and at step 2 (`secret:
// s2, previousSecrets: [s1]`) side by side on one store and one public address. An outside tester's
// finding: the agents' records (clients, grants, refresh tokens, the grant's session, the kept
// sign-in, the consent form's token) were kept and sealed under the current secret only, so an
// instance at step 2 found none of what step 1 made (401 for the grant's token, `invalid_client` at
// the token endpoint, a consent page "expired"). They are found under any secret held now.
import { afterAll, describe, expect } from 'vitest'
import { agentGrant, backToClient, pkcePair } from '../helpers/agent-grant.js'
import { Browser } from '../helpers/browser.js'
import { oidcClient, startGateway, TEST_SECRET, type TestGateway } from '../helpers/gateway.js'
import { test as it } from '../helpers/stack.js'

const S1 = TEST_SECRET
const S2 = 'rotated-session-secret-9876543210-ZYXWVUTSRQponm'

/** Step 1: still sealing with s1, already opening s2. */
let step1: TestGateway
/** Step 2: sealing with s2, opening s1 (the next instance the rolling deploy restarted). */
let step2: TestGateway

it.beforeAll(async ({ startStack, op, upstream, redis }) => {
  const routes = [{ path: '/mcp/', upstream: upstream.url, provider: 'demo', agents: true }]
  step1 = await startStack({ session: { secret: S1, previousSecrets: [S2] }, agents: {}, routes })
  // Same public address (one load balancer), another port: what the rolling deploy runs beside it.
  step2 = await startGateway({
    server: { baseUrl: step1.url },
    store: { type: 'redis', url: redis.url },
    session: { secret: S2, previousSecrets: [S1] },
    providers: { demo: oidcClient(op.issuer, 'c', 's') },
    agents: {},
    routes,
  })
}, 60_000)

afterAll(async () => { await step2?.close() })

/** The port-level address of an instance (the public base URL is the same for both). */
const direct = (gateway: TestGateway) => `http://127.0.0.1:${(gateway.app.server.address() as { port: number }).port}`

async function call (gateway: TestGateway, token: string): Promise<number> {
  const response = await fetch(`${direct(gateway)}/mcp/x`, { headers: { authorization: `Bearer ${token}`, accept: 'application/json' } })
  await response.arrayBuffer()
  return response.status
}

async function refresh (gateway: TestGateway, clientId: string, refreshToken: string): Promise<{ status: number, body: Record<string, unknown> }> {
  const response = await fetch(`${direct(gateway)}/oauth/agents/token`, { method: 'POST', body: new URLSearchParams({ grant_type: 'refresh_token', refresh_token: refreshToken, client_id: clientId }) })
  return { status: response.status, body: await response.json() as Record<string, unknown> }
}

/**
 * agentGrant with the load balancer's routing made explicit: registration, the authorization, the
 * consent page and its POST reach `first` (its own port; Origin the public address); the provider
 * sends the browser back to the public address, which is `step1`'s port.
 */
async function grantVia (first: TestGateway, login: string): Promise<{ status: number, token?: string }> {
  const REDIRECT = 'http://127.0.0.1:8976/callback'
  const at = direct(first)
  const registered = await fetch(`${at}/oauth/agents/register`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ client_name: 'Seam agent', redirect_uris: [REDIRECT], token_endpoint_auth_method: 'none' }) })
  expect(registered.status).toBe(201)
  const id = (await registered.json() as { client_id: string }).client_id
  const { verifier, challenge } = pkcePair()
  const resource = `${step1.url}/mcp`
  const query = new URLSearchParams({ response_type: 'code', client_id: id, redirect_uri: REDIRECT, code_challenge: challenge, code_challenge_method: 'S256', resource })
  const browser = new Browser()
  const page = await browser.navigate(`${at}/oauth/agents/authorize?${query.toString()}`, { login })
  const body = await page.text()
  if (page.status !== 200) return { status: page.status }
  const csrf = /name="csrf" value="([^"]+)"/.exec(body)![1]!
  const action = new URL(/<form method="post" action="([^"]+)"/.exec(body)![1]!, at).href
  const response = await browser.fetch(action, { method: 'POST', headers: { 'content-type': 'application/x-www-form-urlencoded', origin: step1.url }, body: new URLSearchParams({ csrf, decision: 'allow' }) })
  const code = (await backToClient(browser, response, action, REDIRECT)).searchParams.get('code')!
  const token = await fetch(`${at}/oauth/agents/token`, { method: 'POST', body: new URLSearchParams({ grant_type: 'authorization_code', code, client_id: id, redirect_uri: REDIRECT, code_verifier: verifier, resource }) })
  return { status: token.status, token: (await token.json() as { access_token?: string }).access_token }
}

describe('an agent\'s grant across a rolling secret rotation', () => {
  it('made on an instance at step 1, its access token passes on an instance at step 2', async () => {
    const { tokens } = await agentGrant(step1.url, 'rot-agent-a', `${step1.url}/mcp`)
    expect(await call(step1, tokens.access_token)).toBe(200)
    expect(await call(step2, tokens.access_token)).toBe(200)
  })

  it('made on an instance at step 1, its refresh token is redeemed on an instance at step 2', async () => {
    const { id, tokens } = await agentGrant(step1.url, 'rot-agent-b', `${step1.url}/mcp`)
    const refreshed = await refresh(step2, id, tokens.refresh_token)
    expect(refreshed.status, JSON.stringify(refreshed.body)).toBe(200)
  })

  it('an authorization begun on an instance at step 2 whose sign-in comes back (one load balancer) to an instance at step 1 reaches the consent page', async () => {
    // What the person meets once the provider sent the browser back to the public address (step1): the consent page (200) expected.
    const { status, token } = await grantVia(step2, 'rot-agent-c')
    expect(status).toBe(200)
    expect(await call(step1, token!)).toBe(200)
  })
})
