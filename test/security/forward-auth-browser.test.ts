// Forward-auth's 200 carries the person's provider access token (and the assertion) for the proxy
// in front to copy onto the application's request. An outside tester's finding: a script on the
// gateway's origin (a page of another route) fetched /oauth/auth/demo/ itself and read the token.
// A browser's own request is refused now: one that carries Fetch Metadata (Sec-Fetch-Site) from a
// peer no server.trustProxy entry admits, or whose trusted proxy names this endpoint as the request
// it guards. The proxy's own requests (which carry the guarded request's Sec-Fetch-* as they came)
// pass as before.
import { describe, expect } from 'vitest'
import { Browser } from '../helpers/browser.js'
import { frontBinary, startNginxInFront, type FrontProxy } from '../helpers/front-proxy.js'
import { oidcClient, type TestGateway } from '../helpers/gateway.js'
import { test as it } from '../helpers/stack.js'

let gateway: TestGateway
let cookie: string
/** docs/deployment.md's nginx block in front of the gateway (TLS left out), where nginx is installed (.ci/run installs it). */
let relay: FrontProxy | undefined

/** What a page's fetch('/oauth/auth/demo/') sends besides the cookie. */
const BROWSER_FETCH = { accept: '*/*', 'sec-fetch-site': 'same-origin', 'sec-fetch-mode': 'cors', 'sec-fetch-dest': 'empty' }

it.beforeAll(async ({ startStack, upstream, op }) => {
  gateway = await startStack({
    server: { trustProxy: ['127.0.0.1'] },
    assertion: {},
    providers: { 'demo-twin': oidcClient(op.issuer, 'c', 's') },
    routes: [
      { path: '/app/', upstream: upstream.url, provider: 'demo' },
      { path: '/pub/', upstream: upstream.url, auth: 'none' },
      { path: '/multi/', upstream: upstream.url, providers: ['demo', 'demo-twin'] },
    ],
    forwardAuth: { hosts: { '127.0.0.1': {} } },
  })
  const browser = new Browser()
  expect((await browser.navigate(`${gateway.url}/app/`, { login: 'alice' })).status).toBe(200)
  cookie = `gw_session=${browser.cookies.get('gw_session')!.value}`
  if (frontBinary('nginx') !== undefined) relay = await startNginxInFront(`127.0.0.1:${gateway.config.server.port}`)
})

it.afterAll(async () => { await relay?.stop() })

/**
 * Forward-auth asked with `headers` from 127.0.0.1, the proxy the gateway trusts (over a socket), or
 * from another address (`remoteAddress`, through inject).
 */
async function ask (remoteAddress: string, headers: Record<string, string>) {
  if (remoteAddress === '127.0.0.1') {
    const response = await fetch(`${gateway.url}/oauth/auth/demo/`, { headers: { cookie, ...headers } })
    const error = response.status === 200 ? undefined : (await response.json() as { error: string }).error
    return { status: response.status, error, token: response.headers.get('authorization') ?? undefined, assertion: response.headers.get('x-gateway-assertion') ?? undefined }
  }
  const response = await gateway.app.inject({ method: 'GET', url: '/oauth/auth/demo/', remoteAddress, headers: { cookie, ...headers } })
  return { status: response.statusCode, error: response.statusCode === 200 ? undefined : (response.json() as { error: string }).error, token: response.headers.authorization, assertion: response.headers['x-gateway-assertion'] }
}

describe('forward-auth asked by a browser itself', () => {
  it.each([
    ['a page\'s fetch, straight to the gateway (no trusted proxy)', '192.0.2.7', BROWSER_FETCH],
    ['a page\'s navigation to it, straight', '192.0.2.7', { 'sec-fetch-site': 'none', 'sec-fetch-mode': 'navigate', 'sec-fetch-dest': 'document' }],
    ['relayed by the trusted proxy, which names this endpoint as the request', '127.0.0.1', { ...BROWSER_FETCH, 'x-forwarded-uri': '/oauth/auth/demo/', 'x-forwarded-host': '127.0.0.1' }],
    ['relayed, the endpoint named in another spelling of its host', '127.0.0.1', { ...BROWSER_FETCH, 'x-forwarded-uri': '/oauth/auth/demo/?x=1', 'x-forwarded-host': '127.0.0.1:80' }],
    ['relayed, the endpoint named with an encoded letter', '127.0.0.1', { ...BROWSER_FETCH, 'x-forwarded-uri': '/oauth/%61uth/demo/', 'x-forwarded-host': '127.0.0.1' }],
    ['relayed, the endpoint named in capitals', '127.0.0.1', { ...BROWSER_FETCH, 'x-forwarded-uri': '/OAuth/Auth/demo/', 'x-forwarded-host': '127.0.0.1' }],
    // A re-reading's findings: a relay that names no original request (deployment.md's nginx), and
    // one whose two names the script made disagree (the original request cannot be told).
    ['relayed by a trusted proxy that names no original request', '127.0.0.1', BROWSER_FETCH],
    ['relayed, the script\'s own X-Original-URI disagreeing with the relay\'s X-Forwarded-Uri', '127.0.0.1', { ...BROWSER_FETCH, 'x-forwarded-uri': '/oauth/auth/demo/', 'x-forwarded-host': '127.0.0.1', 'x-original-uri': '/app/x' }],
    // No browser, but untrusted while forwardAuth.hosts has rules: which host it asks for cannot be told.
    ['a caller that is no browser (no Fetch Metadata), untrusted', '192.0.2.7', { accept: '*/*' }],
  ])('%s: 403, no token, no assertion', async (_case, from, headers) => {
    expect(await ask(from, headers)).toEqual({ status: 403, error: 'forbidden', token: undefined, assertion: undefined })
  })

  it.each([
    ['the trusted proxy, guarding a page load (the browser\'s Sec-Fetch-* passed on)', '127.0.0.1', { 'sec-fetch-site': 'none', 'sec-fetch-mode': 'navigate', 'x-forwarded-uri': '/app/x', 'x-forwarded-host': '127.0.0.1' }],
    ['the trusted proxy, guarding an application\'s own fetch', '127.0.0.1', { ...BROWSER_FETCH, 'x-forwarded-uri': '/app/api', 'x-forwarded-host': '127.0.0.1' }],
    // A re-reading's finding: an application on another host whose own pages are under /oauth/auth/.
    ['the trusted proxy, guarding another host\'s own /oauth/auth/ page', '127.0.0.1', { 'sec-fetch-site': 'none', 'sec-fetch-mode': 'navigate', 'x-forwarded-uri': '/oauth/auth/settings/', 'x-forwarded-host': 'app.example.com' }],
  ])('%s: 200 with the token', async (_case, from, headers) => {
    const answer = await ask(from, headers)
    expect(answer.status).toBe(200)
    expect(answer.token).toMatch(/^Bearer \S{20,}$/)
  })
})

describe('through docs/deployment.md\'s nginx (a relay of every request to the gateway)', () => {
  // Re-readings' findings: at a long address the sign-in's redirects outgrew nginx's default 4k
  // header buffer (nginx's 502): the route's, whose `next` is the address encoded (up to three
  // times its length: a query of `&`), the chooser's of a route with several providers, and the
  // sign-in's to the provider, whose state seals `next`. The longest `next` the gateway keeps, and
  // one past it (sent to /oauth/ by the sign-in and the chooser alike: no longer named at all).
  it.each([
    ['a route of one provider, the longest next kept', '/app/', 2048, true],
    ['a route of one provider, a next past what is kept', '/app/', 6000, false],
    ['a route of several providers, the longest next kept', '/multi/', 2048, true],
    ['a route of several providers, a next past what is kept', '/multi/', 6000, false],
  ])('a browser at a long address is sent to sign in and on: %s', async (_case, prefix, length, kept) => {
    if (relay === undefined) return expect(frontBinary('nginx')).toBeUndefined()
    const target = `${prefix}x?q=${'&'.repeat(length - `${prefix}x?q=`.length)}`
    const browser = new Browser()
    const toSignIn = await browser.fetch(`${relay.url}${target}`)
    expect(toSignIn.status).toBe(302)
    const signIn = toSignIn.headers.get('location')!
    expect(signIn.length).toBeLessThan(16 * 1024)
    expect(new URL(signIn).searchParams.get('next')).toBe(kept ? target : '/oauth/')
    const onward = await browser.fetch(signIn.replace(gateway.url, relay.url))
    // The sign-in's redirect to the provider; the chooser's page (or, with no next of a route, its redirect).
    if (prefix === '/app/') expect([onward.status, onward.headers.get('location')]).toEqual([302, expect.stringMatching(/\/auth\?/)])
    else expect(onward.status).toBe(kept ? 200 : 302)
  })

  // A re-reading's finding: that relay named no original request, so the page's fetch was answered.
  it.each([
    ['a page\'s fetch', BROWSER_FETCH],
    ['a page\'s fetch naming an original request of its own', { ...BROWSER_FETCH, 'x-forwarded-uri': '/app/x' }],
    ['a script\'s request without Fetch Metadata', { accept: '*/*' }],
  ])('%s: no token, no assertion (the block does not pass /oauth/auth/ on)', async (_case, headers) => {
    if (relay === undefined) return expect(frontBinary('nginx')).toBeUndefined()
    const response = await fetch(`${relay.url}/oauth/auth/demo/`, { headers: { cookie, ...headers } })
    await response.arrayBuffer()
    expect([response.status, response.headers.get('authorization'), response.headers.get('x-gateway-assertion')]).toEqual([404, null, null])
  })
})
