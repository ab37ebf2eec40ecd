// One person-index entry as stored: what goes in comes out (a property over every field, the
// sign-in's operating system and address included), it opens only under the key it was listed under
// and with a secret of the list, it is small enough for Redis's compact ranked sets (at most 64
// bytes, the largest address included), and a table of hostile members of either format (each opens
// to nothing, never throws). And the small seal under it, against its own tampering table.
import { randomBytes } from 'node:crypto'
import fc from 'fast-check'
import { describe, expect, it } from 'vitest'
import { BROWSER_FAMILIES } from '../../src/session/browser-family.js'
import { openEntry, PUBLIC_ID, SEALED_ENTRY, SEALED_ENTRY_WITH_ORIGIN, sealEntry, type PersonEntry } from '../../src/session/person-entry.js'
import { OPERATING_SYSTEMS } from '../../src/session/operating-system.js'
import { Sealer } from '../../src/session/seal.js'

const CURRENT = 'the-current-session-secret-of-32-characters-or-more'
const PREVIOUS = 'the-previous-session-secret-of-32-characters-or-more'
const sealer = new Sealer(CURRENT)
const KEY = 'person:alice-at-demo'

const entry = (over: Partial<PersonEntry> = {}): Omit<PersonEntry, 'publicId'> => ({
  sessionId: randomBytes(32).toString('base64url'),
  started: 1_795_000_000_000,
  browser: 'Firefox',
  ...over,
})

describe('a person-index entry', () => {
  it('opens to what was sealed, with a public id that is not the session id: any id, start up to the year 10000, any browser', () => {
    fc.assert(fc.property(
      fc.uint8Array({ minLength: 32, maxLength: 32 }), fc.integer({ min: 0, max: 253_402_300_799_999 }), fc.constantFrom(...BROWSER_FAMILIES),
      (id, started, browser) => {
        const sealed = entry({ sessionId: Buffer.from(id).toString('base64url'), started, browser })
        const opened = openEntry(sealer, KEY, sealEntry(sealer, KEY, sealed))
        expect(opened).toMatchObject(sealed)
        expect(opened!.publicId).toMatch(PUBLIC_ID)
        expect(sealed.sessionId).not.toContain(opened!.publicId)
      }))
  })

  it('opens to the operating system and address it was sealed with: any system, any IPv4 address, an IPv6 one as its /64', () => {
    fc.assert(fc.property(
      fc.constantFrom(...OPERATING_SYSTEMS), fc.ipV4(), fc.ipV6(), fc.constantFrom(...BROWSER_FAMILIES),
      (os, v4, v6, browser) => {
        const four = openEntry(sealer, KEY, sealEntry(sealer, KEY, entry({ browser, origin: { os, address: v4 } })))
        expect(four).toMatchObject({ browser, origin: { os, address: v4 } })
        const six = openEntry(sealer, KEY, sealEntry(sealer, KEY, entry({ browser, origin: { os, address: v6 } })))
        expect(six!.origin!.os).toBe(os)
        expect(six!.origin!.address).toMatch(/^[0-9a-f:]+\/64$/)
      }))
  })

  it('an entry without an origin (an agent\'s grant) opens without one, as before', () => {
    expect(openEntry(sealer, KEY, sealEntry(sealer, KEY, entry()))).not.toHaveProperty('origin')
    expect(openEntry(sealer, KEY, sealEntry(sealer, KEY, entry({ origin: { os: 'Linux', address: 'not an address' } })))!.origin).toEqual({ os: 'Linux' })
  })

  it('is 52 bytes without an origin, at most 61 with one: within the 64 Redis keeps a ranked set compact for', () => {
    const sizes: Array<[Partial<PersonEntry>, number]> = [
      [{}, 52],
      [{ origin: { os: 'other' } }, 53],
      [{ origin: { os: 'macOS', address: '203.0.113.7' } }, 57],
      [{ origin: { os: 'macOS', address: '::ffff:203.0.113.7' } }, 57],
      [{ origin: { os: 'Linux', address: 'ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff' } }, 61],
    ]
    for (const [over, bytes] of sizes) expect(sealEntry(sealer, KEY, entry(over)), JSON.stringify(over)).toHaveLength(bytes)
  })

  it('the same session sealed twice is the same member (its ranked set holds it once); two sessions differ', () => {
    const one = entry()
    expect(sealEntry(sealer, KEY, one)).toEqual(sealEntry(sealer, KEY, one))
    expect(sealEntry(sealer, KEY, entry())).not.toEqual(sealEntry(sealer, KEY, one))
  })

  it('opens only under the key it was listed under: copied under another person it is nobody\'s', () => {
    const member = sealEntry(sealer, KEY, entry())
    expect(openEntry(sealer, 'person:mallory-at-demo', member)).toBeNull()
  })

  it('opens with a previous secret of the list, keeping its public id; with no list that lacks the secret that sealed it', () => {
    const sealed = entry()
    const member = sealEntry(new Sealer(PREVIOUS), KEY, sealed)
    const before = openEntry(new Sealer(PREVIOUS), KEY, member)
    expect(openEntry(new Sealer(CURRENT, [PREVIOUS]), KEY, member)).toEqual(before)
    expect(openEntry(sealer, KEY, member)).toBeNull()
  })

  it('refuses to seal a session id it could not give back', () => {
    expect(() => sealEntry(sealer, KEY, entry({ sessionId: 's1' }))).toThrow(/session id/)
    expect(() => sealEntry(sealer, KEY, entry({ sessionId: `${randomBytes(32).toString('base64url').slice(0, 42)}B` }))).toThrow(/session id/)
  })

  const good = sealEntry(sealer, KEY, entry())
  const withOrigin = sealEntry(sealer, KEY, entry({ origin: { os: 'iOS', address: '2001:db8:1:2::7' } }))
  const flipped = (at: number, member = good) => { const copy = Buffer.from(member); copy[at]! ^= 1; return copy }
  const hostile: Array<[string, Buffer]> = [
    ['empty', Buffer.alloc(0)],
    ['the format byte alone', Buffer.from([SEALED_ENTRY])],
    ['another format byte', Buffer.concat([Buffer.from([0x03]), good.subarray(1)])],
    ['an entry without an origin called one with', Buffer.concat([Buffer.from([SEALED_ENTRY_WITH_ORIGIN]), good.subarray(1)])],
    ['an entry with an origin called one without', Buffer.concat([Buffer.from([SEALED_ENTRY]), withOrigin.subarray(1)])],
    ['an entry with an origin, cut to an IPv4 one\'s length', withOrigin.subarray(0, 57)],
    ['an entry with an origin, one byte more', Buffer.concat([withOrigin, Buffer.from([0])])],
    ['a bit flipped in the operating system byte', flipped(1 + 12 + 39, withOrigin)],
    ['a bit flipped in the address', flipped(withOrigin.length - 1, withOrigin)],
    ['base64url text (an unreleased build\'s form)', Buffer.from(good.toString('base64url'))],
    ['cut inside the synthetic IV', good.subarray(0, 8)],
    ['cut by one byte', good.subarray(0, good.length - 1)],
    ['one more byte', Buffer.concat([good, Buffer.from([0])])],
    ['random bytes of the right length', Buffer.concat([Buffer.from([SEALED_ENTRY]), randomBytes(good.length - 1)])],
    ['a bit flipped in the synthetic IV', flipped(3)],
    ['a bit flipped in the session id', flipped(20)],
    ['a bit flipped in the browser byte', flipped(good.length - 1)],
    ['a megabyte of noise behind a good head', Buffer.concat([good.subarray(0, 13), randomBytes(1 << 20)])],
  ]
  it.each(hostile)('a hostile member opens to nothing: %s', (_name, member) => {
    expect(openEntry(sealer, KEY, member)).toBeNull()
  })
})

describe('the small seal (SealingKey.sealSmall)', () => {
  const key = sealer.current
  it('opens what it sealed, any bytes, adding 12 bytes; another purpose or token opens nothing', () => {
    fc.assert(fc.property(fc.uint8Array({ maxLength: 200 }), fc.string(), (plain, token) => {
      const sealed = key.sealSmall('p', token, plain)
      expect(sealed).toHaveLength(plain.length + 12)
      expect(key.openSmall('p', token, sealed)).toEqual(Buffer.from(plain))
      expect(key.openSmall('q', token, sealed)).toBeNull()
      expect(key.openSmall('p', `${token}x`, sealed)).toBeNull()
    }))
  })

  it('any one bit flipped anywhere opens nothing', () => {
    const sealed = key.sealSmall('p', 't', Buffer.from('a value of some length'))
    for (let bit = 0; bit < sealed.length * 8; bit++) {
      const copy = Buffer.from(sealed)
      copy[bit >> 3]! ^= 1 << (bit & 7)
      expect(key.openSmall('p', 't', copy)).toBeNull()
    }
  })

  it('too short for its IV opens nothing', () => {
    for (let length = 0; length < 12; length++) expect(key.openSmall('p', 't', Buffer.alloc(length))).toBeNull()
  })
})
