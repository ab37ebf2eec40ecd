// A form kept just before a secret rotation is still delivered after it: the form cookie's token
// names the secret it was kept under, so opening costs one try, and a token naming a secret the
// gateway no longer holds costs no store read.
import { describe, expect, it } from 'vitest'
import { PreservedBodies, formOwner, parseFormToken } from '../../src/oauth/preserved-body.js'
import { Sealer } from '../../src/session/seal.js'
import { MemoryStore } from '../../src/store/memory.js'
import type { KeyValue } from '../../src/store/store.js'

const S1 = 'first-secret-0123456789-abcdefghijklmnopqrstuvwxyz'
const S2 = 'second-secret-9876543210-zyxwvutsrqponmlkjihgfedcba'
const clock = { now: () => 1_700_000_000_000 }
const FORM = { method: 'POST', path: '/app/form', contentType: 'application/x-www-form-urlencoded', body: Buffer.from('note=hello+world') }

/** The store, counting its reads (get, take). */
function counted (store: MemoryStore): { store: KeyValue, reads: () => number } {
  let reads = 0
  const wrapped = Object.create(store) as MemoryStore
  wrapped.get = async (key) => { reads++; return await store.get(key) }
  wrapped.take = async (key) => { reads++; return await store.take(key) }
  return { store: wrapped, reads: () => reads }
}

const OWNER = formOwner('session-that-the-flow-started')

describe('a kept form goes to the session its flow started, and to no other', () => {
  it('another session\'s marker (the browser signed out, someone else signed in) gets nothing, and the form is gone', async () => {
    const bodies = new PreservedBodies(new MemoryStore(), new Sealer(S1), 60_000, clock)
    const { token, flow } = await bodies.keep(FORM)
    expect(await bodies.offer(token, FORM.path, flow, OWNER)).toBe(true)
    expect(await bodies.take(token, FORM.path, formOwner('the-next-persons-session'))).toBeUndefined()
    expect(await bodies.take(token, FORM.path, OWNER)).toBeUndefined()
  })

  it('its own session takes it once', async () => {
    const bodies = new PreservedBodies(new MemoryStore(), new Sealer(S1), 60_000, clock)
    const { token, flow } = await bodies.keep(FORM)
    await bodies.offer(token, FORM.path, flow, OWNER)
    expect((await bodies.take(token, FORM.path, OWNER))?.body.toString()).toBe('note=hello+world')
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
