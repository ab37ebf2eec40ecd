// The stored form of a session record (src/session/record-wire.ts): one-letter keys, the same
// values. Any record comes back equal through it; it is shorter than the record's own JSON by the
// field names; a record of an earlier version (no subject) reads without one; and a provider called
// "__proto__" stays a provider.
import fc from 'fast-check'
import { describe, expect, it } from 'vitest'
import { notOneAddress, type SessionRecord } from '../../src/session/record.js'
import { fromWire, toWire, type WireRecord } from '../../src/session/record-wire.js'
import { Sealer } from '../../src/session/seal.js'
import { decodeRecord, encodeRecord, newCookie } from '../../src/session/sealed-record.js'

const text = fc.string({ minLength: 1, maxLength: 60 })
const providers = fc.uniqueArray(fc.oneof(fc.constantFrom('demo', 'github', '__proto__', 'constructor', 'a.b'), fc.string({ minLength: 1, maxLength: 12 })), { minLength: 1, maxLength: 3 })

const tokens = fc.record({ access_token: text, expires_at: fc.integer({ min: 0, max: 4_000_000_000 }), refresh_token: text }, { requiredKeys: ['access_token'] })
const identity = fc.record({
  sub: text,
  // An address the gateway reads (RFC 5322 allows some it does not: `=?` begins an encoded-word).
  email: fc.emailAddress().filter((address) => !notOneAddress(address)),
  emailVerified: fc.constant(false as const),
  name: text,
  groups: fc.array(text, { maxLength: 4 }),
  subject: text,
  iss: text,
  unknown: fc.constant(['groups' as const]),
  groupWords: fc.array(text, { minLength: 1, maxLength: 4 }),
  // This build keeps every person's subject (sign-in: claims.ts); a record without one is 1.0's form (below).
}, { requiredKeys: ['sub', 'groups', 'subject'] })
const providerSession = fc.record({ idToken: text, sid: text, sub: text }, { requiredKeys: [] })

const record: fc.Arbitrary<SessionRecord> = providers.chain((names) => fc.record({
  createdAt: fc.integer({ min: 0, max: 4_000_000_000_000 }),
  tokens: fc.tuple(...names.map(() => tokens)).map((sets) => Object.fromEntries(names.map((name, i) => [name, sets[i]!]))),
  identities: fc.tuple(...names.map(() => identity)).map((all) => Object.fromEntries(names.map((name, i) => [name, all[i]!]))),
  providerSessions: fc.tuple(...names.map(() => providerSession)).map((all) => Object.fromEntries(names.map((name, i) => [name, all[i]!]))),
}, { requiredKeys: ['createdAt', 'tokens'] }))

describe('the stored form of a session record', () => {
  it('gives back an equal record, through JSON as the store keeps it', () => {
    fc.assert(fc.property(record, (original) => {
      const back = fromWire(JSON.parse(JSON.stringify(toWire(original))))
      expect(back).toEqual(original)
      expect(Object.keys(back.tokens).sort()).toEqual(Object.keys(original.tokens).sort())
    }), { numRuns: 300 })
  })

  it('is shorter than the record\'s own JSON by its field names', () => {
    fc.assert(fc.property(record, (original) => {
      expect(JSON.stringify(toWire(original)).length).toBeLessThan(JSON.stringify(original).length)
    }), { numRuns: 100 })
  })

  it('reads a record an earlier version wrote (no subject, no issuer) as it was: an identity without them, whose groups cannot be told', () => {
    const earlier = '{"c":1700000000000,"t":{"corp":{"a":"at"}},"i":{"corp":{"s":"alice","m":"alice@example.org","g":["staff"]}}}'
    const read = fromWire(JSON.parse(earlier) as WireRecord)
    expect(read.identities).toEqual({ corp: { sub: 'alice', email: 'alice@example.org', groups: ['staff'], untoldGroups: true } })
    // Never stored: written back, the record is 1.0's form again, not a new key.
    expect(toWire(read)).toEqual(JSON.parse(earlier))
  })

  // Made before a sign-in refused such a name, it kept sending it upstream until it ended (two re-readers' finding).
  it('reads a stored session whose user name a sign-in no longer takes as no session: its person signs in again', () => {
    const sealer = new Sealer('record-wire-secret-0123456789-abcdefghijkl')
    const cookie = newCookie(sealer)
    const named = (sub: string): SessionRecord => ({ createdAt: 1, tokens: { corp: { access_token: 'at' } }, identities: { corp: { sub, subject: 's1', groups: [] } } })
    const read = (sub: string) => decodeRecord(sealer, cookie, encodeRecord(sealer, cookie, named(sub)))
    expect(read('alice@corp.example')?.identities?.corp?.sub).toBe('alice@corp.example')
    expect(read('alice')?.identities?.corp?.sub).toBe('alice')
    for (const sub of ['"a@corp.example"@attacker.example', 'a\uff20corp.example@attacker.example', 'alice\uff20corp.example', 'a@corp.example, b@x.example']) {
      expect(read(sub)).toBeNull()
    }
  })

  it('keeps a provider named __proto__ an entry of its own, not a prototype', () => {
    const original: SessionRecord = { createdAt: 1, tokens: JSON.parse('{"__proto__":{"access_token":"at"}}') as SessionRecord['tokens'] }
    const back = fromWire(JSON.parse(JSON.stringify(toWire(original))))
    expect(Object.keys(back.tokens)).toEqual(['__proto__'])
    expect(Object.getPrototypeOf(back.tokens)).toBe(Object.prototype)
    expect((Object.getOwnPropertyDescriptor(back.tokens, '__proto__')?.value as { access_token: string }).access_token).toBe('at')
  })
})
