// The sign-in endpoints' budget per client address (rateLimit.login): /oauth/login/* and
// /oauth/authorized/* share it, instances on one Redis share it, the 429 is the gateway's own
// `rate_limited` error with Retry-After, `off` turns it off, and a Redis outage does not turn
// sign-ins into errors. No test waits for a window to pass.
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { stringify } from 'yaml'
import { ConfigError, parseConfig } from '../../src/config/config.js'
import { Browser } from '../helpers/browser.js'
import { startGateway, type TestGateway } from '../helpers/gateway.js'
import { startRedis, type TestRedis } from '../helpers/redis.js'
import { startUpstream, type Upstream } from '../helpers/upstream.js'

let redis: TestRedis
let upstream: Upstream
let one: TestGateway
let two: TestGateway

const stubProvider = { clientId: 'c', clientSecret: 's', authorizeUrl: 'http://127.0.0.1:9/authorize', tokenUrl: 'http://127.0.0.1:9/token', scope: 'read' }

function gatewayConfig (store: Record<string, unknown>, rateLimit: Record<string, unknown>, trustProxy = true): Record<string, unknown> {
  return {
    server: { trustProxy },
    store,
    rateLimit,
    providers: { stub: stubProvider },
    routes: [{ path: '/app/', upstream: upstream.url, provider: 'stub' }, { path: '/open/', upstream: upstream.url, auth: 'none' }],
  }
}

beforeAll(async () => {
  redis = await startRedis()
  upstream = await startUpstream()
  const raw = gatewayConfig({ type: 'redis', url: redis.url }, { login: '5/min' })
  one = await startGateway(raw)
  two = await startGateway(raw)
})

afterAll(async () => {
  await Promise.all([one?.close(), two?.close()])
  await upstream?.close()
  await redis?.release()
})

let addresses = 0
/** The address the port rows spell with ports. */
let newAddressText = ''

/** A client address of its own (the gateways trust X-Forwarded-For), so tests do not share budgets. */
function newAddress (): string {
  addresses++
  return `203.0.113.${addresses}`
}

function login (gateway: TestGateway, address: string | undefined, accept = 'application/json') {
  return fetch(`${gateway.url}/oauth/login/stub/?next=/app/`, { headers: { accept, ...(address ? { 'x-forwarded-for': address } : {}) }, redirect: 'manual' })
}

function callback (gateway: TestGateway, address: string) {
  return fetch(`${gateway.url}/oauth/authorized/stub/?code=c&state=garbage`, { headers: { accept: 'application/json', 'x-forwarded-for': address }, redirect: 'manual' })
}

async function expectLimited (response: Response): Promise<void> {
  expect(response.status).toBe(429)
  const retryAfter = Number(response.headers.get('retry-after'))
  expect(Number.isInteger(retryAfter)).toBe(true)
  expect(retryAfter).toBeGreaterThan(0)
  expect(retryAfter).toBeLessThanOrEqual(60)
}

describe('rateLimit.login: a budget per client address over the sign-in endpoints', () => {
  it('answers the 6th login of a minute with 429 rate_limited and Retry-After, as JSON', async () => {
    const address = newAddress()
    for (let i = 0; i < 5; i++) expect((await login(one, address)).status).toBe(302)
    const limited = await login(one, address)
    await expectLimited(limited)
    expect(limited.headers.get('content-type')).toMatch(/^application\/json/)
    const body = await limited.json() as { error: string, message: string }
    expect(body.error).toBe('rate_limited')
    expect(body.message).toMatch(/^Too many sign-in requests from your address\. Try again in \d+ seconds?\.$/)
  })

  it('answers a browser over the budget with the HTML error page, 429 and Retry-After', async () => {
    const address = newAddress()
    for (let i = 0; i < 5; i++) await login(one, address, 'text/html')
    const limited = await login(one, address, 'text/html')
    await expectLimited(limited)
    expect(limited.headers.get('content-type')).toMatch(/^text\/html/)
    const page = await limited.text()
    expect(page).toContain('<code>rate_limited</code>')
    expect(page).toContain('Too many sign-in attempts')
  })

  it('charges /oauth/login/ and /oauth/authorized/ to one budget', async () => {
    const address = newAddress()
    for (let i = 0; i < 3; i++) expect((await login(one, address)).status).toBe(302)
    for (let i = 0; i < 2; i++) expect((await callback(one, address)).status).toBe(400)
    await expectLimited(await callback(one, address))
    await expectLimited(await login(one, address))
  })

  it('shares the budget between two instances on one Redis', async () => {
    const address = newAddress()
    for (let i = 0; i < 3; i++) expect((await login(one, address)).status).toBe(302)
    for (let i = 0; i < 2; i++) expect((await login(two, address)).status).toBe(302)
    await expectLimited(await login(one, address))
    await expectLimited(await login(two, address))
  })

  it('counts each client address on its own', async () => {
    const busy = newAddress()
    for (let i = 0; i < 6; i++) await login(one, busy)
    await expectLimited(await login(one, busy))
    expect((await login(one, newAddress())).status).toBe(302)
  })

  // Tester's finding (round 4): a proxy that writes the client's port (Azure Application Gateway)
  // made each new connection a new budget.
  it.each([
    ['an IPv4 client', (port: number) => `${newAddressText}:${port}`],
    ['an IPv6 client, in brackets', (port: number) => `[2001:db8:7::${port.toString(16)}]:${port}`],
  ])('counts %s its proxy names with a new port on each connection as one client', async (_, spelled) => {
    newAddressText = newAddress()
    for (let port = 40001; port <= 40006; port++) await login(one, spelled(port))
    await expectLimited(await login(one, spelled(40007)))
  })

  // An outside tester's finding: "Use another account" begins a sign-in too, and was not charged.
  it('charges "Use another account" (POST /oauth/logout/?switch=) to the budget, refused before anything ends', async () => {
    const address = newAddress()
    const switchAccount = () => fetch(`${one.url}/oauth/logout/?switch=stub&next=/app/`, { method: 'POST', headers: { accept: 'application/json', 'x-forwarded-for': address }, redirect: 'manual' })
    for (let i = 0; i < 4; i++) expect((await login(one, address)).status).toBe(302)
    const started = await switchAccount()
    expect(started.status).toBe(302)
    expect(started.headers.get('location')).toMatch(/^http:\/\/127\.0\.0\.1:9\/authorize\?/)
    await expectLimited(await switchAccount())
    await expectLimited(await login(one, address))
    // A plain sign-out is no sign-in: never charged, never refused.
    expect((await fetch(`${one.url}/oauth/logout/?next=/app/`, { method: 'POST', headers: { 'x-forwarded-for': address }, redirect: 'manual' })).status).toBe(302)
  })

  it('leaves every other endpoint alone for an address over the budget', async () => {
    const address = newAddress()
    for (let i = 0; i < 6; i++) await login(one, address)
    const headers = { accept: 'application/json', 'x-forwarded-for': address }
    expect((await fetch(`${one.url}/open/x`, { headers })).status).toBe(200)
    expect((await fetch(`${one.url}/app/x`, { headers })).status).toBe(401)
    expect((await fetch(`${one.url}/oauth/userinfo/`, { headers })).status).toBe(401)
    expect((await fetch(`${one.url}/healthz`, { headers })).status).toBe(200)
  })
})

describe('rateLimit.login in other setups', () => {
  it('counts in memory with the memory store', async () => {
    const gateway = await startGateway(gatewayConfig({ type: 'memory' }, { login: '5/min' }))
    try {
      for (let i = 0; i < 5; i++) expect((await login(gateway, undefined)).status).toBe(302)
      await expectLimited(await login(gateway, undefined))
    } finally {
      await gateway.close()
    }
  })

  it('keys on the socket address when server.trustProxy is off (X-Forwarded-For does not buy a new budget)', async () => {
    const gateway = await startGateway(gatewayConfig({ type: 'memory' }, { login: '5/min' }, false))
    try {
      for (let i = 0; i < 5; i++) expect((await login(gateway, newAddress())).status).toBe(302)
      await expectLimited(await login(gateway, newAddress()))
    } finally {
      await gateway.close()
    }
  })

  it('does not limit at all with login: off', async () => {
    const gateway = await startGateway(gatewayConfig({ type: 'memory' }, { login: 'off' }))
    try {
      for (let i = 0; i < 30; i++) expect((await login(gateway, undefined)).status).toBe(302)
    } finally {
      await gateway.close()
    }
  })

  it('lets sign-ins start while Redis is down instead of failing them', async () => {
    const own = await startRedis()
    const gateway = await startGateway(gatewayConfig({ type: 'redis', url: own.url }, { login: '5/min' }))
    try {
      expect((await login(gateway, undefined)).status).toBe(302)
      await own.stop()
      for (let i = 0; i < 8; i++) expect((await login(gateway, undefined)).status).toBe(302)
      // The callback needs the store (the state is marked used there): 503, never 500 or 429.
      const browser = new Browser()
      const started = await browser.fetch(`${gateway.url}/oauth/login/stub/`)
      const state = new URL(started.headers.get('location')!).searchParams.get('state')!
      const response = await browser.fetch(`${gateway.url}/oauth/authorized/stub/?code=c&state=${state}`, { headers: { accept: 'application/json' } })
      expect(response.status).toBe(503)
      expect(await response.json()).toMatchObject({ error: 'session_store_unavailable' })
    } finally {
      await gateway.close()
    }
  })
})

describe('rateLimit config', () => {
  const parse = (rateLimit: unknown) => parseConfig(stringify({ rateLimit }), {}, 'test.yaml').rateLimit

  it.each([
    [undefined, { max: 600, windowMs: 60_000 }],
    [{}, { max: 600, windowMs: 60_000 }],
    [{ login: '600/min' }, { max: 600, windowMs: 60_000 }],
    [{ login: '10/s' }, { max: 10, windowMs: 1000 }],
    [{ login: '5000/h' }, { max: 5000, windowMs: 3_600_000 }],
    [{ login: ' 20 / minute ' }, { max: 20, windowMs: 60_000 }],
    [{ login: 'off' }, undefined],
    [{ login: false }, undefined],
  ])('reads %j as %j', (raw, expected) => {
    expect(parse(raw)).toEqual({ login: expected })
  })

  it.each([
    [{ login: 'lots' }, 'rateLimit.login: must be a rate such as 600/min, 10/s or 5000/h (at least 1), or off, got "lots" (line 2)'],
    [{ login: '0/min' }, 'rateLimit.login: must be a rate such as 600/min, 10/s or 5000/h (at least 1), or off, got "0/min" (line 2)'],
    [{ login: '5/day' }, 'rateLimit.login: must be a rate such as 600/min, 10/s or 5000/h (at least 1), or off, got "5/day" (line 2)'],
    [{ login: 600 }, 'rateLimit.login: must be a rate such as 600/min, 10/s or 5000/h (at least 1), or off, got 600 (line 2)'],
    [{ logins: '5/min' }, 'rateLimit.logins: unknown key; did you mean `login`? (line 2)'],
  ])('refuses %j', (raw, message) => {
    expect(() => parse(raw)).toThrow(ConfigError)
    try {
      parse(raw)
    } catch (error) {
      expect((error as ConfigError).issues).toEqual([message])
    }
  })
})
