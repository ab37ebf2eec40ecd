/* eslint-disable no-template-curly-in-string -- the configs and shell values under test contain ${VAR} text */
// The second-day attack on what landed with tracing, --check's messages, the pages and the demo's
// printed lines: each test here is a defence that held. A real gateway (real oidc-provider issuing
// machine tokens, an echo upstream, a refused one) exports to a real OTLP/HTTP receiver; every
// hostile request carries a marked secret, and no byte the collector gets may hold one.
import { execFileSync } from 'node:child_process'
import { createServer, type IncomingHttpHeaders } from 'node:http'
import { connect } from 'node:net'
import { WebSocket, WebSocketServer } from 'ws'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { Browser } from '../helpers/browser.js'
import { oidcClient, reserveBaseUrl, startGateway, type TestGateway } from '../helpers/gateway.js'
import { CI, clientCredentialsToken, startMachineProvider } from '../helpers/machine.js'
import { close, listen, refusedUrl } from '../helpers/net.js'
import { homePage } from '../../src/http/pages.js'
import { parseConfig } from '../../src/config/config.js'
import { gatewayEnvironment } from '../../demo/instructions.js'
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
    // The edge's refusal is known by its 400: tracing records no error message (security round 4).
    expect(received).toContain(target.includes(';') ? '"http.response.status_code","value":{"intValue":400}' : target.split('?')[0]!)
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

describe('pages: what a stranger controls is never markup, and "Start again" stays on the gateway', () => {
  let pages: TestGateway
  let provider: TestProvider
  let now = Date.now()
  const clock = { now: () => now }

  beforeAll(async () => {
    const reserved = await reserveBaseUrl()
    provider = await startMachineProvider(reserved.baseUrl)
    pages = await startGateway({
      server: { port: reserved.port, baseUrl: reserved.baseUrl },
      store: { type: 'memory' },
      providers: { demo: oidcClient(provider.issuer, 'c', 's', 'openid profile email groups') },
      routes: [{ path: '/app/', upstream: upstream.url, provider: 'demo' }],
    }, { deps: { clock } })
  })
  afterAll(async () => {
    await pages?.close()
    await provider?.close()
  })

  // The demo provider keeps login names to [a-z0-9._-]: a provider that does not is stood in for here.
  it.each([
    ['a name', { sub: 's', name: 'x"><img src=x onerror=alert(1)>', groups: [] }],
    ['an email', { sub: 's', email: "a'onmouseover='alert(1)'@x\"><svg/onload=alert(2)>", groups: [] }],
    ['a subject without a name', { sub: '</strong><script>alert(1)</script>', groups: [] }],
  ])('the home page escapes %s a provider sent', (_name, identity) => {
    const html = homePage({ 'de"mo<b>': identity }, [{ name: 'x"><b>', href: 'javascript:alert(1)"' }], [{ label: '<i>', href: '/a"b' }], (provider) => `/oauth/logout/?switch=${provider}`)
    expect(html).toContain('Signed in as')
    expect(html).not.toMatch(/<img|<script>|<svg|<b>|<i>|onmouseover='|href="javascript:alert\(1\)"/)
  })

  // [next asked for, where "Start again" may send the browser back to]
  it.each([
    ['/app/reports?q=1', '/app/reports?q=1'],
    ['//evil.example/x', '/oauth/'],
    ['javascript:alert(1)', '/oauth/'],
    ['/\\evil.example', '/oauth/'],
    ['https://evil.example/', '/oauth/'],
    ['/app/"><script>alert(1)</script>', undefined],
  ])('an expired state toward %s starts again at the gateway\'s own login', async (next, back) => {
    const browser = new Browser()
    const begin = await browser.fetch(`${pages.url}/oauth/login/demo/?next=${encodeURIComponent(next)}`, { redirect: 'manual' })
    const state = new URL(begin.headers.get('location')!).searchParams.get('state')!
    now += 24 * 3600_000
    try {
      const page = await browser.fetch(`${pages.url}/oauth/authorized/demo/?code=x&state=${state}`, { headers: { accept: 'text/html' } })
      expect(page.status).toBe(400)
      const html = await page.text()
      const href = /<a class="button" href="([^"]*)">Start again<\/a>/.exec(html)?.[1]
      expect(href, html).toBeDefined()
      const link = new URL(href!.replaceAll('&#38;', '&'), pages.url)
      expect(link.origin).toBe(pages.url)
      if (link.pathname !== '/oauth/') {
        expect(link.pathname).toBe('/oauth/login/demo/')
        if (back !== undefined) expect(link.searchParams.get('next')).toBe(back)
        expect(link.searchParams.get('next')).toMatch(/^\/(?![/\\])/)
      } else {
        expect(back).toBe('/oauth/')
      }
      expect(html).not.toMatch(/<script>alert/)
    } finally {
      now -= 24 * 3600_000
    }
  })

  it.each([
    ['a 404 path', '/nowhere/"><script>alert(1)</script>'],
    ['a provider error description', '/oauth/authorized/demo/?error=<script>alert(1)</script>&error_description=<script>alert(2)</script>&state=x'],
    ['an unknown provider', '/oauth/login/"><script>alert(1)<%2Fscript>/'],
    ['a logout next', '/oauth/logout/?next=%22%3E%3Cscript%3Ealert(1)%3C/script%3E'],
  ])('reflects nothing unescaped from %s', async (_name, target) => {
    const page = await rawRequest(Number(new URL(pages.url).port), target, [], { accept: 'text/html' })
    expect(page.status).toBeGreaterThanOrEqual(200)
    expect(page.body).not.toMatch(/<script>alert|"><script/)
  })
})

describe('--check messages: no secret value, no crash', () => {
  const SESSION = 'session:\n  secret: test-session-secret-0123456789-abcdefghij\n'
  /** The message parseConfig throws for `text` ('' when it accepts it). */
  function messageOf (text: string, env: Record<string, string> = {}): string {
    try {
      parseConfig(text, env, 'test.yaml')
      return ''
    } catch (error) {
      return error instanceof Error ? `${error.name}: ${error.message}` : String(error)
    }
  }

  it.each([
    ['a client secret indented too little', `${SESSION}providers:\n  demo:\n    issuer: https://idp.example\n    clientId: c\n    scope: openid\nclientSecret: SlipSecretValue42\nroutes: []\n`, 'SlipSecretValue42'],
    ['a client secret indented too far', `${SESSION}  clientSecret: RightSlipSecret42\nroutes: []\n`, 'RightSlipSecret42'],
    ['a misspelt secret key', 'session:\n  secrett: test-session-secret-0123456789-MISSPELT\nroutes: []\n', 'MISSPELT'],
    ['an unknown password key', `${SESSION}  passwd: PasswdSecret42\nroutes: []\n`, 'PasswdSecret42'],
    ['a short session secret', 'session:\n  secret: ShortSecret42\nroutes: []\n', 'ShortSecret42'],
    ['a session secret as a list', 'session:\n  secret: [ListSecretA42, ListSecretB42]\nroutes: []\n', 'ListSecret'],
    ['an upstream with a password', `${SESSION}routes: [{ path: /a/, upstream: "http://u:UpstreamPass42@127.0.0.1:9/x", auth: none }]\n`, 'UpstreamPass42'],
    ['a secret from the environment that is too short', 'session:\n  secret: ${GW_SECRET}\nroutes: []\n', 'EnvGwSecret42'],
    ['a Redis URL with a password, wrong store type', `${SESSION}store:\n  type: redys\n  url: redis://:RedisPass42@h:6379\nroutes: []\n`, 'RedisPass42'],
  ])('%s: the message does not print the value', (_name, text, secret) => {
    const message = messageOf(text, { GW_SECRET: 'EnvGwSecret42' })
    expect(message).toMatch(/^ConfigError: test\.yaml: /)
    expect(message).not.toContain(secret)
  })

  it.each([
    ['20,000 nested lists', `routes: ${'['.repeat(20_000)}${']'.repeat(20_000)}\n`],
    ['3,000 nested mappings, each one further right', `session:\n${Array.from({ length: 3000 }, (_, i) => `${' '.repeat(i + 2)}k${i}:`).join('\n')} v\n`],
    ['a 2 MB key', `${'k'.repeat(2_000_000)}: v\nroutes: []\n`],
    ['a NUL and a BOM', '\uFEFFsession:\n  secret: "a\0b"\nroutes: []\n'],
  ])('%s: a problem of the file, never a crash', (_name, text) => {
    expect(messageOf(text)).toMatch(/^ConfigError: test\.yaml: /)
  })
})

describe('demo:provider\'s printed export line', () => {
  // Each value, pasted into a shell through the printed line, comes back byte for byte and runs nothing.
  const secrets = [
    "a'b", '$(touch /tmp/pwned)', '`id`', 'x\nid', 'a b;id', "'$(id)'", "\\'; id #", '-n', 'a\r\nid', 'ü’\u2028id', '!!', '${IFS}id', '"$HOME"', '*',
  ]
  const issuer = 'http://127.0.0.1:9000/path?x=$(id)'
  // One shell for every value, not one per value, each pasted line in a subshell of its own, the
  // values it exported printed NUL-separated.
  let printed: string[] = []
  beforeAll(() => {
    const script = secrets.map((secret) => `(${gatewayEnvironment(issuer, secret)}; printf '%s\\0%s\\0' "$DEMO_ISSUER" "$DEMO_CLIENT_SECRET")`).join('\n')
    printed = execFileSync('bash', ['-c', script], { encoding: 'utf8', env: { PATH: process.env.PATH } }).split('\0')
  })

  it.each(secrets.map((secret, index) => [secret, index] as const))('the client secret %j', (secret, index) => {
    expect(printed.slice(2 * index, 2 * index + 2)).toEqual([issuer, secret])
  })
})

describe('a failed discovery\'s log lines', () => {
  it.each([
    ['a query holding a token', (base: string) => `${base}/tenant?token=IssuerTokenSecret42`, 'IssuerTokenSecret42'],
    ['a user name and password', (base: string) => base.replace('://', '://admin:IssuerPassSecret42@'), 'IssuerPassSecret42'],
  ])('an issuer with %s: the sign-in fails, and no line names the secret', async (_name, issuer, secret) => {
    const refused = await refusedUrl()
    const failing = await startGateway({
      store: { type: 'memory' },
      providers: { demo: oidcClient(issuer(refused), 'c', 'ClientSecret42') },
      routes: [{ path: '/app/', upstream: upstream.url, provider: 'demo' }],
    })
    try {
      const response = await rawRequest(Number(new URL(failing.url).port), '/oauth/login/demo/?next=/app/')
      expect(response.status).toBeGreaterThanOrEqual(500)
      expect(failing.logs.join('\n')).toMatch(/discovery|ECONNREFUSED/i)
      expect(failing.logs.join('\n')).not.toContain(secret)
      expect(failing.logs.join('\n')).not.toContain('ClientSecret42')
      expect(response.body).not.toContain(secret)
    } finally {
      await failing.close()
    }
  })
})

describe('tracing: a websocket upgrade', () => {
  it('sends no client trace header upstream and no query, state or cookie to the collector', async () => {
    const handshakes: IncomingHttpHeaders[] = []
    const server = createServer((_req, res) => res.end('plain HTTP'))
    const wss = new WebSocketServer({ server })
    wss.on('connection', (socket, request) => {
      handshakes.push(request.headers)
      socket.send('hello')
    })
    const wsUrl = await listen(server)
    const live = await startGateway({
      store: { type: 'memory' },
      routes: [{ path: '/live/', upstream: wsUrl, auth: 'none', websocket: true }],
      tracing: { otlp: receiver.url },
    })
    try {
      const socket = new WebSocket(`${live.url.replace('http', 'ws')}/live/feed?access_token=WsQuerySecret42`, {
        headers: { origin: live.url, traceparent: '00-6bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01', tracestate: 'ws=WsStateSecret42', cookie: 'c=WsCookieSecret42' },
      })
      const first = await new Promise<string>((resolve, reject) => {
        socket.once('message', (data: Buffer) => { resolve(data.toString()) })
        socket.once('error', reject)
      })
      expect(first).toBe('hello')
      const closed = new Promise((resolve) => socket.once('close', resolve))
      socket.close()
      await closed
      expect(handshakes).toHaveLength(1)
      expect(handshakes[0]!.traceparent).toBeUndefined()
      expect(handshakes[0]!.tracestate).toBeUndefined()
      await live.app.tracing!.forceFlush()
      const received = Buffer.concat(receiver.bodies).toString()
      // (An upgrade has no request span on this code: @fastify/otel ends a span in onResponse, which a hijacked reply never reaches.)
      for (const secret of ['WsQuerySecret42', 'WsStateSecret42', 'WsCookieSecret42']) expect(received.includes(secret), secret).toBe(false)
    } finally {
      await live.close()
      wss.close()
      await close(server)
    }
  })
})
