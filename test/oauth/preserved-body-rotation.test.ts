// A form kept just before a secret rotation is still delivered after it: the form cookie's token
// names the secret it was kept under, so opening costs one try, and a token naming a secret the
// gateway no longer holds costs no store read.
import { describe, expect, it } from 'vitest'
import { PreservedBodies, formOwner, parseFormToken } from '../../src/oauth/preserved-body.js'
import { Sealer } from '../../src/session/seal.js'
import { MemoryStore } from '../../src/store/memory.js'

const S1 = 'first-secret-0123456789-abcdefghijklmnopqrstuvwxyz'
const S2 = 'second-secret-9876543210-zyxwvutsrqponmlkjihgfedcba'
const clock = { now: () => 1_700_000_000_000 }
const FORM = { method: 'POST', path: '/app/form', contentType: 'application/x-www-form-urlencoded', body: Buffer.from('note=hello+world') }

/** The store, counting its reads (get, take). */
function counted (store: MemoryStore): { store: MemoryStore, reads: () => number } {
  let reads = 0
  const wrapped = Object.create(store) as MemoryStore
  wrapped.get = async (key) => { reads++; return await store.get(key) }
  wrapped.take = async (key) => { reads++; return await store.take(key) }
  return { store: wrapped, reads: () => reads }
}

const ALICE = { sub: 'alice', subject: 'alice-sub', iss: 'https://op.example', groups: [] }
const OWNER = formOwner('session-that-the-flow-started', 'demo', ALICE)

describe('a kept form goes to the session its flow started (or that person\'s next), and to no other person', () => {
  it('another session\'s marker (the browser signed out, someone else signed in) gets nothing; the form waits for its own', async () => {
    const bodies = new PreservedBodies(new MemoryStore(), new Sealer(S1), 60_000, clock)
    const { token, flow } = await bodies.keep(FORM)
    expect(await bodies.offer(token, FORM.path, flow, OWNER)).toBe(true)
    const next = formOwner('the-next-persons-session', 'demo', { ...ALICE, sub: 'bob', subject: 'bob-sub' })
    expect(await bodies.take(token, FORM.path, next)).toBeUndefined()
    expect((await bodies.take(token, FORM.path, OWNER))?.body.toString()).toBe('note=hello+world')
    expect(await bodies.take(token, FORM.path, OWNER)).toBeUndefined()
  })

  it('goes to its person\'s session renamed since the offer (a sign-in in another tab), once', async () => {
    const bodies = new PreservedBodies(new MemoryStore(), new Sealer(S1), 60_000, clock)
    const { token, flow } = await bodies.keep(FORM)
    await bodies.offer(token, FORM.path, flow, OWNER)
    const renamed = formOwner('the-same-session-renamed', 'demo', ALICE)
    expect((await bodies.take(token, FORM.path, renamed))?.body.toString()).toBe('note=hello+world')
    expect(await bodies.take(token, FORM.path, OWNER)).toBeUndefined()
  })

  it('is not taken before its flow offered it, even by the person it will be offered to', async () => {
    const bodies = new PreservedBodies(new MemoryStore(), new Sealer(S1), 60_000, clock)
    const { token, flow } = await bodies.keep(FORM)
    expect(await bodies.take(token, FORM.path, OWNER)).toBeUndefined()
    expect(await bodies.offer(token, FORM.path, flow, OWNER)).toBe(true)
    expect((await bodies.take(token, FORM.path, OWNER))?.body.toString()).toBe('note=hello+world')
  })

  it('is offered again to the same person\'s next session (the first ended before the marker came), never to another person\'s', async () => {
    const bodies = new PreservedBodies(new MemoryStore(), new Sealer(S1), 60_000, clock)
    const { token, flow } = await bodies.keep(FORM)
    await bodies.offer(token, FORM.path, flow, OWNER)
    const mallory = formOwner('mallorys-session', 'demo', { ...ALICE, sub: 'mallory', subject: 'mallory-sub' })
    expect(await bodies.offer(token, FORM.path, flow, mallory)).toBe(false)
    expect(await bodies.take(token, FORM.path, mallory)).toBeUndefined()
    const again = formOwner('alices-next-session', 'demo', ALICE)
    expect(await bodies.offer(token, FORM.path, flow, again)).toBe(true)
    expect(await bodies.take(token, FORM.path, mallory)).toBeUndefined()
    expect((await bodies.take(token, FORM.path, again))?.body.toString()).toBe('note=hello+world')
  })

  it.each([
    ['the same subject at another issuer', { ...ALICE, iss: 'https://other.example' }, 'demo'],
    ['the same mapped name, another subject', { ...ALICE, subject: 'someone-else' }, 'demo'],
    ['the same person through another provider', ALICE, 'other'],
  ])('%s is another person', async (_what, identity, provider) => {
    const bodies = new PreservedBodies(new MemoryStore(), new Sealer(S1), 60_000, clock)
    const { token, flow } = await bodies.keep(FORM)
    await bodies.offer(token, FORM.path, flow, OWNER)
    const other = formOwner('another-session', provider, identity)
    expect(await bodies.offer(token, FORM.path, flow, other)).toBe(false)
    expect(await bodies.take(token, FORM.path, other)).toBeUndefined()
  })
})

describe('kept forms across a secret rotation', () => {
  it('a form kept under [s1] is delivered once under [s2, previous s1]', async () => {
    const store = new MemoryStore()
    const { token, flow } = await new PreservedBodies(store, new Sealer(S1), 60_000, clock).keep(FORM)
    expect(parseFormToken(token)).toBe(token)
    const rotated = new PreservedBodies(store, new Sealer(S2, [S1]), 60_000, clock)
    expect(await rotated.offer(token, FORM.path, flow, OWNER)).toBe(true)
    expect((await rotated.take(token, FORM.path, OWNER))?.body.toString()).toBe('note=hello+world')
    expect(await rotated.take(token, FORM.path, OWNER)).toBeUndefined()
  })

  it('once s1 is gone, its token finds nothing and costs no store read', async () => {
    const backing = new MemoryStore()
    const { token, flow } = await new PreservedBodies(backing, new Sealer(S1), 60_000, clock).keep(FORM)
    const { store, reads } = counted(backing)
    const retired = new PreservedBodies(store, new Sealer(S2), 60_000, clock)
    expect(await retired.offer(token, FORM.path, flow, OWNER)).toBe(false)
    expect(await retired.take(token, FORM.path, OWNER)).toBeUndefined()
    expect(reads()).toBe(0)
  })
})
