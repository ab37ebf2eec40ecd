// The instance's session cache on a clock the test moves: what it holds after a storm of sign-ins
// (each session read once, then never again), that a session read again keeps its place and its
// life, the bound, and that invalidations still drop what they name.
import { describe, expect, it } from 'vitest'
import { SessionCache } from '../../src/session/cache.js'
import { emptyRecord, type Session } from '../../src/session/record.js'

const TTL = 1_000

function cacheAt (start = 1_700_000_000_000, maxEntries = 10_000) {
  const clock = { now: start }
  const cache = new SessionCache(TTL, { now: () => clock.now }, maxEntries)
  const put = (n: number) => cache.set(session(n), cache.generation)
  return { cache, clock, put }
}

const session = (n: number): Session => ({ id: `id-${n}`, cookie: `cookie-${n}`, record: emptyRecord(0) })

describe('session cache', () => {
  it('holds only the sessions of the last ttl in a sign-in storm, not every session since start', () => {
    const { cache, clock, put } = cacheAt()
    // 5,000 sign-ins at 100 a second, each session read once and never again.
    for (let n = 0; n < 5_000; n++) {
      put(n)
      clock.now += 10
    }
    expect(cache.size).toBeLessThanOrEqual(TTL / 10 + 1)
    expect(cache.get('cookie-4999')).toBeDefined()
    expect(cache.get('cookie-0')).toBeUndefined()
  })

  it('keeps a session that is set again alive for a full ttl from then, ahead of older ones', () => {
    const { cache, clock, put } = cacheAt()
    put(1)
    clock.now += 600
    put(2)
    put(1)
    clock.now += 600
    put(3)
    expect(cache.get('cookie-1')).toBeDefined()
    expect(cache.get('cookie-2')).toBeDefined()
    clock.now += 500
    put(4)
    expect(cache.get('cookie-1')).toBeUndefined()
    expect(cache.get('cookie-2')).toBeUndefined()
    expect(cache.get('cookie-3')).toBeDefined()
  })

  it('drops the oldest live entry at its bound', () => {
    const { cache, put } = cacheAt(0, 3)
    for (const n of [1, 2, 3, 4]) put(n)
    expect(cache.size).toBe(3)
    expect(cache.get('cookie-1')).toBeUndefined()
    expect(cache.get('cookie-4')).toBeDefined()
  })

  it('still drops a session by id, and keeps nothing read across an invalidation', () => {
    const { cache, put } = cacheAt()
    put(1)
    const generation = cache.generation
    cache.dropId('id-1')
    cache.set(session(2), generation)
    expect(cache.get('cookie-1')).toBeUndefined()
    expect(cache.get('cookie-2')).toBeUndefined()
    expect(cache.size).toBe(0)
  })
})
