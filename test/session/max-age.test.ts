// session.maxAge without a server: a session is no session past maxAge from its sign-in, however
// active; the store's expiry never reaches beyond it (it forgets the session then, unread); the
// cache does not serve it past it; a refresh and another provider's sign-in keep the sign-in time;
// and its end is heard (Sessions.onEnded) as a sign-out's is. Time is the test's clock.
import { afterEach, describe, expect, it } from 'vitest'
import type { SessionConfig } from '../../src/config/types.js'
import { emptyRecord, withSignIn, withTokens, type SessionRecord } from '../../src/session/record.js'
import { Sealer } from '../../src/session/seal.js'
import { Sessions } from '../../src/session/session.js'
import { MemoryStore } from '../../src/store/memory.js'
import { storeKeys } from '../../src/store/store.js'

const SECRET = 'a-session-secret-of-at-least-32-characters'
const MINUTE = 60_000
const SIGNED_IN_AT = 1_700_000_000_000
/** Idle 60 s, absolute 5 minutes, cache 1 s. */
const CONFIG: SessionConfig = { cookieName: 'gw_session', secret: SECRET, ttlMs: MINUTE, cookieSecure: true, cacheTtlMs: 1000, maxAgeMs: 5 * MINUTE, previousSecrets: [] }
const RECORD: SessionRecord = withSignIn(emptyRecord(SIGNED_IN_AT), 'demo', { tokens: { access_token: 'at-1', refresh_token: 'rt-1' } })

const stores: MemoryStore[] = []
afterEach(async () => { for (const store of stores.splice(0)) await store.close() })

async function setUp () {
  const clock = { ms: SIGNED_IN_AT, now (): number { return this.ms } }
  const store = new MemoryStore({ clock })
  stores.push(store)
  const sessions = new Sessions(store, new Sealer(SECRET), CONFIG, clock)
  await sessions.listen()
  const ended: string[] = []
  sessions.onEnded((id) => ended.push(id))
  return { clock, store, sessions, ended }
}

const header = (cookie: string) => `gw_session=${cookie}`

/** Uses the session every 50 s (within the idle timeout) until `until`, each load renewing it. */
async function keepUsing (sessions: Sessions, clock: { ms: number }, cookie: string, until: number): Promise<void> {
  while (clock.ms + 50_000 < until) {
    clock.ms += 50_000
    expect(await sessions.load(header(cookie))).not.toBeNull()
  }
  clock.ms = until
}

describe('session.maxAge', () => {
  it('a session used every 50 s lives until maxAge after its sign-in, then is no session, and the store has forgotten it', async () => {
    const { clock, store, sessions } = await setUp()
    const { id, cookie } = await sessions.start(undefined, RECORD)
    await keepUsing(sessions, clock, cookie, SIGNED_IN_AT + CONFIG.maxAgeMs - 1)
    expect(await sessions.load(header(cookie))).not.toBeNull()
    clock.ms += 1
    expect(sessions.cached(header(cookie))).toBeUndefined()
    expect(await sessions.load(header(cookie))).toBeNull()
    expect(await store.getBytes(storeKeys.session(id))).toBeNull()
  })

  it('the store forgets a session at maxAge even unread: a renewal near the end is cut back to it', async () => {
    const { clock, store, sessions, ended } = await setUp()
    const { id, cookie } = await sessions.start(undefined, RECORD)
    await keepUsing(sessions, clock, cookie, SIGNED_IN_AT + 4.5 * MINUTE)
    expect(await sessions.load(header(cookie))).not.toBeNull() // renews: 30 s left, not 60
    clock.ms = SIGNED_IN_AT + CONFIG.maxAgeMs - 1
    expect(await store.getBytes(storeKeys.session(id))).not.toBeNull()
    clock.ms += 1
    // Read past the session: the store itself no longer has it (the idle timeout alone would keep it 30 s more).
    expect(await store.getBytes(storeKeys.session(id))).toBeNull()
    expect(ended).toEqual([])
  })

  it('a cached session is not served past maxAge: it is ended, and heard to end (what hangs off it ends too)', async () => {
    const { clock, sessions, ended } = await setUp()
    const { id, cookie } = await sessions.start(undefined, RECORD)
    await keepUsing(sessions, clock, cookie, SIGNED_IN_AT + CONFIG.maxAgeMs - 500)
    expect(await sessions.load(header(cookie))).not.toBeNull() // cached for 1 s from here
    expect(sessions.cached(header(cookie))).toBeDefined()
    clock.ms = SIGNED_IN_AT + CONFIG.maxAgeMs
    expect(sessions.cached(header(cookie))).toBeUndefined()
    expect(await sessions.load(header(cookie))).toBeNull()
    expect(ended).toContain(id)
  })

  it('a refresh keeps the sign-in time: the refreshed session still ends at maxAge', async () => {
    const { clock, sessions } = await setUp()
    const started = await sessions.start(undefined, RECORD)
    await keepUsing(sessions, clock, started.cookie, SIGNED_IN_AT + 4 * MINUTE)
    const session = (await sessions.load(header(started.cookie)))!
    const read = (await sessions.reload(session))!
    const refreshed = (await sessions.update(session, read, withTokens(read.record, 'demo', { access_token: 'at-2', refresh_token: 'rt-2' })))!
    expect(refreshed.record.createdAt).toBe(SIGNED_IN_AT)
    await keepUsing(sessions, clock, started.cookie, SIGNED_IN_AT + 4.9 * MINUTE)
    expect((await sessions.load(header(started.cookie)))?.record.tokens.demo?.access_token).toBe('at-2')
    await keepUsing(sessions, clock, started.cookie, SIGNED_IN_AT + CONFIG.maxAgeMs)
    expect(await sessions.load(header(started.cookie))).toBeNull()
    // Nothing left to refresh either.
    expect(await sessions.reload(session)).toBeNull()
  })

  it('a sign-in at a second provider keeps the first sign-in\'s time: the new id still ends at the first maxAge', async () => {
    const { clock, sessions } = await setUp()
    const first = await sessions.start(undefined, RECORD)
    await keepUsing(sessions, clock, first.cookie, SIGNED_IN_AT + 3 * MINUTE)
    const previous = (await sessions.load(header(first.cookie)))!.record
    const second = await sessions.start(header(first.cookie), withSignIn(previous, 'github', { tokens: { access_token: 'gh' } }))
    expect(second.record.createdAt).toBe(SIGNED_IN_AT)
    await keepUsing(sessions, clock, second.cookie, SIGNED_IN_AT + CONFIG.maxAgeMs - 1)
    expect(await sessions.load(header(second.cookie))).not.toBeNull()
    clock.ms += 1
    expect(await sessions.load(header(second.cookie))).toBeNull()
  })
})
