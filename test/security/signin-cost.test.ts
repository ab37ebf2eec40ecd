// What an unauthenticated sign-in costs the session store, measured on a real Redis: a login
// request writes nothing; a callback writes one used-state marker of a few dozen bytes (besides the
// session it makes); sign-ins in flight per browser are bounded and the flow cookie stays small.
import { Redis } from 'ioredis'
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest'
import { Browser } from '../helpers/browser.js'
import { oidcClient, reserveBaseUrl, startGateway, type TestGateway } from '../helpers/gateway.js'
import { startOidcProvider, type TestProvider } from '../helpers/oidc.js'
import { startRedis, type TestRedis } from '../helpers/redis.js'
import { startTokenStub, type TokenStub } from '../helpers/token-stub.js'
import { startUpstream, type Upstream } from '../helpers/upstream.js'

let redis: TestRedis
let client: Redis
let op: TestProvider
let stub: TokenStub
let upstream: Upstream
let gateway: TestGateway
let second: TestGateway

beforeAll(async () => {
  redis = await startRedis()
  client = new Redis(redis.url)
  stub = await startTokenStub()
  upstream = await startUpstream()
  const { port, baseUrl } = await reserveBaseUrl()
  op = await startOidcProvider([{ client_id: 'c', client_secret: 's', redirect_uris: [`${baseUrl}/oauth/authorized/demo/`] }])
  const raw = {
    session: { cookieSecure: false },
    store: { type: 'redis', url: redis.url },
    rateLimit: { login: 'off' },
    providers: {
      demo: oidcClient(op.issuer, 'c', 's', 'openid profile'),
      stub: { clientId: 'stub-client', clientSecret: 'stub-secret', authorizeUrl: `${stub.url}/authorize`, tokenUrl: `${stub.url}/token`, scope: 'read' },
    },
    routes: [
      { path: '/app/', upstream: upstream.url, provider: 'demo' },
      { path: '/stub/', upstream: upstream.url, provider: 'stub' },
    ],
  }
  gateway = await startGateway({ ...raw, server: { port, baseUrl } })
  // A second instance on the same Redis, with its own base URL (the flow cookie is what binds).
  second = await startGateway(raw)
})

afterAll(async () => {
  await Promise.all([gateway?.close(), second?.close()])
  await Promise.all([op?.close(), stub?.close(), upstream?.close()])
  client?.disconnect()
  await redis?.release()
})

beforeEach(async () => {
  await client.flushdb()
})

/** Every key in the store with the bytes of its name and value. */
async function storeContents (): Promise<Array<{ key: string, bytes: number }>> {
  const keys = await client.keys('*')
  return await Promise.all(keys.map(async (key) => ({ key, bytes: Buffer.byteLength(key) + await valueBytes(key) })))
}

/** The bytes of a key's value: a string's, or the members of a ranked set (the person index). */
async function valueBytes (key: string): Promise<number> {
  if (await client.type(key) !== 'zset') return await client.strlen(key)
  return (await client.zrange(key, 0, -1)).reduce((sum, member) => sum + Buffer.byteLength(member), 0)
}

async function startLogin (browser: Browser, url = gateway.url, provider = 'stub'): Promise<string> {
  const response = await browser.fetch(`${url}/oauth/login/${provider}/?next=/stub/page`)
  expect(response.status).toBe(302)
  return new URL(response.headers.get('location')!).searchParams.get('state')!
}

function callback (browser: Browser, state: string, url = gateway.url) {
  return browser.fetch(`${url}/oauth/authorized/stub/?${new URLSearchParams({ code: 'c', state })}`, { headers: { accept: 'application/json' } })
}

describe('the cost of an unauthenticated sign-in', () => {
  it('writes nothing to the store for 50 login requests from 50 browsers (DBSIZE stays 0)', async () => {
    for (let i = 0; i < 50; i++) await startLogin(new Browser())
    expect(await client.dbsize()).toBe(0)
    expect(await storeContents()).toEqual([])
  })

  it('keeps working while the store is empty of flows: the callback completes from the cookie and the state alone', async () => {
    const browser = new Browser()
    const state = await startLogin(browser)
    expect(await client.dbsize()).toBe(0)
    const response = await callback(browser, state)
    expect([response.status, response.headers.get('location')]).toEqual([302, '/stub/page'])
    // The PKCE verifier sent at the token endpoint matches the challenge sent to the authorize endpoint.
    expect(new URLSearchParams(stub.requests.at(-1)!.body).get('code_verifier')).toMatch(/^[A-Za-z0-9_-]{43}$/)
  })

  it('writes one used-state marker of under 100 bytes per callback, besides the session it makes', async () => {
    const browser = new Browser()
    const state = await startLogin(browser)
    expect((await callback(browser, state)).status).toBe(302)
    const contents = await storeContents()
    const marker = contents.filter(({ key }) => key.startsWith('gw:used-state:'))
    const sessions = contents.filter(({ key }) => key.startsWith('gw:session:'))
    expect(marker).toHaveLength(1)
    expect(marker[0]!.bytes).toBeLessThan(100)
    expect(sessions).toHaveLength(1)
    expect(contents).toHaveLength(2)
    // The marker lives no longer than the state could (state.ttl, 5 minutes by default).
    const ttl = await client.pttl(marker[0]!.key)
    expect(ttl).toBeGreaterThan(0)
    expect(ttl).toBeLessThanOrEqual(301_000)
  })

  it('writes nothing for a callback whose state is forged or from another browser', async () => {
    const victim = new Browser()
    const state = await startLogin(victim)
    const [header, payload] = state.split('.')
    expect((await callback(victim, `${header}.${payload}.${'A'.repeat(43)}`)).status).toBe(400)
    expect((await callback(new Browser(), state)).status).toBe(400)
    expect(await client.dbsize()).toBe(0)
  })

  it('signs in through a real OIDC provider, with the ID token nonce checked, writing only the session, its person index entry and one marker', async () => {
    const browser = new Browser()
    const response = await browser.navigate(`${gateway.url}/app/`)
    expect(response.status).toBe(200)
    const keys = (await storeContents()).map(({ key }) => key.replace(/:[^:]+$/, ':*')).sort()
    expect(keys).toEqual(['gw:person:*', 'gw:session:*', 'gw:used-state:*'])
  })
})

describe('the sign-in rate limit\'s own cost', () => {
  it('keeps one small counter per client address, expiring with the window, however many logins it counts', async () => {
    const limited = await startGateway({
      store: { type: 'redis', url: redis.url },
      rateLimit: { login: '600/min' },
      providers: { stub: { clientId: 'stub-client', clientSecret: 'stub-secret', authorizeUrl: `${stub.url}/authorize`, tokenUrl: `${stub.url}/token`, scope: 'read' } },
      routes: [],
    })
    try {
      for (let i = 0; i < 50; i++) await startLogin(new Browser(), limited.url)
      const contents = await storeContents()
      expect(contents.map(({ key }) => key)).toEqual(['gw:rate-limit:signin:127.0.0.1'])
      expect(await client.get('gw:rate-limit:signin:127.0.0.1')).toBe('50')
      expect(contents[0]!.bytes).toBeLessThan(64)
      const ttl = await client.pttl('gw:rate-limit:signin:127.0.0.1')
      expect(ttl).toBeGreaterThan(0)
      expect(ttl).toBeLessThanOrEqual(60_000)
    } finally {
      await limited.close()
    }
  })
})

describe('one state, once, on any instance', () => {
  it('refuses a state replayed on a second instance sharing the store with 400 invalid_state', async () => {
    const browser = new Browser()
    const state = await startLogin(browser)
    expect((await callback(browser, state)).status).toBe(302)
    const exchanged = stub.requests.length
    // Without the session its first use made (a browser signed in at that provider goes on to `next`, exchanging nothing).
    browser.cookies.delete('gw_session')
    const replay = await callback(browser, state, second.url)
    expect(replay.status).toBe(400)
    expect(await replay.json()).toMatchObject({ error: 'invalid_state', message: 'This sign-in link has expired or was already used; start again.' })
    expect(stub.requests.length).toBe(exchanged)
  })
})

describe('sign-ins in flight per browser', () => {
  it('keeps the 8 newest: a callback for the 9th-newest state is 400 invalid_state with a plain message', async () => {
    const browser = new Browser()
    const states: string[] = []
    for (let i = 0; i < 9; i++) states.push(await startLogin(browser))
    const oldest = await callback(browser, states[0]!)
    expect(oldest.status).toBe(400)
    expect(await oldest.json()).toMatchObject({ error: 'invalid_state', message: 'This sign-in link has expired or was already used; start again.' })
    expect(await client.dbsize()).toBe(0)
    const newest = await callback(browser, states[8]!)
    expect(newest.status).toBe(302)
    const eighthNewest = await callback(browser, states[1]!)
    expect(eighthNewest.status).toBe(302)
  })

  it('keeps the flow cookie small (under 200 bytes) however many sign-ins a browser starts', async () => {
    const browser = new Browser()
    let largest = 0
    for (let i = 0; i < 30; i++) {
      const response = await browser.fetch(`${gateway.url}/oauth/login/stub/?next=${encodeURIComponent(`/stub/${'x'.repeat(500)}`)}`)
      for (const cookie of response.headers.getSetCookie()) largest = Math.max(largest, Buffer.byteLength(cookie))
    }
    expect(largest).toBeGreaterThan(0)
    expect(largest).toBeLessThan(200)
  })
})
