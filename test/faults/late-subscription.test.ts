// The store's subscription to session invalidations, under outages: a gateway started while Redis
// is unreachable subscribes once it is reachable, however long that took, so a sign-out on another
// instance is heard at once (the assertion keys' channel is subscribed as well); and an instance whose subscription is lost caches no session until it
// is made again (a sign-out published meanwhile never reaches it). Sessions are cached for 10 s
// (session.cacheTtl), so only the invalidation (or not caching) can explain a 401 within a second.
import { Redis } from 'ioredis'
import { afterAll, describe, expect } from 'vitest'
import { signIn as signInAt } from '../helpers/browser.js'
import { endedElsewhere, oidcClient, sessionStatus, startGateway, type TestGateway } from '../helpers/gateway.js'
import { waitFor } from '../helpers/net.js'
import { startRedis, type TestRedis } from '../helpers/redis.js'
import { test as it } from '../helpers/stack.js'

/** The channel of session invalidations, under the default store.keyPrefix. */
const CHANNEL = 'gw:session-invalidated'
/** The channel of assertion key rotations (the route asks for an assertion). */
const KEYS_CHANNEL = 'gw:assertion-keys-changed'
const ENDINGS_CHANNEL = 'gw:session-ended'

let redis: TestRedis
let admin: Redis
/** Started while nothing listened on Redis's port. */
let late: TestGateway
/** Started once Redis was up: signs in and out. */
let other: TestGateway

/** How many connections are subscribed to both channels (or -1 when the two counts differ). */
async function subscribers (): Promise<number> {
  const [, sessions, , keys] = await admin.pubsub('NUMSUB', CHANNEL, KEYS_CHANNEL) as [string, number, string, number]
  return sessions === keys ? sessions : -1
}

/** How many GETEX (a session read from the store) Redis has run. */
async function sessionReads (): Promise<number> {
  const stats = await admin.info('commandstats')
  return Number(/cmdstat_getex:calls=(\d+)/.exec(stats)?.[1] ?? 0)
}

/** How many connections Redis refused (maxclients). */
async function rejectedConnections (): Promise<number> {
  return Number(/rejected_connections:(\d+)/.exec(await admin.info('stats'))![1])
}

/** True when `gateway` answered 200 for `cookie` from its own memory (no store read). */
async function servedFromCache (gateway: TestGateway, cookie: string): Promise<boolean> {
  const before = await sessionReads()
  return await sessionStatus(gateway, cookie) === 200 && await sessionReads() === before
}

async function signIn (): Promise<string> {
  return (await signInAt(`${other.url}/app/`)).value
}

async function signOut (cookie: string): Promise<void> {
  const response = await fetch(`${other.url}/oauth/logout/?next=%2Fapp%2Fbye`, { redirect: 'manual', headers: { accept: 'text/html', cookie: `gw_session=${cookie}`, 'sec-fetch-site': 'same-origin' } })
  expect(response.status).toBe(302)
}

it.beforeAll(async ({ startStack, op, upstream }) => {
  // A port where nothing listens: the spawned Redis's, stopped; restart() starts it there again.
  redis = await startRedis('spawn')
  await redis.stop()
  const raw = {
    session: { cacheTtl: '10s' },
    store: { type: 'redis', url: redis.url, timeout: '250ms' },
    providers: { demo: oidcClient(op.issuer, 'c', 's') },
    routes: [{ path: '/app/', upstream: upstream.url, provider: 'demo', assertion: true }],
  }
  late = await startGateway(raw)
  await redis.restart!()
  admin = new Redis(redis.url)
  other = await startStack(raw)
})

afterAll(async () => {
  await admin?.config('SET', 'maxclients', '10000').catch(() => {})
  admin?.disconnect()
  await Promise.all([late?.close(), other?.close()])
  await redis?.release()
})

describe('a gateway started while Redis was unreachable', () => {
  it('subscribes once Redis is up, and hears a sign-out on another instance at once', async () => {
    // ioredis waits at most 1 s between connection attempts (the store's retryStrategy).
    await waitFor(async () => await subscribers() === 2, 5000, 'both instances to subscribe to session invalidations and key rotations')
    const cookie = await signIn()
    await waitFor(async () => await sessionStatus(late, cookie) === 200, 5000, 'the late instance to read the session')
    expect(await servedFromCache(late, cookie)).toBe(true)

    await signOut(cookie)
    await endedElsewhere(late, cookie)
    // One line when it could not subscribe (naming why), one when it did.
    const lines = late.logs.map((line) => JSON.parse(line) as { msg: string, reason?: string, channels?: string[] })
    expect(lines.filter((line) => line.msg.startsWith('not subscribed to store broadcasts'))).toMatchObject([
      { reason: expect.stringContaining('ECONNREFUSED'), channels: [CHANNEL, ENDINGS_CHANNEL, KEYS_CHANNEL] },
    ])
    expect(lines.filter((line) => line.msg.startsWith('subscribed to store broadcasts again'))).toMatchObject([
      { reason: expect.stringContaining('ECONNREFUSED'), channels: [CHANNEL, ENDINGS_CHANNEL, KEYS_CHANNEL] },
    ])
  })
})

describe('an instance whose subscription is lost', () => {
  it('caches no session until it is subscribed again, so a sign-out it could not hear still holds; then caches again', async () => {
    await waitFor(async () => await subscribers() === 2, 5000, 'both instances to be subscribed')
    const cookie = await signIn()
    await waitFor(async () => await servedFromCache(late, cookie), 5000, 'the late instance to cache the session')

    // Redis takes no new connection (the connected ones stay), and drops every subscription: the
    // subscribers cannot come back, and the sign-out below is published to nobody.
    const [, connected] = /connected_clients:(\d+)/.exec(await admin.info('clients'))!
    await admin.config('SET', 'maxclients', String(Number(connected) - await subscribers()))
    const refused = await rejectedConnections()
    await admin.client('KILL', 'TYPE', 'pubsub')
    expect(await subscribers()).toBe(0)
    await waitFor(async () => await rejectedConnections() >= refused + 2, 5000, 'both subscribers to be refused a new connection')
    await signOut(cookie)
    await endedElsewhere(late, cookie)

    // Connections accepted again: the subscription is made again, and sessions are cached again.
    await admin.config('SET', 'maxclients', '10000')
    await waitFor(async () => await subscribers() === 2, 5000, 'both instances to subscribe again')
    const next = await signIn()
    await waitFor(async () => await servedFromCache(late, next), 5000, 'the late instance to cache sessions again')
    const lines = late.logs.map((line) => JSON.parse(line) as { msg: string, reason?: string })
    expect(lines.filter((line) => line.msg.startsWith('subscribed to store broadcasts again')).map((line) => line.reason)).toEqual([
      expect.stringContaining('ECONNREFUSED'),
      // Redis closed it (CLIENT KILL), with no error to name.
      'connection closed',
    ])
  })
})
