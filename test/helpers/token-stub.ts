// A token endpoint stub, only for injecting faults (500, hang, non-JSON, no access_token, refusal,
// forged ID tokens) and for capturing the exact token request the gateway sends. It also serves a
// discovery document, a JWKS and a userinfo endpoint, so it can stand in for an OIDC provider or a
// plain OAuth 2.0 one (GitHub-like userinfo JSON).
import { createServer, type IncomingHttpHeaders } from 'node:http'
import { SignJWT, exportJWK, generateKeyPair } from 'jose'
import { close, listen } from './net.js'

export type TokenStubMode = 'ok' | 'error500' | 'hang' | 'not-json' | 'no-access-token' | 'invalid-grant'

export interface TokenStub {
  url: string
  mode: TokenStubMode
  /** Merged into the 'ok' token response (e.g. a refresh_token, a short expires_in, an id_token). */
  extra: Record<string, unknown>
  /** When set, token requests are answered only once it resolves (a refresh held while the test acts). */
  hold: Promise<void> | undefined
  /** What GET /userinfo answers. */
  userinfo: Record<string, unknown>
  /** Signs an ID token with the key published at /jwks (or with another one). */
  signIdToken (claims: Record<string, unknown>, options?: { foreignKey?: boolean }): Promise<string>
  requests: Array<{ method: string, headers: IncomingHttpHeaders, body: string }>
  close (): Promise<void>
}

export async function startTokenStub (): Promise<TokenStub> {
  const { publicKey, privateKey } = await generateKeyPair('RS256', { extractable: true })
  const foreign = await generateKeyPair('RS256')
  const jwk = { ...(await exportJWK(publicKey)), kid: 'stub-key', alg: 'RS256', use: 'sig' }
  const stub: TokenStub = {
    url: '',
    mode: 'ok',
    extra: {},
    hold: undefined,
    userinfo: {},
    requests: [],
    close: async () => {},
    signIdToken: async (claims, options = {}) => await new SignJWT(claims)
      .setProtectedHeader({ alg: 'RS256', kid: 'stub-key' })
      .sign(options.foreignKey ? foreign.privateKey : privateKey),
  }
  const server = createServer((req, res) => {
    const json = (status: number, value: unknown) => {
      res.writeHead(status, { 'content-type': 'application/json' })
      res.end(JSON.stringify(value))
    }
    if (req.url === '/.well-known/openid-configuration') {
      return json(200, {
        issuer: stub.url, authorization_endpoint: `${stub.url}/authorize`, token_endpoint: `${stub.url}/token`, jwks_uri: `${stub.url}/jwks`, userinfo_endpoint: `${stub.url}/userinfo`,
      })
    }
    if (req.url === '/jwks') return json(200, { keys: [jwk] })
    if (req.url === '/userinfo') return json(req.headers.authorization?.startsWith('Bearer ') ? 200 : 401, stub.userinfo)
    let body = ''
    req.on('data', (chunk: Buffer) => { body += chunk.toString() })
    req.on('end', () => {
      stub.requests.push({ method: req.method ?? '', headers: req.headers, body })
      void (stub.hold ?? Promise.resolve()).then(answer)
    })
    const answer = () => {
      switch (stub.mode) {
        case 'ok': return json(200, { access_token: `stub-token-${stub.requests.length}`, token_type: 'Bearer', expires_in: 3600, ...stub.extra })
        case 'error500': return json(500, { error: 'server_error' })
        case 'hang': return undefined
        case 'not-json': res.writeHead(200, { 'content-type': 'text/html' }); return res.end('<html>oops</html>')
        case 'no-access-token': return json(200, { token_type: 'Bearer', expires_in: 3600 })
        case 'invalid-grant': return json(400, { error: 'invalid_grant', error_description: 'code expired' })
      }
    }
  })
  stub.url = await listen(server)
  stub.close = () => close(server)
  return stub
}
