// Sessions without a server: Cookie headers in, values out, over the in-process store and a clock
// the test moves. Start, load, the cache window, the idle timeout and the end; a new id at every
// start; a tampered or foreign cookie opens nothing; the store holds only ciphertext; and a record
// is a value that no step edits in place.
import { afterEach, describe, expect, it } from 'vitest'
import type { SessionConfig } from '../../src/config/types.js'
import { emptyRecord, withSignIn, withTokens, type SessionRecord, type TokenSet } from '../../src/session/record.js'
import { Sealer } from '../../src/session/seal.js'
import { fromWire, type WireRecord } from '../../src/session/record-wire.js'
import { Sessions } from '../../src/session/session.js'
import { storedJson } from '../../src/session/sealed-record.js'
import { MemoryStore } from '../../src/store/memory.js'
import { storeKeys } from '../../src/store/store.js'

const SECRET = 'a-session-secret-of-at-least-32-characters'
const CONFIG: SessionConfig = { cookieName: 'gw_session', secret: SECRET, ttlMs: 60_000, cookieSecure: true, cacheTtlMs: 1000, maxAgeMs: 7 * 86_400_000, previousSecrets: [] }

const TOKENS: TokenSet = {
  access_token: 'at-4f1c9e2b7d0a',
  expires_at: 2_000_000_000,
  refresh_token: 'rt-9a8b7c6d5e4f',
}
const RECORD: SessionRecord = withSignIn(emptyRecord(1_700_000_000_000), 'demo', {
  tokens: TOKENS,
  identity: { sub: 'alice', subject: 'alice-subject', email: 'alice@example.com', groups: ['staff'] },
  providerSession: { idToken: 'eyJhbGciOiJSUzI1NiJ9.id-token-body.sig', sid: 'sid-1', sub: 'alice' },
})

/** The in-process store on the test's clock, counting store reads. */
class CountingStore extends MemoryStore {
  reads = 0
  override async getAndTouchBytes (key: string, ttlMs: number): Promise<Buffer | null> {
    this.reads++
    return await super.getAndTouchBytes(key, ttlMs)
  }
}

/**
 * Fails the rename pointer's commands it is told to (as a Redis Cluster node holding `renamed:`
 * keys that is down), finds it claimed by another sign-in when told to, and lists the session
 * records written.
 */
class PointerRefusingStore extends CountingStore {
  readonly refusing = new Set<'claim' | 'set' | 'get'>()
  claimedElsewhere = false
  readonly sessionsWritten: string[] = []
  private refuse (command: 'claim' | 'set' | 'get', key: string): void {
    if (this.refusing.has(command) && key.startsWith('renamed:')) throw new Error('store unreachable')
  }

  override async claim (key: string, value: string, ttlMs: number): Promise<boolean> {
    this.refuse('claim', key)
    return this.claimedElsewhere && key.startsWith('renamed:') ? false : await super.claim(key, value, ttlMs)
  }

  override async set (key: string, value: string | Uint8Array, ttlMs: number): Promise<void> {
    this.refuse('set', key)
    if (key.startsWith('session:')) this.sessionsWritten.push(key)
    await super.set(key, value, ttlMs)
  }

  override async get (key: string): Promise<string | null> {
    this.refuse('get', key)
    return await super.get(key)
  }
}

const stores: MemoryStore[] = []
afterEach(async () => { for (const store of stores.splice(0)) await store.close() })

/** One instance: a store and Sessions over it, both on `clock`; `secret` another gateway's when given. */
async function setUp (clock = { ms: 1_700_000_000_000, now (): number { return this.ms } }, store?: CountingStore, secret = SECRET) {
  const kv = store ?? new CountingStore({ clock })
  stores.push(kv)
  const sessions = new Sessions(kv, new Sealer(secret), { ...CONFIG, secret }, clock)
  await sessions.listen()
  return { clock, store: kv, sessions }
}

const header = (cookie: string, others = 'theme=dark') => `${others}; gw_session=${cookie}; lang=en`

/** A record frozen all the way down: any write into it throws (ES modules run in strict mode). */
function deepFreeze<T> (value: T): T {
  if (value !== null && typeof value === 'object' && !Object.isFrozen(value)) {
    for (const inner of Object.values(value)) deepFreeze(inner)
    Object.freeze(value)
  }
  return value
}

describe('Sessions', () => {
  it('starts, loads, serves from memory within the cache window, reads the store after it, and ends', async () => {
    const { clock, store, sessions } = await setUp()
    const { id, cookie } = await sessions.start(undefined, RECORD)
    expect(cookie).toMatch(/^[A-Za-z0-9_-]{43}\.[A-Za-z0-9_-]{8}$/)
    expect(id).not.toContain(cookie)

    // The session just started is in this instance's cache: the first request after sign-in reads nothing.
    const started = sessions.cached(header(cookie))
    expect(started).toEqual({ id, cookie, record: RECORD })
    expect(await sessions.load(header(cookie))).toBe(started)
    expect(store.reads).toBe(0)

    // Past the window: the store.
    clock.ms += 1001
    expect(sessions.cached(header(cookie))).toBeUndefined()
    const loaded = await sessions.load(header(cookie))
    expect(loaded).toEqual({ id, cookie, record: RECORD })
    expect(store.reads).toBe(1)

    // Within the window: the same value, no store read, no promise.
    clock.ms += 999
    expect(sessions.cached(header(cookie))).toBe(loaded)
    expect(await sessions.load(header(cookie))).toBe(loaded)
    expect(store.reads).toBe(1)

    // Past it: the store again.
    clock.ms += 2
    expect(sessions.cached(header(cookie))).toBeUndefined()
    expect(await sessions.load(header(cookie))).toEqual(loaded)
    expect(store.reads).toBe(2)

    await sessions.end(await sessions.load(header(cookie)))
    expect(sessions.cached(header(cookie))).toBeUndefined()
    expect(await sessions.load(header(cookie))).toBeNull()
    expect(await store.get(storeKeys.session(id))).toBeNull()
  })

  it('keeps a session alive while it is used and lets it go after session.ttl idle', async () => {
    const { clock, sessions } = await setUp()
    const { cookie } = await sessions.start(undefined, RECORD)
    for (let i = 0; i < 3; i++) {
      clock.ms += CONFIG.ttlMs - 1000 // each load renews the idle timeout
      expect(await sessions.load(header(cookie))).not.toBeNull()
    }
    clock.ms += CONFIG.ttlMs + 1
    expect(await sessions.load(header(cookie))).toBeNull()
  })

  it('issues a new id and cookie at every start, and ends the session the old cookie named (no fixation)', async () => {
    const { sessions } = await setUp()
    const first = await sessions.start(undefined, RECORD)
    await sessions.load(header(first.cookie)) // cached too
    const second = await sessions.start(header(first.cookie), RECORD)
    expect(second.id).not.toBe(first.id)
    expect(second.cookie).not.toBe(first.cookie)
    expect(sessions.cached(header(first.cookie))).toBeUndefined()
    expect(await sessions.load(header(first.cookie))).toBeNull()
    expect((await sessions.load(header(second.cookie)))?.record).toEqual(RECORD)

    const ids = new Set<string>()
    for (let i = 0; i < 20; i++) ids.add((await sessions.start(undefined, RECORD)).id)
    expect(ids.size).toBe(20)
  })

  describe('a sign-out with the cookie a sign-in in another tab renamed a moment ago', () => {
    // Tab A's sign-in (a second provider, a step-up) gives the session a new id and cookie; tab B's
    // sign-out, sent before the browser had the new cookie, comes with the old one. Before: it found
    // nothing, and A's answer, arriving last, left the browser signed in.
    it('ends the renamed session, and the old cookie still opens nothing', async () => {
      const { sessions } = await setUp()
      const first = await sessions.start(undefined, RECORD)
      const second = await sessions.start(header(first.cookie), RECORD)
      expect(await sessions.load(header(first.cookie))).toBeNull()
      await sessions.end(null, header(first.cookie))
      expect(await sessions.load(header(second.cookie))).toBeNull()
    })

    it('follows renames one after another, and a copy cached from before the rename ends the new session too', async () => {
      const { sessions } = await setUp()
      const first = await sessions.start(undefined, RECORD)
      const stale = (await sessions.load(header(first.cookie)))!
      const second = await sessions.start(header(first.cookie), RECORD)
      const third = await sessions.start(header(second.cookie), RECORD)
      await sessions.end(stale, header(first.cookie))
      expect(await sessions.load(header(third.cookie))).toBeNull()
    })

    it('a later sign-in with the same old cookie (its record gone) neither replaces nor deletes the pointer', async () => {
      // Two tabs complete sign-ins (a step-up, a second provider) with the same old cookie; a
      // third signs out with it (an outside tester's row: the second sign-in erased the pointer).
      const { sessions } = await setUp()
      const old = await sessions.start(undefined, RECORD)
      const first = await sessions.start(header(old.cookie), RECORD)
      const second = await sessions.start(header(old.cookie), RECORD)
      await sessions.end(await sessions.load(header(old.cookie)), header(old.cookie))
      expect(await sessions.load(header(first.cookie))).toBeNull()
      expect(await sessions.load(header(second.cookie))).not.toBeNull()
    })

    it('a store that fails the pointer fails the sign-in and leaves no session that no cookie names (nor ends the old one)', async () => {
      const store = new PointerRefusingStore({ clock: { now: () => 1_700_000_000_000 } })
      const { sessions } = await setUp(undefined, store)
      const old = await sessions.start(undefined, RECORD)
      store.refusing.add('claim').add('set')
      await expect(sessions.start(header(old.cookie), RECORD)).rejects.toThrow('store unreachable')
      expect(store.sessionsWritten).toHaveLength(2)
      expect(await store.getBytes(store.sessionsWritten[1]!)).toBeNull()
      expect(await sessions.load(header(old.cookie))).not.toBeNull()
    })

    // A reviewer's rows: each ended the new session after the old one was taken, or left a sign-out half done.
    it('a pointer that cannot be written once the old record is taken leaves the sign-in standing', async () => {
      const store = new PointerRefusingStore({ clock: { now: () => 1_700_000_000_000 } })
      const { sessions } = await setUp(undefined, store)
      const old = await sessions.start(undefined, RECORD)
      store.claimedElsewhere = true
      store.refusing.add('set')
      const renamed = await sessions.start(header(old.cookie), RECORD)
      expect(await sessions.load(header(renamed.cookie))).not.toBeNull()
      expect(await sessions.load(header(old.cookie))).toBeNull()
    })

    it('a sign-out whose pointer cannot be read still ends its own session, without an error', async () => {
      const store = new PointerRefusingStore({ clock: { now: () => 1_700_000_000_000 } })
      const { sessions } = await setUp(undefined, store)
      const live = await sessions.start(undefined, RECORD)
      store.refusing.add('get')
      await expect(sessions.end(await sessions.load(header(live.cookie)), header(live.cookie))).resolves.toBeUndefined()
      await expect(sessions.end(null, header(`${'A'.repeat(43)}.${live.cookie.slice(44)}`))).resolves.toBeUndefined()
      expect(await sessions.load(header(live.cookie))).toBeNull()
    })

    it('gives no say to a cookie whose session had ended before the sign-in, to a made-up one, or after a minute', async () => {
      const { clock, sessions } = await setUp()
      const ended = await sessions.start(undefined, RECORD)
      await sessions.end(await sessions.load(header(ended.cookie)))
      const after = await sessions.start(header(ended.cookie), RECORD)
      await sessions.end(null, header(ended.cookie))
      expect(await sessions.load(header(after.cookie))).not.toBeNull()

      await sessions.end(null, header(`${'A'.repeat(43)}.${after.cookie.slice(44)}`))
      expect(await sessions.load(header(after.cookie))).not.toBeNull()

      const second = await sessions.start(header(after.cookie), RECORD)
      // The session's idle timeout (session.ttl) is a minute too: a request halfway renews it.
      clock.ms += 30_001
      expect(await sessions.load(header(second.cookie))).not.toBeNull()
      clock.ms += 30_000
      await sessions.end(null, header(after.cookie))
      expect(await sessions.load(header(second.cookie))).not.toBeNull()
    })
  })

  it('opens nothing for a tampered, foreign, malformed or missing cookie', async () => {
    const { store, sessions } = await setUp()
    const { cookie } = await sessions.start(undefined, RECORD)
    const flipped = cookie.slice(0, 10) + (cookie[10] === 'A' ? 'B' : 'A') + cookie.slice(11)
    expect(await sessions.load(header(flipped))).toBeNull()

    // Another gateway's session (another secret) on the same store: neither opens the other's.
    const other = await setUp(undefined, store, 'another-secret-of-at-least-32-characters!')
    const foreign = await other.sessions.start(undefined, RECORD)
    expect(await sessions.load(header(foreign.cookie))).toBeNull()
    expect(await other.sessions.load(header(cookie))).toBeNull()
    expect(await other.sessions.load(header(foreign.cookie))).not.toBeNull()

    // The record of one cookie copied under another cookie's key does not open either.
    const victim = await sessions.start(undefined, RECORD)
    const victimId = (await sessions.load(header(victim.cookie)))!.id
    const attacker = await sessions.start(undefined, emptyRecord(1_700_000_000_000))
    const attackerId = (await sessions.load(header(attacker.cookie)))!.id
    await store.set(storeKeys.session(attackerId), (await store.getBytes(storeKeys.session(victimId)))!, 60_000)
    const { sessions: fresh } = await setUp(undefined, store) // no cache of the attacker's session
    expect(await fresh.load(header(attacker.cookie))).toBeNull()

    const reads = store.reads
    for (const value of [`${cookie}x`, cookie.slice(1), `${cookie.slice(1)}+`, '', 'gw_session']) {
      expect(await sessions.load(header(value))).toBeNull()
      expect(sessions.cached(header(value))).toBeUndefined()
    }
    expect(await sessions.load(undefined)).toBeNull()
    expect(await sessions.load('')).toBeNull()
    expect(await sessions.load(`xgw_session=${cookie}`)).toBeNull()
    expect(store.reads).toBe(reads) // a malformed value never reaches the store
  })

  it('stores only a keyed hash of the cookie and ciphertext: no token, ID token or cookie in what is stored', async () => {
    const { store, sessions } = await setUp()
    const { id, cookie } = await sessions.start(undefined, RECORD)
    const key = storeKeys.session(id)
    const stored = (await store.getBytes(key))!
    // The compact format: one format byte, then iv | tag | ciphertext of the wire form's JSON.
    expect(stored[0]).toBe(2)
    expect(stored.length).toBe(1 + 12 + 16 + Buffer.byteLength(storedJson(RECORD)))
    const secrets = [TOKENS.access_token, TOKENS.refresh_token!, RECORD.providerSessions!.demo!.idToken!, 'alice@example.com', cookie]
    for (const secret of secrets) {
      expect(key).not.toContain(secret)
      expect(stored.includes(secret)).toBe(false)
      expect(stored.includes(Buffer.from(secret, 'base64url'))).toBe(false)
    }
    // Opening it takes the cookie: the sealer with the right cookie reads the record back.
    expect(fromWire(JSON.parse(new Sealer(SECRET).openBytes('session:compact', cookie, stored.subarray(1))!) as WireRecord)).toEqual(RECORD)
  })

  it('does not open the formats of the builds before 1.0.0, which were never released (long-key JSON as bytes, format byte 1, and as base64url text)', async () => {
    const { clock, store, sessions } = await setUp()
    const { id, cookie } = await sessions.start(undefined, RECORD)
    const sealer = new Sealer(SECRET)
    const binary = Buffer.concat([Buffer.from([1]), sealer.sealBytes('session', cookie, JSON.stringify(RECORD))])
    for (const stored of [binary, Buffer.from(sealer.seal('session', cookie, JSON.stringify(RECORD)))]) {
      await store.set(storeKeys.session(id), stored, 60_000)
      clock.ms += 1001 // past the cache window: read from the store
      expect(await sessions.load(header(cookie))).toBeNull()
    }
  })

  it('a format byte changed in the store opens nothing (each format is sealed under its own key)', async () => {
    const { clock, store, sessions } = await setUp()
    const { id, cookie } = await sessions.start(undefined, RECORD)
    const compact = (await store.getBytes(storeKeys.session(id)))!
    const legacy = new Sealer(SECRET).sealBytes('session', cookie, JSON.stringify(RECORD))
    for (const stored of [Buffer.concat([Buffer.from([1]), compact.subarray(1)]), Buffer.concat([Buffer.from([2]), legacy])]) {
      await store.set(storeKeys.session(id), stored, 60_000)
      clock.ms += 1001
      expect(await sessions.load(header(cookie))).toBeNull()
    }
  })

  it('a record that opens but is not shaped like one is no session, not an error', async () => {
    const { clock, store, sessions } = await setUp()
    const { id, cookie } = await sessions.start(undefined, RECORD)
    const sealer = new Sealer(SECRET)
    for (const plaintext of ['not json', 'null', '[]', '{"c":1}', '{"c":"1","t":{}}', '{"t":{}}']) {
      await store.set(storeKeys.session(id), Buffer.concat([Buffer.from([2]), sealer.sealBytes('session:compact', cookie, plaintext)]), 60_000)
      clock.ms += 1001
      expect(await sessions.load(header(cookie))).toBeNull()
    }
  })

  it('writes a refreshed record as a new value under the same id, drops the cached one, and leaves the old value as it was', async () => {
    const { store, sessions } = await setUp()
    const { cookie } = await sessions.start(undefined, RECORD)
    const loaded = deepFreeze((await sessions.load(header(cookie)))!)
    const refreshed: TokenSet = { ...TOKENS, access_token: 'at-new', expires_at: 2_000_000_600 }

    const read = (await sessions.reload(loaded))!
    expect(read.record).toEqual(loaded.record)
    const updated = (await sessions.update(loaded, read, withTokens(loaded.record, 'demo', refreshed)))!
    expect(updated.id).toBe(loaded.id)
    expect(updated.record.tokens.demo).toEqual(refreshed)
    expect(updated.record.identities).toBe(loaded.record.identities)
    expect(loaded.record.tokens.demo).toEqual(TOKENS)
    expect(sessions.cached(header(cookie))).toBeUndefined()
    const reads = store.reads
    expect((await sessions.load(header(cookie)))?.record.tokens.demo).toEqual(refreshed)
    expect(store.reads).toBe(reads + 1)
    expect((await sessions.reload(updated))?.record).toEqual(updated.record)
  })

  it('ends a session by id on every instance sharing the store', async () => {
    const clock = { ms: 1_700_000_000_000, now (): number { return this.ms } }
    const one = await setUp(clock)
    const two = await setUp(clock, one.store)
    const { id, cookie } = await one.sessions.start(undefined, RECORD)
    expect(await two.sessions.load(header(cookie))).not.toBeNull()
    expect(two.sessions.cached(header(cookie))).toBeDefined()
    await one.sessions.endById(id)
    expect(two.sessions.cached(header(cookie))).toBeUndefined()
    expect(await two.sessions.load(header(cookie))).toBeNull()
  })

  it('describes the cookie for the caller to set: HttpOnly, SameSite=Lax, Path=/, Secure and Domain per config', async () => {
    const { sessions } = await setUp()
    expect(sessions.cookieName).toBe('gw_session')
    expect(sessions.cookieOptions).toEqual({ path: '/', httpOnly: true, sameSite: 'lax', secure: true })
    expect(Object.isFrozen(sessions.cookieOptions)).toBe(true)
    const shared = new Sessions(new MemoryStore(), new Sealer(SECRET), { ...CONFIG, cookieSecure: false, cookieDomain: 'example.com' })
    expect(shared.cookieOptions).toEqual({ path: '/', httpOnly: true, sameSite: 'lax', secure: false, domain: 'example.com' })
  })
})

describe('session records', () => {
  const frozen = deepFreeze(RECORD)

  it('a sign-in at a second provider is a new record that keeps the first provider and leaves the old one untouched', () => {
    const other: TokenSet = { access_token: 'gh' }
    const both = withSignIn(frozen, 'github', { tokens: other, identity: { sub: '42', groups: [] } })
    expect(both).not.toBe(frozen)
    expect(Object.keys(both.tokens)).toEqual(['demo', 'github'])
    expect(both.tokens.demo).toBe(frozen.tokens.demo)
    expect(both.identities?.github).toEqual({ sub: '42', groups: [] })
    expect(both.providerSessions).toEqual(frozen.providerSessions) // github brought none
    expect(Object.keys(frozen.tokens)).toEqual(['demo'])
  })

  it('a sign-in again at the same provider replaces its tokens, and drops an identity or provider session it no longer brings', () => {
    const again = withSignIn(frozen, 'demo', { tokens: { access_token: 'at-2' } })
    expect(again.tokens.demo?.access_token).toBe('at-2')
    expect(again.identities).toEqual({})
    expect(again.providerSessions).toEqual({})
    expect(again.createdAt).toBe(frozen.createdAt)
    expect(frozen.identities?.demo?.sub).toBe('alice')
  })

  it('a refused refresh removes only that provider\'s tokens', () => {
    const both = withSignIn(frozen, 'github', { tokens: { access_token: 'gh' } })
    const refused = withTokens(deepFreeze(both), 'demo', undefined)
    expect(Object.keys(refused.tokens)).toEqual(['github'])
    expect(refused.identities).toBe(both.identities)
    expect(Object.keys(both.tokens)).toEqual(['demo', 'github'])
  })

  it('keeps a provider named __proto__ as an entry, never as a prototype', () => {
    const record = withTokens(emptyRecord(0), '__proto__', TOKENS)
    expect(Object.keys(record.tokens)).toEqual(['__proto__'])
    expect(Object.getPrototypeOf(record.tokens)).toBe(Object.prototype)
    const parsed = JSON.parse(JSON.stringify(record)) as SessionRecord
    expect(Object.getOwnPropertyDescriptor(parsed.tokens, '__proto__')?.value).toEqual(TOKENS)
  })
})
