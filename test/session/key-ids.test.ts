// Sealed values name the key id of the secret that sealed them, so opening costs one try: session
// cookies (`<43 chars>.<kid>`), records refreshed under a previous secret (format byte 3), the
// assertion key set, the back-channel logout index. Cookies of earlier versions (no key id) are
// tried with each secret, current first. A made-up cookie naming an unknown key id costs no store
// read. No sockets: the in-process store, counting its reads and the decryptions tried.
import pino from 'pino'
import { afterEach, describe, expect, it, vi } from 'vitest'
import type { SessionConfig } from '../../src/config/types.js'
import { KeyRing } from '../../src/assertion/keys.js'
import { SessionIndex } from '../../src/oauth/session-index.js'
import { emptyRecord, withSignIn, withTokens } from '../../src/session/record.js'
import { keyIdOf, randomToken, Sealer, SealingKey } from '../../src/session/seal.js'
import { encodeRecord, Sessions } from '../../src/session/session.js'
import { MemoryStore } from '../../src/store/memory.js'
import { storeKeys } from '../../src/store/store.js'

const S1 = 'key-id-secret-one-0123456789-abcdefghijklm'
const S2 = 'key-id-secret-two-9876543210-zyxwvutsrqpon'
const S3 = 'key-id-secret-three-0123456789-abcdefghijk'
const CONFIG: SessionConfig = { cookieName: 'gw_session', secret: S1, ttlMs: 60_000, cookieSecure: true, cacheTtlMs: 1000, maxAgeMs: 7 * 86_400_000, previousSecrets: [] }
const RECORD = withSignIn(emptyRecord(Date.now()), 'demo', {
  tokens: { access_token: 'at-1', refresh_token: 'rt-1' },
  identity: { sub: 'alice', groups: [] },
  providerSession: { sid: 'sid-1', sub: 'alice' },
})

/** The in-process store, counting reads of session records (getAndTouchBytes and getBytes). */
class CountingStore extends MemoryStore {
  reads = 0
  override async getAndTouchBytes (key: string, ttlMs: number): Promise<Buffer | null> {
    this.reads++
    return await super.getAndTouchBytes(key, ttlMs)
  }

  override async getBytes (key: string): Promise<Buffer | null> {
    this.reads++
    return await super.getBytes(key)
  }
}

const stores: MemoryStore[] = []
afterEach(async () => {
  vi.restoreAllMocks()
  for (const store of stores.splice(0)) await store.close()
})

function newStore (): CountingStore {
  const store = new CountingStore()
  stores.push(store)
  return store
}

/** An instance holding `secrets` (the first seals) over `store`; no cache, so every load reads the store. */
function instance (store: CountingStore, secrets: string[]): Sessions {
  return new Sessions(store, new Sealer(secrets[0]!, secrets.slice(1)), { ...CONFIG, cacheTtlMs: 0 })
}

const header = (cookie: string) => `gw_session=${cookie}`

/** The decryptions tried from here on (one entry each). */
function countTries (): readonly unknown[] {
  return vi.spyOn(SealingKey.prototype, 'openBytes').mock.calls
}

describe('session cookies name the key id of their secret', () => {
  it('a key id is a keyed hash: short, stable, different per secret, and not the secret', () => {
    expect(keyIdOf(S1)).toMatch(/^[A-Za-z0-9_-]{8}$/)
    expect(keyIdOf(S1)).toBe(keyIdOf(S1))
    expect(keyIdOf(S1)).not.toBe(keyIdOf(S2))
    expect(S1).not.toContain(keyIdOf(S1))
    expect(() => new Sealer(S1, [S1])).toThrow('the secrets must differ')
  })

  it('a session begun under s1 opens under [s2, previous s1] in one read and one try, and is no session under [s2]', async () => {
    const store = newStore()
    const { cookie } = await instance(store, [S1]).start(undefined, RECORD)
    expect(cookie).toMatch(new RegExp(`^[A-Za-z0-9_-]{43}\\.${keyIdOf(S1)}$`))
    const rotated = instance(store, [S2, S1, S3])
    const reads = store.reads
    const tries = countTries()
    expect((await rotated.load(header(cookie)))?.record).toEqual(RECORD)
    expect(store.reads - reads).toBe(1)
    expect(tries.length).toBe(1)
    expect(await instance(store, [S2]).load(header(cookie))).toBeNull()
  })

  it('a refresh under [s2, previous s1] keeps the store id and seals the record with s2, naming it (format byte 3)', async () => {
    const store = newStore()
    const { id, cookie } = await instance(store, [S1]).start(undefined, RECORD)
    const rotated = instance(store, [S2, S1])
    const session = (await rotated.load(header(cookie)))!
    const refreshed = withTokens(RECORD, 'demo', { access_token: 'at-2', refresh_token: 'rt-2' })
    expect(await rotated.update(session, (await rotated.reload(session))!, refreshed)).not.toBeNull()
    const stored = (await store.getBytes(storeKeys.session(id)))!
    expect(stored[0]).toBe(3)
    expect(stored.toString('latin1', 1, 9)).toBe(keyIdOf(S2))
    expect((await rotated.load(header(cookie)))?.record).toEqual(refreshed)
    // s1 alone cannot open what s2 sealed: the write was with the current secret.
    expect(await instance(store, [S1]).load(header(cookie))).toBeNull()
    // Refreshed again by an instance back on [s1, previous s2]: its own secret, format byte 2.
    const back = instance(store, [S1, S2])
    const again = (await back.load(header(cookie)))!
    expect(await back.update(again, (await back.reload(again))!, RECORD)).not.toBeNull()
    expect((await store.getBytes(storeKeys.session(id)))![0]).toBe(2)
    expect((await instance(store, [S1]).load(header(cookie)))?.record).toEqual(RECORD)
  })

  it.each<[string, (stored: Buffer) => Buffer]>([
    ['its key id changed to another held secret', (stored) => Buffer.concat([stored.subarray(0, 1), Buffer.from(keyIdOf(S1)), stored.subarray(9)])],
    ['its key id changed to an unknown one', (stored) => Buffer.concat([stored.subarray(0, 1), Buffer.from('AAAAAAAA'), stored.subarray(9)])],
    ['its format byte changed to 2', (stored) => Buffer.concat([Buffer.from([2]), stored.subarray(1)])],
    ['its format byte changed to 2 and its key id cut', (stored) => Buffer.concat([Buffer.from([2]), stored.subarray(9)])],
    ['cut short after the key id', (stored) => stored.subarray(0, 9)],
    ['only its format byte', (stored) => stored.subarray(0, 1)],
  ])('a rekeyed record with %s opens nothing', async (_case, tamper) => {
    const store = newStore()
    const { id, cookie } = await instance(store, [S1]).start(undefined, RECORD)
    const rotated = instance(store, [S2, S1])
    const session = (await rotated.load(header(cookie)))!
    await rotated.update(session, (await rotated.reload(session))!, RECORD)
    await store.set(storeKeys.session(id), tamper((await store.getBytes(storeKeys.session(id)))!), 60_000)
    expect(await rotated.load(header(cookie))).toBeNull()
  })

  it('a cookie of an earlier version (no key id) is tried with each secret, current first, and then is like any other', async () => {
    const store = newStore()
    const cookie = randomToken()
    const s1 = new Sealer(S1)
    await store.set(storeKeys.session(s1.idFor('session', cookie)), encodeRecord(s1, cookie, RECORD), 60_000)
    expect((await instance(store, [S1]).load(header(cookie)))?.record).toEqual(RECORD)
    let reads = store.reads
    const rotated = instance(store, [S2, S1])
    const session = (await rotated.load(header(cookie)))!
    expect(session.record).toEqual(RECORD)
    expect(store.reads - reads).toBe(2)
    // Refreshed: still its s1 store id, sealed with s2.
    expect(await rotated.update(session, (await rotated.reload(session))!, RECORD)).not.toBeNull()
    expect((await store.getBytes(storeKeys.session(session.id)))![0]).toBe(3)
    expect((await rotated.load(header(cookie)))?.record).toEqual(RECORD)
    // At most one read per secret held (secret and four previous), then nothing.
    reads = store.reads
    expect(await instance(store, [S2, S3, 'key-id-secret-four-0123456789-abcdefghijk', 'key-id-secret-five-0123456789-abcdefghijk', 'key-id-secret-six-0123456789-abcdefghijkl']).load(header(randomToken()))).toBeNull()
    expect(store.reads - reads).toBe(5)
    // A sign-in over it ends it, under whichever secret it was found.
    const started = await rotated.start(header(cookie), RECORD)
    expect(await store.getBytes(storeKeys.session(session.id))).toBeNull()
    expect(started.cookie.endsWith(`.${keyIdOf(S2)}`)).toBe(true)
  })

  it.each<[string, (real: string) => string]>([
    ['a made-up token with an unknown key id', () => `${randomToken()}.AAAAAAAA`],
    ['a real token with its key id changed to an unknown one', (real) => `${real.slice(0, 43)}.ZZZZZZZZ`],
    ['the key id of a secret given up', (real) => `${real.slice(0, 43)}.${keyIdOf(S3)}`],
    ['a key id one character short', (real) => real.slice(0, -1)],
    ['a key id one character long', (real) => `${real}A`],
    ['two key ids', (real) => `${real}.${keyIdOf(S2)}`],
    ['an empty key id', (real) => `${real.slice(0, 43)}.`],
    ['a key id with a character outside base64url', (real) => `${real.slice(0, 43)}.${keyIdOf(S2).slice(0, 7)}+`],
    ['a key id with a percent-encoded dot', (real) => `${real.slice(0, 43)}%2E${keyIdOf(S2)}`],
    ['a key id before the token', (real) => `${keyIdOf(S2)}.${real.slice(0, 43)}`],
    ['a key id with a NUL', (real) => `${real.slice(0, 43)}.${keyIdOf(S2).slice(0, 7)}\0`],
  ])('%s: no session, and no store read', async (_case, value) => {
    const store = newStore()
    const sessions = instance(store, [S2, S1])
    const { cookie } = await sessions.start(undefined, RECORD)
    const reads = store.reads
    expect(await sessions.load(header(value(cookie)))).toBeNull()
    expect(store.reads).toBe(reads)
  })

  it("a real token under another held secret's key id: one read, no session", async () => {
    const store = newStore()
    const sessions = instance(store, [S2, S1])
    const { cookie } = await sessions.start(undefined, RECORD)
    const reads = store.reads
    expect(await sessions.load(header(`${cookie.slice(0, 43)}.${keyIdOf(S1)}`))).toBeNull()
    expect(store.reads - reads).toBe(1)
  })
})

describe('the assertion key set', () => {
  const options = { rotateEveryMs: 86_400_000, clock: { now: () => Date.parse('2026-01-01T00:00:00Z') }, log: pino({ level: 'silent' }) }

  it('names its key id; sealed with s1 it is opened under [s2, previous s1] and sealed again with s2, so [s2] opens it', async () => {
    const store = newStore()
    const kid = (await new KeyRing(store, new Sealer(S1), options).signingKey()).kid
    expect((await store.get('assertion-keys'))!.startsWith(`${keyIdOf(S1)}.`)).toBe(true)
    expect((await new KeyRing(store, new Sealer(S2, [S1]), options).signingKey()).kid).toBe(kid)
    expect((await store.get('assertion-keys'))!.startsWith(`${keyIdOf(S2)}.`)).toBe(true)
    expect((await new KeyRing(store, new Sealer(S2), options).signingKey()).kid).toBe(kid)
  })

  it('a set written by an earlier version (no key id) opens under a previous secret', async () => {
    const store = newStore()
    await new KeyRing(store, new Sealer(S1), options).signingKey()
    const named = (await store.get('assertion-keys'))!
    await store.set('assertion-keys', named.slice(named.indexOf('.') + 1), 60_000)
    await expect(new KeyRing(store, new Sealer(S2, [S1]), options).signingKey()).resolves.toBeDefined()
    expect((await store.get('assertion-keys'))!.startsWith(`${keyIdOf(S2)}.`)).toBe(true)
  })
})

describe('the back-channel logout index', () => {
  it('a session listed under s1 is found under [s2, previous s1]; a renewal keeps its entry alive', async () => {
    const clock = { ms: 0, now (): number { return this.ms } }
    const store = new MemoryStore({ clock })
    stores.push(store)
    await new SessionIndex(store, new Sealer(S1), 60_000).add('demo', { sid: 'sid-1', sub: 'alice' }, 'session-1')
    const rotated = new SessionIndex(store, new Sealer(S2, [S1]), 60_000)
    await rotated.add('demo', { sub: 'alice' }, 'session-2')
    clock.ms = 50_000
    await rotated.touch({ demo: { sid: 'sid-1', sub: 'alice' } })
    clock.ms = 100_000
    expect((await rotated.take('demo', 'sub', 'alice')).sort()).toEqual(['session-1', 'session-2'])
    expect(await rotated.take('demo', 'sub', 'alice')).toEqual([])
    expect(await rotated.take('demo', 'sid', 'sid-1')).toEqual(['session-1'])
  })
})
