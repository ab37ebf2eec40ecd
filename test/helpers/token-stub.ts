// A token endpoint stub, only for injecting faults (500, hang, non-JSON, no access_token, refusal)
// and for capturing the exact token request the gateway sends.
import { createServer, type IncomingHttpHeaders } from 'node:http'
import { close, listen } from './net.js'

export type TokenStubMode = 'ok' | 'error500' | 'hang' | 'not-json' | 'no-access-token' | 'invalid-grant'

export interface TokenStub {
  url: string
  mode: TokenStubMode
  /** Merged into the 'ok' token response (e.g. a refresh_token, a short expires_in). */
  extra: Record<string, unknown>
  requests: Array<{ method: string, headers: IncomingHttpHeaders, body: string }>
  close (): Promise<void>
}

export async function startTokenStub (): Promise<TokenStub> {
  const stub: TokenStub = { url: '', mode: 'ok', extra: {}, requests: [], close: async () => {} }
  const server = createServer((req, res) => {
    let body = ''
    req.on('data', (chunk: Buffer) => { body += chunk.toString() })
    req.on('end', () => {
      stub.requests.push({ method: req.method ?? '', headers: req.headers, body })
      const json = (status: number, value: unknown) => {
        res.writeHead(status, { 'content-type': 'application/json' })
        res.end(JSON.stringify(value))
      }
      switch (stub.mode) {
        case 'ok': return json(200, { access_token: `stub-token-${stub.requests.length}`, token_type: 'Bearer', expires_in: 3600, ...stub.extra })
        case 'error500': return json(500, { error: 'server_error' })
        case 'hang': return undefined
        case 'not-json': res.writeHead(200, { 'content-type': 'text/html' }); return res.end('<html>oops</html>')
        case 'no-access-token': return json(200, { token_type: 'Bearer', expires_in: 3600 })
        case 'invalid-grant': return json(400, { error: 'invalid_grant', error_description: 'code expired' })
      }
    })
  })
  stub.url = await listen(server)
  stub.close = () => close(server)
  return stub
}
