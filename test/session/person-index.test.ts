// The per-person index without a server, over the in-process store on a clock the test moves: one
// entry per session under each provider's `iss` + subject (never the user name; a record without a
// subject, written by an earlier version, is under no key), the bound (the oldest beyond it is dropped and its
// session ended), pruning of sessions that are gone, the key's expiry following its sessions, last
// seen from the session's remaining idle time, where each browser signed in from, a rotated key
// list, and a dump that shows no user id or address. And the User-Agent classifier, with a table of
// hostile headers.
import { createHash } from 'node:crypto'
import { afterEach, describe, expect, it, vi } from 'vitest'
import { browserFamily, USER_AGENT_READ } from '../../src/session/browser-family.js'
import { issuerSiblings, PersonIndex } from '../../src/session/person-index.js'
import { emptyRecord, withSignIn, type SessionRecord } from '../../src/session/record.js'
import { Sealer } from '../../src/session/seal.js'
import { Sessions } from '../../src/session/session.js'
import { MemoryStore } from '../../src/store/memory.js'
import { storeKeys } from '../../src/store/store.js'

const TTL = 60_000
const SECRET = 'the-current-session-secret-of-32-characters-or-more'
const OLD_SECRET = 'the-previous-session-secret-of-32-characters-or-more'
const SEALER = new Sealer(SECRET)

/** A session's store id as the gateway makes them (43 base64url characters), named for the test. */
const ids = new Map<string, string>()
function sid (name: string): string {
  const id = createHash('sha256').update(name).digest('base64url')
  ids.set(id, name)
  return id
}
/** The test's name of a store id. */
const nameOf = (id: string) => ids.get(id) ?? id

let now = 1_700_000_000_000
const clock = { now: () => now }
const stores: MemoryStore[] = []
afterEach(async () => { for (const store of stores.splice(0)) await store.close() })

/** A record signed in as `sub` at each of `providers`, begun at `createdAt`. */
function record (sub: string, providers: string[] = ['demo'], createdAt = now): SessionRecord {
  return providers.reduce((built, provider) => withSignIn(built, provider, { tokens: { access_token: 'at' }, identity: { sub, subject: sub, iss: 'https://op.example', groups: [] } }), emptyRecord(createdAt))
}

/** A store, an index over it with `keys` (on `indexClock`, the instance's), and the ids it was asked to end. */
function setUp (sealer = SEALER, max?: number, store = new MemoryStore({ clock }), indexClock = clock) {
  stores.push(store)
  const ended: string[] = []
  const index = new PersonIndex(store, async (id) => { ended.push(nameOf(id)); await store.delete(storeKeys.session(id)) }, sealer, TTL, indexClock, undefined, max)
  return { store, index, ended }
}

/** A session named `name` that exists in the store (for `ttl`), as the index sees it. */
async function live (store: MemoryStore, name: string, rec: SessionRecord, ttl = TTL) {
  const id = sid(name)
  await store.set(storeKeys.session(id), 'sealed', ttl)
  return { id, record: rec }
}

describe('person index', () => {
  it("lists a person's sessions once each, newest first, and none of another person's", async () => {
    const { store, index } = setUp()
    const alice = record('alice', ['demo', 'other'])
    await index.add(await live(store, 's1', alice), 'Firefox')
    now += 1000
    await index.add(await live(store, 's2', record('alice')), 'Chrome')
    await index.add(await live(store, 's3', record('bob')), 'curl')
    const listed = await index.list(record('alice'))
    expect(listed.map((s) => [nameOf(s.sessionId), s.browser, s.providers])).toEqual([['s2', 'Chrome', ['demo']], ['s1', 'Firefox', ['demo']]])
    // Through its other provider, the same person finds the session listed under both once; signed
    // in as this person at both, each session shows the providers of this person's keys that list it.
    expect((await index.list(record('alice', ['other']))).map((s) => [nameOf(s.sessionId), s.providers])).toEqual([['s1', ['other']]])
    expect((await index.list(record('alice', ['demo', 'other']))).map((s) => [nameOf(s.sessionId), s.providers])).toEqual([['s2', ['demo']], ['s1', ['demo', 'other']]])
    expect((await index.list(record('bob'))).map((s) => nameOf(s.sessionId))).toEqual(['s3'])
    expect(new Set(listed.map((s) => s.publicId)).size).toBe(2)
  })

  it('a public id revokes only for the person whose index lists it', async () => {
    const { store, index } = setUp()
    await index.add(await live(store, 'a1', record('alice')), 'Firefox')
    await index.add(await live(store, 'b1', record('bob')), 'Firefox')
    const [bobs] = await index.list(record('bob'))
    expect(await index.find(record('alice'), bobs!.publicId)).toBeNull()
    expect(await index.find(record('bob'), bobs!.publicId)).toBe(sid('b1'))
    // Listed until it has ended (a revoke met by a store fault finds it again), and no longer after.
    expect(await index.list(record('bob'))).toHaveLength(1)
    await store.delete(storeKeys.session(sid('b1')))
    expect(await index.list(record('bob'))).toEqual([])
    expect(await index.list(record('alice'))).toHaveLength(1)
  })

  it('keeps at most `max` sessions per person: a sign-in beyond drops the oldest and ends it', async () => {
    const { store, index, ended } = setUp(SEALER, 3)
    for (const id of ['s1', 's2', 's3', 's4']) {
      await index.add(await live(store, id, record('alice')), 'Chrome')
      now += 1000
    }
    expect(ended).toEqual(['s1'])
    expect(await store.get(storeKeys.session(sid('s1')))).toBeNull()
    expect((await index.list(record('alice'))).map((s) => nameOf(s.sessionId))).toEqual(['s4', 's3', 's2'])
  })

  it('a sign-in into a key with room is one store command; into a full key, what is gone is pruned before anyone is ended', async () => {
    const { store, index, ended } = setUp(SEALER, 3)
    // Spies call through: they count what the index asks of the store.
    const asked = { ifRoom: vi.spyOn(store, 'addRankedIfRoom'), bounded: vi.spyOn(store, 'addRanked'), read: vi.spyOn(store, 'rankedMembers') }
    const counts = () => ({ ifRoom: asked.ifRoom.mock.calls.length, bounded: asked.bounded.mock.calls.length, read: asked.read.mock.calls.length })
    await index.add(await live(store, 's1', record('alice')), 'Chrome')
    await index.add(await live(store, 's2', record('alice'), 1000), 'Chrome')
    now += 1000
    await index.add(await live(store, 's3', record('alice')), 'Chrome')
    expect(counts()).toEqual({ ifRoom: 3, bounded: 0, read: 0 })
    now += 1000
    // s2 is gone: the fourth sign-in finds the key full, prunes it, fills the room s2 held, and ends nobody.
    await index.add(await live(store, 's4', record('alice')), 'Chrome')
    expect(counts()).toEqual({ ifRoom: 4, bounded: 1, read: 1 })
    expect(ended).toEqual([])
    expect((await index.list(record('alice'))).map((s) => nameOf(s.sessionId))).toEqual(['s4', 's3', 's1'])
    // Full of live sessions, the next one ends the oldest.
    await index.add(await live(store, 's5', record('alice')), 'Chrome')
    expect(ended).toEqual(['s1'])
  })

  it('prunes sessions that are gone, and expires with its sessions unless a renewal keeps it', async () => {
    const { store, index } = setUp()
    await index.add(await live(store, 'short', record('alice'), 1000), 'Chrome')
    await index.add(await live(store, 'long', record('alice')), 'Chrome')
    now += 2000
    expect((await index.list(record('alice'))).map((s) => nameOf(s.sessionId))).toEqual(['long'])
    expect(await store.rankedMembers(personKey(store))).toHaveLength(1)
    // The session is renewed past the index's first expiry: so is the index.
    now += TTL - 3000
    await store.set(storeKeys.session(sid('long')), 'sealed', TTL)
    await index.touch(record('alice'))
    now += 2000
    expect((await index.list(record('alice'))).map((s) => nameOf(s.sessionId))).toEqual(['long'])
    // Unrenewed, the key goes when its last session's idle time does.
    now += TTL
    expect(await store.rankedMembers(personKey(store))).toEqual([])
  })

  it("last seen: when the session's idle timeout was last renewed", async () => {
    const { store, index } = setUp()
    const begun = now
    await index.add(await live(store, 's1', record('alice')), 'Chrome')
    now += 5000
    expect((await index.list(record('alice')))[0]).toMatchObject({ started: begun, lastSeen: begun })
    await store.getAndTouchBytes(storeKeys.session(sid('s1')), TTL)
    const renewed = now
    now += 3000
    expect((await index.list(record('alice')))[0]).toMatchObject({ started: begun, lastSeen: renewed })
  })

  // A re-reading's point: the mark was written and read under the current secret's key only, so an
  // instance of a rolling rotation that sealed with the other one did not see it.
  // An attacker's finding, on the back-channel logout's marks, which were as these: an instance's own
  // time compared with another's, so that 100 ms of skew undid them. Read as intervals now.
  it('a sign out everywhere is seen by an instance whose clock is ahead or behind, for what it kept before, never after', async () => {
    const store = new MemoryStore({ clock })
    const there = setUp(SEALER, undefined, store)
    for (const skew of [2000, -2000]) {
      const here = setUp(SEALER, undefined, store, { now: () => now + skew })
      const kept = now + skew
      now += 1000
      await there.index.othersOf(record('alice'), sid('current'))
      expect(await here.index.signedOutSince(record('alice'), kept), `skew ${skew}`).toBe(true)
      now += 1000
      expect(await here.index.signedOutSince(record('alice'), now + skew - 1), `skew ${skew}, kept after`).toBe(false)
    }
  })

  it('a sign out everywhere marks the person for instances of either side of a key rotation', async () => {
    const store = new MemoryStore({ clock })
    const rotated = setUp(new Sealer(SECRET, [OLD_SECRET]), undefined, store)
    const before = setUp(new Sealer(OLD_SECRET, [SECRET]), undefined, store)
    const at = now
    now += 1000
    await rotated.index.othersOf(record('alice'), sid('current'))
    expect(await before.index.signedOutSince(record('alice'), at)).toBe(true)
    expect(await rotated.index.signedOutSince(record('alice'), at)).toBe(true)
    // A sign-in made after it, and another person, are not marked.
    expect(await before.index.signedOutSince(record('alice'), now + 1)).toBe(false)
    expect(await before.index.signedOutSince(record('bob'), at)).toBe(false)
  })

  it('after a key rotation the old key still reads and opens what it wrote; the new key writes', async () => {
    const store = new MemoryStore({ clock })
    const before = setUp(new Sealer(OLD_SECRET), undefined, store)
    await before.index.add(await live(store, 'old', record('alice')), 'Safari')
    const after = setUp(new Sealer(SECRET, [OLD_SECRET]), undefined, store)
    await after.index.add(await live(store, 'new', record('alice')), 'Edge')
    expect((await after.index.list(record('alice'))).map((s) => nameOf(s.sessionId)).sort()).toEqual(['new', 'old'])
    // Without the old key its entries are nobody's.
    const only = setUp(SEALER, undefined, store)
    expect((await only.index.list(record('alice'))).map((s) => nameOf(s.sessionId))).toEqual(['new'])
  })

  it('a store read that renews a session with identities only (no provider session: OAuth 2 providers) renews its person key', async () => {
    const { store, index } = setUp()
    const sessions = new Sessions(store, new Sealer('a-session-secret-of-at-least-32-characters'), { cookieName: 'gw_session', secret: 'unused', ttlMs: TTL, cookieSecure: true, cacheTtlMs: 0, maxAgeMs: 7 * 86_400_000, previousSecrets: [] }, clock)
    sessions.onRenewed((session) => { void index.touch(session.record) })
    const alice = record('alice')
    expect(alice.providerSessions).toEqual({})
    const started = await sessions.start(undefined, { ...alice, providerSessions: undefined })
    await index.add(started, 'Chrome')
    now += TTL - 1000
    expect(await sessions.load(`gw_session=${started.cookie}`)).not.toBeNull()
    now += 2000
    expect((await index.list(alice)).map((s) => nameOf(s.sessionId))).toEqual([started.id])
  })

  it('keys a person on iss + subject: the same user name at another subject (or issuer) is another person', async () => {
    const { store, index } = setUp()
    const named = (subject: string, iss = 'https://op.example'): SessionRecord =>
      withSignIn(emptyRecord(now), 'demo', { tokens: { access_token: 'at' }, identity: { sub: 'alice', subject, iss, groups: [] } })
    await index.add(await live(store, 'first', named('id-1')), 'Firefox')
    await index.add(await live(store, 'second', named('id-2')), 'Chrome')
    await index.add(await live(store, 'elsewhere', named('id-1', 'https://other.example')), 'curl')
    expect((await index.list(named('id-2'))).map((s) => nameOf(s.sessionId))).toEqual(['second'])
    expect(await index.othersOf(named('id-2'), sid('second'))).toEqual({ others: [], gone: [] })
    const [theirs] = await index.list(named('id-1'))
    expect(await index.find(named('id-2'), theirs!.publicId)).toBeNull()
    expect((await index.list(named('id-1'))).map((s) => nameOf(s.sessionId))).toEqual(['first'])
  })

  it('a record written before the subject was kept lists nothing, ends nothing, and is listed under no one', async () => {
    const { store, index } = setUp()
    const old = withSignIn(emptyRecord(now), 'demo', { tokens: { access_token: 'at' }, identity: { sub: 'alice', groups: [] } })
    await index.add(await live(store, 'old', old), 'Firefox')
    await index.add(await live(store, 'new', record('alice')), 'Chrome')
    expect((await index.list(old))).toEqual([])
    expect(await index.othersOf(old, sid('old'))).toEqual({ others: [], gone: [] })
    expect((await index.list(record('alice'))).map((s) => nameOf(s.sessionId))).toEqual(['new'])
  })

  it("lists where each browser signed in from (its operating system and address); an agent's grant, added without, shows none", async () => {
    const { store, index } = setUp()
    await index.add(await live(store, 'laptop', record('alice')), 'Chrome', { os: 'macOS', address: '203.0.113.7' })
    now += 1000
    await index.add(await live(store, 'phone', record('alice')), 'Safari', { os: 'iOS', address: '2001:db8:1:2:3:4:5:6' })
    now += 1000
    await index.add(await live(store, 'agent', record('alice')), 'agent (MCP client or CLI)')
    expect((await index.list(record('alice'))).map((s) => [nameOf(s.sessionId), s.browser, s.origin])).toEqual([
      ['agent', 'agent (MCP client or CLI)', undefined],
      ['phone', 'Safari', { os: 'iOS', address: '2001:db8:1:2::/64' }],
      ['laptop', 'Chrome', { os: 'macOS', address: '203.0.113.7' }],
    ])
  })

  it('a store dump shows no user id, session id (as text or bytes), browser or provider', async () => {
    const { store, index } = setUp()
    await index.add(await live(store, 'session-id-123', record('alice@example.test', ['github'])), 'Firefox', { os: 'Linux', address: '203.0.113.7' })
    const key = personKey(store)
    const dump = Buffer.concat([Buffer.from(key), ...await store.rankedMembers(key)])
    const id = sid('session-id-123')
    for (const secret of ['alice', id, 'Firefox', 'github', 'Linux', '203.0.113.7']) expect(dump.includes(secret)).toBe(false)
    expect(dump.includes(Buffer.from(id, 'base64url'))).toBe(false)
    expect(dump.includes(Buffer.from([203, 0, 113, 7]))).toBe(false)
  })
})

/** The one person key in `store` (the memory store's ranked sets, read through its own map). */
function personKey (store: MemoryStore): string {
  const keys = [...(store as unknown as { ranked: Map<string, unknown> }).ranked.keys()]
  expect(keys).toHaveLength(1)
  return keys[0]!
}

describe('browser family from the User-Agent', () => {
  const huge = 'a'.repeat(1_000_000)
  const table: Array<[string, string | undefined, string]> = [
    ['absent', undefined, 'other'],
    ['empty', '', 'other'],
    ['curl', 'curl/8.5.0', 'curl'],
    ['Firefox', 'Mozilla/5.0 (X11; Linux x86_64; rv:128.0) Gecko/20100101 Firefox/128.0', 'Firefox'],
    ['Chrome', 'Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Safari/537.36', 'Chrome'],
    ['headless Chrome', 'Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) HeadlessChrome/131.0.0.0 Safari/537.36', 'Chrome'],
    ['Edge', 'Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Safari/537.36 Edg/131.0.0.0', 'Edge'],
    ['Safari', 'Mozilla/5.0 (Macintosh; Intel Mac OS X 14_5) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.5 Safari/605.1.15', 'Safari'],
    ['a bare Mozilla', 'Mozilla/5.0', 'other'],
    ['markup', '<script>alert(1)</script> Firefox/1', 'Firefox'],
    ['control characters', '\u0000\u001b[31mChrome/1\r\n', 'Chrome'],
    ['a megabyte, the token past the read limit', `${huge}Firefox/128.0`, 'other'],
    ['the token just inside the read limit', `${'a'.repeat(USER_AGENT_READ - 'Firefox/'.length)}Firefox/`, 'Firefox'],
    ['many near-tokens', 'Firefox'.repeat(100_000), 'other'],
    ['curl not first', 'not curl/8', 'other'],
    ['lone surrogate', '\ud800Chrome/1', 'Chrome'],
  ]
  it.each(table)('%s', (_name, header, family) => {
    expect(browserFamily(header)).toBe(family)
  })
})

describe('the providers that share a person (one issuer behind several entries)', () => {
  const siblings = issuerSiblings({
    corp: { issuer: 'https://login.example.com/realms/corp', openid: true },
    'corp-admin': { issuer: 'https://LOGIN.example.com:443/realms/corp/', openid: true },
    'corp-plain': { issuer: 'https://login.example.com/realms/corp', openid: false },
    other: { issuer: 'https://login.example.com/realms/other', openid: true },
    github: { issuer: undefined, openid: false },
  })
  it.each([
    ['the same issuer, spelled otherwise (host case, default port, trailing slash)', 'corp', ['corp', 'corp-admin']],
    ['from the other entry', 'corp-admin', ['corp', 'corp-admin']],
    // Its subject may be a mapped user name (userinfo without `sub`), which could equal someone's `sub`.
    ['an entry of that issuer without openid: only itself', 'corp-plain', ['corp-plain']],
    ['another realm of the same host', 'other', ['other']],
    ['a provider without an issuer', 'github', ['github']],
    ['a name no provider has', 'nobody', ['nobody']],
  ])('%s', (_what, provider, expected) => {
    expect(siblings(provider)).toEqual(expected)
  })
})

describe('samePerson: whether a sign-in is the person a session holds', () => {
  const index = new PersonIndex(new MemoryStore({ clock }), async () => {}, SEALER, TTL, clock, issuerSiblings({
    demo: { issuer: 'https://op.example', openid: true },
    twin: { issuer: 'https://op.example', openid: true },
    other: { issuer: 'https://other.example', openid: true },
  }))
  // `subject` null: a record written before the subject was kept.
  const signIn = (sub: string, subject: string | null = sub, iss = 'https://op.example') => ({ sub, groups: [], ...(subject === null ? {} : { subject, iss }) })
  const held = (provider: string, identity: ReturnType<typeof signIn>): SessionRecord => withSignIn(emptyRecord(now), provider, { tokens: { access_token: 'at' }, identity })
  it.each<[string, SessionRecord, string, ReturnType<typeof signIn> | undefined, boolean]>([
    ['the same subject at the provider', held('demo', signIn('alice')), 'demo', signIn('alice'), true],
    ['another subject at the provider', held('demo', signIn('mallory')), 'demo', signIn('alice'), false],
    ['another subject at a provider of the same issuer', held('twin', signIn('mallory')), 'demo', signIn('alice'), false],
    ['the same subject at a provider of the same issuer', held('twin', signIn('alice')), 'demo', signIn('alice'), true],
    ['someone at a provider of another issuer (cannot be told)', held('other', signIn('mallory', 'mallory', 'https://other.example')), 'demo', signIn('alice'), true],
    ['a record from before the subject was kept, the same user name', held('demo', signIn('alice', null)), 'demo', signIn('alice', 'sub-1'), true],
    ['a record from before the subject was kept, another user name', held('demo', signIn('mallory', null)), 'demo', signIn('alice', 'sub-1'), false],
    ['a sign-in that gave no identity over one that did', held('demo', signIn('alice')), 'demo', undefined, false],
    ['an empty session', emptyRecord(now), 'demo', signIn('alice'), true],
  ])('%s', (_name, record, provider, identity, expected) => {
    expect(index.samePerson(record, provider, identity)).toBe(expected)
  })
})
