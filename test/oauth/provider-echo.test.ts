// A provider that echoes what it was sent (the code, the client secret, the PKCE verifier, the
// access token) in its error answers, answers that are not JSON, and callbacks carrying hostile
// error text: nothing of it reaches the gateway's answers or its log lines (SPEC "Security floor").
// An outside tester's findings: a JSON parse error's message quotes 10 characters either side of
// its fault, and the gateway logged every cause's message (a code or token in pieces); a callback's
// `error` value was repeated in the answer and the log. The provider is a stub (it must misbehave).
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http'
import { afterAll, beforeEach, describe, expect } from 'vitest'
import { Browser } from '../helpers/browser.js'
import type { TestGateway } from '../helpers/gateway.js'
import { close, listen } from '../helpers/net.js'
import { test as it } from '../helpers/stack.js'

const CLIENT_SECRET = 'CliSecretZq8w7e6r5t4y3u2i1o0p9a8s'
const CODE = 'AuthCodeXk3j4h5g6f7d8s9a0q1w2e3r4t'
const ACCESS = 'AccessTokVb5n6m7l8k9j0h1g2f3d4s5a6'
const REFRESH = 'RefreshTokPo9i8u7y6t5r4e3w2q1a2s3d'

type Mode = 'echo400' | 'echo500text' | 'echo200error' | 'badjson' | 'badjsonmid' | 'ok-userinfo401' | 'ok-userinfo-badjson' | 'ok-userinfo-badjson-mid' | 'challenge401'

let mode: Mode = 'echo400'
let lastVerifier = ''
let lastTokenBody = ''
let stubUrl = ''

function echo (): string {
  return `code=${CODE} client_secret=${CLIENT_SECRET} code_verifier=${lastVerifier} body=${lastTokenBody}`
}

function handler (req: IncomingMessage, res: ServerResponse): void {
  const url = new URL(req.url ?? '/', 'http://stub')
  const json = (status: number, value: unknown, headers: Record<string, string> = {}) => {
    res.writeHead(status, { 'content-type': 'application/json', ...headers })
    res.end(typeof value === 'string' ? value : JSON.stringify(value))
  }
  if (url.pathname === '/userinfo') {
    const auth = req.headers.authorization ?? ''
    if (mode === 'ok-userinfo401') return json(401, { error: 'invalid_token', error_description: `token ${auth} is bad; ${echo()}` }, { 'www-authenticate': `Bearer error="invalid_token", error_description="${auth}"` })
    if (mode === 'ok-userinfo-badjson') return json(200, `${ACCESS} is your token`)
    if (mode === 'ok-userinfo-badjson-mid') return json(200, `{"sub":"u1","t":${ACCESS}}`)
    return json(200, { sub: 'u1', login: 'mallory', email: 'm@example.test' })
  }
  if (url.pathname === '/token') {
    let body = ''
    req.on('data', (chunk: Buffer) => { body += chunk.toString() })
    req.on('end', () => {
      lastTokenBody = body
      lastVerifier = new URLSearchParams(body).get('code_verifier') ?? ''
      switch (mode) {
        case 'echo400': return json(400, { error: 'invalid_grant', error_description: `bad grant: ${echo()}` })
        case 'echo200error': return json(200, { error: 'bad_verification_code', error_description: `bad grant: ${echo()}` })
        case 'echo500text':
          res.writeHead(500, { 'content-type': 'text/plain' })
          return res.end(`internal error: ${echo()}`)
        case 'challenge401': return json(401, { error: 'invalid_client' }, { 'www-authenticate': `Basic realm="x", error="invalid_client", error_description="${CLIENT_SECRET} ${CODE}"` })
        // A body that is not JSON, beginning with the code: V8's SyntaxError quotes its first 10 characters.
        case 'badjson': return json(200, `${CODE}&${echo()}`)
        // Almost JSON, with an unquoted token: V8 quotes 10 characters either side of the error.
        case 'badjsonmid': return json(200, `{"token_type":"bearer","access_token":${ACCESS}}`)
        // The userinfo modes: the token answer is a good one.
        case 'ok-userinfo401':
        case 'ok-userinfo-badjson':
        case 'ok-userinfo-badjson-mid': return json(200, { access_token: ACCESS, token_type: 'bearer', refresh_token: REFRESH, expires_in: 3600 })
      }
    })
    return
  }
  json(404, { error: 'not_found' })
}

let gateway: TestGateway
let server: ReturnType<typeof createServer>

it.beforeAll(async ({ startStack, upstream }) => {
  server = createServer(handler)
  stubUrl = await listen(server)
  gateway = await startStack({
    providers: {
      hostile: { clientId: 'hostile-client', clientSecret: CLIENT_SECRET, authorizeUrl: `${stubUrl}/authorize`, tokenUrl: `${stubUrl}/token`, userinfoUrl: `${stubUrl}/userinfo`, scope: 'read', claims: { user: 'login' } },
    },
    routes: [{ path: '/app/', upstream: upstream.url, provider: 'hostile' }],
  })
})

afterAll(async () => {
  await gateway?.close()
  if (server) await close(server)
})

beforeEach(() => { lastVerifier = ''; lastTokenBody = '' })

/** Starts a sign-in and sends the callback with CODE (and `extra`); returns the answer, the state and its text. */
async function signInWith (accept: string, extra: Record<string, string> = {}): Promise<{ status: number, text: string, state: string, headers: Headers }> {
  const browser = new Browser()
  const login = await browser.fetch(`${gateway.url}/oauth/login/hostile/?next=/app/x`)
  expect(login.status).toBe(302)
  const authorize = new URL(login.headers.get('location')!)
  const state = authorize.searchParams.get('state')!
  const query = new URLSearchParams({ code: CODE, state, ...extra })
  const answer = await browser.fetch(`${gateway.url}/oauth/authorized/hostile/?${query}`, { headers: { accept } })
  return { status: answer.status, text: await answer.text(), state, headers: answer.headers }
}

function secretsOf (state: string): Record<string, string> {
  return { CODE, CLIENT_SECRET, ACCESS, REFRESH, state, verifier: lastVerifier }
}

/** Every secret (and its first 10 characters: V8 quotes that much of a bad JSON body) that appears in `text`. */
function leaked (text: string, secrets: Record<string, string>): string[] {
  return Object.entries(secrets).filter(([, value]) => value.length > 0).flatMap(([name, value]) => {
    const found: string[] = []
    if (text.includes(value)) found.push(`${name} (whole)`)
    else if (text.includes(value.slice(0, 10))) found.push(`${name} (first 10 chars)`)
    else if (text.includes(value.slice(-10))) found.push(`${name} (last 10 chars)`)
    return found
  })
}

describe('a provider that echoes secrets in its answers', () => {
  it.each([
    ['echo400', 'application/json'],
    ['echo400', 'text/html'],
    ['echo200error', 'application/json'],
    ['echo500text', 'application/json'],
    ['challenge401', 'application/json'],
    ['ok-userinfo401', 'application/json'],
    ['ok-userinfo401', 'text/html'],
  ] as const)('token/userinfo mode %s (Accept %s): no secret in the answer or the log', async (which, accept) => {
    mode = which
    const before = gateway.logs.length
    const answer = await signInWith(accept)
    expect(answer.status).toBeGreaterThanOrEqual(400)
    const secrets = secretsOf(answer.state)
    expect(leaked(answer.text, secrets), `answer: ${answer.text.slice(0, 400)}`).toEqual([])
    const logs = gateway.logs.slice(before).join('\n')
    expect(leaked(logs, secrets), `logs: ${logs}`).toEqual([])
  })

  it.each([
    ['badjson'],
    ['badjsonmid'],
    ['ok-userinfo-badjson'],
    ['ok-userinfo-badjson-mid'],
  ] as const)('a body that is not JSON (mode %s): no part of a secret in the log', async (which) => {
    mode = which
    const before = gateway.logs.length
    const answer = await signInWith('application/json')
    expect(answer.status).toBeGreaterThanOrEqual(400)
    const secrets = secretsOf(answer.state)
    expect(leaked(answer.text, secrets), `answer: ${answer.text.slice(0, 400)}`).toEqual([])
    const logs = gateway.logs.slice(before).join('\n')
    expect(leaked(logs, secrets), `logs: ${logs}`).toEqual([])
  })
})

describe('a callback carrying hostile error text', () => {
  const DESCRIPTION = '<script>alert(1)</script>DescSecretRt5y6u7i8o9p0'
  it.each(['text/html', 'application/json'])('error_description, error_uri and a hostile error are not reflected (Accept %s)', async (accept) => {
    const before = gateway.logs.length
    const answer = await signInWith(accept, { error: '<img src=x onerror=alert(1)>ErrSecretQq1', error_description: DESCRIPTION, error_uri: 'https://evil.example/UriSecretWw2' })
    expect(answer.status).toBeGreaterThanOrEqual(400)
    for (const value of ['DescSecretRt5y6u7i8o9p0', '<script>', 'ErrSecretQq1', '<img', 'UriSecretWw2', 'evil.example']) {
      expect(answer.text).not.toContain(value)
      expect(gateway.logs.slice(before).join('\n')).not.toContain(value)
    }
    expect(leaked(answer.text, { CODE, state: answer.state })).toEqual([])
  })

  it('the callback\'s `error` query value reaches neither the log nor the answer', async () => {
    const before = gateway.logs.length
    const answer = await signInWith('application/json', { error: 'ErrorCodeSecretZx9c8v7b6n5m4' })
    expect(answer.status).toBeGreaterThanOrEqual(400)
    const logs = gateway.logs.slice(before).join('\n')
    expect(logs, 'a query-string value in the log').not.toContain('ErrorCodeSecretZx9c8v7b6n5m4')
    expect(answer.text, 'a query-string value echoed in the error answer').not.toContain('ErrorCodeSecretZx9c8v7b6n5m4')
  })
})
