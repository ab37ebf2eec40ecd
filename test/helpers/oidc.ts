// A real authorization server for tests: the demo's oidc-provider (demo/authorization-server.ts)
// on a loopback port from the OS; `Browser` (./browser.ts) fills in its sign-in and consent forms.
import { startAuthorizationServer, type AuthorizationServer, type DemoClient } from '../../demo/authorization-server.js'

export type TestProvider = AuthorizationServer

export async function startOidcProvider (clients: DemoClient[], options: { accessTokenTtl?: (clientId: string, grantType: string) => number } = {}): Promise<TestProvider> {
  return await startAuthorizationServer({ clients, ...options })
}
