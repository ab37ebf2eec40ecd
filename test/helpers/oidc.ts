// A real authorization server for tests: oidc-provider on a loopback port from the OS, with one
// confidential client (client_secret_post), any username signing in, and its dev login and
// consent forms, which `Browser` (./browser.ts) fills in.
import { createServer } from 'node:http'
import Provider, { type Configuration } from 'oidc-provider'
import { close, listen } from './net.js'

export interface TestClient {
  client_id: string
  client_secret: string
  redirect_uris: string[]
}

export interface TestProvider {
  issuer: string
  provider: Provider
  close (): Promise<void>
}

export async function startOidcProvider (clients: TestClient[], options: { accessTokenTtl?: (clientId: string) => number } = {}): Promise<TestProvider> {
  const server = createServer()
  const issuer = await listen(server)
  const configuration: Configuration = {
    clients: clients.map((client) => ({
      ...client,
      token_endpoint_auth_method: 'client_secret_post',
      grant_types: ['authorization_code', 'refresh_token'],
      response_types: ['code'],
    })),
    async findAccount (_ctx, id) {
      return {
        accountId: id,
        async claims () {
          return { sub: id, name: `User ${id}`, email: `${id}@example.test`, email_verified: true }
        },
      }
    },
    claims: { openid: ['sub'], profile: ['name'], email: ['email', 'email_verified'] },
    cookies: { keys: ['test-cookie-key-0123456789abcdef'] },
    features: { devInteractions: { enabled: true } },
    ttl: { AccessToken: (_ctx, token) => options.accessTokenTtl?.(String(token.clientId)) ?? 3600, IdToken: 3600, RefreshToken: 86400, Interaction: 600, Session: 3600, Grant: 3600 },
    issueRefreshToken: async () => true,
  }
  const provider = new Provider(issuer, configuration)
  // oidc-provider warns on the console about dev interactions and in-memory storage; tests accept both.
  provider.on('server_error', (_ctx, error) => { console.error('oidc-provider server_error', error) })
  server.on('request', provider.callback())
  return { issuer, provider, close: () => close(server) }
}
