// An agent's access token for `npm run bench -- --agent`: a client registered at the gateway, the
// person's sign-in and Allow on the consent page (through the real flow against oidc-provider),
// then the code for tokens, as an MCP client does (docs/agents.md).
import { createHash, randomBytes } from 'node:crypto'
import { Browser } from '../test/helpers/browser.js'

/** Where the client says it listens; nothing does: the code is read from the redirect. */
const REDIRECT = 'http://127.0.0.1:8975/callback'

/** An access token the gateway issued for its route at `routePath`, signed in as `login`. */
export async function agentToken (gatewayUrl: string, routePath: string, login: string): Promise<string> {
  const registered = await fetch(`${gatewayUrl}/oauth/agents/register`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ client_name: 'bench agent', redirect_uris: [REDIRECT], token_endpoint_auth_method: 'none' }),
  })
  const clientId = (await registered.json() as { client_id: string }).client_id
  const verifier = randomBytes(32).toString('base64url')
  const resource = `${gatewayUrl}${routePath.replace(/\/$/, '')}`
  const query = new URLSearchParams({ response_type: 'code', client_id: clientId, redirect_uri: REDIRECT, code_challenge: createHash('sha256').update(verifier).digest('base64url'), code_challenge_method: 'S256', resource })
  const browser = new Browser()
  const consent = await (await browser.navigate(`${gatewayUrl}/oauth/agents/authorize?${query.toString()}`, { login })).text()
  const csrf = /name="csrf" value="([^"]+)"/.exec(consent)?.[1]
  const action = /<form method="post" action="([^"]+)"/.exec(consent)?.[1]
  if (csrf === undefined || action === undefined) throw new Error('the bench agent never reached the consent page')
  let response = await browser.fetch(new URL(action, gatewayUrl).href, { method: 'POST', headers: { 'content-type': 'application/x-www-form-urlencoded', origin: gatewayUrl }, body: new URLSearchParams({ csrf, decision: 'allow' }) })
  while (!(response.headers.get('location') ?? REDIRECT).startsWith(REDIRECT)) response = await browser.fetch(new URL(response.headers.get('location')!, gatewayUrl).href)
  const code = URL.parse(response.headers.get('location') ?? '')?.searchParams.get('code')
  if (!code) throw new Error(`the consent did not send the bench agent back with a code: ${response.status}`)
  const tokens = await fetch(`${gatewayUrl}/oauth/agents/token`, { method: 'POST', body: new URLSearchParams({ grant_type: 'authorization_code', code, client_id: clientId, redirect_uri: REDIRECT, code_verifier: verifier, resource }) })
  const body = await tokens.json() as { access_token?: string }
  if (body.access_token === undefined) throw new Error(`the gateway refused the bench agent's code: ${tokens.status}`)
  return body.access_token
}
