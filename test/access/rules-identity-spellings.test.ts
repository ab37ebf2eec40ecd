// A `deny` on a person holds for every spelling of the same person, and an `allow` never widens: an
// address in Unicode's decomposed form, with its local part quoted or with a subaddress (`+tag`),
// a user name in decomposed or full-width letters, and groups sent as one string (split only at
// commas: `Domain Admins` is one group). A table of hostile spellings, then a property over random
// spellings of an address: the session's identity (oauth/claims.ts) and the rules
// (config/rule-lists.ts folds) must agree on what is the same mailbox.
import fc from 'fast-check'
import { describe, expect, it } from 'vitest'
import { compileRules } from '../../src/access/rules.js'
import type { RuleYaml } from '../../src/config/rule-lists.js'
import type { ClaimsMapping } from '../../src/config/types.js'
import { identityFrom } from '../../src/oauth/claims.js'
import { lists } from '../helpers/rules.js'

const MAPPING: ClaimsMapping = { user: 'sub', email: 'email', name: 'name', groups: 'groups' }

function admitted (allow: RuleYaml[] | undefined, deny: RuleYaml[], claims: Record<string, unknown>): boolean {
  return compileRules(lists(allow, deny))(identityFrom(claims, MAPPING), 'GET', '/app/', '127.0.0.1').admit
}

describe('a deny on an address or a user, and the same person spelt otherwise', () => {
  it.each([
    ['the address in NFD', { emails: ['jos\u00e9@corp.example'] }, { email: 'jose\u0301@corp.example' }],
    ['the entry in NFD', { emails: ['jose\u0301@corp.example'] }, { email: 'jos\u00e9@corp.example' }],
    ['a quoted local part', { emails: ['mallory@corp.example'] }, { email: '"mallory"@corp.example' }],
    ['a quoted local part in another case', { emails: ['mallory@corp.example'] }, { email: '"Mallory"@CORP.example' }],
    ['a subaddress', { emails: ['mallory@corp.example'] }, { email: 'mallory+2@corp.example' }],
    ['a subaddress in another case', { emails: ['mallory@corp.example'] }, { email: 'Mallory+Work@corp.example.' }],
    ['a quoted subaddress', { emails: ['mallory@corp.example'] }, { email: '"mallory+x"@corp.example' }],
    ['a subject in NFD', { users: ['jos\u00e9'] }, { sub: 'jose\u0301' }],
    ['a subject in full-width letters', { users: ['mallory'] }, { sub: '\uff4d\uff41\uff4c\uff4c\uff4f\uff52\uff59' }],
    ['a group name with a space, sent as one string', { groups: ['Sales Admins'] }, { groups: 'Sales Admins' }],
    ['a group among others in a comma list', { groups: ['ops'] }, { groups: 'staff, ops' }],
  ])('%s is refused', (_name, deny, claims) => {
    expect(admitted(undefined, [deny], { sub: 'u1', ...claims })).toBe(false)
  })

  it.each([
    ['a subaddress is not the listed address', [{ emails: ['mallory@corp.example'] }], { email: 'mallory+2@corp.example' }, false],
    ['the listed subaddress is', [{ emails: ['mallory+2@corp.example'] }], { email: 'mallory+2@corp.example' }, true],
    ['the NFD spelling of the listed address is', [{ emails: ['jos\u00e9@corp.example'] }], { email: 'jose\u0301@corp.example' }, true],
    ['a quoted local part that needs its quotes is not the bare one', [{ emails: ['a.b@corp.example'] }], { email: '"a..b"@corp.example' }, false],
    ['one group with a space is not its first word', [{ groups: ['Payroll'] }], { groups: 'Payroll Readonly' }, false],
    ['one group with a space is itself', [{ groups: ['Payroll Readonly'] }], { groups: 'Payroll Readonly' }, true],
    ['a full-width subject is not the listed one', [{ users: ['mallory'] }], { sub: '\uff4d\uff41\uff4c\uff4c\uff4f\uff52\uff59' }, false],
  ])('in an allow: %s', (_name, allow, claims, expected) => {
    expect(admitted(allow, [], { sub: 'u1', ...claims })).toBe(expected)
  })
})

describe('random spellings of an address', () => {
  const local = fc.stringMatching(/^[a-z][a-z0-9]{0,6}$/)
  const spelling = fc.record({ upper: fc.boolean(), quoted: fc.boolean(), tag: fc.option(fc.stringMatching(/^[a-z0-9]{1,5}$/), { nil: undefined }), dot: fc.boolean() })
  const spell = (name: string, how: { upper: boolean, quoted: boolean, tag: string | undefined, dot: boolean }): string => {
    const tagged = how.tag === undefined ? name : `${name}+${how.tag}`
    const cased = how.upper ? tagged.toUpperCase() : tagged
    return `${how.quoted ? `"${cased}"` : cased}@${how.upper ? 'CORP.example' : 'corp.example'}${how.dot ? '.' : ''}`
  }

  it('a deny on an address refuses every spelling of its mailbox; an allow admits only the untagged ones', () => {
    fc.assert(fc.property(local, spelling, (name, how) => {
      const email = spell(name, how)
      expect(admitted(undefined, [{ emails: [`${name}@corp.example`] }], { sub: 'u1', email })).toBe(false)
      expect(admitted([{ emails: [`${name}@corp.example`] }], [], { sub: 'u1', email })).toBe(how.tag === undefined)
    }), { numRuns: 500 })
  })

  it('another mailbox is never refused by the deny, whatever its spelling', () => {
    fc.assert(fc.property(local, local, spelling, (name, other, how) => {
      fc.pre(name !== other)
      expect(admitted(undefined, [{ emails: [`${name}@corp.example`] }], { sub: 'u1', email: spell(other, how) })).toBe(true)
    }), { numRuns: 500 })
  })
})
