// Fault: the authorization server's token endpoint hangs, or refuses connections, during sign-in
// and during token refresh. A sign-in answers 502 token_exchange_failed within the provider's
// timeout (hung) or at once (refused); a refresh answers 502 within the same bounds, asks the
// provider once for all the requests waiting on it, on one instance or two sharing the session,
// and keeps the session: when the provider is back, the same cookie works again without signing
// in. The real oidc-provider and a real Redis serve everything; a TCP relay in front of the token
// endpoint is the only stub, and only injects the fault.
import { createServer, connect, type Server, type Socket } from 'node:net'
import type { AddressInfo } from 'node:net'
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest'
import { Browser } from '../helpers/browser.js'
import { ONE_ANSWER_MS } from '../helpers/bounds.js'
import { reserveBaseUrl, startGateway, type TestGateway } from '../helpers/gateway.js'
import { startOidcProvider, type TestProvider } from '../helpers/oidc.js'
import { startRedis, type TestRedis } from '../helpers/redis.js'
import { startUpstream, type SeenRequest, type Upstream } from '../helpers/upstream.js'

/** The provider's timeout (providers.demo.timeout): one token call, at sign-in or refresh. */
const TIMEOUT_MS = 1000
/**
 * A request whose token call hangs answers 502 within the provider's timeout plus one answer's own
 * work; one that waited for a second call (a retry, or another instance's refresh) would take two.
 */
const HUNG_WITHIN_MS = TIMEOUT_MS + ONE_ANSWER_MS
/** A refused token call fails at once: well within the provider's timeout, which it never waits for. */
const REFUSED_WITHIN_MS = TIMEOUT_MS / 2
const CONCURRENT = 20
/** Tokens from sign-in live this long; they count as expired 30 s before that. */
const TOKEN_TTL_S = 60
/** The gateways' clock: the wall clock plus an offset {@link expireTokens} moves (no waiting for expiry). */
const clock = { offset: 0, now: () => Date.now() + clock.offset }

type Mode = 'pass' | 'hang' | 'refuse'

/** A TCP relay to the token endpoint's port: passes through, holds every request unanswered (and counts them), or refuses. */
interface Relay { url: string, mode (next: Mode): Promise<void>, hung: () => number, close: () => Promise<void> }

async function startRelay (target: URL): Promise<Relay> {
  let mode: Mode = 'pass'
  let hung = 0
  const sockets = new Set<Socket>()
  const server: Server = createServer((client) => {
    sockets.add(client)
    client.on('close', () => sockets.delete(client))
    client.on('error', () => {})
    if (mode === 'hang') {
      // Counted by request, not by connection: an HTTP client may open a spare connection.
      client.once('data', () => { hung++ })
      return
    }
    const upstream = connect(Number(target.port), target.hostname)
    sockets.add(upstream)
    upstream.on('close', () => { sockets.delete(upstream); client.destroy() })
    upstream.on('error', () => {})
    client.on('close', () => upstream.destroy())
    client.pipe(upstream).pipe(client)
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  const port = (server.address() as AddressInfo).port
  const dropAll = () => { for (const socket of sockets) socket.destroy() }
  return {
    url: `http://127.0.0.1:${port}`,
    hung: () => hung,
    // Kept-alive connections from before would carry requests past the new fault: drop them.
    async mode (next) {
      dropAll()
      if (mode === 'refuse' && next !== 'refuse') await new Promise<void>((resolve) => server.listen(port, '127.0.0.1', resolve))
      if (next === 'refuse' && mode !== 'refuse') await new Promise<void>((resolve) => server.close(() => resolve()))
      mode = next
    },
    async close () {
      dropAll()
      if (mode !== 'refuse') await new Promise<void>((resolve) => server.close(() => resolve()))
    },
  }
}

/** A browser that times each request it makes. */
class TimedBrowser extends Browser {
  readonly times: Array<{ url: string, ms: number }> = []
  override async fetch (url: string, init: RequestInit = {}): Promise<Response> {
    const start = performance.now()
    const response = await super.fetch(url, init)
    this.times.push({ url, ms: performance.now() - start })
    return response
  }
}

let redis: TestRedis
let op: TestProvider
let relay: Relay
let upstream: Upstream
/** Two instances sharing sessions in Redis; most tests use the first. */
let gateway: TestGateway
let second: TestGateway

beforeAll(async () => {
  redis = await startRedis()
  const addresses = [await reserveBaseUrl(), await reserveBaseUrl()]
  op = await startOidcProvider([{ client_id: 'c', client_secret: 's', redirect_uris: addresses.map(({ baseUrl }) => `${baseUrl}/oauth/authorized/demo/`) }], {
    accessTokenTtl: (_client, grantType) => grantType === 'refresh_token' ? 3600 : TOKEN_TTL_S,
  })
  const discovery = await (await fetch(`${op.issuer}/.well-known/openid-configuration`)).json() as { token_endpoint: string }
  const tokenEndpoint = new URL(discovery.token_endpoint)
  relay = await startRelay(tokenEndpoint)
  upstream = await startUpstream()
  const [first, other] = await Promise.all(addresses.map(async ({ port, baseUrl }) => await startGateway({
    server: { port, baseUrl },
    store: { type: 'redis', url: redis.url },
    providers: {
      demo: { clientId: 'c', clientSecret: 's', issuer: op.issuer, scope: 'openid offline_access', tokenUrl: `${relay.url}${tokenEndpoint.pathname}`, timeout: `${TIMEOUT_MS}ms` },
    },
    routes: [{ path: '/app/', upstream: upstream.url, provider: 'demo' }],
  }, { deps: { clock } })))
  gateway = first!
  second = other!
})

afterAll(async () => {
  await Promise.all([gateway?.close(), second?.close()])
  await relay?.close()
  await upstream?.close()
  await op?.close()
  await redis?.release()
})

afterEach(async () => {
  clock.offset = 0
  await relay.mode('pass')
})

/** Signs in through the real provider (the relay passing), and checks the session works. */
async function signedIn (): Promise<Browser> {
  const browser = new Browser()
  const page = await browser.navigate(`${gateway.url}/app/`)
  expect(page.status).toBe(200)
  return browser
}

/** Moves the gateways' clock on, so the access token counts as expired (the provider's stays: it only has to refresh). */
function expireTokens (): void {
  clock.offset = TOKEN_TTL_S * 1000
}

async function apiCall (browser: Browser, at = gateway): Promise<{ status: number, body: Record<string, unknown>, setCookie: string[], ms: number }> {
  const start = performance.now()
  const response = await browser.fetch(`${at.url}/app/data`, { headers: { accept: 'application/json' } })
  const ms = performance.now() - start
  return { status: response.status, body: await response.json() as Record<string, unknown>, setCookie: response.headers.getSetCookie(), ms }
}

describe('fault: the token endpoint during sign-in', () => {
  it('answers 502 token_exchange_failed within the provider timeout when the token endpoint hangs', async () => {
    await relay.mode('hang')
    const before = relay.hung()
    const browsers = Array.from({ length: 5 }, () => new TimedBrowser())
    const pages = await Promise.all(browsers.map((browser) => browser.navigate(`${gateway.url}/app/`)))
    for (const page of pages) {
      expect(page.status).toBe(502)
      expect(await page.text()).toContain('token_exchange_failed')
    }
    // One code exchange per sign-in, none retried.
    expect(relay.hung() - before).toBe(5)
    const callbacks = browsers.map((browser) => browser.times.find((hop) => hop.url.includes('/oauth/authorized/'))!.ms)
    expect(Math.min(...callbacks)).toBeGreaterThanOrEqual(TIMEOUT_MS * 0.95)
    expect(Math.max(...callbacks)).toBeLessThan(HUNG_WITHIN_MS)
  })

  it('answers 502 token_exchange_failed at once when the token endpoint refuses connections', async () => {
    await relay.mode('refuse')
    const browser = new TimedBrowser()
    const page = await browser.navigate(`${gateway.url}/app/`)
    expect(page.status).toBe(502)
    expect(await page.text()).toContain('token_exchange_failed')
    expect(browser.times.find((hop) => hop.url.includes('/oauth/authorized/'))!.ms).toBeLessThan(REFUSED_WITHIN_MS)
  })
})

describe('fault: the token endpoint during refresh', () => {
  it.each([
    ['hangs', 'hang', { min: TIMEOUT_MS * 0.95, max: HUNG_WITHIN_MS }],
    ['refuses connections', 'refuse', { min: 0, max: REFUSED_WITHIN_MS }],
  ] as const)('when it %s: %#: every waiting request answers 502 within bounds, and the session survives it', async (_name, mode, bounds) => {
    const browser = await signedIn()
    const original = (await (await browser.fetch(`${gateway.url}/app/data`, { headers: { accept: 'application/json' } })).json() as SeenRequest).headers.authorization
    expireTokens()
    await relay.mode(mode)
    const before = relay.hung()

    const answers = await Promise.all(Array.from({ length: CONCURRENT }, () => apiCall(browser)))
    expect(answers.filter((answer) => answer.status === 502 && answer.body.error === 'token_exchange_failed')).toHaveLength(CONCURRENT)
    const times = answers.map((answer) => answer.ms)
    expect(Math.min(...times)).toBeGreaterThanOrEqual(bounds.min)
    expect(Math.max(...times)).toBeLessThan(bounds.max)
    // One refresh for all of them (a hung endpoint is asked once), and no sign-out: no cookie cleared.
    if (mode === 'hang') expect(relay.hung() - before).toBe(1)
    expect(answers.flatMap((answer) => answer.setCookie)).toEqual([])

    // The provider is back: the same session refreshes and goes through, without signing in.
    await relay.mode('pass')
    const after = await apiCall(browser)
    expect(after.status).toBe(200)
    const refreshed = (after.body as unknown as SeenRequest).headers.authorization
    expect(refreshed).toMatch(/^Bearer /)
    expect(refreshed).not.toBe(original)
  })

  it('with two instances sharing the session: the provider is asked once, and both answer 502 within the provider timeout', async () => {
    const browser = await signedIn()
    expireTokens()
    await relay.mode('hang')
    const before = relay.hung()

    const answers = await Promise.all(Array.from({ length: CONCURRENT }, (_, i) => apiCall(browser, i % 2 === 0 ? gateway : second)))
    expect(answers.filter((answer) => answer.status === 502 && answer.body.error === 'token_exchange_failed')).toHaveLength(CONCURRENT)
    // The instance that waited for the other's refresh does not start a second one when it fails.
    expect(relay.hung() - before).toBe(1)
    const times = answers.map((answer) => answer.ms)
    expect(Math.min(...times)).toBeGreaterThanOrEqual(TIMEOUT_MS * 0.95)
    expect(Math.max(...times)).toBeLessThan(HUNG_WITHIN_MS)
    expect(answers.flatMap((answer) => answer.setCookie)).toEqual([])

    await relay.mode('pass')
    expect((await apiCall(browser, second)).status).toBe(200)
    expect((await apiCall(browser, gateway)).status).toBe(200)
  })
})
