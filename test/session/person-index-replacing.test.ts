// A sign-in over a person's full list of sessions that replaces one of them (a step-up, a second
// provider: Sessions.start renames it after PersonIndex.add lists the new one). The replaced
// session neither counts against the bound nor is dropped by it, in the same store script: it
// stays listed until it has ended, so that a sign-in failing after the list step (its rename
// refused) leaves it where a revoke and sign out everywhere reach it, and two sign-ins over it at
// once leave the person no more sessions than the bound. Over a memory store whose deletes can be
// refused and whose endings can stay unsettled (a replica lagging), as an attacker found both.
import { describe, expect, it } from 'vitest'
import type { SessionConfig } from '../../src/config/types.js'
import { GatewayError } from '../../src/errors.js'
import { PersonIndex } from '../../src/session/person-index.js'
import { emptyRecord, withSignIn, type SessionRecord } from '../../src/session/record.js'
import { Sealer } from '../../src/session/seal.js'
import { Sessions } from '../../src/session/session.js'
import { MemoryStore } from '../../src/store/memory.js'
import { StoreRefusal } from '../../src/store/store.js'

const SECRET = 'a-session-secret-of-at-least-32-characters'
const CONFIG: SessionConfig = { cookieName: 'gw_session', secret: SECRET, ttlMs: 60_000, cookieSecure: true, cacheTtlMs: 1000, maxAgeMs: 7 * 86_400_000, previousSecrets: [] }
const AT = Date.now()
const header = (cookie: string) => `gw_session=${cookie}`
const identity = { sub: 'alice', subject: 'alice', iss: 'https://op.example', groups: [] }
const person = withSignIn(emptyRecord(AT), 'demo', { tokens: { access_token: 'at' }, identity })
const stepUp = (n: number) => withSignIn(person, 'demo', { tokens: { access_token: `up${n}` }, identity })
const MAX = 3

/** A memory store whose endings can be refused (as a demoted master refuses them) and can stay unsettled (as while a replica lags). */
class Faulty extends MemoryStore {
  refuse = false
  lagging = false
  readonly marks = new Set<string>()
  override async end (key: string): Promise<boolean> {
    if (this.refuse) throw new GatewayError('session_store_unavailable', 'The session store refused the request.', { cause: new StoreRefusal('NOPERM', 'no DEL') })
    const there = await super.end(key)
    if (there && this.lagging) this.marks.add(key)
    return there
  }

  override async settled (key: string): Promise<void> {
    if (this.lagging && this.marks.has(key)) throw new GatewayError('session_store_unavailable', 'No replica acknowledged the write.')
    this.marks.delete(key)
  }

  override async unsettled (key: string): Promise<boolean> { return this.marks.has(key) }
}

function setup () {
  const store = new Faulty()
  const sessions = new Sessions(store, new Sealer(SECRET), CONFIG)
  // Each sign-in a millisecond after the last: the list ranks its entries by that time.
  let now = AT
  const index = new PersonIndex(store, (id) => sessions.endById(id), new Sealer(SECRET), CONFIG.ttlMs, { now: () => ++now }, undefined, MAX)
  const start = async (cookie: string | undefined, record: SessionRecord, replacing?: string, listed?: () => Promise<void>) =>
    await sessions.start(cookie === undefined ? undefined : header(cookie), record, { alone: () => person, indexed: async (session) => { await index.add(session, 'Firefox', undefined, replacing); await listed?.() } })
  const live = async (ids: string[]) => (await Promise.all(ids.map(async (id) => await sessions.exists(id) ? id : null))).filter((id) => id !== null)
  return { store, sessions, index, start, live }
}

describe('a sign-in over a full list that replaces one of its sessions', () => {
  it('leaves that session listed when its rename is refused, though the list also holds an ending no replica has yet', async () => {
    const { store, sessions, index, start } = setup()
    const replaced = await start(undefined, person)
    await start(undefined, person)
    const other = await start(undefined, person)
    // Another browser steps up while a replica lags: its old session's ending stays unsettled, and listed.
    store.lagging = true
    await start(other.cookie, stepUp(1), other.id)
    store.refuse = true
    await expect(start(replaced.cookie, stepUp(2), replaced.id)).rejects.toMatchObject({ code: 'session_store_unavailable' })
    store.refuse = false
    expect((await sessions.load(header(replaced.cookie)))?.id).toBe(replaced.id)
    expect((await index.list(person)).map((session) => session.sessionId)).toContain(replaced.id)
    expect((await index.othersOf(person, 'none')).others).toContain(replaced.id)
  })

  it('leaves the person no more live sessions than the bound when two sign-ins replace it at once', async () => {
    const { start, live } = setup()
    const replaced = await start(undefined, person)
    const first = await start(undefined, person)
    const second = await start(undefined, person)
    let listedA!: () => void
    const aListed = new Promise<void>((resolve) => { listedA = resolve })
    let bothListed!: () => void
    const both = new Promise<void>((resolve) => { bothListed = resolve })
    const [a, b] = await Promise.all([
      start(replaced.cookie, stepUp(1), replaced.id, async () => { listedA(); await both }),
      (async () => { await aListed; return await start(replaced.cookie, stepUp(2), replaced.id, async () => { bothListed() }) })(),
    ])
    expect((await live([replaced.id, first.id, second.id, a.id, b.id])).length).toBeLessThanOrEqual(MAX)
  })
})
