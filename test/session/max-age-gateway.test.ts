// session.maxAge through a real gateway, Redis and oidc-provider, time moved on the gateway's
// injected clock (never waited on): the store's expiry of a session never reaches past its maxAge,
// and past it the session is no session anywhere (proxy, forward-auth, /oauth/, /oauth/userinfo/):
// browsers are sent to sign in, API clients get 401, and the session is ended (gone from Redis,
// heard by Sessions.onEnded) though it was used all along.
import { Redis } from 'ioredis'
import { afterAll, describe, expect } from 'vitest'
import { Browser } from '../helpers/browser.js'
import { oidcClient, type TestGateway } from '../helpers/gateway.js'
import { test as it } from '../helpers/stack.js'
import type { TestProvider } from '../helpers/oidc.js'
import type { TestRedis } from '../helpers/redis.js'
import { startUpstream, type Upstream } from '../helpers/upstream.js'

const MINUTE = 60_000
const MAX_AGE = 5 * MINUTE

let redis: TestRedis
let client: Redis
let upstream: Upstream
let op: TestProvider
let gateway: TestGateway
const clock = { ms: Date.now(), now (): number { return this.ms } }
const ended: string[] = []

it.beforeAll(async ({ startStack, op: workerOp, redis: fileRedis }) => {
  redis = fileRedis
  op = workerOp
  client = new Redis(redis.url)
  upstream = await startUpstream()
  gateway = await startStack({
    server: { trustProxy: ['127.0.0.1'] },
    session: { ttl: '8h', maxAge: '5m' },
    store: { type: 'redis', url: redis.url, keyPrefix: 'maxage:' },
    providers: { demo: oidcClient(op.issuer, 'c', 's', 'openid email') },
    routes: [{ path: '/app/', upstream: upstream.url, provider: 'demo' }],
  }, { deps: { clock } })
  gateway.app.sessions.onEnded((id) => ended.push(id))
}, 60_000)

afterAll(async () => {
  await gateway?.close()
  client?.disconnect()
  await upstream?.close()
})

/** The status (and Location) of an API client's or a browser's GET of `path` with `cookie`. */
async function get (path: string, cookie: string, accept = 'application/json'): Promise<{ status: number, location: string | null, body: string }> {
  const response = await fetch(`${gateway.url}${path}`, { redirect: 'manual', headers: { accept, cookie, 'x-forwarded-uri': '/app/x', 'x-forwarded-host': new URL(gateway.url).host } })
  return { status: response.status, location: response.headers.get('location'), body: await response.text() }
}

/** The session keys in Redis and the milliseconds each has left. */
async function sessionKeys (): Promise<Array<{ key: string, pttl: number }>> {
  const keys = await client.keys('maxage:session:*')
  return await Promise.all(keys.map(async (key) => ({ key, pttl: await client.pttl(key) })))
}

describe('session.maxAge', () => {
  it('a session used all along is no session anywhere past maxAge, and the store never keeps it longer', async () => {
    const browser = new Browser()
    const signedInAt = clock.ms
    expect((await browser.navigate(`${gateway.url}/app/`)).status).toBe(200)
    const cookie = browser.cookieHeader(`${gateway.url}/app/`)!
    const [written] = await sessionKeys()
    // ttl is 8h, but the store is told to forget it at maxAge.
    expect(written!.pttl).toBeGreaterThan(0)
    expect(written!.pttl).toBeLessThanOrEqual(MAX_AGE)

    // Used every minute (well within the idle timeout): each renewal is capped at what is left.
    for (let minute = 1; minute <= 4; minute++) {
      clock.ms = signedInAt + minute * MINUTE
      expect((await get('/app/x', cookie)).status).toBe(200)
    }
    clock.ms = signedInAt + MAX_AGE - 30_000
    expect((await get('/app/x', cookie)).status).toBe(200)
    const [renewed] = await sessionKeys()
    expect(renewed!.pttl).toBeLessThanOrEqual(30_000 + 1000) // Redis's clock ran on a little meanwhile, never the 8h
    expect((await get('/oauth/userinfo/', cookie)).status).toBe(200)
    expect((await get('/oauth/auth/demo/', cookie)).status).toBe(200)

    clock.ms = signedInAt + MAX_AGE + 1
    const api = await get('/app/x', cookie)
    expect(api.status).toBe(401)
    expect(JSON.parse(api.body)).toMatchObject({ error: 'unauthenticated' })
    expect(new Set(ended).size).toBe(1) // heard here at once, then maybe again from the broadcast
    expect(await sessionKeys()).toEqual([])
    const page = await get('/app/x', cookie, 'text/html')
    expect(page.status).toBe(302)
    expect(page.location).toBe(`${gateway.url}/oauth/login/demo/?next=${encodeURIComponent('/app/x')}`)
    expect((await get('/oauth/auth/demo/', cookie)).status).toBe(401)
    expect((await get('/oauth/userinfo/', cookie)).status).toBe(401)
    expect(JSON.parse((await get('/oauth/', cookie)).body)).toEqual({ identities: {} })
  })
})
