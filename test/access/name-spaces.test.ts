// name-spaces.ts: no two people of different providers are ever given the same name by any route of
// a gateway, whatever names the providers hand out, in any case: the naming is one-to-one over
// (provider, user name) for a route's own provider, whichever other providers and issuers the
// route takes, including the own provider's names that hold a `:`.
import fc from 'fast-check'
import { describe, expect, it } from 'vitest'
import { named, nameSpaces } from '../../src/access/name-spaces.js'
import { foldName } from '../../src/config/rule-lists.js'
import type { Identity } from '../../src/session/record.js'

const person = (sub: string): Identity => ({ sub, subject: sub, groups: [] })
const SPACES = nameSpaces({ corp: {}, partner: {}, gh: {} })
/** Names built from the providers' own words, colons and case, where collisions would be. */
const name = fc.array(fc.constantFrom('corp', 'Partner', 'partner', 'gh', 'alice', ':', '\uff1a', ''), { minLength: 1, maxLength: 5 }).map((parts) => parts.join(''))
const provider = fc.constantFrom('corp', 'partner', 'gh')

describe('a gateway\'s names', () => {
  it('are one-to-one over (provider, name), and over providers in any case, on the routes of one own provider', () => {
    fc.assert(fc.property(provider, name, provider, name, (a, first, b, second) => {
      fc.pre(a !== b || first !== second)
      const one = named(person(first), a, 'corp', SPACES).sub
      const other = named(person(second), b, 'corp', SPACES).sub
      expect(one).not.toBe(other)
      if (a !== b) expect(foldName(one)).not.toBe(foldName(other))
    }), { numRuns: 3000 })
  })

  it.each([
    ['alice', 'alice'],
    ['partner:alice', 'corp:partner:alice'],
    ['Partner:alice', 'corp:Partner:alice'],
    ['partner\uff1aalice', 'corp:partner\uff1aalice'],
    ['corp:alice', 'corp:corp:alice'],
    ['gh:1', 'corp:gh:1'],
    [':alice', ':alice'],
    ['other:alice', 'other:alice'],
    ['urn:corp:alice', 'urn:corp:alice'],
  ])('the own provider\'s %s is %s, keeping its name for a deny', (sub, expected) => {
    const identity = named(person(sub), 'corp', 'corp', SPACES)
    expect(identity).toMatchObject({ sub: expected, subject: expected })
    expect(identity.aka).toEqual(sub === expected ? undefined : [sub, sub])
  })

  it('keep the names of a gateway of one provider as they are, and give another provider\'s people no old name', () => {
    expect(named(person('partner:alice'), 'corp', 'corp', nameSpaces({ corp: {} }))).toMatchObject({ sub: 'partner:alice' })
    expect(named(person('alice'), 'partner', 'corp', SPACES)).toEqual({ sub: 'partner:alice', subject: 'partner:alice', groups: [] })
  })
})
