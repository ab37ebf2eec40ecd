// The second-day attack on what landed with tracing, --check's messages, the pages and the demo's
// printed lines: each test here is a defence that held. A real gateway (real oidc-provider issuing
// machine tokens, an echo upstream, a refused one) exports to a real OTLP/HTTP receiver; every
// hostile request carries a marked secret, and no byte the collector gets may hold one.
import { connect } from 'node:net'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { oidcClient, reserveBaseUrl, startGateway, type TestGateway } from '../helpers/gateway.js'
import { CI, clientCredentialsToken, startMachineProvider } from '../helpers/machine.js'
import { refusedUrl } from '../helpers/net.js'
import type { TestProvider } from '../helpers/oidc.js'
import { startOtlpReceiver, type OtlpReceiver } from '../helpers/otlp-receiver.js'
import { rawRequest } from '../helpers/raw-http.js'
import { startUpstream, type Upstream } from '../helpers/upstream.js'

/** One request with a body, byte for byte on a real socket; resolves with the status. */
export async function rawPost (port: number, target: string, contentType: string, body: string, headers: string[] = []): Promise<number> {
  return await new Promise((resolve, reject) => {
    const socket = connect(port, '127.0.0.1', () => {
      socket.write([`POST ${target} HTTP/1.1`, `Host: 127.0.0.1:${port}`, 'Accept: application/json', 'Connection: close',
        `Content-Type: ${contentType}`, `Content-Length: ${Buffer.byteLength(body)}`, ...headers, '', body].join('\r\n'))
    })
    let data = ''
    socket.setEncoding('latin1')
    socket.setTimeout(10_000, () => socket.destroy(new Error(`no answer to ${target} within 10 s`)))
    socket.on('data', (chunk: string) => { data += chunk })
    socket.on('error', reject)
    socket.on('close', () => { resolve(Number(/^HTTP\/1\.1 (\d{3})/.exec(data)?.[1] ?? 0)) })
  })
}

let upstream: Upstream
let receiver: OtlpReceiver
let op: TestProvider
let gateway: TestGateway
let port = 0
let jwt = ''
let opaque = ''

beforeAll(async () => {
  upstream = await startUpstream()
  receiver = await startOtlpReceiver()
  const reserved = await reserveBaseUrl()
  port = reserved.port
  op = await startMachineProvider(reserved.baseUrl)
  // Minted before the gateway (and with it the process-wide undici instrumentation) starts.
  jwt = await clientCredentialsToken(op, CI, 'api://orders', 'orders.read')
  opaque = await clientCredentialsToken(op, CI, 'api://ledger')
  gateway = await startGateway({
    server: { port: reserved.port, baseUrl: reserved.baseUrl },
    store: { type: 'memory' },
    session: { cacheTtl: 0 },
    providers: { demo: oidcClient(op.issuer, 'c', 's', 'openid email groups') },
    forwardAuth: { allowedRedirectHosts: ['app.example.org'] },
    routes: [
      { path: '/orders/', upstream: upstream.url, provider: 'demo', bearer: { audience: 'api://orders', scopes: ['orders.read'] } },
      { path: '/ledger/', upstream: upstream.url, provider: 'demo', bearer: { audience: 'api://ledger', introspect: true } },
      { path: '/down/', upstream: await refusedUrl(), auth: 'none' },
      { path: '/pub/', upstream: upstream.url, auth: 'none' },
    ],
    tracing: { otlp: receiver.url },
  })
})
afterAll(async () => {
  await gateway?.close()
  await op?.close()
  await receiver?.close()
  await upstream?.close()
})

/** Everything the collector was sent so far, after a flush. */
async function collected (): Promise<string> {
  await gateway.app.tracing!.forceFlush()
  return Buffer.concat(receiver.bodies).toString()
}

describe('tracing: no secret reaches the collector', () => {
  // [what, method, target, headers, body?, secrets that must not be exported]
  const hostile: Array<[string, 'GET' | 'POST', string, string[], string | undefined, string[]]> = [
    ['a callback with a code and a forged state', 'GET', '/oauth/authorized/demo/?code=CodeSecret0001&state=StateSecret0001', [], undefined, ['CodeSecret0001', 'StateSecret0001']],
    ['a callback with error and error_description', 'GET', '/oauth/authorized/demo/?error=access_denied&error_description=DescSecret0001&state=StateSecret0002', [], undefined, ['DescSecret0001', 'StateSecret0002']],
    ['a callback with two codes', 'GET', '/oauth/authorized/demo/?code=CodeSecret0002&code=CodeSecret0003&state=x', [], undefined, ['CodeSecret0002', 'CodeSecret0003']],
    ['a 404 with a token in its query', 'GET', '/nowhere/x?access_token=QuerySecret404', [], undefined, ['QuerySecret404']],
    ['a 502 (refused upstream) with a token in its query', 'GET', '/down/x?token=QuerySecret502', [], undefined, ['QuerySecret502']],
    ['a public route with a token in its query and a secret User-Agent', 'GET', '/pub/x?token=QuerySecretPub', ['User-Agent: AgentSecret0001', 'Referer: http://x/?r=RefererSecret1'], undefined, ['QuerySecretPub', 'AgentSecret0001', 'RefererSecret1']],
    ['forward-auth with the original URI holding a token', 'GET', '/oauth/auth/demo/?rd=https://app.example.org/?t=RdSecret0001', ['X-Forwarded-Uri: /p?t=FwdUriSecret01', 'X-Forwarded-Host: app.example.org'], undefined, ['RdSecret0001', 'FwdUriSecret01']],
    ['a session cookie that is not one', 'GET', '/orders/x', ['Cookie: gw_session=CookieSecret0001; other=OtherCookie01'], undefined, ['CookieSecret0001', 'OtherCookie01']],
    ['a bearer token that is garbage', 'GET', '/orders/x', ['Authorization: Bearer GarbageBearerSecret1'], undefined, ['GarbageBearerSecret1']],
    ['an opaque token the provider does not know (introspected)', 'GET', '/ledger/x', ['Authorization: Bearer UnknownOpaqueSecret1'], undefined, ['UnknownOpaqueSecret1']],
    ['a sign-out state', 'GET', '/oauth/logout/demo/?state=LogoutStateSecret1', [], undefined, ['LogoutStateSecret1']],
    ['a back-channel logout token', 'POST', '/oauth/backchannel-logout/demo/', [], 'logout_token=eyJLogoutTokenSecret1.eyJx.sig', ['LogoutTokenSecret1']],
    ['a back-channel logout token as malformed JSON', 'POST', '/oauth/backchannel-logout/demo/', ['Content-Type: application/json'], '{"logout_token":"JsonLogoutSecret1', ['JsonLogoutSecret1']],
    ['a sign-out form', 'POST', '/oauth/logout/', [], 'next=/pub/%3Ft%3DNextSecret0001&csrf=CsrfSecret0001', ['NextSecret0001', 'CsrfSecret0001']],
    ['a login with a next holding a token', 'GET', '/oauth/login/demo/?next=/orders/%3Ft%3DLoginNextSecret1', [], undefined, ['LoginNextSecret1']],
    // Refused at the edge (a ; in the path): the span names neither the path nor the query.
    ['a path with a matrix parameter holding a session id', 'GET', '/pub/a;jsessionid=MatrixSecret01?t=MatrixQuery01', [], undefined, ['MatrixSecret01', 'MatrixQuery01', 'jsessionid']],
  ]
  it.each(hostile)('%s', async (_what, method, target, headers, body, secrets) => {
    const status = method === 'GET'
      ? (await rawRequest(port, target, headers)).status
      : await rawPost(port, target, headers.find((line) => /^content-type/i.test(line))?.slice(14) ?? 'application/x-www-form-urlencoded', body ?? '', headers.filter((line) => !/^content-type/i.test(line)))
    expect(status).toBeGreaterThanOrEqual(200)
    const received = await collected()
    expect(received).toContain(target.includes(';') ? 'the path has a ;' : target.split('?')[0]!)
    for (const secret of secrets) expect(received.includes(secret), `${secret} reached the collector`).toBe(false)
    expect(received).not.toMatch(/authorization|cookie|user_agent|referer/i)
  })

  it('a valid machine token (JWT and introspected opaque) is proxied, and neither reaches the collector', async () => {
    expect((await rawRequest(port, '/orders/ok', [`Authorization: Bearer ${jwt}`])).status).toBe(200)
    expect((await rawRequest(port, '/ledger/ok', [`Authorization: Bearer ${opaque}`])).status).toBe(200)
    const received = await collected()
    // The introspection call was made and traced, its body (the token) not recorded.
    expect(received).toMatch(/\/token\/introspection|introspect/)
    for (const secret of [jwt, opaque, jwt.split('.')[2]!, 'ci-secret']) expect(received.includes(secret)).toBe(false)
  })

  it('a sampled caller\'s traceparent with tracestate and baggage: one traceparent upstream, baggage as it came, no header injected', async () => {
    const id = '5bf92f3577b34da6a3ce929d0e0e4736'
    const response = await rawRequest(port, '/pub/ctx', [
      `traceparent: 00-${id}-00f067aa0ba902b7-01`, 'tracestate: a=1,b=2', `baggage: user=BaggageValue,${'k=v,'.repeat(200)}x=1`,
      `tracestate: ${'z'.repeat(300)}=1`,
    ])
    expect(response.status).toBe(200)
    const seen = upstream.seen.filter((request) => request.url === '/pub/ctx')
    expect(seen).toHaveLength(1)
    expect(seen[0]!.headers.traceparent).toMatch(new RegExp(`^00-${id}-[0-9a-f]{16}-01$`))
    expect(Object.keys(seen[0]!.headers).filter((name) => name === 'traceparent')).toHaveLength(1)
    expect(String(seen[0]!.headers.tracestate)).not.toContain('z'.repeat(300))
    // Baggage is the application's business: the gateway neither reads nor records it.
    expect(await collected()).not.toContain('BaggageValue')
  })
})
