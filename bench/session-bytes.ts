// `npm run bench -- --session-bytes`: what one session costs in Redis. A browser signs in through
// the real flow at one provider, then at two more (three providers of the same authorization
// server, each its own client), and the record the gateway wrote is read back: the value's length,
// Redis's MEMORY USAGE of the key, and the record opened with the bench's session secret, so the
// raw token strings can be told apart from the gateway's own overhead (JSON field names, the
// identity, the seal: IV, tag and base64url). Then `records` records of each shape are written
// with the gateway's own sealing code (bench/records.ts), each with its own cookie and random token
// strings of the real lengths, and Redis's used_memory before and after gives the bytes per session,
// extrapolated to a million. Then each of those sessions is listed in the person index with the
// gateway's own PersonIndex over its RedisStore (one entry under each provider's person key, each
// record a person of its own), and used_memory again gives what sign out everywhere costs per
// session. oidc-provider's tokens are opaque and short; many providers issue JWT access tokens of
// 1-2 KB, so a third shape takes the real one-provider record with a 1,200-character access token (a
// stand-in of that size, said so in the table).
import { Redis } from 'ioredis'
import { Browser } from '../test/helpers/browser.js'
import { freePort } from '../test/helpers/net.js'
import { startRedis } from '../test/helpers/redis.js'
import pino from 'pino'
import { PersonIndex } from '../src/session/person-index.js'
import { type SessionRecord } from '../src/session/session.js'
import { RedisStore } from '../src/store/redis.js'
import { storedJson } from '../src/session/sealed-record.js'
import { toWire } from '../src/session/record-wire.js'
import { KEY_PREFIX, openRecord, randomText, sealer, sessionId, sessionKey, writeSessions } from './records.js'
import { Stops, round, startProviderProcess } from './stack.js'
import { startGateway, startUpstream } from './targets.js'

export interface SessionBytesOptions { records: number }

export interface SessionShape {
  shape: string
  providers: number
  /** The sealed value's length (bytes, ASCII). */
  valueBytes: number
  /** Redis MEMORY USAGE of the key (value, key and Redis's own bookkeeping). */
  memoryUsage: number
  /** The record's JSON. */
  jsonBytes: number
  /** The raw token strings (access and refresh tokens) in it. */
  tokenBytes: number
  /** The identities (who the user is, per provider) in the JSON. */
  identityBytes: number
  /** Redis used_memory growth per record over `records` records of this shape. */
  perRecordBytes: number
  /** Redis used_memory growth per session when each is listed in the person index (one entry per provider). */
  personIndexBytes: number
  /** ...times a million, GB (10^9). */
  millionGb: number
}

function tokenBytes (record: SessionRecord): number {
  return Object.values(record.tokens).reduce((n, t) => n + t.access_token.length + (t.refresh_token?.length ?? 0), 0)
}

/** A copy of `record` with fresh random token strings and subjects of the same lengths (each record its own person). */
function likeRecord (record: SessionRecord, accessLength?: number): SessionRecord {
  const identities = Object.fromEntries(Object.entries(record.identities ?? {}).map(([name, identity]) => [name, { ...identity, subject: randomText(identity.subject?.length ?? 8) }]))
  const tokens = Object.fromEntries(Object.entries(record.tokens).map(([name, t]) => [name, {
    ...t,
    access_token: randomText(accessLength ?? t.access_token.length),
    ...(t.refresh_token ? { refresh_token: randomText(t.refresh_token.length) } : {}),
  }]))
  return { ...record, createdAt: Date.now(), tokens, identities }
}

/** Lists each session in the person index as a sign-in does, with the gateway's own index and store. */
async function indexSessions (redisUrl: string, sessions: Array<{ cookie: string, record: SessionRecord }>): Promise<void> {
  const store = new RedisStore({ type: 'redis', url: redisUrl, cluster: undefined, sentinel: undefined, keyPrefix: KEY_PREFIX, timeoutMs: 5000, readiness: 'required', waitForReplica: 0 }, pino({ level: 'silent' }))
  try {
    if (!await store.ready(5000)) throw new Error(`no Redis at ${redisUrl}`)
    const index = new PersonIndex(store, async () => {}, sealer, 8 * 3600_000)
    for (let start = 0; start < sessions.length; start += 200) {
      // The longest entry a sign-in writes: an IPv6 address (kept as its /64) and the operating system.
      await Promise.all(sessions.slice(start, start + 200).map(async ({ cookie, record }) => await index.add({ id: sessionId(cookie), record }, 'Chrome', { os: 'macOS', address: '2001:db8:1:2::7' })))
    }
  } finally {
    await store.close()
  }
}

async function usedMemory (redis: Redis): Promise<number> {
  return Number(/used_memory:(\d+)/.exec(await redis.info('memory'))![1])
}

export async function sessionBytesBench (options: SessionBytesOptions): Promise<SessionShape[]> {
  const stops = new Stops()
  try {
    const redisServer = stops.add(await startRedis(process.env.TEST_REDIS === undefined ? 'spawn' : undefined))
    const upstream = stops.add(await startUpstream())
    const port = await freePort()
    const clientSecret = 'bench-client-secret'
    const names = ['demo', 'second', 'third']
    const provider = stops.add(await startProviderProcess(names.map((name, i) =>
      ({ client_id: `bench-${i}`, client_secret: clientSecret, redirect_uris: [`http://127.0.0.1:${port}/oauth/authorized/${name}/`] }))))
    const gateway = stops.add(await startGateway({
      name: 'gateway',
      upstream: upstream.url,
      redisUrl: redisServer.url,
      issuer: provider.issuer,
      clientId: 'bench-0',
      clientSecret,
      port,
      workers: 1,
      logLevel: 'warn',
      moreProviders: { second: 'bench-1', third: 'bench-2' },
    }))
    const redis = new Redis(redisServer.url)
    stops.add({ stop: async () => { redis.disconnect() } })
    const browser = new Browser()
    const read = async () => {
      const cookie = browser.cookies.get('gw_session')!.value
      const key = sessionKey(cookie)
      const value = (await redis.getBuffer(key))!
      return { value, memoryUsage: Number(await redis.memory('USAGE', key)), record: openRecord(cookie, value)! }
    }
    const shapes: Array<Omit<SessionShape, 'perRecordBytes' | 'personIndexBytes' | 'millionGb'> & { record: SessionRecord, accessLength?: number }> = []
    const shape = (label: string, got: Awaited<ReturnType<typeof read>>) => {
      const json = storedJson(got.record)
      return {
        shape: label,
        providers: Object.keys(got.record.tokens).length,
        valueBytes: got.value.length,
        memoryUsage: got.memoryUsage,
        jsonBytes: json.length,
        tokenBytes: tokenBytes(got.record),
        identityBytes: JSON.stringify(toWire(got.record).i ?? {}).length,
        record: got.record,
      }
    }
    const landed = await browser.navigate(`${gateway.url}/app/`, { login: 'alice' })
    if (landed.status !== 200) throw new Error(`sign-in failed: ${landed.status}`)
    const one = await read()
    shapes.push(shape('1 provider (signed in through the real flow)', one))
    for (const name of names.slice(1)) {
      const done = await browser.navigate(`${gateway.url}/oauth/login/${name}/?next=/oauth/`, { login: 'alice' })
      if (done.status !== 200) throw new Error(`sign-in at ${name} failed: ${done.status}`)
    }
    shapes.push(shape('3 providers (signed in at each through the real flow)', await read()))
    // The real one-provider record with an access token of a JWT's size.
    const jwtSized = likeRecord(one.record, 1200)
    shapes.push({ ...shapes[0]!, shape: '1 provider, access token of 1,200 characters (a JWT\'s size; stand-in)', record: jwtSized, accessLength: 1200, valueBytes: NaN, memoryUsage: NaN, jsonBytes: storedJson(jwtSized).length, tokenBytes: tokenBytes(jwtSized) })

    const results: SessionShape[] = []
    for (const s of shapes) {
      await redis.flushdb()
      const before = await usedMemory(redis)
      const records = Array.from({ length: options.records }, () => likeRecord(s.record, s.accessLength))
      const cookies = await writeSessions(redisServer.url, options.records, 8 * 3600_000, (i) => records[i]!)
      const after = await usedMemory(redis)
      const perRecordBytes = Math.round((after - before) / options.records)
      await indexSessions(redisServer.url, cookies.map((cookie, i) => ({ cookie, record: records[i]! })))
      const personIndexBytes = Math.round((await usedMemory(redis) - after) / options.records)
      const sample = cookies[0]!
      const value = (await redis.getBuffer(sessionKey(sample)))!
      const { record: _record, accessLength: _length, ...rest } = s
      results.push({
        ...rest,
        valueBytes: Number.isNaN(s.valueBytes) ? value.length : s.valueBytes,
        memoryUsage: Number.isNaN(s.memoryUsage) ? Number(await redis.memory('USAGE', sessionKey(sample))) : s.memoryUsage,
        perRecordBytes,
        personIndexBytes,
        millionGb: round((perRecordBytes + personIndexBytes) * 1e6 / 1e9, 2),
      })
    }
    return results
  } finally {
    await stops.run()
  }
}

export function sessionBytesTable (results: SessionShape[]): string {
  const rows = results.map((r) => `| ${r.shape} | ${r.tokenBytes} | ${r.jsonBytes} | ${r.identityBytes} | ${r.valueBytes} | ${r.valueBytes - r.tokenBytes} (${Math.round(100 * (r.valueBytes - r.tokenBytes) / r.valueBytes)}%) | ${r.memoryUsage} | **${r.perRecordBytes}** | ${r.personIndexBytes} | **${r.perRecordBytes + r.personIndexBytes}** | **${r.millionGb} GB** |`)
  return `| session | token strings B | record JSON B | of which identities B | stored value B | gateway overhead beyond the tokens B | MEMORY USAGE B | Redis used_memory per record B | person index per session B | per session, both B | a million sessions |
|---|---|---|---|---|---|---|---|---|---|---|
${rows.join('\n')}`
}
