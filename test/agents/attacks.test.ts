// The authorization server for agents under attack, over real sockets (the gateway, its Redis, the
// worker's oidc-provider as the route's provider): registrations it must refuse, authorization
// requests that must never redirect, a consent it must not take from another site or another
// browser, a sign-in someone else started, codes and refresh tokens used twice, PKCE gone wrong,
// and grants used after the person signed out everywhere or revoked them.
import { createHash, randomBytes } from 'node:crypto'
import { createServer } from 'node:http'
import { connect } from 'node:net'
import { Redis } from 'ioredis'
import { WebSocket, WebSocketServer } from 'ws'
import { afterAll, describe, expect, vi } from 'vitest'
import { createRemoteJWKSet, decodeJwt, jwtVerify } from 'jose'
import { TOKEN_ENDED_CODE, TOKEN_ENDED_REASON } from '../../src/proxy/bearer-sockets.js'
import { SESSION_ENDED_CODE } from '../../src/proxy/session-sockets.js'
import { Browser } from '../helpers/browser.js'
import { backToClient, pkcePair } from '../helpers/agent-grant.js'
import { oidcClient, type TestGateway } from '../helpers/gateway.js'
import { ManualTimers } from '../helpers/manual-timers.js'
import { close, listen } from '../helpers/net.js'
import { TOKEN_MESSAGES, tokenMessage } from '../../src/oauth/token-messages.js'
import { OWN_BODY_MS } from '../../src/routes/own-bodies.js'
import { logoutToken, type TestProvider } from '../helpers/oidc.js'
import { test as it } from '../helpers/stack.js'
import { settledWithin } from '../helpers/websocket.js'

let gateway: TestGateway
const REDIRECT = 'http://127.0.0.1:8976/callback'

/** The gateway's clock: the wall clock plus an offset a test moves (no waiting for a token's expiry). */
const clock = { offset: 0, now: () => Date.now() + clock.offset }
/** The timers of its websockets' deadlines, fired by the tests (their due times are on `clock`'s scale less its offset). */
const timers = new ManualTimers()

/** The gateway trusts the loopback proxy's X-Forwarded-For, so that each test's registrations count for an address of their own. */
const SERVER = { trustProxy: ['127.0.0.1'] }

/** A websocket upstream that echoes. */
const live = createServer((_request, response) => response.end('plain HTTP'))
new WebSocketServer({ server: live }).on('connection', (socket) => socket.on('message', (data) => socket.send(`echo ${String(data)}`)))

/** The gateway's store, read directly: what a request nobody signs in for keeps there. */
let store: Redis
/** The worker's provider that sends back-channel logout tokens, for the route /bcl/. */
let bclProvider: TestProvider

it.beforeAll(async ({ startStack, upstream, bcl, redis }) => {
  store = new Redis(redis.url)
  const liveUrl = await listen(live)
  bclProvider = bcl
  gateway = await startStack({
    server: SERVER,
    providers: { bcl: oidcClient(bclProvider.issuer, 'c2', 's', 'openid email') },
    routes: [
      { path: '/bcl/', upstream: upstream.url, provider: 'bcl', agents: true },
      { path: '/live/', upstream: liveUrl, provider: 'demo', agents: true, websocket: true },
      // Its machine clients' tokens, and so its agents', come in Proxy-Authorization.
      { path: '/pa/', upstream: liveUrl, provider: 'demo', agents: true, websocket: true, bearer: { audience: 'api://pa', header: 'proxy-authorization' } },
      { path: '/mcp', upstream: upstream.url, provider: 'demo', agents: true },
      { path: '/other/', upstream: upstream.url, provider: 'demo', agents: true, public: ['GET /other/open'] },
      { path: '/app/', upstream: upstream.url, provider: 'demo' },
    ],
  }, { deps: { clock, timers } })
})

async function register (metadata: Record<string, unknown>, headers: Record<string, string> = {}): Promise<Response> {
  return await fetch(`${gateway.url}/oauth/agents/register`, { method: 'POST', headers: { 'content-type': 'application/json', ...headers }, body: JSON.stringify(metadata) })
}

/** A registered public client, its PKCE pair, and its authorization URL (overrides replace parameters; null drops one). */
async function client (name = 'Attack test'): Promise<{ id: string, verifier: string, url: (overrides?: Record<string, string | null>) => string }> {
  const response = await register({ client_name: name, redirect_uris: [REDIRECT], token_endpoint_auth_method: 'none' }, { 'x-forwarded-for': randomBytes(4).join('.') })
  expect(response.status).toBe(201)
  const id = (await response.json() as { client_id: string }).client_id
  const { verifier, challenge } = pkcePair()
  return {
    id,
    verifier,
    url: (overrides = {}) => {
      const query = new URLSearchParams({ response_type: 'code', client_id: id, redirect_uri: REDIRECT, code_challenge: challenge, code_challenge_method: 'S256', resource: `${gateway.url}/mcp` })
      for (const [key, value] of Object.entries(overrides)) {
        if (value === null) query.delete(key)
        else query.set(key, value)
      }
      return `${gateway.url}/oauth/agents/authorize?${query.toString()}`
    },
  }
}

/** The person's part over HTTP: the provider's sign-in, then the consent page; its body and CSRF token. */
async function toConsent (browser: Browser, url: string, login: string): Promise<{ body: string, csrf: string, action: string }> {
  const page = await browser.navigate(url, { login })
  const body = await page.text()
  expect(page.status, body).toBe(200)
  // Never framed (clickjacking), never cached.
  expect(page.headers.get('content-security-policy')).toContain("frame-ancestors 'none'")
  expect(page.headers.get('x-frame-options')).toBe('DENY')
  expect(page.headers.get('cache-control')).toBe('no-store')
  expect(page.headers.get('referrer-policy')).toBe('same-origin')
  return { body, csrf: /name="csrf" value="([^"]+)"/.exec(body)?.[1] ?? '', action: new URL(/<form method="post" action="([^"]+)"/.exec(body)![1]!, gateway.url).href }
}

/** Allow on the consent page (as a same-origin form POST), then follow the redirects back to the client: the code. */
async function allow (browser: Browser, consent: { csrf: string, action: string }, decision = 'allow'): Promise<URL> {
  const response = await browser.fetch(consent.action, { method: 'POST', headers: { 'content-type': 'application/x-www-form-urlencoded', origin: gateway.url }, body: new URLSearchParams({ csrf: consent.csrf, decision }) })
  return await backToClient(browser, response, consent.action, REDIRECT)
}

async function exchange (id: string, code: string, verifier: string, extra: Record<string, string> = {}): Promise<Response> {
  return await fetch(`${gateway.url}/oauth/agents/token`, { method: 'POST', body: new URLSearchParams({ grant_type: 'authorization_code', code, client_id: id, redirect_uri: REDIRECT, code_verifier: verifier, ...extra }) })
}

afterAll(async () => {
  store?.disconnect()
  await gateway?.close()
  await close(live)
})

async function granted (login = 'alice', resource = `${gateway.url}/mcp`): Promise<{ id: string, tokens: { access_token: string, refresh_token: string } }> {
  const registered = await client()
  const browser = new Browser()
  const code = (await allow(browser, await toConsent(browser, registered.url({ resource }), login))).searchParams.get('code')
  expect(code).toBeTruthy()
  const response = await exchange(registered.id, code!, registered.verifier, { resource })
  expect(response.status).toBe(200)
  return { id: registered.id, tokens: await response.json() as { access_token: string, refresh_token: string } }
}

const call = async (token: string, path = '/mcp') => await fetch(`${gateway.url}${path}`, { headers: { authorization: `Bearer ${token}` } })
const refresh = async (id: string, token: string) => await fetch(`${gateway.url}/oauth/agents/token`, { method: 'POST', body: new URLSearchParams({ grant_type: 'refresh_token', refresh_token: token, client_id: id }) })

describe('an upstream\'s challenge on an agents route', () => {
  it('is replaced by the gateway\'s own: no upstream can point the route\'s clients at another authorization server', async () => {
    const { tokens } = await granted()
    const response = await call(tokens.access_token, '/mcp/challenge')
    expect(response.status).toBe(401)
    expect(await response.text()).toBe('challenged')
    expect(response.headers.get('www-authenticate')).toBe(`Bearer resource_metadata="${gateway.url}/.well-known/oauth-protected-resource/mcp"`)
  })
})

describe('metadata', () => {
  it('publishes RFC 8414 metadata of the endpoints it serves, and names itself in each agents route\'s RFC 9728 metadata and 401', async () => {
    const metadata = await (await fetch(`${gateway.url}/.well-known/oauth-authorization-server`)).json() as Record<string, unknown>
    expect(metadata).toMatchObject({
      issuer: gateway.url,
      authorization_endpoint: `${gateway.url}/oauth/agents/authorize`,
      token_endpoint: `${gateway.url}/oauth/agents/token`,
      registration_endpoint: `${gateway.url}/oauth/agents/register`,
      revocation_endpoint: `${gateway.url}/oauth/agents/revoke`,
      code_challenge_methods_supported: ['S256'],
      token_endpoint_auth_methods_supported: ['none'],
    })
    expect(metadata).not.toHaveProperty('device_authorization_endpoint')
    // The device flow is off unless agents.deviceFlow says so: none of its endpoints answer.
    expect((await fetch(`${gateway.url}/oauth/agents/device/auth`, { method: 'POST' })).status).toBe(404)
    expect((await fetch(`${gateway.url}/oauth/agents/device`)).status).toBe(404)
    const resource = await (await fetch(`${gateway.url}/.well-known/oauth-protected-resource/mcp`)).json() as Record<string, unknown>
    expect(resource).toMatchObject({ resource: `${gateway.url}/mcp`, authorization_servers: [gateway.url], scopes_supported: ['access'] })
    const refused = await fetch(`${gateway.url}/mcp`, { headers: { accept: 'application/json' } })
    expect(refused.status).toBe(401)
    expect(refused.headers.get('www-authenticate')).toContain(`resource_metadata="${gateway.url}/.well-known/oauth-protected-resource/mcp"`)
  })
})

describe('registration (RFC 7591) refuses what an agent client may not be', () => {
  it.each([
    ['http off loopback', { redirect_uris: ['http://evil.example/callback'] }, 'invalid_redirect_uri'],
    ['http on a look-alike of localhost', { redirect_uris: ['http://localhost.evil.example/cb'] }, 'invalid_redirect_uri'],
    ['javascript:', { redirect_uris: ['javascript:alert(1)'] }, 'invalid_redirect_uri'],
    ['data:', { redirect_uris: ['data:text/html,hi'] }, 'invalid_redirect_uri'],
    ['file:', { redirect_uris: ['file:///etc/passwd'] }, 'invalid_redirect_uri'],
    ['a Windows program (ms-msdt:)', { redirect_uris: ['ms-msdt:/id PCWDiagnostic'] }, 'invalid_redirect_uri'],
    ['a Windows search (search-ms:)', { redirect_uris: ['search-ms:query=x'] }, 'invalid_redirect_uri'],
    // An outside tester's rows: each opens a browser at the web address after it, where the code would go.
    ['Edge at a web address (microsoft-edge:https://...)', { redirect_uris: ['microsoft-edge:https://evil.example/cb'] }, 'invalid_redirect_uri'],
    ['Safari at a web address (x-safari-https://...)', { redirect_uris: ['x-safari-https://evil.example/cb'] }, 'invalid_redirect_uri'],
    ['Chrome at a web address (googlechromes://...)', { redirect_uris: ['googlechromes://evil.example/cb'] }, 'invalid_redirect_uri'],
    // An outside tester's: Chrome for iOS's third scheme opens the address in its url parameter.
    ['Chrome\'s x-callback scheme (googlechrome-x-callback://...?url=...)', { redirect_uris: ['googlechrome-x-callback://x-callback-url/open/?url=https%3A%2F%2Fevil.example%2Fcb'] }, 'invalid_redirect_uri'],
    ['Firefox at a web address (firefox:https://...)', { redirect_uris: ['firefox:https://evil.example/cb'] }, 'invalid_redirect_uri'],
    // A reviewer's rows: more of the same, and schemes a web site may claim in a browser.
    ['Edge\'s https twin (microsoft-edge-https://...)', { redirect_uris: ['microsoft-edge-https://evil.example/cb'] }, 'invalid_redirect_uri'],
    ['Android\'s browser by its package (android-app://...)', { redirect_uris: ['android-app://com.android.chrome/https/evil.example/cb'] }, 'invalid_redirect_uri'],
    ['legacy Edge\'s reading view (read:https://...)', { redirect_uris: ['read:https://evil.example/cb'] }, 'invalid_redirect_uri'],
    ['a web site\'s own scheme (web+agent:)', { redirect_uris: ['web+agent:/callback'] }, 'invalid_redirect_uri'],
    ['Firefox Focus, which opens the address after it', { redirect_uris: ['firefox-focus://open-url?url=https://evil.example/cb'] }, 'invalid_redirect_uri'],
    ['Yandex Browser, which opens the address after it', { redirect_uris: ['yandexbrowser-open-url://https%3A%2F%2Fevil.example%2Fcb'] }, 'invalid_redirect_uri'],
    ['a scheme any web site may claim (webcal:)', { redirect_uris: ['webcal://evil.example/cb'] }, 'invalid_redirect_uri'],
    ['another (xmpp:)', { redirect_uris: ['xmpp:/callback'] }, 'invalid_redirect_uri'],
    ['a fragment', { redirect_uris: ['https://app.example/cb#x'] }, 'invalid_redirect_uri'],
    ['credentials in the URI', { redirect_uris: ['https://user:pw@app.example/cb'] }, 'invalid_redirect_uri'],
    ['no redirect URI', { redirect_uris: [] }, 'invalid_redirect_uri'],
    ['eleven redirect URIs', { redirect_uris: Array.from({ length: 11 }, (_, i) => `https://app.example/${i}`) }, 'invalid_redirect_uri'],
    ['a confidential client', { redirect_uris: [REDIRECT], token_endpoint_auth_method: 'client_secret_basic' }, 'invalid_client_metadata'],
    ['a name too long for the consent page', { redirect_uris: [REDIRECT], client_name: 'x'.repeat(101) }, 'invalid_client_metadata'],
    ['http on a name under .localhost (a resolver may look it up)', { redirect_uris: ['http://evil.localhost:8976/callback'] }, 'invalid_redirect_uri'],
    ['http on another loopback address than 127.0.0.1', { redirect_uris: ['http://127.0.0.2:8976/callback'] }, 'invalid_redirect_uri'],
    ['a name that turns the page\'s sentence around (a right-to-left override)', { redirect_uris: [REDIRECT], client_name: 'Claude Code\u202E' }, 'invalid_client_metadata'],
    ['a name with a direction isolate left open', { redirect_uris: [REDIRECT], client_name: 'Claude Code\u2066' }, 'invalid_client_metadata'],
    ['a name with zero-width characters (a look-alike)', { redirect_uris: [REDIRECT], client_name: 'Cl\u200Baude\u200D Code' }, 'invalid_client_metadata'],
    ['a name with a soft hyphen', { redirect_uris: [REDIRECT], client_name: 'Clau\u00ADde' }, 'invalid_client_metadata'],
    ['a name with a line break and a tab', { redirect_uris: [REDIRECT], client_name: 'Claude Code\n\t(verified)' }, 'invalid_client_metadata'],
    ['a name with a line separator', { redirect_uris: [REDIRECT], client_name: 'Claude\u2028Code' }, 'invalid_client_metadata'],
    // An outside tester's: default-ignorable code points outside category Cf render as nothing too.
    ['a name with a Hangul filler (U+3164)', { redirect_uris: [REDIRECT], client_name: 'Claude\u3164Code' }, 'invalid_client_metadata'],
    ['a name with a Hangul choseong filler (U+115F)', { redirect_uris: [REDIRECT], client_name: 'Cl\u115Faude Code' }, 'invalid_client_metadata'],
    ['a name with a halfwidth Hangul filler (U+FFA0)', { redirect_uris: [REDIRECT], client_name: 'Claude Code\uFFA0' }, 'invalid_client_metadata'],
    ['a name with a combining grapheme joiner (U+034F)', { redirect_uris: [REDIRECT], client_name: 'Cl\u034Faude Code' }, 'invalid_client_metadata'],
    ['a name with a variation selector (U+FE0F)', { redirect_uris: [REDIRECT], client_name: 'Clau\uFE0Fde Code' }, 'invalid_client_metadata'],
    ['a name that says a site vouches for it', { redirect_uris: [REDIRECT], client_name: 'Claude Code (as described at claude.ai)' }, 'invalid_client_metadata'],
    ['a name that says whose name it is', { redirect_uris: [REDIRECT], client_name: 'Claude Code, which calls  itself so' }, 'invalid_client_metadata'],
    // A re-reading's: the same words and blanks in other spellings.
    ['those words with a Cyrillic а', { redirect_uris: [REDIRECT], client_name: 'Claude Code (\u0430s described at claude.ai)' }, 'invalid_client_metadata'],
    // An outside tester's: Latin's own look-alikes, which NFKC keeps.
    ['those words with a Latin alpha (ɑ) for a', { redirect_uris: [REDIRECT], client_name: 'Claude Code (\u0251s described \u0251t claude.ai)' }, 'invalid_client_metadata'],
    ['those words in small capitals', { redirect_uris: [REDIRECT], client_name: 'Claude, who \u1d04\u1d00\u029f\u029f\ua731 \u026a\u1d1b\ua731\u1d07\u029f\ua730 Claude' }, 'invalid_client_metadata'],
    // A re-reading's: capitals of other scripts (lower-cased into letters the map did not read), Cherokee, and I for l.
    ['those words in capitals with a Greek Beta', { redirect_uris: [REDIRECT], client_name: 'Claude Code (AS DESCRI\u0392ED AT claude.ai)' }, 'invalid_client_metadata'],
    ['those words in capitals with a Cyrillic Te', { redirect_uris: [REDIRECT], client_name: 'Claude Code (CALLS I\u0422SELF claude.ai)' }, 'invalid_client_metadata'],
    ['those words in Cherokee capitals', { redirect_uris: [REDIRECT], client_name: 'Claude Code (\u13AA\u13DA \u13A0\u13AC\u13DA\u13DF\u13D2\u13C6\u13F4\u13AC\u13A0 \u13AA\u13A2 claude.ai)' }, 'invalid_client_metadata'],
    ['those words with a capital I for each l', { redirect_uris: [REDIRECT], client_name: 'Claude Code (caIIs itseIf)' }, 'invalid_client_metadata'],
    ['those words in fullwidth letters', { redirect_uris: [REDIRECT], client_name: 'Claude, who \uff43\uff41\uff4c\uff4c\uff53 \uff49\uff54\uff53\uff45\uff4c\uff46 Claude' }, 'invalid_client_metadata'],
    ['those words joined by no-break hyphens', { redirect_uris: [REDIRECT], client_name: 'Claude Code (as\u2011described\u2011at claude.ai)' }, 'invalid_client_metadata'],
    ['braille blanks (U+2800)', { redirect_uris: [REDIRECT], client_name: `Claude${'\u2800'.repeat(16)}Code` }, 'invalid_client_metadata'],
    ['ideographic spaces (U+3000)', { redirect_uris: [REDIRECT], client_name: 'Claude\u3000\u3000Code' }, 'invalid_client_metadata'],
    ['a no-break space', { redirect_uris: [REDIRECT], client_name: 'Claude\u00a0Code' }, 'invalid_client_metadata'],
    ['combining marks stacked over the rows above', { redirect_uris: [REDIRECT], client_name: `C${'\u0364'.repeat(90)}laude` }, 'invalid_client_metadata'],
    ['a tag character (U+E0041)', { redirect_uris: [REDIRECT], client_name: 'Claude\u{E0041}Code' }, 'invalid_client_metadata'],
    ['the implicit grant', { redirect_uris: [REDIRECT], grant_types: ['implicit'], response_types: ['id_token'] }, 'invalid_client_metadata'],
  ])('%s', async (_name, metadata, error) => {
    const response = await register(metadata, { 'x-forwarded-for': randomBytes(4).join('.') })
    expect(response.status).toBe(400)
    const body = await response.json() as { error: string, error_description: string }
    expect(body.error).toBe(error)
    // The gateway's reason, not oidc-provider's authorization-time text (an outside tester's finding).
    expect(body.error_description).not.toContain('did not match')
  })

  it.each([
    ['http off loopback', ['http://evil.example/callback'], 'redirect URI "http://evil.example/callback" uses http on a host other than 127.0.0.1, [::1] or localhost: use https'],
    ['a fragment', ['https://app.example/cb#x'], 'redirect URI "https://app.example/cb#x" must have no fragment'],
    ['eleven redirect URIs', Array.from({ length: 11 }, (_, i) => `https://app.example/${i}`), 'redirect_uris may list at most 10 URIs'],
  ])('says why a redirect URI is refused: %s', async (_name, uris, reason) => {
    const response = await register({ redirect_uris: uris }, { 'x-forwarded-for': randomBytes(4).join('.') })
    expect(await response.json()).toEqual({ error: 'invalid_redirect_uri', error_description: reason })
  })

  it.each([
    ['https', 'https://app.example/callback'],
    ['http on 127.0.0.1, any port', 'http://127.0.0.1:51234/callback'],
    ['http on [::1]', 'http://[::1]:8080/cb'],
    ['http on localhost', 'http://localhost:3333/callback'],
    ['a private-use scheme', 'com.example.agent:/callback'],
  ])('accepts %s', async (_name, uri) => {
    const response = await register({ redirect_uris: [uri] }, { 'x-forwarded-for': randomBytes(4).join('.') })
    expect(response.status).toBe(201)
    const body = await response.json() as Record<string, unknown>
    expect(body.token_endpoint_auth_method).toBe('none')
    expect(body).not.toHaveProperty('client_secret')
  })

  // A private-use URI's host means nothing to the system (the app of the scheme gets the code):
  // with or without one, it is shown whole but its query, never as its scheme alone.
  it.each([
    ['without a host', 'com.example.agent:/oauth/callback'],
    ['with a host', 'cursor://anysphere.cursor-retrieval/oauth/callback'],
  ])('names a private-use redirect URI %s in full on the consent page', async (_case, uri) => {
    const response = await register({ client_name: 'Native', redirect_uris: [uri] }, { 'x-forwarded-for': randomBytes(4).join('.') })
    const id = (await response.json() as { client_id: string }).client_id
    const challenge = createHash('sha256').update('v'.repeat(43)).digest('base64url')
    const query = new URLSearchParams({ response_type: 'code', client_id: id, redirect_uri: uri, code_challenge: challenge, code_challenge_method: 'S256', resource: `${gateway.url}/mcp` })
    const page = await new Browser().navigate(`${gateway.url}/oauth/agents/authorize?${query.toString()}`, { login: 'alice' })
    expect(await page.text()).toContain(`<dt>Sends you back to</dt><dd><code>${uri}</code></dd>`)
  })

  it('refuses a registration over 8 KiB with 413, and keeps none of the metadata it has no use for (no fetch of a sector_identifier_uri)', async () => {
    const large = await register({ redirect_uris: [REDIRECT], client_name: 'x', contacts: ['a'.repeat(9000) + '@example.com'] }, { 'x-forwarded-for': randomBytes(4).join('.') })
    expect(large.status).toBe(413)
    const response = await register({
      redirect_uris: [REDIRECT],
      client_name: 'Kept small',
      contacts: ['ops@example.com'],
      logo_uri: 'https://example.com/logo.png',
      jwks_uri: 'https://127.0.0.1:1/jwks',
      sector_identifier_uri: 'https://127.0.0.1:1/sector',
      tos_uri: 'https://example.com/tos',
    }, { 'x-forwarded-for': randomBytes(4).join('.') })
    expect(response.status).toBe(201)
    const body = await response.json() as Record<string, unknown>
    for (const key of ['contacts', 'logo_uri', 'jwks_uri', 'sector_identifier_uri', 'tos_uri']) expect(body).not.toHaveProperty(key)
    expect(body.client_name).toBe('Kept small')
  })

  it('is bounded per client address: the 11th registration within a minute is 429', async () => {
    const statuses: number[] = []
    const headers = { 'x-forwarded-for': '203.0.113.7' }
    for (let i = 0; i < 11; i++) statuses.push((await register({ redirect_uris: [REDIRECT] }, headers)).status)
    expect(statuses).toEqual([...Array.from({ length: 10 }, () => 201), 429])
    // Another address still registers.
    expect((await register({ redirect_uris: [REDIRECT] }, { 'x-forwarded-for': '203.0.113.8' })).status).toBe(201)
  })
})

describe('an authorization request that must not redirect, and one that must not pass', () => {
  it.each([
    ['an unknown client', { client_id: 'nobody' }],
    ['a redirect URI not registered', { redirect_uri: 'http://127.0.0.1:8976/callbackx' }],
    ['a look-alike redirect URI', { redirect_uri: 'http://127.0.0.1:8976/callback/../evil' }],
    ['another host\'s redirect URI', { redirect_uri: 'https://evil.example/callback' }],
  ])('%s is an error page, never a redirect, and never framed', async (_name, overrides) => {
    const registered = await client()
    const response = await fetch(registered.url(overrides), { redirect: 'manual' })
    expect(response.status).toBe(400)
    expect(response.headers.get('location')).toBeNull()
    expect(response.headers.get('content-type')).toContain('text/html')
    expect(response.headers.get('content-security-policy')).toContain("frame-ancestors 'none'")
    expect(response.headers.get('x-frame-options')).toBe('DENY')
  })

  it('a resume address with no authorization behind it is an error page, never framed', async () => {
    const response = await fetch(`${gateway.url}/oauth/agents/authorize/abcdefghijklmnopqrstu`, { headers: { accept: 'text/html' } })
    expect(response.status).toBeGreaterThanOrEqual(400)
    expect(response.headers.get('content-type')).toContain('text/html')
    expect(response.headers.get('content-security-policy')).toContain("frame-ancestors 'none'")
    expect(response.headers.get('x-frame-options')).toBe('DENY')
  })

  it.each([
    ['no PKCE', { code_challenge: null, code_challenge_method: null }],
    ['PKCE plain', { code_challenge_method: 'plain' }],
    ['PKCE without its method', { code_challenge_method: null }],
    ['a code challenge too short', { code_challenge: 'abc' }],
    ['a resource that is not an agents route', { resource: 'http://127.0.0.1:1/app/' }],
    ['response_type token', { response_type: 'token' }],
    ['no response_type', { response_type: null }],
    ['prompt=none (dropped, so it cannot answer without the person)', { prompt: 'none', response_type: 'token' }],
    ['a state over 512 characters (kept for state.ttl, whoever asks)', { state: 'x'.repeat(513) }],
  ])('%s is an error page too: a request no person has seen never sends the browser to the client', async (_name, overrides) => {
    const registered = await client()
    const response = await fetch(registered.url(overrides), { redirect: 'manual' })
    expect(response.status).toBe(400)
    expect(response.headers.get('location')).toBeNull()
  })

  it('a repeated parameter is refused, and parameters the gateway does not take never reach the authorization server', async () => {
    const registered = await client()
    expect((await fetch(`${registered.url()}&resource=${encodeURIComponent(`${gateway.url}/other/`)}`, { redirect: 'manual' })).status).toBe(400)
    // prompt=none would have oidc-provider answer login_required to the client at once; dropped, the person is asked.
    const response = await fetch(registered.url({ prompt: 'none', request_uri: 'urn:x', response_mode: 'form_post' }), { redirect: 'manual' })
    expect(response.status).toBe(303)
    expect(response.headers.get('location')).toMatch(/^\/oauth\/agents\/interaction\//)
  })

  it('keeps a few kilobytes for a request nobody signs in for, whatever its size', async () => {
    const registered = await client()
    const interactionBytes = async () => {
      const keys = await store.keys('*agents:Interaction:*')
      return (await Promise.all(keys.map(async (key) => Number(await store.memory('USAGE', key) ?? 0)))).reduce((sum, size) => sum + size, 0)
    }
    const before = await interactionBytes()
    const refused = await fetch(registered.url({ state: 'x'.repeat(513) }), { redirect: 'manual' })
    expect(refused.status).toBe(400)
    expect(await refused.text()).toContain('The state is at most 512 characters.')
    expect(await interactionBytes()).toBe(before)
    const longest = await fetch(registered.url({ state: 'x'.repeat(512) }), { redirect: 'manual' })
    expect(longest.status).toBe(303)
    expect(await interactionBytes() - before).toBeLessThan(6144)
  })

  it('is bounded per client address: the 61st authorization request within a minute is 429', async () => {
    const registered = await client()
    const headers = { 'x-forwarded-for': '203.0.113.9' }
    const statuses: number[] = []
    for (let i = 0; i < 61; i++) statuses.push((await fetch(registered.url({ response_type: 'token' }), { redirect: 'manual', headers })).status)
    expect(statuses.slice(0, 60).every((status) => status === 400)).toBe(true)
    expect(statuses.at(-1)).toBe(429)
  })
})

describe('consent is the person\'s, in their browser, on this gateway\'s page', () => {
  it.each([
    ['Vietnamese, decomposed (two marks on a letter)', 'Tro\u031B\u0323 ly\u0301 ma\u0303'],
    ['Thai', 'ผู้ช่วยโค้ด'],
    ['Hindi', 'कोड सहायक'],
    ['Hebrew with vowel points', 'עוֹזֵר קוֹד'],
    ['a name that recounts, but does not say whose it is', 'Describer at large'],
  ])('registers a name in %s', async (_what, name) => {
    const response = await register({ client_name: name, redirect_uris: [REDIRECT], token_endpoint_auth_method: 'none' }, { 'x-forwarded-for': randomBytes(4).join('.') })
    expect(response.status, await response.clone().text()).toBe(201)
  })

  it('shows a name in a right-to-left script apart from the sentence around it', async () => {
    const consent = await toConsent(new Browser(), (await client('עוזר קוד')).url(), 'alice')
    expect(consent.body).toContain('A client that calls itself <strong><bdi>עוזר קוד</bdi></strong> asks to use')
    expect(consent.body).toContain('<dt>Named by</dt><dd>itself: anyone may register a client under any name</dd>')
  })

  it('refuses a consent POST from another site, or without its CSRF token', async () => {
    const registered = await client()
    const browser = new Browser()
    const consent = await toConsent(browser, registered.url(), 'alice')
    expect(consent.body).toContain('Attack test')
    expect(consent.body).toContain('127.0.0.1:8976')
    const post = async (headers: Record<string, string>, form: Record<string, string>) => await browser.fetch(consent.action, { method: 'POST', headers: { 'content-type': 'application/x-www-form-urlencoded', ...headers }, body: new URLSearchParams(form) })
    expect((await post({ 'sec-fetch-site': 'cross-site', origin: 'https://evil.example' }, { csrf: consent.csrf, decision: 'allow' })).status).toBe(403)
    expect((await post({ origin: gateway.url }, { decision: 'allow' })).status).toBe(403)
    expect((await post({ origin: gateway.url }, { csrf: 'x'.repeat(consent.csrf.length), decision: 'allow' })).status).toBe(403)
    // Still pending: the real form then works, once, and the browser's sign-in for it is cleared.
    expect(browser.cookies.has('gw_session_agent')).toBe(true)
    // Host-only and under /oauth/, as the sign-in's flow cookie: no application's page gets it.
    expect(browser.cookies.get('gw_session_agent')!.path).toBe('/oauth/')
    expect((await allow(browser, consent)).searchParams.get('code')).toBeTruthy()
    expect(browser.cookies.has('gw_session_agent')).toBe(false)
    expect((await post({ origin: gateway.url }, { csrf: consent.csrf, decision: 'allow' })).status).toBe(400)
  })

  it('the authorization server\'s cookies, and their .sig companions, never reach an upstream', async ({ upstream }) => {
    const browser = new Browser()
    await allow(browser, await toConsent(browser, (await client()).url(), 'alice'))
    const own = [...browser.cookies.keys()].filter((name) => name.startsWith('gw_session_as'))
    expect(own).toEqual(expect.arrayContaining(['gw_session_as', 'gw_session_as.sig']))
    // Set only under the server's own paths; stripped by name besides, whatever path a browser kept.
    expect(browser.cookies.get('gw_session_as')!.path).toBe('/oauth/agents/')
    expect(browser.cookies.get('gw_session_as.sig')!.path).toBe('/oauth/agents/')
    for (const name of own) browser.cookies.set(name, { ...browser.cookies.get(name)!, path: '/' })
    // The same browser signed in to a page route; every cookie it holds goes with the request.
    expect((await browser.navigate(`${gateway.url}/app/seen-cookies`, { login: 'alice' })).status).toBe(200)
    browser.cookies.set('app_pref', { value: 'dark', path: '/' })
    expect((await browser.fetch(`${gateway.url}/app/seen-cookies`)).status).toBe(200)
    const seen = upstream.seen.filter((request) => request.url.endsWith('/seen-cookies')).at(-1)!
    // The provider's own cookies are there too: a browser sends a host's cookies to every port of it.
    const names = String(seen.headers.cookie).split('; ').map((pair) => pair.slice(0, pair.indexOf('=')))
    expect(names).toContain('app_pref')
    expect(names.filter((name) => name.startsWith('gw_session'))).toEqual([])
  })

  it('a sign-in someone else started for their authorization shows them nothing of the person who signed in', async () => {
    const registered = await client()
    const attacker = new Browser()
    // The attacker starts the authorization, and so holds its interaction.
    const first = await attacker.fetch(registered.url())
    const interaction = new URL(first.headers.get('location')!, gateway.url)
    const uid = interaction.pathname.split('/').at(-1)!
    // The victim is led to sign in "for" that interaction.
    const victim = new Browser()
    await victim.navigate(`${gateway.url}/oauth/login/demo/?agent=${uid}`, { login: 'bob' })
    // The attacker's browser has no sign-in of its own for it: it is sent to sign in, and never sees bob.
    const page = await attacker.fetch(interaction.href)
    expect(page.status).toBe(302)
    expect(page.headers.get('location')).toContain('/oauth/login/demo/')
    // The victim's browser holds the sign-in but not the interaction: no consent page either.
    const theirs = await victim.fetch(interaction.href)
    expect(theirs.status).toBe(400)
    expect(await theirs.text()).not.toContain('Allow')
  })

  it('sign-ins for an agent that nobody allows start no session: they cannot push the person\'s sessions out of their list', async () => {
    const person = new Browser()
    expect((await person.navigate(`${gateway.url}/app/`, { login: 'erin' })).status).toBe(200)
    const list = async () => (await (await person.fetch(`${gateway.url}/oauth/sessions/`, { headers: { accept: 'application/json' } })).json() as { sessions: unknown[] }).sessions
    expect(await list()).toHaveLength(1)
    for (let i = 0; i < 3; i++) await new Browser().navigate(`${gateway.url}/oauth/login/demo/?agent=forced${i}`, { login: 'erin' })
    expect(await list()).toHaveLength(1)
  })
})

describe('codes, refresh tokens and grants', () => {
  it('a code used twice: the second is invalid_grant, and what the first issued ends', async () => {
    const registered = await client()
    const browser = new Browser()
    const code = (await allow(browser, await toConsent(browser, registered.url(), 'alice'))).searchParams.get('code')!
    const first = await exchange(registered.id, code, registered.verifier)
    expect(first.status).toBe(200)
    const tokens = await first.json() as { access_token: string, refresh_token: string }
    expect((await call(tokens.access_token)).status).toBe(200)
    const second = await exchange(registered.id, code, registered.verifier)
    expect(second.status).toBe(400)
    expect((await second.json() as { error: string }).error).toBe('invalid_grant')
    expect((await call(tokens.access_token)).status).toBe(401)
    expect((await refresh(registered.id, tokens.refresh_token)).status).toBe(400)
  })

  it.each([
    ['the wrong PKCE verifier', (verifier: string) => ({ code_verifier: `${verifier}x` })],
    ['no PKCE verifier', () => ({ code_verifier: '' })],
    ['another redirect URI', () => ({ redirect_uri: 'http://127.0.0.1:8977/callback' })],
  ])('a code with %s is invalid_grant', async (_name, change) => {
    const registered = await client()
    const browser = new Browser()
    const code = (await allow(browser, await toConsent(browser, registered.url(), 'alice'))).searchParams.get('code')!
    const response = await exchange(registered.id, code, registered.verifier, change(registered.verifier))
    expect(response.status).toBe(400)
    expect((await response.json() as { error: string }).error).toMatch(/^invalid_(grant|request)$/)
  })

  it('a grant refreshed again and again keeps a few hundred bytes per used refresh token, and any of them used again ends the grant', async () => {
    const setsBefore = new Set(await store.keys('*agents:grant:*'))
    const { id, tokens } = await granted('alice')
    const [grantSet] = (await store.keys('*agents:grant:*')).filter((key) => !setsBefore.has(key))
    const refreshBytes = async () => {
      const keys = await store.keys('*agents:RefreshToken:*')
      return (await Promise.all(keys.map(async (key) => Number(await store.memory('USAGE', key) ?? 0)))).reduce((sum, size) => sum + size, 0)
    }
    const bytesBefore = await refreshBytes()
    const used: string[] = [tokens.refresh_token]
    const REFRESHES = 12
    for (let i = 0; i < REFRESHES; i++) {
      const answer = await refresh(id, used.at(-1)!)
      expect(answer.status).toBe(200)
      used.push((await answer.json() as { refresh_token: string }).refresh_token)
    }
    // The grant's list: its code, the live refresh token, the grant; not one entry per refresh.
    expect(await store.scard(grantSet!)).toBeLessThanOrEqual(3)
    // Each used token keeps what its second use needs (its grant), not its whole record (1.2 KB).
    expect((await refreshBytes() - bytesBefore) / REFRESHES).toBeLessThan(500)
    // The first token used again, two rotations later (stolen, and rotated twice by the thief): the grant ends.
    const reused = await refresh(id, used[0]!)
    expect(reused.status).toBe(400)
    expect((await reused.json() as { error: string }).error).toBe('invalid_grant')
    expect((await refresh(id, used.at(-1)!)).status).toBe(400)
  })

  it('a stolen refresh token its thief rotates twice: its holder\'s next use ends the grant, the thief\'s tokens with it', async () => {
    const { id, tokens } = await granted('alice')
    const first = await refresh(id, tokens.refresh_token)
    const second = await refresh(id, (await first.json() as { refresh_token: string }).refresh_token)
    const thief = await second.json() as { access_token: string, refresh_token: string }
    expect((await call(thief.access_token)).status).toBe(200)
    expect((await refresh(id, tokens.refresh_token)).status).toBe(400)
    expect((await call(thief.access_token)).status).toBe(401)
    expect((await refresh(id, thief.refresh_token)).status).toBe(400)
  })

  it('a code of another client is refused', async () => {
    const registered = await client()
    const other = await client('Another client')
    const browser = new Browser()
    const code = (await allow(browser, await toConsent(browser, registered.url(), 'alice'))).searchParams.get('code')!
    expect((await exchange(other.id, code, registered.verifier)).status).toBe(400)
  })

  it('a token is refused on another route, and after its refresh token is revoked (RFC 7009); each request\'s line says it was an agent\'s token', async () => {
    const { id, tokens } = await granted()
    const before = gateway.logs.length
    expect((await call(tokens.access_token)).status).toBe(200)
    // A made-up token is nobody's agent: logged as a bearer token (an attacker's finding).
    expect((await call('made-up')).status).toBe(401)
    expect((await call(tokens.access_token, '/other/')).status).toBe(401)
    // On a public path nothing is judged, the token neither (docs/operations.md: credential null).
    expect((await call(tokens.access_token, '/other/open')).status).toBe(200)
    const revoked = await fetch(`${gateway.url}/oauth/agents/revoke`, { method: 'POST', body: new URLSearchParams({ token: tokens.refresh_token, client_id: id }) })
    expect(revoked.status).toBe(200)
    expect((await call(tokens.access_token)).status).toBe(401)
    expect((await refresh(id, tokens.refresh_token)).status).toBe(400)
    // An audit on credential: agent sees the refusals too (they were logged credential: bearer).
    const lines = gateway.logs.slice(before).map((line) => JSON.parse(line) as Record<string, unknown>).filter((line) => line.msg === 'request completed' && line.url !== '/oauth/agents/revoke' && line.url !== '/oauth/agents/token')
    expect(lines.map(({ url, decision, reason, credential }) => ({ url, decision, reason, credential }))).toEqual([
      { url: '/mcp', decision: 'allow', reason: undefined, credential: 'agent' },
      { url: '/mcp', decision: 'token_refused', reason: 'malformed', credential: 'bearer' },
      { url: '/other/', decision: 'token_refused', reason: 'wrong_audience', credential: 'agent' },
      { url: '/other/open', decision: 'public', reason: undefined, credential: null },
      { url: '/mcp', decision: 'token_refused', reason: 'inactive', credential: 'agent' },
    ])
  })

  it('a grant ends when the person signs out everywhere: its token gets 401 and its refresh token invalid_grant', async () => {
    const { id, tokens } = await granted('carol')
    expect((await call(tokens.access_token)).status).toBe(200)
    const browser = new Browser()
    expect((await browser.navigate(`${gateway.url}/app/`, { login: 'carol' })).status).toBe(200)
    const out = await browser.fetch(`${gateway.url}/oauth/logout/?everywhere=1`, { method: 'POST', body: new URLSearchParams({}), headers: { 'content-type': 'application/x-www-form-urlencoded', 'sec-fetch-site': 'same-origin' } })
    expect(await out.text()).toContain('You are signed out')
    expect((await call(tokens.access_token)).status).toBe(401)
    expect((await refresh(id, tokens.refresh_token)).status).toBe(400)
  })

  it('no log line holds a code, a token or the client\'s verifier, and each request to the authorization server is logged', async () => {
    const registered = await client()
    const browser = new Browser()
    const code = (await allow(browser, await toConsent(browser, registered.url(), 'alice'))).searchParams.get('code')!
    const tokens = await (await exchange(registered.id, code, registered.verifier)).json() as { access_token: string, refresh_token: string }
    await refresh(registered.id, tokens.refresh_token)
    await call(tokens.access_token)
    const log = gateway.logs.join('\n')
    for (const secret of [code, tokens.access_token, tokens.refresh_token, registered.verifier, tokens.access_token.split('.')[2]!]) expect(log).not.toContain(secret)
    expect(gateway.logs.some((line) => line.includes('/oauth/agents/token'))).toBe(true)
  })

  it('a token past its exp (10 minutes, 60 s of skew) is invalid_token, even one checked before', async () => {
    const { tokens } = await granted()
    expect((await call(tokens.access_token)).status).toBe(200)
    clock.offset = 10 * 60_000
    try {
      expect((await call(tokens.access_token)).status).toBe(200)
      clock.offset = 11 * 60_000 + 1000
      const expired = await call(tokens.access_token)
      expect(expired.status).toBe(401)
      expect(expired.headers.get('www-authenticate')).toContain('invalid_token')
      expect(await expired.text()).toContain('expired')
    } finally {
      clock.offset = 0
    }
  })

  it('a grant whose provider token has expired with none to refresh it with ends: the route says so, and the agent\'s refresh is refused', async () => {
    // The route's provider issues no refresh token here, and its access tokens live an hour. Every
    // clock moves (the gateway's, oidc-provider's, the provider's): Date is faked, timers are not.
    const { id, tokens } = await granted('judy')
    vi.useFakeTimers({ toFake: ['Date'], now: Date.now() + 2 * 3600_000 })
    try {
      const renewed = await refresh(id, tokens.refresh_token)
      expect(renewed.status, await renewed.clone().text()).toBe(200)
      const fresh = await renewed.json() as { access_token: string, refresh_token: string }
      const ended = await call(fresh.access_token)
      expect(ended.status).toBe(401)
      expect(await ended.text()).toContain('has ended')
      // Not a loop of refresh, 401, refresh: the grant is over, the agent authorizes again.
      expect(await (await refresh(id, fresh.refresh_token)).json()).toMatchObject({ error: 'invalid_grant' })
    } finally {
      vi.useRealTimers()
    }
  })

  it('back-channel logout at the provider ends the person\'s grants: the token is refused, the refresh too', async () => {
    const { id, tokens } = await granted('kate', `${gateway.url}/bcl`)
    expect((await call(tokens.access_token, '/bcl/')).status).toBe(200)
    // The provider says: every session of kate ends (a logout token with sub only, OIDC Back-Channel Logout §2.4).
    const token = await logoutToken(bclProvider, 'c2', 'kate')
    const logout = await fetch(`${gateway.url}/oauth/backchannel-logout/bcl/`, { method: 'POST', headers: { 'content-type': 'application/x-www-form-urlencoded' }, body: `logout_token=${token}` })
    expect(logout.status).toBe(200)
    const refused = await call(tokens.access_token, '/bcl/')
    expect(refused.status).toBe(401)
    expect(refused.headers.get('www-authenticate')).toContain('invalid_token')
    expect(await (await refresh(id, tokens.refresh_token)).json()).toMatchObject({ error: 'invalid_grant' })
  })

  it('forged and foreign tokens are invalid_token', async () => {
    const { tokens } = await granted()
    const [header, payload] = tokens.access_token.split('.')
    const claims = JSON.parse(Buffer.from(payload!, 'base64url').toString()) as Record<string, unknown>
    const forged = `${header}.${Buffer.from(JSON.stringify({ ...claims, sub: 'admin' })).toString('base64url')}.${tokens.access_token.split('.')[2]}`
    const none = `${Buffer.from('{"alg":"none","typ":"at+jwt"}').toString('base64url')}.${payload}.`
    for (const token of [forged, none, 'Bearer', 'not-a-jwt']) {
      const response = await call(token)
      expect(response.status).toBe(401)
      expect(response.headers.get('www-authenticate')).toContain('invalid_token')
    }
    // What a client sends when its token request failed: said as such, not as a bad token.
    for (const [token, word] of [['', undefined], ['null', 'null'], ['undefined', 'undefined']] as const) {
      const response = await call(token)
      expect(response.status).toBe(401)
      expect(await response.json()).toMatchObject({ error: 'invalid_token', message: word === undefined ? TOKEN_MESSAGES.noToken : tokenMessage('placeholder', { word }) })
    }
  })
})

describe('an agent\'s websocket', () => {
  it('passes with the agent\'s token (no Origin: not a browser), and closes within a second when the grant ends', async () => {
    const { id, tokens } = await granted('gina', `${gateway.url}/live`)
    const socket = new WebSocket(`${gateway.url.replace('http', 'ws')}/live/feed`, { headers: { authorization: `Bearer ${tokens.access_token}` } })
    const closed = new Promise<number>((resolve) => socket.once('close', resolve))
    await new Promise((resolve, reject) => { socket.once('open', resolve); socket.once('error', reject) })
    const echo = new Promise((resolve) => socket.once('message', (data) => resolve(String(data))))
    socket.send('hello')
    expect(await echo).toBe('echo hello')
    // The grant ends (its refresh token revoked, RFC 7009): so does its session, and the socket with it.
    expect((await fetch(`${gateway.url}/oauth/agents/revoke`, { method: 'POST', body: new URLSearchParams({ token: tokens.refresh_token, client_id: id }) })).status).toBe(200)
    expect(await settledWithin(closed)).toBe(SESSION_ENDED_CODE)
  })
})

describe('an agent\'s websocket and its token', () => {
  it.each([
    ['/live', 'authorization', 'june'],
    ['/pa', 'proxy-authorization', 'jules'],
  ])('on %s, with the token in %s: closes (1008, token ended) when the clock passes its exp, and not a moment before', async (path, header, login) => {
    const { tokens } = await granted(login, `${gateway.url}${path}`)
    const exp = decodeJwt(tokens.access_token).exp! * 1000
    const setBefore = timers.set.length
    const opening = Date.now()
    const socket = new WebSocket(`${gateway.url.replace('http', 'ws')}${path}/feed`, { headers: { [header]: `Bearer ${tokens.access_token}` } })
    const closed = new Promise<{ code: number, reason: string }>((resolve) => socket.once('close', (code, reason) => resolve({ code, reason: String(reason) })))
    await new Promise((resolve, reject) => { socket.once('open', resolve); socket.once('error', reject) })
    const echo = async (text: string) => await new Promise((resolve) => { socket.once('message', (data) => resolve(String(data))); socket.send(text) })
    expect(await echo('hello')).toBe('echo hello')
    // The token's timer, set as both legs opened at its exp (the session's own is at its provider token's, later).
    const next = () => timers.set.slice(setBefore).filter((timer) => !timer.done).sort((a, b) => a.at - b.at)[0]!
    expect(next().at - timers.time).toBeLessThanOrEqual(exp - opening)
    try {
      clock.offset = exp - Date.now() - 5000
      timers.advance(next().at)
      expect(await echo('still')).toBe('echo still')
      clock.offset = exp - Date.now()
      timers.advance(next().at)
      expect(await closed).toEqual({ code: TOKEN_ENDED_CODE, reason: TOKEN_ENDED_REASON })
    } finally {
      clock.offset = 0
    }
  })

  it('past its exp, within the clock skew: a request passes, the upgrade is answered 401 (the socket would close as it opened)', async () => {
    const { tokens } = await granted('skewed', `${gateway.url}/live`)
    const bearer = { authorization: `Bearer ${tokens.access_token}` }
    try {
      clock.offset = decodeJwt(tokens.access_token).exp! * 1000 + 30_000 - Date.now()
      expect((await fetch(`${gateway.url}/live/x`, { headers: bearer })).status).toBe(200)
      const socket = new WebSocket(`${gateway.url.replace('http', 'ws')}/live/feed`, { headers: bearer })
      const status = await new Promise((resolve) => {
        socket.once('open', () => { resolve('opened'); socket.close() })
        socket.once('unexpected-response', (_request, response) => { resolve(response.statusCode); response.resume() })
        socket.once('error', (error) => { resolve(error.message) })
      })
      expect(status).toBe(401)
    } finally {
      clock.offset = 0
    }
  })
})

describe('an agent\'s streams', () => {
  it('are cut within a second when the grant ends (an MCP SSE answer, a long-held GET)', async ({ upstream }) => {
    const { id, tokens } = await granted('hank', `${gateway.url}/other`)
    const response = await fetch(`${gateway.url}/other/stream`, { headers: { authorization: `Bearer ${tokens.access_token}` } })
    expect(response.status).toBe(200)
    const reader = response.body!.getReader()
    expect(new TextDecoder().decode((await reader.read()).value)).toBe('first,')
    expect((await fetch(`${gateway.url}/oauth/agents/revoke`, { method: 'POST', body: new URLSearchParams({ token: tokens.refresh_token, client_id: id }) })).status).toBe(200)
    try {
      expect(await settledWithin(reader.read().then(() => 'went on', () => 'cut'))).toBe('cut')
    } finally {
      upstream.release()
    }
  })

  // An outside tester's finding: a stream outlived the token it was opened with (the grant's websocket closes at its exp).
  it('are cut at the end of the access token they were opened with', async ({ upstream }) => {
    const { tokens } = await granted('stream-exp', `${gateway.url}/other`)
    const exp = (JSON.parse(Buffer.from(tokens.access_token.split('.')[1]!, 'base64url').toString()) as { exp: number }).exp
    const response = await fetch(`${gateway.url}/other/stream`, { headers: { authorization: `Bearer ${tokens.access_token}` } })
    const reader = response.body!.getReader()
    expect(new TextDecoder().decode((await reader.read()).value)).toBe('first,')
    try {
      // The stream's deadline, on the timers' own scale: the token's exp and its 60 s of skew, seen from now.
      const due = timers.time + exp * 1000 + 60_000 - Date.now()
      let cut = false
      const read = reader.read().then(() => 'went on', () => { cut = true; return 'cut' })
      timers.advance(due - 2000)
      await new Promise((resolve) => setImmediate(resolve))
      expect(cut).toBe(false)
      clock.offset = exp * 1000 + 61_000 - Date.now()
      timers.advance(due + 1000)
      expect(await read).toBe('cut')
    } finally {
      clock.offset = 0
      upstream.release()
    }
  })

  it('pass MCP\'s DELETE with its Mcp-Session-Id, and a stream the grant outlives ends as the upstream ends it', async ({ upstream }) => {
    const { tokens } = await granted('ivan', `${gateway.url}/other`)
    const auth = { authorization: `Bearer ${tokens.access_token}` }
    const deleted = await fetch(`${gateway.url}/other/session`, { method: 'DELETE', headers: { ...auth, 'mcp-session-id': 'session-1' } })
    expect(deleted.status).toBe(200)
    expect(await deleted.json()).toMatchObject({ method: 'DELETE', url: '/other/session', headers: { 'mcp-session-id': 'session-1' } })
    const response = await fetch(`${gateway.url}/other/stream`, { headers: auth })
    upstream.release()
    expect(await response.text()).toBe('first,last')
  })
})

describe('metrics', () => {
  it('counts registrations, consents, tokens and refusals by name, and never a client, a token or a person', async () => {
    const { id, tokens } = await granted('frank')
    await call(tokens.access_token, '/other/')
    const text = await (await fetch(`${gateway.url}/metrics`)).text()
    const value = (event: string, result: string) => Number(new RegExp(`^gateway_agents_total\\{event="${event}",result="${result}"\\} (\\d+)$`, 'm').exec(text)?.[1] ?? 0)
    expect(value('registration', 'registered')).toBeGreaterThan(0)
    expect(value('registration', 'invalid_redirect_uri')).toBeGreaterThan(0)
    // The gateway's own refusals of an authorization request (no PKCE, a resource agents may not reach).
    expect(value('authorization', 'invalid_request')).toBeGreaterThan(0)
    expect(value('consent', 'allowed')).toBeGreaterThan(0)
    expect(value('token', 'authorization_code')).toBeGreaterThan(0)
    expect(value('token', 'refresh_token')).toBeGreaterThan(0)
    expect(value('token', 'invalid_grant')).toBeGreaterThan(0)
    expect(value('grant', 'revoked')).toBeGreaterThan(0)
    expect(value('route', 'accepted')).toBeGreaterThan(0)
    expect(value('route', 'wrong_audience')).toBeGreaterThan(0)
    for (const secret of [id, tokens.access_token, tokens.refresh_token, 'frank']) expect(text).not.toContain(secret)
  })
})

// Last: it starts the file's gateway again with rules of its own.
describe('a body that never arrives at the gateway\'s own endpoints', () => {
  /** A timer set now for OWN_BODY_MS (the file's timers count from whole milliseconds, as Node's do). */
  const isBodyDeadline = (timer: { at: number }) => Math.abs(timer.at - timers.time - OWN_BODY_MS) <= 1
  /**
   * Sends `path` a POST that declares 200 bytes and sends 3, moves the gateway's timers to the body's
   * deadline, and gives what the socket received before it closed.
   */
  async function stalled (path: string, type: string): Promise<{ answer: string }> {
    const setBefore = timers.set.length
    const socket = connect(Number(new URL(gateway.url).port), '127.0.0.1')
    let answer = ''
    socket.on('data', (chunk: Buffer) => { answer += chunk.toString('latin1') })
    const closed = new Promise<void>((resolve) => socket.once('close', () => resolve()))
    socket.write(`POST ${path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: ${type}\r\nContent-Length: 200\r\n\r\nabc`)
    const timer = await vi.waitFor(() => {
      const set = timers.set.slice(setBefore).find((candidate) => !candidate.done && isBodyDeadline(candidate))
      if (set === undefined) throw new Error(`no body deadline yet; answered ${JSON.stringify(answer.slice(0, 300))}`)
      return set
    })
    // Nothing answered before the deadline: the client is still sending, as far as anyone knows.
    expect(answer).toBe('')
    timer.done = true
    timer.callback()
    await closed
    return { answer }
  }

  const form = 'application/x-www-form-urlencoded'
  it.each([['/oauth/agents/token', form], ['/oauth/agents/register', 'application/json'], ['/oauth/logout/', form], ['/oauth/backchannel-logout/bcl/', form]])('%s: 400 invalid_request at the deadline, and the connection closed', async (path, type) => {
    const logged = gateway.logs.length
    const { answer } = await stalled(path, type)
    expect(answer).toMatch(/^HTTP\/1\.1 400 /)
    expect(answer.slice(answer.indexOf('\r\n\r\n') + 4)).toBe(JSON.stringify({ error: 'invalid_request', message: `The request's body did not arrive within ${OWN_BODY_MS} ms.` }))
    // One line says why, and nothing of the aborted read is logged as a failure.
    const lines = gateway.logs.slice(logged).map((line) => JSON.parse(line) as { level: number, msg: string, error?: string })
    expect(lines.filter((line) => line.msg === 'request rejected')).toMatchObject([{ level: 30, error: 'invalid_request' }])
    expect(lines.filter((line) => line.level >= 40)).toEqual([])
  })

  it.each([
    ['a registration over its size (413)', 'POST /oauth/agents/register HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 100000', 413],
    ['the home page, which reads no body', 'GET /oauth/ HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 100000', 200],
  ])('%s: answered before its body arrived, the connection is closed after the answer', async (_name, head, status) => {
    const socket = connect(Number(new URL(gateway.url).port), '127.0.0.1')
    let answer = ''
    socket.on('data', (chunk: Buffer) => { answer += chunk.toString('latin1') })
    const closed = new Promise<void>((resolve) => socket.once('close', () => resolve()))
    socket.write(`${head}\r\n\r\nabc`)
    // Closed by the gateway: the test's own timeout would end a connection left waiting for the body.
    await closed
    expect(answer).toMatch(new RegExp(`^HTTP/1\\.1 ${status} `))
  })

  it('a proxied route\'s request body is not timed here (it is the upstream\'s to read, within the route\'s timeout)', async () => {
    const setBefore = timers.set.length
    const answer = await fetch(`${gateway.url}/app/upload`, { method: 'POST', body: 'a=1' })
    await answer.arrayBuffer()
    expect(timers.set.slice(setBefore).filter(isBodyDeadline)).toEqual([])
  })

  it('a body that arrives whole is answered as ever, and its deadline cancelled', async () => {
    const setBefore = timers.set.length
    const answer = await fetch(`${gateway.url}/oauth/agents/token`, { method: 'POST', body: new URLSearchParams({ grant_type: 'refresh_token', refresh_token: 'unknown', client_id: 'nobody' }) })
    expect(answer.status).toBeGreaterThanOrEqual(400)
    await answer.arrayBuffer()
    const deadlines = timers.set.slice(setBefore).filter(isBodyDeadline)
    expect(deadlines).toHaveLength(1)
    await vi.waitFor(() => { expect(deadlines[0]!.done).toBe(true) })
  })
})

describe('the route\'s rules', () => {
  it('refuses a person the route\'s rules refuse, before any grant', async ({ startStack, upstream }) => {
    await gateway.close()
    gateway = await startStack({ server: SERVER, routes: [{ path: '/mcp', upstream: upstream.url, provider: 'demo', agents: true, deny: [{ users: ['mallory'] }] }] })
    const registered = await client()
    const page = await new Browser().navigate(registered.url({ resource: null }), { login: 'mallory' })
    expect(page.status).toBe(403)
    expect(await page.text()).not.toContain('name="csrf"')
    // With one agents route, `resource` may be left out: alice gets that route's token.
    const person = new Browser()
    const consent = await toConsent(person, registered.url({ resource: null }), 'alice')
    // Another browser cannot answer it.
    await expect(allow(new Browser(), consent)).rejects.toThrow(/ended with 400/)
    const code = (await allow(person, consent)).searchParams.get('code')!
    const tokens = await (await exchange(registered.id, code, registered.verifier, {})).json() as { access_token: string }
    expect((await call(tokens.access_token)).status).toBe(200)
  })

  it('judges the person under the name the route gives them, as the grant\'s requests will be: demo\'s partner:mallory is demo:partner:mallory', async ({ startStack, upstream, op }) => {
    await gateway.close()
    gateway = await startStack({
      server: SERVER,
      // A second provider makes partner: a name space; its client is never used here.
      providers: { partner: oidcClient(op.issuer, 'unused', 's') },
      routes: [{ path: '/mcp', upstream: upstream.url, provider: 'demo', agents: true, deny: [{ users: ['demo:partner:mallory'] }] }],
    })
    const page = await new Browser().navigate((await client()).url({ resource: null }), { login: 'partner:mallory' })
    expect(page.status).toBe(403)
    expect(await page.text()).not.toContain('name="csrf"')
  })

  // An outside tester's rows: from the grant's second request on (its token checked and its session
  // cached on this instance), the person was judged and named by the provider's raw identity.
  it('names and judges the person so on every request of the grant, not only its first', async ({ startStack, upstream, op }) => {
    await gateway.close()
    gateway = await startStack({
      server: SERVER,
      providers: { partner: oidcClient(op.issuer, 'unused', 's') },
      routes: [{ path: '/mcp', upstream: upstream.url, provider: 'demo', agents: true, deny: [{ users: ['demo:partner:mallory'], paths: ['/mcp/admin'] }] }],
    })
    const { tokens } = await granted('partner:mallory', `${gateway.url}/mcp`)
    for (let i = 0; i < 3; i++) {
      const before = upstream.seen.length
      expect((await call(tokens.access_token, `/mcp/x${i}`)).status).toBe(200)
      expect(upstream.seen.slice(before).at(-1)!.headers['x-forwarded-user'], `request ${i + 1}`).toBe('demo:partner:mallory')
      expect((await call(tokens.access_token, '/mcp/admin')).status, `request ${i + 1}`).toBe(403)
    }
  })
})

// Tester's finding: the root route's resource is the gateway's bare origin, and its agents' tokens
// named it as `aud`, which is exactly the `aud` of a forward-auth assertion for an application on
// the gateway's own origin. Signed with the same keys and `iss`, such a token passed the verifier
// docs/assertion.md gives upstreams (signature, iss, aud, ES256) as "the gateway vouches for bob",
// for an application whose rules had refused him. Now its `aud` is the origin with its `/`.
describe('the root route\'s tokens', () => {
  it('never pass for an identity assertion on the gateway\'s own origin', async ({ startStack, upstream, op }) => {
    await gateway.close()
    gateway = await startStack({
      server: SERVER,
      // Groups, for the forward-auth rule below; identity assertions on.
      providers: { demo: oidcClient(op.issuer, 'c', 's', 'openid groups') },
      assertion: { ttl: '60s' },
      routes: [{ path: '/', upstream: upstream.url, provider: 'demo', agents: true }],
    })
    const origin = new URL(gateway.url).origin
    const keys = createRemoteJWKSet(new URL('/.well-known/jwks.json', gateway.url))
    // As docs/assertion.md verifies, for an application on the gateway's own origin.
    const asAssertion = async (token: string) => (await jwtVerify(token, keys, { issuer: gateway.url, audience: origin, algorithms: ['ES256'] })).payload
    const forwarded = { 'x-forwarded-proto': 'http', 'x-forwarded-host': new URL(gateway.url).host, 'x-forwarded-uri': '/admin/' }

    // A real assertion for that origin verifies so (alice is an admin)...
    const alice = new Browser()
    await alice.navigate(`${gateway.url}/`, { login: 'alice' })
    const vouched = await alice.fetch(`${gateway.url}/oauth/auth/demo/?groups=admins`, { headers: forwarded })
    expect(vouched.status).toBe(200)
    expect((await asAssertion(vouched.headers.get('x-gateway-assertion')!)).sub).toBe('alice')
    // ...bob gets none there...
    const bob = new Browser()
    await bob.navigate(`${gateway.url}/`, { login: 'bob' })
    const refused = await bob.fetch(`${gateway.url}/oauth/auth/demo/?groups=admins`, { headers: { ...forwarded, accept: 'application/json' } })
    expect(refused.status).toBe(403)
    expect(refused.headers.get('x-gateway-assertion')).toBeNull()
    // ...and the token of an agent bob allowed on the root route is no assertion, though it works there.
    const { tokens } = await granted('bob', gateway.url)
    expect(decodeJwt(tokens.access_token).aud).toBe(`${origin}/`)
    await expect(asAssertion(tokens.access_token)).rejects.toThrow(/aud/)
    expect((await call(tokens.access_token, '/')).status).toBe(200)
    // Nor does an assertion pass for an agent's token: signed by the gateway (so logged as one of
    // its tokens, an attacker's finding: it was bearer), but not one (typ JWT, no client).
    const before = gateway.logs.length
    expect((await call(vouched.headers.get('x-gateway-assertion')!, '/')).status).toBe(401)
    const line = gateway.logs.slice(before).map((each) => JSON.parse(each) as Record<string, unknown>).find((each) => each.msg === 'request completed')
    expect(line).toMatchObject({ decision: 'token_refused', reason: 'malformed', credential: 'agent' })
  })
})
