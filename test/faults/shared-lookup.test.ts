// Fault: a name whose lookup hangs, asked for by many requests at once and one after another.
// node:dns's lookup (getaddrinfo) holds one of libuv's four thread-pool threads until the resolver
// answers: one hung lookup per request left every other lookup, file read, pbkdf2/scrypt and zlib
// call of the process waiting (a public route answered 504 after its timeout, behind six sign-ins
// whose token endpoint's name hung). The gateway runs one lookup per name at a time for its
// connections to providers and upstreams, shared by every caller meanwhile, so that a hanging name
// costs one thread; each caller still ends at its own timeout, and once the lookup ends (either
// way) the next connection looks the name up again. A lookup that never ends (a getaddrinfo stuck
// in an NSS module) is shared only for as long as its callers wait for it (their connect timeout):
// after that the next connection starts a fresh one, so a name that resolves again works again, and
// a name that stays stuck costs one more thread per such period, not one per connection.
// The real oidc-provider and upstream serve `.localhost` names (loopback, RFC 6761); the only stub
// is node:dns's `lookup`, which counts the lookups it is asked for and holds the hung ones
// (test/helpers/dns-stub.ts): a held lookup is a thread-pool thread taken.
import { setTimeout as sleep } from 'node:timers/promises'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { Browser, signIn as signInAt } from '../helpers/browser.js'
import { DnsStub, startNamedStack, TOKEN_HOST } from '../helpers/dns-stub.js'
import type { TestGateway } from '../helpers/gateway.js'
import type { TestProvider } from '../helpers/oidc.js'
import type { Upstream } from '../helpers/upstream.js'

/** The provider's `timeout` and the named upstream's route `timeout` in this test. */
const TIMEOUT_MS = 500
/** Every answer comes within the timeout and as much again. */
const BOUND_MS = 2 * TIMEOUT_MS
/** Tokens from sign-in live this long (they count as expired 30 s before). */
const TOKEN_TTL_S = 60
/** Requests at once. */
const CONCURRENT = 3
/** The gateway's clock: the wall clock plus an offset the refresh test moves (no waiting for expiry). */
const clock = { offset: 0, now: () => Date.now() + clock.offset }

/** An upstream's host (the token endpoint's is TOKEN_HOST). */
const UPSTREAM_HOST = 'app.localhost'
/** An upstream's host whose lookups never return. */
const STUCK_HOST = 'stuck.localhost'

const dns = new DnsStub()
let op: TestProvider
let upstream: Upstream
let gateway: TestGateway

beforeAll(async () => {
  dns.install();
  ({ op, upstream, gateway } = await startNamedStack(TIMEOUT_MS, TOKEN_TTL_S, (ports) => ({
    routes: [
      { path: '/named/', upstream: `http://${UPSTREAM_HOST}:${ports.upstream}`, auth: 'none', timeout: `${TIMEOUT_MS}ms` },
      { path: '/stuck/', upstream: `http://${STUCK_HOST}:${ports.upstream}`, auth: 'none', timeout: `${TIMEOUT_MS}ms` },
    ],
  }), { clock }))
})

afterAll(async () => {
  dns.restore()
  await gateway?.close()
  await upstream?.close()
  await op?.close()
})

interface Timed { status: number, body: string, ms: number }

async function timed (work: () => Promise<Response>): Promise<Timed> {
  const start = performance.now()
  const response = await work()
  const ms = performance.now() - start
  return { status: response.status, body: await response.text(), ms }
}

function expectAnswered (answer: Timed, status: number, error: string): void {
  expect(answer.status).toBe(status)
  expect(answer.body).toContain(error)
  expect(answer.ms).toBeGreaterThanOrEqual(TIMEOUT_MS * 0.95)
  expect(answer.ms).toBeLessThan(BOUND_MS)
}

/** A browser that times the gateway's callback (where the code is exchanged). */
class TimedBrowser extends Browser {
  callbackMs = 0
  override async fetch (url: string, init: RequestInit = {}): Promise<Response> {
    const start = performance.now()
    const response = await super.fetch(url, init)
    if (url.includes('/oauth/authorized/')) this.callbackMs = performance.now() - start
    return response
  }
}

async function signIn (): Promise<Browser> {
  return (await signInAt(`${gateway.url}/app/`)).browser
}

/** A sign-in, timed at its callback: the code exchange asks the token endpoint. */
async function timedSignIn (): Promise<Timed> {
  const browser = new TimedBrowser()
  const page = await browser.navigate(`${gateway.url}/app/`)
  return { status: page.status, body: await page.text(), ms: browser.callbackMs }
}

/** A request whose expired access token is refreshed at the token endpoint. */
async function timedRefresh (browser: Browser): Promise<Timed> {
  return await timed(async () => await browser.fetch(`${gateway.url}/app/data`, { headers: { accept: 'application/json' } }))
}

describe('fault: a name lookup that hangs under many requests is one lookup, not one per request', () => {
  it('sign-ins and refreshes share one hung lookup of the token endpoint\'s name, each answering 502 within the provider timeout; once it ends the next call looks the name up again', async () => {
    const sessions = await Promise.all(Array.from({ length: CONCURRENT }, signIn))
    // The access tokens count as expired: the gateway's clock moves on.
    clock.offset = TOKEN_TTL_S * 1000
    try {
      dns.hang(TOKEN_HOST)
      op.dropConnections()
      const before = dns.lookups(TOKEN_HOST)

      const concurrent = await Promise.all([...sessions.map(timedRefresh), ...Array.from({ length: CONCURRENT }, timedSignIn)])
      for (const answer of concurrent) expectAnswered(answer, 502, 'token_exchange_failed')
      expect(dns.lookups(TOKEN_HOST) - before).toBe(1)
      expect(dns.pending(TOKEN_HOST)).toBe(1)

      expectAnswered(await timedRefresh(sessions[0]!), 502, 'token_exchange_failed')
      expectAnswered(await timedSignIn(), 502, 'token_exchange_failed')
      expect(dns.lookups(TOKEN_HOST) - before).toBe(1)

      // The resolver gives up; the name still hangs: the next call asks again, it is not told the old answer.
      dns.fail(TOKEN_HOST)
      await new Promise((resolve) => setImmediate(resolve))
      expectAnswered(await timedRefresh(sessions[1]!), 502, 'token_exchange_failed')
      expect(dns.lookups(TOKEN_HOST) - before).toBe(2)
      expect(dns.pending(TOKEN_HOST)).toBe(1)

      dns.resolve(TOKEN_HOST)
      for (const browser of sessions) expect((await timedRefresh(browser)).status).toBe(200)
    } finally {
      clock.offset = 0
    }
  })

  it('requests to an upstream whose name hangs share one lookup, each answering 504 gateway_timeout within the route timeout; once it ends the next request looks the name up again', async () => {
    dns.hang(UPSTREAM_HOST)
    const before = dns.lookups(UPSTREAM_HOST)
    const get = async (i: number) => await timed(async () => await fetch(`${gateway.url}/named/data/${i}`, { headers: { accept: 'application/json' } }))

    const from = gateway.logs.length
    const concurrent = await Promise.all(Array.from({ length: 2 * CONCURRENT }, async (_, i) => await get(i)))
    for (const answer of concurrent) expectAnswered(answer, 504, 'gateway_timeout')
    // Each line says the application never had the request (a tester's finding: it read as a slow application's).
    const lines = gateway.logs.slice(from).map((line) => JSON.parse(line) as Record<string, unknown>).filter((line) => line.msg === 'upstream timed out')
    expect(lines).toHaveLength(2 * CONCURRENT)
    for (const line of lines) expect(line).toMatchObject({ errno: 'UND_ERR_CONNECT_TIMEOUT', reason: expect.stringMatching(/^No connection to the upstream within 500 ms: its name did not resolve/) })
    expect(dns.lookups(UPSTREAM_HOST) - before).toBe(1)
    expect(dns.pending(UPSTREAM_HOST)).toBe(1)

    dns.fail(UPSTREAM_HOST)
    await new Promise((resolve) => setImmediate(resolve))
    expectAnswered(await get(2), 504, 'gateway_timeout')
    expect(dns.lookups(UPSTREAM_HOST) - before).toBe(2)
    expect(dns.pending(UPSTREAM_HOST)).toBe(1)

    dns.resolve(UPSTREAM_HOST)
    expect((await get(3)).status).toBe(200)
  })

  it('a lookup of an upstream name that never returns pins nothing: after the route timeout the next requests share one fresh lookup, and once the name resolves again they are answered 200 though the old lookups never return', async () => {
    dns.hang(STUCK_HOST)
    const before = dns.lookups(STUCK_HOST)
    const get = async (i: number) => await timed(async () => await fetch(`${gateway.url}/stuck/data/${i}`, { headers: { accept: 'application/json' } }))
    const together = async () => await Promise.all(Array.from({ length: CONCURRENT }, async (_, i) => await get(i)))

    for (const answer of await together()) expectAnswered(answer, 504, 'gateway_timeout')
    expect(dns.lookups(STUCK_HOST) - before).toBe(1)
    // The lookup began before those answers; the route's timeout (its connect timeout, the longest
    // any of its connections waits for the lookup) has passed since once as much again has.
    await sleep(TIMEOUT_MS)

    // Still stuck: one more lookup for all the requests of this period, not one per request.
    for (const answer of await together()) expectAnswered(answer, 504, 'gateway_timeout')
    expect(dns.lookups(STUCK_HOST) - before).toBe(2)
    expect(dns.pending(STUCK_HOST)).toBe(2)
    await sleep(TIMEOUT_MS)

    // The name resolves again; the two lookups under way never return.
    dns.heal(STUCK_HOST)
    expect((await get(0)).status).toBe(200)
    expect(dns.lookups(STUCK_HOST) - before).toBe(3)
    expect(dns.pending(STUCK_HOST)).toBe(2)

    // The stuck lookups end at last, with an error: their callers gave up long ago, and the name
    // stays resolved for the next requests.
    dns.fail(STUCK_HOST)
    await new Promise((resolve) => setImmediate(resolve))
    expect(dns.pending(STUCK_HOST)).toBe(0)
    for (const answer of await together()) expect(answer.status).toBe(200)
  })
})
