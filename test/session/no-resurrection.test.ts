// Nothing resurrects an ended session (SPEC, Security floor): a write that was under way when the
// session ended (a refresh's result, a touch) never brings its record back, on one instance or
// across two sharing a store; and a sign-out with a cookie that opens no session writes nothing and
// tells no instance. Over the memory store and a real Redis; no server.
import fc from 'fast-check'
import { Redis } from 'ioredis'
import pino from 'pino'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import type { SessionConfig } from '../../src/config/types.js'
import { emptyRecord, withSignIn, withTokens, type SessionRecord } from '../../src/session/record.js'
import { PersonIndex } from '../../src/session/person-index.js'
import { randomToken, Sealer } from '../../src/session/seal.js'
import { Sessions } from '../../src/session/session.js'
import { MemoryStore } from '../../src/store/memory.js'
import { RedisStore } from '../../src/store/redis.js'
import { storeKeys, type SessionStore } from '../../src/store/store.js'
import { waitFor } from '../helpers/net.js'
import { startRedis, type TestRedis } from '../helpers/redis.js'

const SECRET = 'a-session-secret-of-at-least-32-characters'
const CONFIG: SessionConfig = { cookieName: 'gw_session', secret: SECRET, ttlMs: 60_000, cookieSecure: true, cacheTtlMs: 1000, maxAgeMs: 7 * 86_400_000, previousSecrets: [] }
/** Now: these sessions run on the wall clock (never waited on), and a sign-in older than session.maxAge is no session. */
const SIGNED_IN_AT = Date.now()
const RECORD: SessionRecord = withTokens(emptyRecord(SIGNED_IN_AT), 'demo', { access_token: 'at-old', expires_at: 1, refresh_token: 'rt-old' })
const REFRESHED = { access_token: 'at-new', expires_at: 2_000_000_000, refresh_token: 'rt-new' }

const header = (cookie: string) => `theme=dark; gw_session=${cookie}`

/** Counts what a store is asked to do beyond reading: writes, deletes and broadcasts. */
function counting (store: SessionStore): { store: SessionStore, writes: string[] } {
  const writes: string[] = []
  const counted = new Proxy(store, {
    get (target, name, receiver) {
      const value: unknown = Reflect.get(target, name, receiver)
      if (typeof value !== 'function') return value
      const method = value as (...args: unknown[]) => unknown
      const isWrite = ['set', 'replace', 'delete', 'end', 'settled', 'take', 'claim', 'publish', 'addMember', 'removeMember', 'extend', 'addRanked', 'addRankedIfRoom', 'removeRanked', 'acquire', 'release'].includes(String(name))
      return (...args: unknown[]) => {
        if (isWrite) writes.push(String(name))
        return method.apply(target, args)
      }
    },
  })
  return { store: counted, writes }
}

interface Backend {
  /** One store per gateway instance (two connections to one Redis; one shared memory store). */
  stores: SessionStore[]
  close (): Promise<void>
}

let redis: TestRedis
beforeAll(async () => { redis = await startRedis() }, 30_000)
afterAll(async () => { await redis?.release() })

const backends: Array<[string, () => Promise<Backend>]> = [
  ['memory', async () => {
    const store = new MemoryStore()
    return { stores: [store, store], close: () => store.close() }
  }],
  ['redis', async () => {
    const config = { type: 'redis' as const, url: redis.url, cluster: undefined, sentinel: undefined, keyPrefix: `nr${randomToken().slice(0, 6)}:`, timeoutMs: 2000, readiness: 'required' as const, waitForReplica: 0 }
    const stores = [new RedisStore(config, pino({ level: 'silent' })), new RedisStore(config, pino({ level: 'silent' }))]
    for (const store of stores) expect(await store.ready(10_000)).toBe(true)
    return {
      stores,
      close: async () => {
        // KEYS takes no prefix and answers with it; DEL adds it.
        const left = (await stores[0]!.redis.keys(`${config.keyPrefix}*`)).map((key) => key.slice(config.keyPrefix.length))
        if (left.length > 0) await stores[0]!.redis.del(...left)
        await Promise.all(stores.map((store) => store.close()))
      },
    }
  }],
]

describe.each(backends)('an ended session stays ended: %s', (_name, open) => {
  let backend: Backend
  /** Gateway instances A and B on the shared store. */
  let a: Sessions
  let b: Sessions

  beforeAll(async () => {
    backend = await open()
    a = new Sessions(backend.stores[0]!, new Sealer(SECRET), CONFIG)
    b = new Sessions(backend.stores[1]!, new Sealer(SECRET), CONFIG)
    await a.listen()
    await b.listen()
  }, 30_000)
  afterAll(async () => { await backend?.close() })

  /** Until the end of the session `cookie` names has reached both instances' caches (Redis's broadcast is not instant). */
  async function forgottenEverywhere (cookie: string): Promise<void> {
    await waitFor(async () => a.cached(header(cookie)) === undefined && b.cached(header(cookie)) === undefined, 5000, 'the end reaching both instances')
  }

  /** A session started on A, loaded by the refresh on `on` and read back as the refresh does before writing. */
  async function refreshing (on: Sessions) {
    const { cookie } = await a.start(undefined, RECORD)
    const session = (await on.load(header(cookie)))!
    const read = (await on.reload(session))!
    expect(read.record).toEqual(RECORD)
    return { cookie, session, read }
  }

  it.each([
    ['signed out on the refreshing instance', () => a, async (cookie: string) => { await a.end(await a.load(header(cookie))) }],
    ['signed out on the other instance', () => a, async (cookie: string) => { await b.end(await b.load(header(cookie))) }],
    ['ended by a back-channel logout (endById) on the other instance', () => a, async (_cookie: string, id: string) => { await b.endById(id) }],
    ['ended by a back-channel logout on the refreshing instance', () => b, async (_cookie: string, id: string) => { await b.endById(id) }],
  ])('%s while the refresh waited on the provider: its result is not written, and the cookie opens nothing', async (_case, on, end) => {
    const { cookie, session, read } = await refreshing(on())
    await end(cookie, session.id)
    await forgottenEverywhere(cookie)
    // The provider's answer lands: the write over the record read is refused.
    expect(await on().update(session, read, withTokens(read.record, 'demo', REFRESHED))).toBeNull()
    expect(await backend.stores[0]!.getBytes(storeKeys.session(session.id))).toBeNull()
    for (const instance of [a, b]) {
      expect(instance.cached(header(cookie))).toBeUndefined()
      expect(await instance.load(header(cookie))).toBeNull()
    }
    // A touch arriving after the end does not bring it back either.
    expect(await backend.stores[1]!.getAndTouchBytes(storeKeys.session(session.id), 60_000)).toBeNull()
    expect(await backend.stores[0]!.getBytes(storeKeys.session(session.id))).toBeNull()
  })

  it.each([
    ['signed out on the other instance', async (cookie: string) => { await b.end(await b.load(header(cookie))) }],
    ['ended by a back-channel logout (endById) on the other instance', async (_cookie: string, id: string) => { await b.endById(id) }],
  ])('a sign-in under way when the browser\'s session was %s keeps nothing of that session', async (_case, end) => {
    const old = await a.start(undefined, RECORD)
    // The callback read the browser's session and built the new record on it (one session, every provider) ...
    const previous = (await a.load(header(old.cookie)))!
    const merged = withTokens(previous.record, 'github', { access_token: 'gh' })
    const alone = () => withTokens(emptyRecord(SIGNED_IN_AT), 'github', { access_token: 'gh' })
    // ... and the session ended before the new one replaced it.
    await end(old.cookie, old.id)
    const started = await a.start(header(old.cookie), merged, { alone })
    expect(started.record).toEqual(alone())
    for (const instance of [a, b]) {
      expect((await instance.load(header(started.cookie)))?.record.tokens).toEqual({ github: { access_token: 'gh' } })
      expect(await instance.load(header(old.cookie))).toBeNull()
    }
  })

  it('a sign-out that finds the new id while the old one is still there (the index step, before the old id ends) ends both, and the sign-in keeps neither', async () => {
    const old = await a.start(undefined, RECORD)
    const merged = withTokens(RECORD, 'github', { access_token: 'gh' })
    const alone = () => withTokens(emptyRecord(SIGNED_IN_AT), 'github', { access_token: 'gh' })
    let newId: string | undefined
    // "Sign out everywhere" on the other instance, in the moment after the new id was listed.
    const indexed = async ({ id }: { id: string }) => {
      newId = id
      await b.endById(old.id)
      await b.endById(id)
    }
    await expect(a.start(header(old.cookie), merged, { alone, indexed })).rejects.toMatchObject({ code: 'invalid_state' })
    for (const instance of [a, b]) expect(await instance.load(header(old.cookie))).toBeNull()
    expect(newId).toBeDefined()
    expect(await backend.stores[0]!.getBytes(storeKeys.session(newId!))).toBeNull()
  })

  it('the new id is listed (the index step) before the old one ends: a sign-out that finds the old id then finds the new one too', async () => {
    const old = await a.start(undefined, RECORD)
    const merged = withTokens(RECORD, 'github', { access_token: 'gh' })
    const seen: boolean[] = []
    const indexed = async () => { seen.push((await b.load(header(old.cookie))) !== null) }
    await a.start(header(old.cookie), merged, { alone: () => merged, indexed })
    expect(seen).toEqual([true])
  })

  it('an index step that fails ends the new session, and the old one stays', async () => {
    const old = await a.start(undefined, RECORD)
    let newId: string | undefined
    const indexed = async ({ id }: { id: string }) => { newId = id; throw new Error('the index refused') }
    await expect(a.start(header(old.cookie), RECORD, { indexed })).rejects.toThrow('the index refused')
    expect(await b.load(header(old.cookie))).not.toBeNull()
    expect(await backend.stores[0]!.getBytes(storeKeys.session(newId!))).toBeNull()
  })

  it('a sign-in over a session still there keeps what it held under the new id and ends the old id everywhere', async () => {
    const old = await a.start(undefined, RECORD)
    expect(await b.load(header(old.cookie))).not.toBeNull()
    const merged = withTokens(RECORD, 'github', { access_token: 'gh' })
    const started = await a.start(header(old.cookie), merged, { alone: () => { throw new Error('not rebuilt while the old session is there') } })
    expect(started.record).toEqual(merged)
    await forgottenEverywhere(old.cookie)
    for (const instance of [a, b]) {
      expect(await instance.load(header(old.cookie))).toBeNull()
      expect((await instance.load(header(started.cookie)))?.record).toEqual(merged)
    }
  })

  it('a refused refresh (the token dropped) is not written over an ended session either', async () => {
    const { cookie, session, read } = await refreshing(a)
    await b.end(await b.load(header(cookie)))
    expect(await a.update(session, read, withTokens(read.record, 'demo', undefined))).toBeNull()
    expect(await a.load(header(cookie))).toBeNull()
  })

  it('a write over a record that changed since it was read is refused; over the record read again it lands', async () => {
    const { cookie, session, read } = await refreshing(a)
    const other = (await b.update(session, (await b.reload(session))!, withTokens(RECORD, 'github', { access_token: 'gh' })))!
    expect(await a.update(session, read, withTokens(read.record, 'demo', REFRESHED))).toBeNull()
    // Still signed in with what the other writer wrote: a refused write ends nothing.
    expect((await a.load(header(cookie)))?.record).toEqual(other.record)
    const again = (await a.reload(session))!
    expect((await a.update(session, again, withTokens(again.record, 'demo', REFRESHED)))?.record.tokens).toEqual({ demo: REFRESHED, github: { access_token: 'gh' } })
    expect((await b.load(header(cookie)))?.record.tokens.demo).toEqual(REFRESHED)
  })

  it('property: after any interleaving of reads, writes and touches, a write lands exactly when nothing ended or changed the record since its read', async () => {
    type Step = { op: 'read' | 'write', writer: 0 | 1 | 2, on: 0 | 1 } | { op: 'touch', on: 0 | 1 } | { op: 'end', on: 0 | 1 }
    const step = fc.oneof(
      fc.record({ op: fc.constantFrom('read' as const, 'write' as const), writer: fc.constantFrom(0 as const, 1 as const, 2 as const), on: fc.constantFrom(0 as const, 1 as const) }),
      fc.record({ op: fc.constantFrom('touch' as const, 'end' as const), on: fc.constantFrom(0 as const, 1 as const) })
    )
    await fc.assert(fc.asyncProperty(fc.array(step, { maxLength: 12 }), async (steps: Step[]) => {
      const instances = [a, b]
      const { id, cookie } = await a.start(undefined, RECORD)
      // The model: the record's version, and which version each writer read (undefined: none yet, or read as gone).
      let version = 0
      let ended = false
      const reads: Array<{ version: number, read: Awaited<ReturnType<Sessions['reload']>> } | undefined> = [undefined, undefined, undefined]
      const session = { id, cookie, record: RECORD }
      for (const s of steps) {
        const on = instances[s.on]!
        if (s.op === 'read') {
          const read = await on.reload(session)
          expect(read !== null).toBe(!ended)
          reads[s.writer] = read ? { version, read } : undefined
        } else if (s.op === 'write') {
          const held = reads[s.writer]
          if (!held?.read) continue
          const written = await on.update(session, held.read, withTokens(held.read.record, 'demo', { access_token: `at-${version + 1}` }))
          expect(written !== null).toBe(!ended && held.version === version)
          if (written) version++
        } else if (s.op === 'touch') {
          expect((await on.load(header(cookie))) !== null).toBe(!ended)
        } else {
          await on.end(await on.load(header(cookie)))
          ended = true
          await forgottenEverywhere(cookie)
        }
      }
      const stored = await backend.stores[0]!.getBytes(storeKeys.session(id))
      expect(stored === null).toBe(ended)
      await a.endById(id)
    }), { numRuns: 60 })
  }, 60_000)

  it.each([
    ['a well-formed made-up value', () => randomToken()],
    ['all one letter', () => 'A'.repeat(43)],
    ['a real cookie with one character changed', async () => { const { cookie } = await a.start(undefined, RECORD); return (cookie[0] === 'A' ? 'B' : 'A') + cookie.slice(1) }],
    ['the cookie of a session already signed out', async () => { const { cookie } = await a.start(undefined, RECORD); await a.end(await a.load(header(cookie))); return cookie }],
    ['the cookie of a gateway with another secret', async () => (await new Sessions(backend.stores[0]!, new Sealer('another-secret-of-at-least-32-characters'), CONFIG).start(undefined, RECORD)).cookie],
    ['too short', () => randomToken().slice(1)],
    ['no cookie at all', () => undefined],
  ])('a sign-out with %s writes nothing and tells no instance', async (_case, value) => {
    const cookie = await value()
    const { store, writes } = counting(backend.stores[1]!)
    const signingOut = new Sessions(store, new Sealer(SECRET), CONFIG)
    const cookieHeader = cookie === undefined ? 'theme=dark' : header(cookie)
    // With the header, as a sign-out ends a session (what the cookie was renamed to is only read).
    await signingOut.end(await signingOut.load(cookieHeader), cookieHeader)
    expect(writes).toEqual([])
  })

  it("a real session's sign-out still ends it on every instance", async () => {
    const { cookie } = await a.start(undefined, RECORD)
    expect(await b.load(header(cookie))).not.toBeNull()
    const { store, writes } = counting(backend.stores[1]!)
    const signingOut = new Sessions(store, new Sealer(SECRET), CONFIG)
    await signingOut.end(await signingOut.load(header(cookie)), header(cookie))
    // The cache invalidation, then the ending (Sessions.onEnded on every instance).
    expect(writes).toEqual(['end', 'publish', 'publish', 'settled'])
    await forgottenEverywhere(cookie)
    expect(await a.load(header(cookie))).toBeNull()
    expect(await b.load(header(cookie))).toBeNull()
  })
})

describe('a sign-in over a session whose delete the store refuses', () => {
  /** A store signed in as a user of its own, whose ACL `deny` takes DEL away (as a demoted master refuses every write, READONLY, between the new record and the old one's delete). */
  async function refusing (run: (store: RedisStore, deny: (allowed: boolean) => Promise<void>) => Promise<void>): Promise<void> {
    const user = `nr-${randomToken().slice(0, 8).toLowerCase()}`
    const admin = new Redis(redis.url)
    await admin.call('ACL', 'SETUSER', user, 'on', '>pw', '~*', '&*', '+@all')
    const url = new URL(redis.url)
    url.username = user
    url.password = 'pw'
    const config = { type: 'redis' as const, url: url.href, cluster: undefined, sentinel: undefined, keyPrefix: `nr${randomToken().slice(0, 6)}:`, timeoutMs: 2000, readiness: 'required' as const, waitForReplica: 0 }
    const store = new RedisStore(config, pino({ level: 'silent' }))
    try {
      expect(await store.ready(10_000)).toBe(true)
      await run(store, async (denied) => { await admin.call('ACL', 'SETUSER', user, denied ? '-del' : '+del') })
    } finally {
      await admin.call('ACL', 'DELUSER', user)
      admin.disconnect()
      await store.close()
    }
  }

  it('fails (503) and leaves that session as it was: never counted as renamed, nor told ended', async () => {
    await refusing(async (store, deny) => {
      const sessions = new Sessions(store, new Sealer(SECRET), CONFIG)
      const old = await sessions.start(undefined, RECORD)
      const ended: string[] = []
      sessions.onEnded((id) => ended.push(id))
      await deny(true)
      // Before: counted as taken, the sign-in stood, the old id was told ended everywhere (its
      // websockets closed), and the old cookie still opened its session (an attacker's finding).
      await expect(sessions.start(header(old.cookie), withTokens(RECORD, 'github', { access_token: 'gh' }))).rejects.toMatchObject({ code: 'session_store_unavailable' })
      expect(ended).toEqual([])
      expect((await sessions.load(header(old.cookie)))?.record).toEqual(RECORD)
    })
  })

  it('keeps that session on its person\'s list when the list was full (the list step comes first), so a revoke or sign out everywhere still reaches it', async () => {
    await refusing(async (store, deny) => {
      const sealer = new Sealer(SECRET)
      const sessions: Sessions = new Sessions(store, sealer, CONFIG)
      const MAX = 3
      const index = new PersonIndex(store, (id) => sessions.endById(id), sealer, CONFIG.ttlMs, undefined, undefined, MAX)
      const person = withSignIn(emptyRecord(SIGNED_IN_AT), 'demo', { tokens: { access_token: 'at' }, identity: { sub: 'alice', subject: 'alice', iss: 'https://op.example', groups: [] } })
      const listed = { indexed: async (session: { id: string, record: SessionRecord }) => { await index.add(session, 'Firefox') } }
      const started = []
      for (let i = 0; i < MAX; i++) started.push(await sessions.start(undefined, person, listed))
      const old = started.at(-1)!
      await deny(true)
      const carried = withSignIn(person, 'other', { tokens: { access_token: 'other' }, identity: { sub: 'alice', subject: 'alice', iss: 'https://op.example', groups: [] } })
      await expect(sessions.start(header(old.cookie), carried, { indexed: async (session) => { await index.add(session, 'Firefox', undefined, old.id) } })).rejects.toMatchObject({ code: 'session_store_unavailable' })
      await deny(false)
      expect((await sessions.load(header(old.cookie)))?.id).toBe(old.id)
      // An attacker's finding: the list step had taken it out to make room, and nothing listed it.
      expect((await index.list(person)).map((session) => session.sessionId)).toContain(old.id)
    })
  })
})
