// name-spaces.ts: on a route, no two people of different providers (or two different people of one)
// are ever given the same name, whatever names the providers hand out: the naming is one-to-one
// over (provider, user name), including the own provider's names that hold a `:`.
import fc from 'fast-check'
import { describe, expect, it } from 'vitest'
import { foreignSpaces, named } from '../../src/access/name-spaces.js'
import type { Identity } from '../../src/session/record.js'

const person = (sub: string): Identity => ({ sub, subject: sub, groups: [] })
const SPACES = ['corp', 'partner', 'gh']
/** Names built from the spaces' own words and colons, where collisions would be. */
const name = fc.array(fc.constantFrom('corp', 'partner', 'gh', 'alice', ':', ''), { minLength: 1, maxLength: 5 }).map((parts) => parts.join(''))

describe('a route\'s names', () => {
  it('are one-to-one over (provider, name) on a route with other name spaces', () => {
    const foreign = foreignSpaces('corp', ['corp', 'partner'], ['gh'])
    fc.assert(fc.property(fc.constantFrom(...SPACES), name, fc.constantFrom(...SPACES), name, (a, first, b, second) => {
      fc.pre(a !== b || first !== second)
      expect(named(person(first), a, 'corp', foreign).sub).not.toBe(named(person(second), b, 'corp', foreign).sub)
    }), { numRuns: 2000 })
  })

  it.each([
    ['alice', 'alice'],
    ['partner:alice', 'corp:partner:alice'],
    ['corp:alice', 'corp:corp:alice'],
    ['gh:1', 'corp:gh:1'],
    [':alice', ':alice'],
    ['other:alice', 'other:alice'],
    ['urn:corp:alice', 'urn:corp:alice'],
  ])('the own provider\'s %s is %s beside other name spaces', (sub, expected) => {
    expect(named(person(sub), 'corp', 'corp', foreignSpaces('corp', ['corp', 'partner'], ['gh']))).toMatchObject({ sub: expected, subject: expected })
  })

  it('leave the own provider\'s names as they are on a route without another name space', () => {
    expect(named(person('partner:alice'), 'corp', 'corp', foreignSpaces('corp', ['corp'], ['corp']))).toMatchObject({ sub: 'partner:alice' })
    expect(named(person('partner:alice'), 'corp', 'corp')).toMatchObject({ sub: 'partner:alice' })
  })
})
