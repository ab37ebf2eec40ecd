// An ending's unsettled mark (RedisStore.end: a MULTI of the mark's SET and the key's DEL) must
// hash to its key's Redis Cluster slot, or every ending on a Cluster is refused (CROSSSLOT). The
// mark is a hash tag of the key's whole name, prefix included; store.keyPrefix's pattern and the
// mark's spelling must agree, so a prefix with a brace is refused at start and by --check.
import calculateSlot from 'cluster-key-slot'
import fc from 'fast-check'
import { describe, expect, it } from 'vitest'
import { parseConfig } from '../../src/config/config.js'
import { unsettledMark } from '../../src/store/redis.js'
import { storeKeys } from '../../src/store/store.js'

const keyPrefix = (value: string) => parseConfig(`store:\n  type: redis\n  keyPrefix: ${JSON.stringify(value)}\n`, {}).store.keyPrefix

/** A store id as the gateway makes one: a keyed hash, base64url. */
const ID = fc.stringMatching(/^[A-Za-z0-9_-]{43}$/)

describe('an ending\'s unsettled mark', () => {
  it('property: for every prefix store.keyPrefix takes, it shares the slot of the session or kept sign-in it marks', () => {
    const prefix = fc.string({ unit: 'binary', maxLength: 40 }).filter((value) => {
      try { return keyPrefix(value) === value } catch { return false }
    })
    fc.assert(fc.property(prefix, ID, fc.constantFrom(storeKeys.session, storeKeys.pendingSignIn), (taken, id, named) => {
      const key = named(id)
      expect(calculateSlot(unsettledMark(taken, key))).toBe(calculateSlot(`${taken}${key}`))
    }), { numRuns: 200 })
  })

  // Whether the mark would still share the slot: where it would not, every ending on a Cluster
  // fails; where it would by chance (a brace that makes no tag), refused all the same: one rule
  // an operator can read.
  it.each([
    ['a hash tag of its own', '{gw}:', false],
    ['a closing brace alone', 'gw}:', false],
    ['a tag in the middle', 'gw:{tenant}:', false],
    ['an empty tag', 'gw:{}:', false],
    ['an opening brace alone', 'gw{', true],
  ])('refuses a prefix with %s (%s), naming the key', (_name, value, sameSlot) => {
    expect(calculateSlot(unsettledMark(value, 'session:x')) === calculateSlot(`${value}session:x`)).toBe(sameSlot)
    expect(() => keyPrefix(value)).toThrow(/store\.keyPrefix: must be a prefix without \{ or \}/)
  })

  it.each([['gw:'], ['prod/gw:'], ['tenant-a.gw:'], ['ゲートウェイ:']])('takes the prefix %s', (value) => {
    expect(keyPrefix(value)).toBe(value)
  })
})
