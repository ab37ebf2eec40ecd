// Sealed values name the key id of the secret that sealed them, so opening costs one try: session
// cookies (`<43 chars>.<kid>`), records 1.0.0 sealed under another secret (format byte 3), the
// assertion key set, the back-channel logout index. A cookie without a key id (the builds before
// 1.0.0 made them) is no session. A made-up cookie naming an unknown key id costs no store
// read. A session record is sealed with its cookie's secret, whichever instance writes it; one
// 1.0.0 sealed under another is sealed again by its first read where its cookie's secret is
// the current one. No sockets: the in-process store, counting its reads and the decryptions tried.
import pino from 'pino'
import { afterEach, describe, expect, it, vi } from 'vitest'
import type { SessionConfig } from '../../src/config/types.js'
import { KeyRing } from '../../src/assertion/keys.js'
import { PRUNE_ABOVE, SessionIndex } from '../../src/oauth/session-index.js'
import { emptyRecord, withSignIn, withTokens } from '../../src/session/record.js'
import { keyIdOf, randomToken, Sealer, SealingKey } from '../../src/session/seal.js'
import { Sessions } from '../../src/session/session.js'
import { encodeRecord, storedJson } from '../../src/session/sealed-record.js'
import type { SessionRecord } from '../../src/session/session.js'
import { systemClock } from '../../src/ops/clock.js'
import { MemoryStore } from '../../src/store/memory.js'
import { storeKeys } from '../../src/store/store.js'

const S1 = 'key-id-secret-one-0123456789-abcdefghijklm'
const S2 = 'key-id-secret-two-9876543210-zyxwvutsrqpon'
const S3 = 'key-id-secret-three-0123456789-abcdefghijk'
const CONFIG: SessionConfig = { cookieName: 'gw_session', secret: S1, ttlMs: 60_000, cookieSecure: true, cacheTtlMs: 1000, maxAgeMs: 7 * 86_400_000, previousSecrets: [] }
const RECORD = withSignIn(emptyRecord(Date.now()), 'demo', {
  tokens: { access_token: 'at-1', refresh_token: 'rt-1' },
  identity: { sub: 'alice', subject: 'alice-subject', groups: [] },
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

/** What an earlier build wrote for a cookie made under a secret other than its current one `writer`: format byte 3, writer's key id, the record sealed with it. */
function rekeyed (writer: string, cookie: string, record: SessionRecord): Buffer {
  return Buffer.concat([Buffer.from([3]), Buffer.from(keyIdOf(writer), 'latin1'), new SealingKey(writer).sealBytes('session:compact', cookie, storedJson(record))])
}

/** The in-process store, a write made by another instance between a read and the compare-and-set after it. */
class RacingStore extends CountingStore {
  meanwhile: (() => Promise<void>) | undefined
  override async replace (key: string, expected: Uint8Array, value: string | Uint8Array, ttlMs: number): Promise<boolean> {
    const write = this.meanwhile
    this.meanwhile = undefined
    await write?.()
    return await super.replace(key, expected, value, ttlMs)
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

  it('a refresh keeps the store id and seals the record with the secret its cookie names, whatever the instance seals new sessions with (format byte 2)', async () => {
    const store = newStore()
    const { id, cookie } = await instance(store, [S1]).start(undefined, RECORD)
    const rotated = instance(store, [S2, S1])
    const session = (await rotated.load(header(cookie)))!
    const refreshed = withTokens(RECORD, 'demo', { access_token: 'at-2', refresh_token: 'rt-2' })
    expect(await rotated.update(session, (await rotated.reload(session))!, refreshed)).not.toBeNull()
    expect((await store.getBytes(storeKeys.session(id)))![0]).toBe(2)
    expect((await rotated.load(header(cookie)))?.record).toEqual(refreshed)
    // s1 alone opens it: the session needs s1 for its store id anyway.
    expect((await instance(store, [S1]).load(header(cookie)))?.record).toEqual(refreshed)

    // A session begun under s2, refreshed by an instance still on [s1, previous s2]: sealed with s2, so [s2] keeps it.
    const later = await instance(store, [S2, S1]).start(undefined, RECORD)
    const behind = instance(store, [S1, S2])
    const own = (await behind.load(header(later.cookie)))!
    expect(await behind.update(own, (await behind.reload(own))!, refreshed)).not.toBeNull()
    expect((await store.getBytes(storeKeys.session(later.id)))![0]).toBe(2)
    expect((await instance(store, [S2]).load(header(later.cookie)))?.record).toEqual(refreshed)
  })

  it('a record an earlier build sealed under s1 for an s2 cookie is sealed again with s2 by its first read under [s2, previous s1], once; [s1, previous s2] leaves it', async () => {
    const store = newStore()
    const { id, cookie } = await instance(store, [S2, S1]).start(undefined, RECORD)
    const key = storeKeys.session(id)
    await store.set(key, rekeyed(S1, cookie, RECORD), 60_000)
    const behind = instance(store, [S1, S2])
    expect((await behind.load(header(cookie)))?.record).toEqual(RECORD)
    expect((await store.getBytes(key))![0]).toBe(3)
    // s2 is a previous secret on that instance: it counts the session, whose cookie needs s2.
    expect(behind.previousSecretSessions()).toBe(1)
    const rotated = instance(store, [S2, S1])
    expect((await rotated.load(header(cookie)))?.record).toEqual(RECORD)
    const resealed = (await store.getBytes(key))!
    expect(resealed[0]).toBe(2)
    expect(rotated.previousSecretSessions()).toBe(0)
    expect((await instance(store, [S2]).load(header(cookie)))?.record).toEqual(RECORD)
    expect((await rotated.load(header(cookie)))?.record).toEqual(RECORD)
    expect((await store.getBytes(key))!.equals(resealed)).toBe(true)
  })

  it('sealing again is a compare-and-set over the bytes read: a refresh written in between is kept, and the session still counts until read again', async () => {
    const store = new RacingStore()
    stores.push(store)
    const { id, cookie } = await instance(store, [S2, S1]).start(undefined, RECORD)
    const key = storeKeys.session(id)
    await store.set(key, rekeyed(S1, cookie, RECORD), 60_000)
    const refreshed = withTokens(RECORD, 'demo', { access_token: 'at-2', refresh_token: 'rt-2' })
    store.meanwhile = async () => { await store.set(key, encodeRecord(new Sealer(S2, [S1]), cookie, refreshed), 60_000) }
    const rotated = instance(store, [S2, S1])
    expect((await rotated.load(header(cookie)))?.record).toEqual(RECORD)
    expect(rotated.previousSecretSessions()).toBe(1)
    expect((await rotated.load(header(cookie)))?.record).toEqual(refreshed)
    expect(rotated.previousSecretSessions()).toBe(0)
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
    await store.set(storeKeys.session(id), tamper(rekeyed(S2, cookie, RECORD)), 60_000)
    expect(await rotated.load(header(cookie))).toBeNull()
  })

  it.each<[string, (real: string) => string]>([
    ['a made-up token with an unknown key id', () => `${randomToken()}.AAAAAAAA`],
    ['no key id (the builds before 1.0.0, never released, made such cookies)', (real) => real.slice(0, 43)],
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

  it('a set without a key id (the builds before 1.0.0 wrote one) is not opened, and not overwritten', async () => {
    const store = newStore()
    await new KeyRing(store, new Sealer(S1), options).signingKey()
    const named = (await store.get('assertion-keys'))!
    await store.set('assertion-keys', named.slice(named.indexOf('.') + 1), 60_000)
    await expect(new KeyRing(store, new Sealer(S2, [S1]), options).signingKey()).rejects.toMatchObject({ code: 'internal_error' })
    expect(await store.get('assertion-keys')).toBe(named.slice(named.indexOf('.') + 1))
  })
})

describe('the back-channel logout index', () => {
  it(`keeps the ids of ended sessions only until a sign-in finds more than ${PRUNE_ABOVE} (an outside tester's finding: one more a sign-in, without bound)`, async () => {
    const store = new MemoryStore()
    stores.push(store)
    const index = new SessionIndex(store, new Sealer(S1), 60_000, systemClock)
    // The person keeps one session in use and a kept agent sign-in; every other sign-in ends (sign out everywhere, a revoke) without its entry.
    await store.set(storeKeys.session('kept'), 'sealed', 60_000)
    const pending = storeKeys.pendingSignIn('waiting')
    await store.set(pending, 'sealed', 60_000)
    await index.add('demo', { sub: 'alice' }, 'kept')
    await index.add('demo', { sub: 'alice' }, pending)
    for (let i = 0; i < PRUNE_ABOVE - 2; i++) await index.add('demo', { sub: 'alice' }, `ended-${i}`)
    expect(await index.find('demo', 'sub', 'alice')).toHaveLength(PRUNE_ABOVE)
    await store.set(storeKeys.session('new'), 'sealed', 60_000)
    await index.add('demo', { sub: 'alice' }, 'new')
    expect((await index.find('demo', 'sub', 'alice')).sort()).toEqual([pending, 'kept', 'new'].sort())
  })

  it('a session listed under s1 is found under [s2, previous s1]; a renewal keeps its entry alive', async () => {
    const clock = { ms: 0, now (): number { return this.ms } }
    const store = new MemoryStore({ clock })
    stores.push(store)
    await new SessionIndex(store, new Sealer(S1), 60_000, systemClock).add('demo', { sid: 'sid-1', sub: 'alice' }, 'session-1')
    const rotated = new SessionIndex(store, new Sealer(S2, [S1]), 60_000, systemClock)
    await rotated.add('demo', { sub: 'alice' }, 'session-2')
    clock.ms = 50_000
    await rotated.touch({ demo: { sid: 'sid-1', sub: 'alice' } })
    clock.ms = 100_000
    expect((await rotated.find('demo', 'sub', 'alice')).sort()).toEqual(['session-1', 'session-2'])
    await rotated.drop('demo', 'sub', 'alice', ['session-1', 'session-2'])
    expect(await rotated.find('demo', 'sub', 'alice')).toEqual([])
    expect(await rotated.find('demo', 'sid', 'sid-1')).toEqual(['session-1'])
  })
})

describe('Sealer: what the agents\' server keeps by a keyed id, through a rotation', () => {
  const S1 = 'first-session-secret-0123456789-abcdefghijkl'
  const S2 = 'second-session-secret-9876543210-zyxwvutsrqpo'

  it('opens what any held secret sealed, the current one first; nothing a secret no longer held sealed', () => {
    const sealed = new Sealer(S1).seal('agents-Client', 'id', 'payload')
    expect(new Sealer(S2, [S1]).open('agents-Client', 'id', sealed)).toBe('payload')
    expect(new Sealer(S1, [S2]).open('agents-Client', 'id', sealed)).toBe('payload')
    expect(new Sealer(S2).open('agents-Client', 'id', sealed)).toBeNull()
    expect(new Sealer(S2, [S1]).open('agents-Client', 'another id', sealed)).toBeNull()
  })

  it('names the id under every held secret, the current one first: each instance of a rotation finds the other\'s', () => {
    const step1 = new Sealer(S1, [S2])
    const step2 = new Sealer(S2, [S1])
    expect(step1.idsFor('agents-Grant', 'g')).toEqual([step1.idFor('agents-Grant', 'g'), step2.idFor('agents-Grant', 'g')])
    expect(step2.idsFor('agents-Grant', 'g')).toEqual([...step1.idsFor('agents-Grant', 'g')].reverse())
  })
})
