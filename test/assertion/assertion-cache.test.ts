// The assertion caches stay bounded whatever audiences a client makes forward-auth name (docs/security.md,
// caches keyed by what a client sends): the LRU itself, the
// forward-auth audiences and their assertions at their caps, a route's own cache kept beside them
// and emptied by a key change, and a signing begun before a key change never cached after it.
// No sockets: a KeyRing on the in-process store, time from a fixed clock.
import pino from 'pino'
import { decodeJwt } from 'jose'
import { describe, expect, it } from 'vitest'
import type { Identity } from '../../src/session/record.js'
import { Assertions } from '../../src/assertion/assertions.js'
import { KeyRing } from '../../src/assertion/keys.js'
import { Lru } from '../../src/ops/lru.js'
import { Sealer } from '../../src/session/seal.js'
import { MemoryStore } from '../../src/store/memory.js'
import { TEST_SECRET } from '../helpers/gateway.js'

const alice: Identity = { sub: 'alice', email: 'alice@example.test', groups: ['admins'] }

/** Who an assertion is for: a session's id and its identity at the provider. */
function session (id: string, identity: Identity = alice): { id: string, identity: Identity } {
  return { id, identity }
}

/**
 * Assertions on a real key ring, its key set already made (making it is a change, which empties the
 * caches); `keyChanged` calls what the ring calls when its published set changes.
 */
async function assertions (options: { maxEntries?: number, maxAudiences?: number } = {}): Promise<{ assertions: Assertions, keyChanged: () => void }> {
  const now = Date.parse('2026-01-01T00:00:00Z')
  const keys = new KeyRing(new MemoryStore(), new Sealer(TEST_SECRET), { rotateEveryMs: 86_400_000, clock: { now: () => now }, log: pino({ level: 'silent' }) })
  const listeners: Array<() => void> = []
  const onChange = keys.onChange.bind(keys)
  keys.onChange = (listener) => {
    listeners.push(listener)
    onChange(listener)
  }
  const signer = new Assertions(keys, { issuer: 'https://gw.example', ttlMs: 60_000, clock: { now: () => now }, ...options })
  await keys.signingKey()
  return { assertions: signer, keyChanged: () => { for (const listener of listeners) listener() } }
}

describe('Lru', () => {
  it('keeps at most its capacity, dropping the least recently used (a read counts as a use)', () => {
    const lru = new Lru<string, number>(3)
    for (const [i, key] of ['a', 'b', 'c'].entries()) lru.set(key, i)
    expect(lru.get('a')).toBe(0)
    lru.set('d', 3)
    expect(lru.size).toBe(3)
    expect(lru.peek('b')).toBeUndefined()
    expect([lru.peek('a'), lru.peek('c'), lru.peek('d')]).toEqual([0, 2, 3])
    lru.set('c', 9)
    lru.set('e', 4)
    expect(lru.peek('a')).toBeUndefined()
    expect(lru.peek('c')).toBe(9)
  })

  it('holds its cap over 20,000 distinct keys', () => {
    const lru = new Lru<string, number>(100)
    for (let i = 0; i < 20_000; i++) lru.set(`h${i}.example.com`, i)
    expect(lru.size).toBe(100)
    expect(lru.peek('h19999.example.com')).toBe(19_999)
    expect(lru.peek('h19899.example.com')).toBeUndefined()
  })

  it.each([0, -1, 1.5, Number.NaN])('refuses a capacity of %s', (capacity) => {
    expect(() => new Lru(capacity)).toThrow(RangeError)
  })
})

describe('Assertions: the caches keyed by audience', () => {
  it('keeps 2,000 forward-auth audiences of one session at the caps (audiences and assertions)', async () => {
    // Each audience costs one ES256 signature: 2,000 are ten and thirty times the caps.
    const { assertions: signer } = await assertions({ maxEntries: 200, maxAudiences: 64 })
    const alices = session('s1')
    for (let i = 0; i < 2000; i++) expect(await signer.forAnyAudience('demo', `https://h${i}.example.com`).assertion(alices.id, alices.identity)).toBeTruthy()
    expect(signer.cached).toEqual({ audiences: 64, assertions: 200 })
    expect(signer.signed).toBe(2000)
  })

  it('keeps a route\'s audience (held by the proxy) beside them, and its assertions are reused', async () => {
    const { assertions: signer } = await assertions({ maxEntries: 50, maxAudiences: 4 })
    const route = signer.forAudience('demo', 'http://upstream.internal:9100')
    const alices = session('s1')
    const first = await route.assertion(alices.id, alices.identity)
    for (let i = 0; i < 1000; i++) await signer.forAnyAudience('demo', `https://h${i}.example.com`).assertion(alices.id, alices.identity)
    expect(route.ready(alices.id, alices.identity)).toBe(first)
    // Forward-auth asked for the route's own audience: the route's cache answers, nothing is signed.
    const signed = signer.signed
    expect(await signer.forAnyAudience('demo', 'http://upstream.internal:9100').assertion(alices.id, alices.identity)).toBe(first)
    expect(signer.signed).toBe(signed)
    expect(signer.cached).toEqual({ audiences: 5, assertions: 51 })
  })

  // An identity read again (a refresh, a token's claims asked again) that has lost a group or its
  // address: the cached assertion still said the old (an outside tester's finding: an upstream that
  // trusts the assertion kept a demoted person an admin for up to 2/3 of assertion.ttl).
  it('signs anew for an identity that says other groups or another address, and reuses one for an identity that says the same', async () => {
    const { assertions: signer } = await assertions()
    const route = signer.forAudience('demo', 'http://upstream.internal:9100')
    const first = await route.assertion('s1 alice', alice)
    expect(route.ready('s1 alice', { ...alice })).toBe(first)
    const rows: Array<[string, Identity, Record<string, unknown>]> = [
      ['a group removed', { ...alice, groups: [] }, { groups: [] }],
      ['a group added', { ...alice, groups: ['admins', 'staff'] }, { groups: ['admins', 'staff'] }],
      ['groups reordered', { ...alice, groups: ['staff', 'admins'] }, { groups: ['staff', 'admins'] }],
      ['another address', { ...alice, email: 'alice@elsewhere.test' }, { email: 'alice@elsewhere.test' }],
      ['the address no longer verified', { ...alice, emailVerified: false }, {}],
    ]
    for (const [change, identity, claims] of rows) {
      expect(route.ready('s1 alice', identity), change).toBeUndefined()
      const signed = signer.signed
      const payload = decodeJwt(await route.assertion('s1 alice', identity))
      expect(payload, change).toMatchObject(claims)
      expect('email' in payload, change).toBe(identity.emailVerified !== false)
      expect(signer.signed, change).toBe(signed + 1)
    }
    // A name or a field the assertion does not carry changes nothing.
    const last = rows.at(-1)![1]
    expect(route.ready('s1 alice', { ...last, name: 'Alice B.' })).toBeDefined()
  })

  it('empties every cache on a key change, and does not cache a signing begun under the old key', async () => {
    const { assertions: signer, keyChanged } = await assertions({ maxEntries: 50, maxAudiences: 4 })
    const route = signer.forAudience('demo', 'http://upstream.internal:9100')
    const alices = session('s1')
    await route.assertion(alices.id, alices.identity)
    await signer.forAnyAudience('demo', 'https://a.example.com').assertion(alices.id, alices.identity)
    const pending = signer.forAnyAudience('demo', 'https://b.example.com').assertion(session('s2').id, session('s2').identity)
    // As a rotation by this or another instance would, while s2's assertion is being signed.
    keyChanged()
    await pending
    expect(signer.cached.assertions).toBe(0)
    expect(route.ready(alices.id, alices.identity)).toBeUndefined()
  })
})

/** A key ring on `store`, rotating daily, at the clock's time. */
function ring (store: MemoryStore, clock: { now: () => number }): KeyRing {
  return new KeyRing(store, new Sealer(TEST_SECRET), { rotateEveryMs: DAY, clock, log: pino({ level: 'silent' }) })
}

const kids = async (keys: KeyRing) => (await keys.jwks()).keys.map((key) => key.kid)
const DAY = 86_400_000

// Outside testers' findings: the set lived two periods in the store, so a quiet weekend lost it and
// the next request was signed with a key no JWK Set held; then (a re-reading of the fix, which
// wrote back the noticing instance's memory) a new instance made a key of its own, and a stale one
// brought a retired key back to sign.
describe('the assertion keys after a quiet spell, or a store that lost them', () => {
  it('a quiet weekend: the set is still in the store, and an instance started then signs with the key in use', async () => {
    let now = Date.parse('2026-01-02T00:00:00Z')
    const clock = { now: () => now }
    const store = new MemoryStore({ clock })
    const running = ring(store, clock)
    await running.listen()
    const inUse = (await running.signingKey()).kid
    now += 3 * DAY
    const started = ring(store, clock)
    await started.listen()
    // It adopts the set (and rotates it: due), so the key in use signs for the lead and stays published.
    expect((await started.signingKey()).kid).toBe(inUse)
    now += 2 * 60_000
    expect(await kids(running)).toContain(inUse)
  })

  it('a store that lost the set: an instance whose keys are current writes them back; one that missed rotations never brings a retired key back', async () => {
    let now = Date.parse('2026-01-02T00:00:00Z')
    const clock = { now: () => now }
    const store = new MemoryStore({ clock })
    // `stale` hears of no rotation (no subscription: a lost message) and serves nothing meanwhile.
    const stale = ring(store, clock)
    const retired = (await stale.signingKey()).kid
    const busy = ring(store, clock)
    await busy.listen()
    now += DAY + 1000
    await busy.jwks()
    now += DAY + 1000
    await busy.jwks()
    now += 6 * 60_000
    await busy.jwks()
    const inUse = (await busy.signingKey()).kid
    expect(await kids(busy)).not.toContain(retired)
    // Lost by the store; the busy instance (current keys) notices first: written back as they were.
    await store.delete('assertion-keys')
    now += 2 * 60_000
    expect(await kids(busy)).toContain(inUse)
    expect((await busy.signingKey()).kid).toBe(inUse)
    // Lost again; the stale one notices first this time: a new key, never its retired one.
    await store.delete('assertion-keys')
    now += 2 * 60_000
    const made = await kids(stale)
    expect(made).not.toContain(retired)
    expect((await stale.signingKey()).kid).not.toBe(retired)
    now += 2 * 60_000
    expect(await kids(busy)).toEqual(made)
    expect((await busy.signingKey()).kid).not.toBe(retired)
  })
})
