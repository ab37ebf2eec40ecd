// A rolling change of session.secret taken out of order (reliability round 3): two instances on
// one real Redis and a real authorization server, one already at step 2 ([s2, previous s1]) while
// the other is still at step 1 ([s1, previous s2]) and refreshes the sessions the first one began.
// Then both at step 3 ([s2]): nobody who signed in under s2 is signed out. A record an earlier
// build sealed under s1 for an s2 cookie is re-sealed under s2 by the first read at step 2, once
// (later reads write nothing, an instance at step 1 does not seal it back), and
// gateway_sessions_previous_secret counts the sessions read that still need a previous secret.
// Time is the gateways' injected clock (token expiry), never waited on.
import { Redis } from 'ioredis'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { Sealer, SealingKey, keyIdOf } from '../../src/session/seal.js'
import { decodeRecord, storedJson } from '../../src/session/sealed-record.js'
import { signIn as signInAt } from '../helpers/browser.js'
import { oidcClient, reserveBaseUrl, startGateway, type TestGateway } from '../helpers/gateway.js'
import { metricValue } from '../helpers/metrics.js'
import { startOidcProvider, type TestProvider } from '../helpers/oidc.js'
import { startRedis, type TestRedis } from '../helpers/redis.js'
import { startUpstream, type SeenRequest, type Upstream } from '../helpers/upstream.js'

const S1 = 'rotation-order-secret-one-0123456789-abcdefg'
const S2 = 'rotation-order-secret-two-9876543210-zyxwvut'
/** Access tokens live 60 s: due for a refresh (30 s early) 31 s on, on the gateways' clock. */
const TOKEN_S = 60
const clock = { offset: 0, now: () => Date.now() + clock.offset }
const GAUGE = 'gateway_sessions_previous_secret'

let redis: TestRedis
let admin: Redis
let op: TestProvider
let upstream: Upstream
let base: { port: number, baseUrl: string }
let refreshGrants = 0
const instances: { a?: TestGateway, b?: TestGateway } = {}

beforeAll(async () => {
  redis = await startRedis()
  admin = new Redis(redis.url)
  upstream = await startUpstream()
  base = await reserveBaseUrl()
  op = await startOidcProvider([{ client_id: 'c', client_secret: 's', redirect_uris: [`${base.baseUrl}/oauth/authorized/demo/`] }],
    { accessTokenTtl: () => TOKEN_S })
  op.provider.on('grant.success', (ctx) => { if (ctx.oidc.params?.grant_type === 'refresh_token') refreshGrants++ })
})

afterAll(async () => {
  await Promise.all([instances.a?.close(), instances.b?.close()])
  await Promise.all([op?.close(), upstream?.close()])
  admin?.disconnect()
  await redis?.release()
})

/** Starts (or restarts) an instance with `secrets`: the first is session.secret, the others previousSecrets. */
async function roll (which: 'a' | 'b', secrets: string[]): Promise<void> {
  await instances[which]?.close()
  instances[which] = await startGateway({
    server: which === 'a' ? { port: base.port, baseUrl: base.baseUrl } : { baseUrl: base.baseUrl },
    // No session cache: every request reads the store, as on a busy set of instances.
    session: { secret: secrets[0], previousSecrets: secrets.slice(1), cacheTtl: '0s' },
    store: { type: 'redis', url: redis.url },
    providers: { demo: oidcClient(op.issuer, 'c', 's', 'openid offline_access') },
    routes: [{ path: '/app/', upstream: upstream.url, provider: 'demo' }],
  }, { deps: { clock } })
}

/** An instance's own address (B's base URL is A's, where the provider's callbacks land). */
const url = (which: 'a' | 'b'): string => `http://127.0.0.1:${instances[which]!.config.server.port}`

/** A sign-in at instance A: the session cookie's value. */
async function signIn (login: string): Promise<string> {
  return (await signInAt(`${url('a')}/app/`, login)).value
}

/** The status of an API client's request with `cookie` at one instance, and the bearer token the upstream got. */
async function ask (which: 'a' | 'b', cookie: string): Promise<{ status: number, token?: string }> {
  const response = await fetch(`${url(which)}/app/x`, { headers: { cookie: `gw_session=${cookie}`, accept: 'application/json' } })
  if (response.status !== 200) return { status: response.status }
  return { status: 200, token: (await response.json() as SeenRequest).headers.authorization as string }
}

async function gauge (which: 'a' | 'b'): Promise<number | undefined> {
  return metricValue(await (await fetch(`${url(which)}/metrics`)).text(), GAUGE)
}

/** The Redis key of a session whose cookie was made under `secret`. */
const recordKey = (secret: string, cookie: string): string => `gw:session:${new SealingKey(secret).idFor('session', cookie)}`

describe('rotating session.secret with instances out of order', () => {
  it('a session begun at step 2 and refreshed by an instance still at step 1 survives step 3 on both', async () => {
    await roll('a', [S2, S1])
    await roll('b', [S1, S2])
    clock.offset = 0
    const cookie = await signIn('alice')
    expect(cookie.endsWith(`.${keyIdOf(S2)}`)).toBe(true)
    const first = await ask('a', cookie)
    expect(first.status).toBe(200)

    // Due for a refresh: B, still at step 1, refreshes it.
    clock.offset = 31_000
    const grants = refreshGrants
    const refreshed = await ask('b', cookie)
    expect(refreshed.status).toBe(200)
    expect(refreshGrants).toBe(grants + 1)
    expect(refreshed.token).not.toBe(first.token)
    expect((await ask('a', cookie)).status).toBe(200)

    // Step 3 on both: s1 is dropped.
    await roll('a', [S2])
    await roll('b', [S2])
    expect(await ask('a', cookie)).toEqual({ status: 200, token: refreshed.token })
    expect((await ask('b', cookie)).status).toBe(200)
  }, 60_000)

  it('re-seals under s2, once, a record sealed under s1 for an s2 cookie; counts the sessions that still need s1', async () => {
    await roll('a', [S1, S2])
    await roll('b', [S1, S2])
    clock.offset = 0
    const early = await signIn('bob')
    expect(early.endsWith(`.${keyIdOf(S1)}`)).toBe(true)
    await roll('a', [S2, S1])
    const cookie = await signIn('carol')
    expect(cookie.endsWith(`.${keyIdOf(S2)}`)).toBe(true)
    // What an earlier build at step 1 wrote when it refreshed this session: the record sealed under s1, named in front.
    const key = recordKey(S2, cookie)
    const record = decodeRecord(new Sealer(S2, [S1]), cookie, await admin.getBuffer(key))!
    const underS1 = Buffer.concat([Buffer.from([0x03]), Buffer.from(keyIdOf(S1), 'latin1'), new SealingKey(S1).sealBytes('session:compact', cookie, storedJson(record))])
    await admin.set(key, underS1, 'PX', 60_000)
    expect(decodeRecord(new Sealer(S2), cookie, await admin.getBuffer(key))).toBeNull()

    // B, at step 1, reads it: it does not seal it again (s1 is its current secret, but not the cookie's).
    expect((await ask('b', cookie)).status).toBe(200)
    expect((await admin.getBuffer(key))!.equals(underS1)).toBe(true)
    // A, at step 2, reads it: re-sealed under s2, which alone now opens it.
    expect((await ask('a', cookie)).status).toBe(200)
    const resealed = (await admin.getBuffer(key))!
    expect(resealed.equals(underS1)).toBe(false)
    expect(decodeRecord(new Sealer(S2), cookie, resealed)).toEqual(record)
    // Once: later reads, on either instance, write nothing.
    expect((await ask('a', cookie)).status).toBe(200)
    expect((await ask('b', cookie)).status).toBe(200)
    expect((await admin.getBuffer(key))!.equals(resealed)).toBe(true)

    // A has read no session that still needs s1; then the one begun under s1.
    expect(await gauge('a')).toBe(0)
    expect((await ask('a', early)).status).toBe(200)
    expect(await gauge('a')).toBe(1)
    expect((await ask('a', early)).status).toBe(200)
    expect(await gauge('a')).toBe(1)
    // One idle timeout (session.ttl, 8 h) later without reading it again, it no longer counts: its record has expired.
    clock.offset += 8 * 3600_000 + 1
    expect(await gauge('a')).toBe(0)

    await roll('a', [S2])
    expect((await ask('a', cookie)).status).toBe(200)
    expect((await ask('a', early)).status).toBe(401)
  }, 60_000)
})
