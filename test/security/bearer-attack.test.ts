// Machine clients' tokens attacked from outside: a real authorization server (oidc-provider) issuing
// client-credentials tokens, tokens signed here with its own signing key (the one its JWKS
// publishes) where a claim must be odd, real Redis, a real echo upstream and a real websocket
// upstream, the gateway on a real socket. Each test says what must hold for a stranger.
import { createServer, type IncomingHttpHeaders } from 'node:http'
import { createRemoteJWKSet, decodeProtectedHeader, jwtVerify, SignJWT, type JWTPayload } from 'jose'
import { WebSocket, WebSocketServer } from 'ws'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { Browser } from '../helpers/browser.js'
import { oidcClient, reserveBaseUrl, startGateway, type TestGateway } from '../helpers/gateway.js'
import { CI, clientCredentialsToken, startMachineProvider } from '../helpers/machine.js'
import { close, listen } from '../helpers/net.js'
import { startOidcProvider, type TestProvider } from '../helpers/oidc.js'
import { rawExchange, rawRequest } from '../helpers/raw-http.js'
import { startRedis, type TestRedis } from '../helpers/redis.js'
import { startUpstream, type Upstream } from '../helpers/upstream.js'

let redis: TestRedis
let upstream: Upstream
let op: TestProvider
/** Another authorization server, the issuer of another route. */
let other: TestProvider
let gateway: TestGateway
let port: number
let kid: string
/** The websocket upstream's handshakes, newest last. */
const handshakes: IncomingHttpHeaders[] = []
const wsServer = createServer((_req, res) => res.end('plain HTTP'))

beforeAll(async () => {
  redis = await startRedis()
  upstream = await startUpstream()
  const wss = new WebSocketServer({ server: wsServer })
  wss.on('connection', (socket, request) => {
    handshakes.push(request.headers)
    socket.send('hello')
  })
  await listen(wsServer)
  const wsPort = (wsServer.address() as { port: number }).port
  const reserved = await reserveBaseUrl()
  port = reserved.port
  op = await startMachineProvider(reserved.baseUrl)
  other = await startOidcProvider([], { machineClients: [{ client_id: CI.id, client_secret: CI.secret }], resources: { 'api://orders': { scope: 'orders.read' } } })
  kid = decodeProtectedHeader(await clientCredentialsToken(op, CI, 'api://orders', 'orders.read')).kid!
  const orders = { audience: 'api://orders', scopes: ['orders.read'] }
  gateway = await startGateway({
    server: { port: reserved.port, baseUrl: reserved.baseUrl },
    store: { type: 'redis', url: redis.url },
    providers: { demo: oidcClient(op.issuer, 'c', 's', 'openid email groups'), other: oidcClient(other.issuer, 'o', 'o-secret') },
    routes: [
      { path: '/other/', upstream: upstream.url, provider: 'other', bearer: orders },
      { path: '/signed/', upstream: upstream.url, provider: 'demo', bearer: orders, assertion: true },
      { path: '/orders/', upstream: upstream.url, provider: 'demo', bearer: orders, public: ['GET /orders/open/*'] },
      { path: '/team/', upstream: upstream.url, provider: 'demo', bearer: orders, headers: { 'x-team': 'claims.team' } },
      { path: '/pa/', upstream: upstream.url, provider: 'demo', bearer: { ...orders, header: 'proxy-authorization' } },
      { path: '/ledger/', upstream: upstream.url, provider: 'demo', bearer: { audience: 'api://ledger', introspect: true } },
      { path: '/ledger-jwt-only/', upstream: upstream.url, provider: 'demo', bearer: { audience: 'api://ledger' } },
      { path: '/plain/', upstream: upstream.url, provider: 'demo' },
      { path: '/live/', upstream: `http://127.0.0.1:${wsPort}`, provider: 'demo', websocket: true, bearer: orders },
    ],
  })
})

afterAll(async () => {
  await gateway?.close()
  await Promise.all([op?.close(), other?.close(), upstream?.close(), close(wsServer)])
  await redis?.release()
})

/** A token signed with the provider's own key (its JWKS publishes it): claims as an attacker who got one minted would hold. */
/** The OpenID back-channel logout event, as a logout token's `events` names it. */
const BCL_EVENT = 'http://schemas.openid.net/event/backchannel-logout'

async function signed (claims: JWTPayload, typ = 'at+jwt'): Promise<string> {
  const now = Math.floor(Date.now() / 1000)
  return await new SignJWT({ iss: op.issuer, aud: 'api://orders', scope: 'orders.read', sub: 'svc', iat: now, exp: now + 300, ...claims })
    .setProtectedHeader({ alg: 'RS256', kid, typ }).sign(op.signingKey)
}

/** The upstream's record of the last request whose path is `path`. */
function lastSeen (path: string) {
  return upstream.seen.filter((request) => request.url === path).at(-1)
}

async function get (path: string, headers: Record<string, string>): Promise<{ status: number, body: string, challenge: string | null }> {
  const response = await fetch(`${gateway.url}${path}`, { headers: { accept: 'application/json', ...headers }, redirect: 'manual' })
  return { status: response.status, body: await response.text(), challenge: response.headers.get('www-authenticate') }
}

describe('the Authorization header', () => {
  it('reads the scheme in any case and with several spaces; the upstream gets the token itself', async () => {
    const token = await clientCredentialsToken(op, CI, 'api://orders', 'orders.read')
    for (const [i, value] of [`bearer ${token}`, `BEARER   ${token}`, `BeArEr ${token}`].entries()) {
      const path = `/orders/case-${i}`
      expect((await get(path, { authorization: value })).status).toBe(200)
      expect(lastSeen(path)?.headers.authorization).toBe(`Bearer ${token}`)
    }
  })

  it('refuses a Bearer value that is not one token (two tokens, a comma, a quote, only the scheme) with 401 invalid_token, never a 500', async () => {
    const token = await clientCredentialsToken(op, CI, 'api://orders', 'orders.read')
    for (const [i, value] of [`Bearer ${token} ${token}`, `Bearer ${token},x`, `Bearer "${token}"`, 'Bearer', `Bearer ${token}==x`].entries()) {
      const result = await get(`/orders/bad-${i}`, { authorization: value, accept: 'text/html' })
      expect(result.status).toBe(401)
      expect(result.challenge).toContain('error="invalid_token"')
      expect(lastSeen(`/orders/bad-${i}`)).toBeUndefined()
    }
  })

  it('a huge token (12 KiB) is refused as a token, not a 500', async () => {
    const huge = `${'a'.repeat(6000)}.${'b'.repeat(6000)}.${'c'.repeat(100)}`
    const result = await get('/orders/huge', { authorization: `Bearer ${huge}` })
    expect(result.status).toBe(401)
    expect(JSON.parse(result.body)).toMatchObject({ error: 'invalid_token' })
  })

  it('judges the first of two Authorization headers, and the upstream gets that one only', async () => {
    const good = await clientCredentialsToken(op, CI, 'api://orders', 'orders.read')
    const other = await clientCredentialsToken(op, CI, 'api://orders', 'orders.write')
    const first = await rawRequest(port, '/orders/twice-a', [`Authorization: Bearer ${good}`, `Authorization: Bearer ${other}`])
    expect(first.status).toBe(200)
    expect(lastSeen('/orders/twice-a')?.headers.authorization).toBe(`Bearer ${good}`)
    const second = await rawRequest(port, '/orders/twice-b', [`Authorization: Bearer ${other}`, `Authorization: Bearer ${good}`])
    expect(second.status).toBe(403)
    expect(lastSeen('/orders/twice-b')).toBeUndefined()
  })

  it('a token beside a session cookie is judged alone: a refused token is not rescued by the session', async () => {
    const browser = new Browser()
    expect((await browser.navigate(`${gateway.url}/orders/home`, { login: 'alice' })).status).toBe(200)
    const cookie = `gw_session=${browser.cookies.get('gw_session')!.value}`
    const ledger = await clientCredentialsToken(op, CI, 'api://ledger', 'ledger.read')
    const refused = await get('/orders/with-cookie', { authorization: `Bearer ${ledger}`, cookie, accept: 'text/html' })
    expect(refused.status).toBe(401)
    expect(lastSeen('/orders/with-cookie')).toBeUndefined()
    const token = await clientCredentialsToken(op, CI, 'api://orders', 'orders.read')
    expect((await get('/orders/with-cookie-ok', { authorization: `Bearer ${token}`, cookie })).status).toBe(200)
    const seen = lastSeen('/orders/with-cookie-ok')!
    expect(seen.headers.authorization).toBe(`Bearer ${token}`)
    expect(seen.headers['x-forwarded-user']).toBe(CI.id)
    expect(seen.headers.cookie).toBeUndefined()
  })

  it('on a public path the token is not looked at and not forwarded', async () => {
    const result = await get('/orders/open/x', { authorization: 'Bearer not-a-token-at-all' })
    expect(result.status).toBe(200)
    expect(lastSeen('/orders/open/x')?.headers.authorization).toBeUndefined()
  })

  it('on a route without bearer: a token is no credential (401 for an API client), and it never reaches the upstream', async () => {
    const token = await clientCredentialsToken(op, CI, 'api://orders', 'orders.read')
    const result = await get('/plain/x', { authorization: `Bearer ${token}` })
    expect(result.status).toBe(401)
    expect(lastSeen('/plain/x')).toBeUndefined()
  })

  it('identity headers a machine client sends are dropped; the gateway\'s own are set', async () => {
    const token = await clientCredentialsToken(op, CI, 'api://orders', 'orders.read')
    const result = await get('/team/spoof', {
      authorization: `Bearer ${token}`, 'x-forwarded-user': 'admin', 'x-forwarded-groups': 'admins', 'x-team': 'red', x_forwarded_email: 'a@b.c',
    })
    expect(result.status).toBe(200)
    const seen = lastSeen('/team/spoof')!.headers
    expect(seen['x-forwarded-user']).toBe(CI.id)
    expect(seen['x-forwarded-groups']).toBeUndefined()
    expect(seen['x-team']).toBeUndefined()
    expect(seen.x_forwarded_email).toBeUndefined()
  })
})

describe('HTTP/1.1 pipelining', () => {
  /** Writes `requests` (raw, each ending in a blank line) in one packet on one connection; the status lines, in order. */
  async function pipelined (requests: string[]): Promise<number[]> {
    const data = await rawExchange(port, requests.join(''), 'the pipelined requests')
    return [...data.matchAll(/HTTP\/1\.1 (\d{3})/g)].map((match) => Number(match[1]))
  }

  it('a token on the first request of a connection does not carry over to the next ones', async () => {
    const token = await clientCredentialsToken(op, CI, 'api://orders', 'orders.read')
    const line = (path: string, extra: string[], last = false) => [`GET ${path} HTTP/1.1`, `Host: 127.0.0.1:${port}`, 'Accept: application/json', ...extra, ...(last ? ['Connection: close'] : []), '', ''].join('\r\n')
    const statuses = await pipelined([
      line('/orders/pipe-1', [`Authorization: Bearer ${token}`]),
      line('/orders/pipe-2', []),
      line('/orders/pipe-3', ['Authorization: Bearer forged.forged.forged'], true),
    ])
    expect(statuses).toEqual([200, 401, 401])
    expect(lastSeen('/orders/pipe-2')).toBeUndefined()
    expect(lastSeen('/orders/pipe-3')).toBeUndefined()
  })
})

describe('header: proxy-authorization', () => {
  it('the app\'s own Authorization passes untouched and Proxy-Authorization never reaches the upstream', async () => {
    const token = await clientCredentialsToken(op, CI, 'api://orders', 'orders.read')
    const result = await get('/pa/x', { 'proxy-authorization': `Bearer ${token}`, authorization: 'Basic YXBwOmFwcA==' })
    expect(result.status).toBe(200)
    const seen = lastSeen('/pa/x')!.headers
    expect(seen.authorization).toBe('Basic YXBwOmFwcA==')
    expect(seen['proxy-authorization']).toBeUndefined()
  })

  it('a token in Authorization is not read there: without one in Proxy-Authorization the request has no credential', async () => {
    const token = await clientCredentialsToken(op, CI, 'api://orders', 'orders.read')
    const result = await get('/pa/wrong-header', { authorization: `Bearer ${token}` })
    expect(result.status).toBe(401)
    expect(lastSeen('/pa/wrong-header')).toBeUndefined()
  })
})

describe('token confusion', () => {
  it('aud as a list naming the resource passes; the gateway\'s own client id as the only audience is an ID token', async () => {
    expect((await get('/orders/aud-list', { authorization: `Bearer ${await signed({ aud: ['api://other', 'api://orders'] })}` })).status).toBe(200)
    const own = await get('/orders/aud-own', { authorization: `Bearer ${await signed({ aud: 'c' })}` })
    expect(own.status).toBe(401)
    expect(own.challenge).toContain('error="invalid_token"')
    const nested = await get('/orders/aud-object', { authorization: `Bearer ${await signed({ aud: { 0: 'api://orders' } as unknown as string })}` })
    expect(nested.status).toBe(401)
  })

  it('scp as a list and as a string both carry scopes; scope as a number carries none', async () => {
    expect((await get('/orders/scp-list', { authorization: `Bearer ${await signed({ scope: undefined, scp: ['orders.read'] })}` })).status).toBe(200)
    expect((await get('/orders/scp-string', { authorization: `Bearer ${await signed({ scope: undefined, scp: 'orders.read orders.write' })}` })).status).toBe(200)
    const numeric = await get('/orders/scope-number', { authorization: `Bearer ${await signed({ scope: 7 as unknown as string })}` })
    expect(numeric.status).toBe(403)
    expect(numeric.challenge).toContain('error="insufficient_scope"')
  })

  it('a token with a nonce, or typ id+jwt, is refused as an ID token', async () => {
    expect((await get('/orders/nonce', { authorization: `Bearer ${await signed({ nonce: 'n' })}` })).status).toBe(401)
    const idTyp = await new SignJWT({ iss: op.issuer, aud: 'api://orders', scope: 'orders.read', sub: 'svc', exp: Math.floor(Date.now() / 1000) + 300 })
      .setProtectedHeader({ alg: 'RS256', kid, typ: 'application/ID+JWT' }).sign(op.signingKey)
    expect((await get('/orders/id-typ', { authorization: `Bearer ${idTyp}` })).status).toBe(401)
  })

  it.each([
    ['a back-channel logout token (typ logout+jwt, events)', { events: { [BCL_EVENT]: {} }, sid: 's1', jti: 'j1' }, 'logout+jwt', 'A logout token (a security event) is not an access token.'],
    ['a logout token typed JWT, told by its events claim', { events: { [BCL_EVENT]: {} }, jti: 'j2' }, 'JWT', 'A logout token (a security event) is not an access token.'],
    ['a security event token (typ secevent+jwt)', { jti: 'j3' }, 'secevent+jwt', 'A logout token (a security event) is not an access token.'],
    ['a token whose own typ claim says Logout (Keycloak)', { typ: 'Logout' }, 'JWT', 'A logout token (a security event) is not an access token.'],
    ['a token whose own typ claim says ID (Keycloak)', { typ: 'ID' }, 'JWT', 'An ID token is not an access token.'],
    ['a token whose own typ claim says Refresh (Keycloak)', { typ: 'Refresh' }, 'JWT', 'A refresh token is not an access token.'],
    ['a token whose own typ claim says Offline (Keycloak)', { typ: 'Offline' }, 'JWT', 'A refresh token is not an access token.'],
    ['a token whose own typ claim says Serialized-ID (Keycloak)', { typ: 'Serialized-ID' }, 'JWT', 'An ID token is not an access token.'],
    ['an ID token without a nonce (a refreshed one), told by its at_hash', { at_hash: 'x6Gx4mQ2XvU6o8m3nA0e1g', auth_time: 1, azp: 'c' }, 'JWT', 'An ID token is not an access token.'],
    ['an ID token without a nonce, told by its c_hash', { c_hash: 'x6Gx4mQ2XvU6o8m3nA0e1g', azp: 'c' }, 'JWT', 'An ID token is not an access token.'],
    ['a logout token whose typ has a parameter', { events: { [BCL_EVENT]: {} }, jti: 'j4' }, 'logout+jwt; charset=utf-8', 'A logout token (a security event) is not an access token.'],
    ['a token whose typ header says ID with a parameter', { jti: 'j5' }, 'application/id+jwt ; q=1', 'An ID token is not an access token.'],
  ])('%s, signed by the route\'s issuer for its audience, is refused: it is no access token', async (_name, claims, typ, message) => {
    const refused = await get('/orders/other-kind', { authorization: `Bearer ${await signed(claims, typ)}` })
    expect(refused.status).toBe(401)
    expect(JSON.parse(refused.body)).toMatchObject({ error: 'invalid_token', message })
    // Keycloak's access tokens say typ Bearer in their claims: they pass.
    expect((await get('/orders/kc-bearer', { authorization: `Bearer ${await signed({ typ: 'Bearer' }, 'JWT')}` })).status).toBe(200)
  })

  it('odd claim types: sub as a number is its text, groups as an object are no groups, never a 500', async () => {
    expect((await get('/orders/sub-number', { authorization: `Bearer ${await signed({ sub: 42 as unknown as string })}` })).status).toBe(200)
    expect(lastSeen('/orders/sub-number')?.headers['x-forwarded-user']).toBe('42')
    expect((await get('/orders/groups-object', { authorization: `Bearer ${await signed({ groups: { admin: true } })}` })).status).toBe(200)
    expect(lastSeen('/orders/groups-object')?.headers['x-forwarded-groups']).toBeUndefined()
    expect((await get('/orders/exp-string', { authorization: `Bearer ${await signed({ exp: 'soon' as unknown as number })}` })).status).toBe(401)
  })

  it('a claim header whose value holds a line break refuses the request (403), the upstream not asked', async () => {
    const result = await get('/team/crlf', { authorization: `Bearer ${await signed({ team: 'red\r\nx-forwarded-user: admin' })}` })
    expect(result.status).toBe(403)
    expect(lastSeen('/team/crlf')).toBeUndefined()
  })
})

describe('the assertion of a machine client', () => {
  it('names the client, verifies with the gateway\'s keys, and a client cannot send its own', async () => {
    const token = await clientCredentialsToken(op, CI, 'api://orders', 'orders.read')
    const forged = await signed({ sub: 'admin' })
    expect((await get('/signed/a', { authorization: `Bearer ${token}`, 'x-gateway-assertion': forged })).status).toBe(200)
    const assertion = lastSeen('/signed/a')?.headers['x-gateway-assertion']
    expect(typeof assertion).toBe('string')
    expect(assertion).not.toBe(forged)
    const { payload } = await jwtVerify(assertion as string, createRemoteJWKSet(new URL(`${gateway.url}/.well-known/jwks.json`)), { audience: upstream.url.replace(/\/$/, '') })
    expect(payload).toMatchObject({ sub: CI.id, provider: 'demo' })
  })
})

describe('another issuer', () => {
  it('a token of the other route\'s issuer is refused here, and this issuer\'s there, even once cached', async () => {
    const theirs = await clientCredentialsToken(other, CI, 'api://orders', 'orders.read')
    const ours = await clientCredentialsToken(op, CI, 'api://orders', 'orders.read')
    expect((await get('/other/theirs', { authorization: `Bearer ${theirs}` })).status).toBe(200)
    expect((await get('/orders/ours', { authorization: `Bearer ${ours}` })).status).toBe(200)
    expect((await get('/orders/theirs', { authorization: `Bearer ${theirs}` })).status).toBe(401)
    expect((await get('/other/ours', { authorization: `Bearer ${ours}` })).status).toBe(401)
  })

  it('a token naming this issuer and its kid but signed with the other issuer\'s key is refused', async () => {
    const now = Math.floor(Date.now() / 1000)
    const forged = await new SignJWT({ iss: op.issuer, aud: 'api://orders', scope: 'orders.read', sub: 'svc', exp: now + 300 })
      .setProtectedHeader({ alg: 'RS256', kid, typ: 'at+jwt' }).sign(other.signingKey)
    expect((await get('/orders/forged-key', { authorization: `Bearer ${forged}` })).status).toBe(401)
    expect(lastSeen('/orders/forged-key')).toBeUndefined()
  })
})

describe('the caches', () => {
  it('a token accepted on one route is judged afresh on another with another audience or scopes', async () => {
    const token = await clientCredentialsToken(op, CI, 'api://orders', 'orders.write')
    expect((await get('/ledger/first', { authorization: `Bearer ${token}` })).status).toBe(401)
    expect((await get('/orders/second', { authorization: `Bearer ${token}` })).status).toBe(403)
    const ledger = await clientCredentialsToken(op, CI, 'api://ledger', 'ledger.read')
    expect((await get('/ledger/ok', { authorization: `Bearer ${ledger}` })).status).toBe(200)
    expect((await get('/orders/not-ledger', { authorization: `Bearer ${ledger}` })).status).toBe(401)
  })
})

describe('websocket upgrades', () => {
  /** Opens a websocket at `path` with `headers` (no Origin: as a CLI or a service opens one): 101 once the upstream spoke, else the refusal's status. */
  async function open (path: string, headers: Record<string, string>): Promise<number> {
    return await new Promise((resolve, reject) => {
      const socket = new WebSocket(`ws://127.0.0.1:${port}${path}`, { headers })
      // The gateway answers the client's handshake before it opens the upstream's: the upstream's first message says both are open.
      socket.once('message', () => { resolve(101); socket.close() })
      socket.once('unexpected-response', (_request, response) => { resolve(response.statusCode ?? 0); response.resume() })
      socket.once('error', reject)
    })
  }

  it('a session cookie from a foreign page (or with no Origin) still cannot open one; a Basic credential is no token', async () => {
    const browser = new Browser()
    expect((await browser.navigate(`${gateway.url}/orders/ws-home`, { login: 'alice' })).status).toBe(200)
    const cookie = `gw_session=${browser.cookies.get('gw_session')!.value}`
    expect(await open('/live/x', { cookie, origin: 'https://evil.example' })).toBe(403)
    expect(await open('/live/x', { cookie })).toBe(403)
    expect(await open('/live/x', { cookie, authorization: 'Basic YTpi' })).toBe(403)
  })

  it('refuses a websocket with a refused token, the upstream never asked', async () => {
    const before = handshakes.length
    expect(await open('/live/x', { authorization: 'Bearer nope.nope.nope', origin: gateway.url })).toBe(401)
    expect(handshakes.length).toBe(before)
  })

  it('a machine client with a valid token opens a websocket without a browser\'s Origin; the upstream handshake carries its token', async () => {
    const token = await clientCredentialsToken(op, CI, 'api://orders', 'orders.read')
    expect(await open('/live/x', { authorization: `Bearer ${token}` })).toBe(101)
    expect(handshakes.at(-1)?.authorization).toBe(`Bearer ${token}`)
    expect(handshakes.at(-1)?.['x-forwarded-user']).toBe(CI.id)
  })
})

describe('what the logs hold', () => {
  it('no log line holds a token, accepted or refused', async () => {
    const tokens = [
      await clientCredentialsToken(op, CI, 'api://orders', 'orders.read'),
      await clientCredentialsToken(op, CI, 'api://orders', 'orders.write'),
      await clientCredentialsToken(op, CI, 'api://ledger', 'ledger.read'),
      await signed({ nonce: 'x' }),
      await signed({ exp: 1 }),
      'opaque-made-up-token-value-123456',
    ]
    for (const token of tokens) {
      for (const path of ['/orders/log', '/ledger/log', '/plain/log', '/live/log']) await get(path, { authorization: `Bearer ${token}` })
      await get('/pa/log', { 'proxy-authorization': `Bearer ${token}` })
    }
    for (const token of tokens) {
      // The signature part of a JWT, or the opaque token whole: any of it in a line is a leak.
      const secret = token.split('.').at(-1)!
      expect(gateway.logs.filter((line) => line.includes(secret))).toEqual([])
    }
  })
})
