// Fault: the provider's host name does not resolve: the lookup hangs (a DNS server that never
// answers). Every provider call still ends within the provider's `timeout`, lookup and connect
// included: the code exchange at sign-in and the refresh answer 502 token_exchange_failed,
// discovery and the JWKS 502 provider_unavailable. undici acts on an abort only once connected, so
// these used to wait for its 10 s connect timeout (discovery and the JWKS for their own 5 s).
// The real oidc-provider serves everything under `.localhost` names (loopback, RFC 6761); the only
// stub is the name lookup (node:dns's `lookup`, which every socket of this process asks): it answers
// 127.0.0.1 for those names, or holds the lookups of the ones a test makes hang (test/helpers/dns-stub.ts)
// until the test ends.
import { randomUUID } from 'node:crypto'
import { generateKeyPair, SignJWT } from 'jose'
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest'
import { BACKCHANNEL_LOGOUT_EVENT } from '../../src/oauth/backchannel.js'
import { JWKS_COOLDOWN_MS } from '../../src/oauth/issuer-keys.js'
import { CONNECT_TIMEOUT_MS } from '../../src/oauth/provider-http.js'
import { Browser, signIn as signInAt } from '../helpers/browser.js'
import { DnsStub, ISSUER_HOST, startNamedStack, TOKEN_HOST } from '../helpers/dns-stub.js'
import type { TestGateway } from '../helpers/gateway.js'
import type { TestProvider } from '../helpers/oidc.js'
import type { Upstream } from '../helpers/upstream.js'

/** The providers' `timeout` in this test. */
const TIMEOUT_MS = 500
/**
 * What ended a call: at or after the provider's timeout, and before the connect timeout (10 s,
 * name lookup included), the only other timer that could have ended it, so it was the provider's.
 * Not the timeout and as much again: on a busy machine one answer took 1.55 s, and the test is
 * about which timer ends the call, not about the machine's latency.
 */
const BOUND_MS = CONNECT_TIMEOUT_MS
/** Tokens from sign-in live this long (they count as expired 30 s before). */
const TOKEN_TTL_S = 60
/** The gateway's clock: the wall clock plus an offset the refresh test moves (no waiting for expiry). */
const clock = { offset: 0, now: () => Date.now() + clock.offset }

/** A provider's host that never resolves (the issuer's and the token endpoint's: ISSUER_HOST, TOKEN_HOST). */
const UNRESOLVED_HOST = 'unresolved.localhost'

const dns = new DnsStub()

let op: TestProvider
let upstream: Upstream
let gateway: TestGateway

beforeAll(async () => {
  dns.install().hang(UNRESOLVED_HOST);
  ({ op, upstream, gateway } = await startNamedStack(TIMEOUT_MS, TOKEN_TTL_S, (ports) => ({
    providers: { unresolved: { clientId: 'c', clientSecret: 's', issuer: `http://${UNRESOLVED_HOST}:${ports.op}`, scope: 'openid', timeout: `${TIMEOUT_MS}ms` } },
    routes: [{ path: '/other/', upstream: `http://127.0.0.1:${ports.upstream}`, provider: 'unresolved' }],
  }), { clock }))
})

afterEach(() => {
  clock.offset = 0
  // The lookups a test left hanging end, as a resolver's do: the next test's calls look the names up again.
  dns.resolve(ISSUER_HOST)
  dns.resolve(TOKEN_HOST)
})

afterAll(async () => {
  dns.restore()
  await gateway?.close()
  await upstream?.close()
  await op?.close()
})

/** Makes `host`'s lookups hang from now on; open connections are dropped, so the next call looks it up. */
function hang (host: string): number {
  dns.hang(host)
  op.dropConnections()
  return dns.lookups(host)
}

async function timed<T> (work: () => Promise<T>): Promise<{ result: T, ms: number }> {
  const start = performance.now()
  const result = await work()
  return { result, ms: performance.now() - start }
}

function expectWithinTimeout (ms: number): void {
  expect(ms).toBeGreaterThanOrEqual(TIMEOUT_MS * 0.95)
  expect(ms).toBeLessThan(BOUND_MS)
}

/** A browser that times the gateway's callback (where the code is exchanged). */
class TimedBrowser extends Browser {
  callbackMs = 0
  override async fetch (url: string, init: RequestInit = {}): Promise<Response> {
    const { result, ms } = await timed(async () => await super.fetch(url, init))
    if (url.includes('/oauth/authorized/')) this.callbackMs = ms
    return result
  }
}

async function signIn (): Promise<Browser> {
  return (await signInAt(`${gateway.url}/app/`)).browser
}

describe('fault: the provider\'s name lookup hangs', () => {
  it('discovery: a sign-in answers 502 provider_unavailable within the provider timeout', async () => {
    const { result: page, ms } = await timed(async () => await fetch(`${gateway.url}/oauth/login/unresolved/`, { redirect: 'manual' }))
    expect(page.status).toBe(502)
    expect(await page.text()).toContain('provider_unavailable')
    expect(ms).toBeLessThan(BOUND_MS)
    expect(dns.lookups(UNRESOLVED_HOST)).toBeGreaterThan(0)
  })

  it('the JWKS: a back-channel logout answers 502 provider_unavailable within the provider timeout', async () => {
    // Discovery done (the sign-in redirects to the provider), the JWKS not fetched yet.
    expect((await fetch(`${gateway.url}/oauth/login/demo/`, { redirect: 'manual' })).status).toBe(302)
    const before = hang(ISSUER_HOST)
    const token = await new SignJWT({ sid: randomUUID(), events: { [BACKCHANNEL_LOGOUT_EVENT]: {} }, jti: randomUUID() })
      .setProtectedHeader({ alg: 'RS256', kid: 'k', typ: 'logout+jwt' })
      .setIssuer(op.issuer).setAudience('c').setIssuedAt()
      .sign((await generateKeyPair('RS256')).privateKey)
    const { result: answer, ms } = await timed(async () => await fetch(`${gateway.url}/oauth/backchannel-logout/demo/`, {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      body: new URLSearchParams({ logout_token: token }),
    }))
    expect(answer.status).toBe(502)
    expect(await answer.json()).toMatchObject({ error: 'provider_unavailable' })
    expectWithinTimeout(ms)
    expect(dns.lookups(ISSUER_HOST)).toBeGreaterThan(before)
  })

  it('the code exchange: a sign-in answers 502 token_exchange_failed within the provider timeout', async () => {
    const browser = new TimedBrowser()
    // The provider's pages resolve; the token endpoint's name does not.
    const before = hang(TOKEN_HOST)
    const page = await browser.navigate(`${gateway.url}/app/`)
    expect(page.status).toBe(502)
    expect(await page.text()).toContain('token_exchange_failed')
    expectWithinTimeout(browser.callbackMs)
    expect(dns.lookups(TOKEN_HOST)).toBeGreaterThan(before)
  })

  it('the refresh: every waiting request answers 502 token_exchange_failed within the provider timeout, and the session survives', async () => {
    // The JWKS read the test above made failed (its lookup hung): the next may begin 5 s after it.
    clock.offset = JWKS_COOLDOWN_MS
    const browser = await signIn()
    // The access token counts as expired: the gateway's clock moves on.
    clock.offset += TOKEN_TTL_S * 1000
    const before = hang(TOKEN_HOST)
    const call = async () => await browser.fetch(`${gateway.url}/app/data`, { headers: { accept: 'application/json' } })

    const answers = await Promise.all(Array.from({ length: 5 }, async () => await timed(call)))
    for (const { result, ms } of answers) {
      expect(result.status).toBe(502)
      expect(await result.json()).toMatchObject({ error: 'token_exchange_failed' })
      expect(result.headers.getSetCookie()).toEqual([])
      expectWithinTimeout(ms)
    }
    expect(dns.lookups(TOKEN_HOST)).toBeGreaterThan(before)

    dns.resolve(TOKEN_HOST)
    expect((await call()).status).toBe(200)
  })
})
