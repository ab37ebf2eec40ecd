// A real authorization server for tests: the demo's oidc-provider (demo/authorization-server.ts)
// on a loopback port from the OS; `Browser` (./browser.ts) fills in its sign-in and consent forms.
import { randomUUID } from 'node:crypto'
import { SignJWT } from 'jose'
import { BACKCHANNEL_LOGOUT_EVENT } from '../../src/oauth/backchannel.js'
import type { Browser } from './browser.js'
import { startAuthorizationServer, type AuthorizationServer, type AuthorizationServerOptions, type DemoClient } from '../../demo/authorization-server.js'

export type TestProvider = AuthorizationServer
/** What startOidcProvider takes besides its clients. */
export type ProviderOptions = Omit<AuthorizationServerOptions, 'clients'>

/**
 * `logout: true`: the provider keeps its sign-in (a second sign-in does not ask again) and offers
 * RP-initiated logout, token revocation and back-channel logout; its clients may then list
 * `post_logout_redirect_uris` and a `backchannel_logout_uri`.
 */
export async function startOidcProvider (clients: DemoClient[], options: ProviderOptions = {}): Promise<TestProvider> {
  return await startAuthorizationServer({ clients, ...options })
}

/**
 * The registration of the gateway at `baseUrl` as a client of the test provider, for its provider
 * `provider`: the callback, the post-logout return address and (`backchannel`) the back-channel
 * logout address, as docs/providers.md tells operators to register them.
 */
export function gatewayClient (baseUrl: string, provider: string, clientId: string, options: { clientSecret?: string, backchannel?: boolean } = {}): DemoClient {
  return {
    client_id: clientId,
    client_secret: options.clientSecret ?? 's',
    redirect_uris: [`${baseUrl}/oauth/authorized/${provider}/`],
    post_logout_redirect_uris: [`${baseUrl}/oauth/logout/${provider}/`],
    ...(options.backchannel ? { backchannel_logout_uri: `${baseUrl}/oauth/backchannel-logout/${provider}/` } : {}),
  }
}

/**
 * A back-channel logout token (OpenID Connect Back-Channel Logout 1.0) from `provider` for its client
 * `clientId`, naming `sub` (or, given `{ sid }`, that session of the provider's), signed with the
 * provider's own key under the `kid` its JWKS lists, as the provider sends one: what a test posts to
 * `/oauth/backchannel-logout/<provider>/`.
 */
export async function logoutToken (provider: TestProvider, clientId: string, names: string | { sid: string }): Promise<string> {
  const { keys } = await (await fetch(`${provider.issuer}/jwks`)).json() as { keys: Array<{ kid: string }> }
  const now = Math.floor(Date.now() / 1000)
  return await new SignJWT({ iss: provider.issuer, aud: clientId, iat: now, exp: now + 120, jti: randomUUID(), ...(typeof names === 'string' ? { sub: names } : names), events: { [BACKCHANNEL_LOGOUT_EVENT]: {} } })
    .setProtectedHeader({ alg: 'RS256', kid: keys[0]!.kid, typ: 'logout+jwt' }).sign(provider.signingKey)
}

/** Where a walk through redirects ended: the last response, its body, and every address visited. */
export interface WalkEnd { response: Response, body: string, url: string, visited: string[] }

/**
 * Follows redirects from `url` with `browser`'s cookies, and answers the provider's sign-out
 * question (its `op.logoutForm`, RP-initiated logout) with "Yes, sign me out"; stops at any other
 * page. Sign-in and consent forms are not filled in: the caller sees them (`body`).
 */
export async function walk (browser: Browser, url: string, init: RequestInit = {}): Promise<WalkEnd> {
  const visited: string[] = []
  let current = url
  for (let step = 0; step < 20; step++) {
    visited.push(current)
    const response = await browser.fetch(current, init)
    init = {}
    const location = response.headers.get('location')
    if (response.status >= 300 && response.status < 400 && location) {
      await response.arrayBuffer()
      current = new URL(location, current).href
      continue
    }
    const body = await response.text()
    // The question itself, or (no session at the provider) its self-submitting form.
    const form = /<form (?:id="op\.logoutForm" )?method="post" action="([^"]+\/session\/end\/confirm)">\s*<input type="hidden" name="xsrf" value="([^"]+)"/.exec(body)
    if (!form) return { response, body, url: current, visited }
    current = new URL(form[1]!, current).href
    init = { method: 'POST', body: new URLSearchParams({ xsrf: form[2]!, logout: 'yes' }), headers: { 'content-type': 'application/x-www-form-urlencoded' } }
  }
  throw new Error(`no final page after 20 steps from ${url}`)
}
