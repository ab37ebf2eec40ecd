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
import { DEFAULT_IDENTITY_HEADERS, identityHeaders } from '../../src/access/identity-headers.js'
import { LONGEST_NAME } from '../../src/access/deny-forms.js'
import type { Identity } from '../../src/session/record.js'
import { fromWire, type WireRecord } from '../../src/session/record-wire.js'
import { lists } from '../helpers/rules.js'

const MAPPING: ClaimsMapping = { user: 'sub', email: 'email', name: 'name', groups: 'groups' }

/** A provider whose user name is the (verified) e-mail address. */
const BY_EMAIL: ClaimsMapping = { user: 'email', email: 'email', name: 'name', groups: 'groups' }

function admitted (allow: RuleYaml[] | undefined, deny: RuleYaml[], claims: Record<string, unknown>, mapping = MAPPING): boolean {
  return compileRules(lists(allow, deny))(identityFrom(claims, mapping), 'GET', '/app/', '127.0.0.1').admit
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

describe('groups sent as one string: a deny holds on each of its words', () => {
  it('deny groups: [contractors] holds for groups "staff contractors"', () => {
    expect(admitted(undefined, [{ groups: ['contractors'] }], { sub: 'u1', groups: 'staff contractors' })).toBe(false)
  })
  it('deny groups: [contractors] holds for groups "staff\\ncontractors" / tab separated', () => {
    expect(admitted(undefined, [{ groups: ['contractors'] }], { sub: 'u1', groups: 'staff\ncontractors' })).toBe(false)
    expect(admitted(undefined, [{ groups: ['contractors'] }], { sub: 'u1', groups: 'staff\tcontractors' })).toBe(false)
  })
  it('deny groups: [contractors] holds for groups "staff;contractors"', () => {
    expect(admitted(undefined, [{ groups: ['contractors'] }], { sub: 'u1', groups: 'staff;contractors' })).toBe(false)
  })
})

// An outside tester's finding: a deny on groups compared as written, so a token's (or a provider's)
// `Contractors`, fullwidth letters or a soft hyphen passed a deny on `contractors`; a users or claims
// deny already folded. An allow on groups stays as written.
describe('a deny on a group, and the group spelt otherwise', () => {
  it.each<[string, string | string[]]>([
    ['another case', ['Contractors']],
    ['fullwidth letters', ['\uff43\uff4f\uff4e\uff54\uff52\uff41\uff43\uff54\uff4f\uff52\uff53']],
    ['a soft hyphen', ['contrac\u00adtors']],
    ['a zero-width space', ['contractors\u200b']],
    ['a word of one string, in another case', 'staff CONTRACTORS'],
  ])('holds on %s', (_name, groups) => {
    expect(admitted(undefined, [{ groups: ['contractors'] }], { sub: 'u1', groups })).toBe(false)
  })

  // A re-reading's finding: a group that is an address kept a joiner in its domain (IDNA refuses it).
  it.each([
    ['a zero-width joiner inside the domain', 'contractors@co\u200drp.example'],
    ['a zero-width non-joiner inside the domain', 'contractors@co\u200crp.example'],
    ['a joiner and another case', 'Contractors@CO\u200dRP.example'],
    ['a joiner and an ideographic full stop', 'contractors@co\u200drp\u3002example'],
    ['a joiner and a trailing dot', 'contractors@co\u200drp.example.'],
  ])('holds on an address-like group with %s', (_name, group) => {
    expect(admitted(undefined, [{ groups: ['contractors@corp.example'] }], { sub: 'u1', groups: [group] })).toBe(false)
    expect(admitted(undefined, [{ groups: ['contractors@corp.example'] }], { sub: 'u1', groups: ['staff@corp.example'] })).toBe(true)
  })

  it('holds on a joiner in a Unicode domain, the deny written in punycode', () => {
    expect(admitted(undefined, [{ groups: ['contractors@xn--bcher-kva.example'] }], { sub: 'u1', groups: ['contractors@b\u00fc\u200dcher.example'] })).toBe(false)
  })

  it('holds on an entry written in another case', () => {
    expect(admitted(undefined, [{ groups: ['Contractors'] }], { sub: 'u1', groups: ['contractors'] })).toBe(false)
  })

  it('an allow on a group admits it only as written', () => {
    expect(admitted([{ groups: ['admins'] }], [], { sub: 'u1', groups: ['Admins'] })).toBe(false)
    expect(admitted([{ groups: ['admins'] }], [], { sub: 'u1', groups: ['admins'] })).toBe(true)
  })
})

// An outside tester's finding: JavaScript's trim() took Unicode spaces off a name's and a group's
// ends, so `alice\u3000` (another account at the provider) went upstream as alice, and a group
// `admins\u00a0` passed an allow on admins. A group's ends lose only ASCII white space, as HTTP
// trims; a user name or sub with white space of any kind at an end names nobody.
describe('Unicode spaces at the ends of a name or a group', () => {
  const MAPPED: ClaimsMapping = { user: 'preferred_username', email: 'email', name: 'name', groups: 'team' }
  // A re-reading's: kept, such a name still read as alice to an application that trims (Go's
  // TrimSpace, JavaScript's trim(), Python's strip()): it names nobody, as ASCII white space does.
  it.each(['alice\u3000', '\ufeffalice', 'alice\u00a0', '\u2028alice', 'alice\u0085', 'alice\u2003', '\u180ealice', 'alice\x1f', '\x1calice'])('the user name or sub %j is not alice: it names nobody', (name) => {
    expect(identityFrom({ sub: 'zed-sub', preferred_username: name }, MAPPED)).toBeUndefined()
    expect(identityFrom({ sub: name, preferred_username: 'zed' }, MAPPED)).toBeUndefined()
  })
  it('white space inside a name is part of it', () => {
    expect(identityFrom({ sub: 'zed sub', preferred_username: 'alice\u00a0smith' }, MAPPED)).toMatchObject({ sub: 'alice\u00a0smith', subject: 'zed sub' })
  })
  it.each([['admins\u00a0'], ['\u2028admins'], ['admins\u3000, staff']])('the group %j does not pass an allow on admins', (team) => {
    expect(admitted([{ groups: ['admins'] }], [], { sub: 'zed-sub', preferred_username: 'zed', team }, MAPPED)).toBe(false)
    // The control: the same person in admins passes.
    expect(admitted([{ groups: ['admins'] }], [], { sub: 'zed-sub', preferred_username: 'zed', team: 'admins' }, MAPPED)).toBe(true)
  })
  it('ASCII white space at a group\'s ends is still trimmed, and commas still split', () => {
    const identity = identityFrom({ sub: 'alice-sub', preferred_username: 'alice', team: ' admins ,\tstaff\n' }, MAPPED)
    expect([identity?.sub, identity?.groups]).toEqual(['alice', ['admins', 'staff']])
  })
  // An attacker's finding: trimmed, `alice\t` (another account) passed a users rule on alice; kept, it
  // would reach the upstream as alice all the same (HTTP trims a header value's ends).
  it.each([' alice', 'alice\t', 'alice\r\n', 'alice '])('a user name or sub %j is nobody the gateway can tell apart: no identity', (name) => {
    expect(identityFrom({ sub: 'alice-sub', preferred_username: name }, MAPPED)).toBeUndefined()
    expect(identityFrom({ sub: name, preferred_username: 'alice' }, MAPPED)).toBeUndefined()
    expect(identityFrom({ sub: 'alice-sub', preferred_username: 'alice' }, MAPPED)).toMatchObject({ sub: 'alice', subject: 'alice-sub' })
  })
})

describe('a deny users entry that is an address is folded as an emails entry', () => {
  it('deny users: [mallory@corp] holds for the user name mallory+2@corp (as deny emails does)', () => {
    expect(admitted(undefined, [{ emails: ['mallory@corp.example'] }], { email: 'mallory+2@corp.example' }, BY_EMAIL)).toBe(false)
    expect(admitted(undefined, [{ users: ['mallory@corp.example'] }], { email: 'mallory+2@corp.example' }, BY_EMAIL)).toBe(false)
  })
  it('deny users: [mallory@corp] holds for a full-width local part (NFKC applies to plain names only)', () => {
    expect(admitted(undefined, [{ users: ['mallory'] }], { sub: '\uff4d\uff41\uff4c\uff4c\uff4f\uff52\uff59' })).toBe(false)
    expect(admitted(undefined, [{ users: ['mallory@corp.example'] }], { sub: '\uff4d\uff41\uff4c\uff4c\uff4f\uff52\uff59@corp.example' })).toBe(false)
  })
  it('deny users: [mallory] holds for a name with a default-ignorable code point (soft hyphen, zero-width space)', () => {
    expect(admitted(undefined, [{ users: ['mallory'] }], { sub: 'mal\u00adlory' })).toBe(false)
    expect(admitted(undefined, [{ users: ['mallory'] }], { sub: 'mal\u200blory' })).toBe(false)
  })
})

describe('other spellings of the same mailbox in an emails deny', () => {
  it.each([
    ['a quoted local part with a quoted-pair (RFC 5321: "mal\\lory" is mallory)', '"mal\\lory"@corp.example'],
    ['a quoted, escaped subaddress', '"mallory\\+x"@corp.example'],
    ['a comment in the local part (RFC 5322 CFWS)', 'mallory(x)@corp.example'],
    ['a comment before the domain', 'mallory@(x)corp.example'],
  ])('%s is refused', (_name, email) => {
    expect(admitted(undefined, [{ emails: ['mallory@corp.example'] }], { sub: 'u1', email })).toBe(false)
  })

  it('a deny entry written with a tag refuses the tag with a further tag (mallory+x+y@)', () => {
    expect(admitted(undefined, [{ emails: ['mallory+x@corp.example'] }], { sub: 'u1', email: 'mallory+x+y@corp.example' })).toBe(false)
  })
})

describe('an e-mail claim that is text but not one address cannot be told', () => {
  const claims = { sub: 'u1', email: 'mallory@contractor.example, mallory@corp.example' }
  it('a deny on the contractor domain holds', () => {
    expect(admitted(undefined, [{ domains: ['contractor.example'] }], claims)).toBe(false)
  })
  it('an allow on corp does not admit', () => {
    expect(admitted([{ domains: ['corp.example'] }], [], claims)).toBe(false)
  })
})

// An address is read only when it is one address as every reader reads it: one `@`, something on
// each side, quotes only around the whole local part (a reader splitting at the first `@` and the
// rules, which read the domain after the last, name the same domain). Before, a provider-verified
// `"a@corp.example"@attacker.example` was sent in X-Forwarded-Email, where an application splitting
// at the first `@` reads `corp.example"`, and a claim `corp.example` met `domains: [corp.example]`.
describe('an e-mail claim that two readers could read apart is not an address', () => {
  it.each([
    ['a quoted local part holding an @', '"a@corp.example"@attacker.example'],
    ['two @', 'a@corp.example@attacker.example'],
    ['no @: a domain alone', 'corp.example'],
    ['nothing before the @', '@corp.example'],
    ['nothing after the @', 'alice@'],
    ['a quote inside the local part', 'al"ice"@corp.example'],
    ['an unclosed quote', '"alice@corp.example'],
    ['empty quotes', '""@corp.example'],
    ['an escape', 'al\\ice@corp.example'],
    // A reader that decodes what it reads (an outside tester's findings, after PortSwigger's "Splitting the email atom").
    ['an RFC 2047 encoded-word (Q) holding an @', '=?utf-8?q?a=40corp.example?=@attacker.example'],
    ['an RFC 2047 encoded-word (B) holding an @', '=?utf-8?b?YWRtaW5AY29ycC5leGFtcGxl?=@attacker.example'],
    ['a fullwidth @ (U+FF20), an @ under NFKC', 'a\uff20corp.example@attacker.example'],
    ['a small @ (U+FE6B), an @ under NFKC', 'a\ufe6bcorp.example@attacker.example'],
    ['a control character', 'alice\u0001@attacker.example'],
    ['a zero-width space', 'al\u200bice@attacker.example'],
  ])('%s (%s): an allow on the domain does not admit, a deny on it holds, no header carries it', (_name, email) => {
    const identity = identityFrom({ sub: 'u1', email }, MAPPING)!
    expect({ email: identity.email, unknown: identity.unknown }).toEqual({ email: undefined, unknown: ['email'] })
    expect(admitted([{ domains: ['corp.example'] }], [], { sub: 'u1', email })).toBe(false)
    expect(admitted(undefined, [{ domains: ['attacker.example'] }], { sub: 'u1', email })).toBe(false)
    expect(identityHeaders(identity, DEFAULT_IDENTITY_HEADERS, {})).toEqual({ 'x-forwarded-user': 'u1' })
  })

  it.each([
    ['a plain address', 'alice@corp.example'],
    ['quotes that change nothing (RFC 5321 §4.1.2)', '"alice"@corp.example'],
    ['a subaddress', 'alice+x@corp.example'],
    ['a non-ASCII local part (RFC 6531)', 'jos\u00e9@corp.example'],
    ['an apostrophe', "o'brien@corp.example"],
    // Folded as the rules compare (NFKC), still one address at the same domain.
    ['a fullwidth letter', '\uff41lice@corp.example'],
    ['a decomposed accent', 'jose\u0301@corp.example'],
    ['a local part and a domain in Chinese (RFC 6531), NFKC as written', '\u7528\u6237@corp.example'],
  ])('%s (%s) is read, and an allow on its domain admits', (_name, email) => {
    expect(identityFrom({ sub: 'u1', email }, MAPPING)!.email).toBe(email)
    expect(admitted([{ domains: ['corp.example'] }], [], { sub: 'u1', email })).toBe(true)
  })

  it('every address the gateway reads names one domain, whether read after the first @ or the last', () => {
    // Read as written, and as a reader folding Unicode compatibility characters reads it (＠ is @, ａ is a): one domain.
    const part = fc.string({ unit: fc.constantFrom(...'abcxyz"@\\.+ ,=?\uff20\uff41\u00e9\u0301'), maxLength: 8 })
    fc.assert(fc.property(part, part, part, (a, b, c) => {
      const email = identityFrom({ sub: 'u1', email: `${a}@${b}${c}` }, MAPPING)!.email
      if (email === undefined) return
      expect(email.slice(email.indexOf('@') + 1)).toBe(email.slice(email.lastIndexOf('@') + 1))
      expect(email.slice(email.indexOf('@') + 1)).not.toContain('"')
      const folded = email.normalize('NFKC')
      expect(folded.indexOf('@')).toBe(folded.lastIndexOf('@'))
      expect(folded.slice(folded.indexOf('@') + 1)).toBe(email.slice(email.indexOf('@') + 1).normalize('NFKC'))
    }), { numRuns: 2000 })
  })
})

describe('an email_verified that does not say yes counts as unverified', () => {
  it.each([[0], ['0'], ['no'], [['false']], [{ value: false }]])('email_verified %j: an allow on the address does not admit', (verified) => {
    expect(admitted([{ emails: ['alice@corp.example'] }], [], { sub: 'u1', email: 'alice@corp.example', email_verified: verified })).toBe(false)
  })
})

describe('names and addresses a deny cannot read', () => {
  const judge = (allow: RuleYaml[] | undefined, deny: RuleYaml[], identity: Identity): boolean => compileRules(lists(allow, deny))(identity, 'GET', '/app/', '127.0.0.1').admit

  it.each([
    ['nested comments', `${'('.repeat(LONGEST_NAME)}${')'.repeat(LONGEST_NAME)}x@corp.example`],
    ['many subaddresses', `${'a+'.repeat(LONGEST_NAME)}@corp.example`],
    ['a long name', 'm'.repeat(LONGEST_NAME + 1)],
  ])('%s longer than any person\'s meet every users and emails deny, and no allow is widened', (_name, long) => {
    const identity: Identity = { sub: long, subject: long, email: long, groups: ['staff'] }
    expect(judge(undefined, [{ users: ['mallory'] }], identity)).toBe(false)
    expect(judge(undefined, [{ emails: ['mallory@corp.example'] }], identity)).toBe(false)
    expect(judge([{ groups: ['staff'] }], [], identity)).toBe(true)
    expect(judge([{ users: ['mallory'] }], [], identity)).toBe(false)
  })

  it.each([
    ['a comment after the domain', 'mallory@evil.example(x)'],
    ['a comment before the domain', 'mallory@(x)evil.example'],
  ])('%s: a deny on the domain holds as a deny on the address does, and the provider\'s claim is not read as an address at all', (_name, email) => {
    const identity: Identity = { sub: 'm', subject: 'm', email, groups: [] }
    expect(judge(undefined, [{ emails: ['mallory@evil.example'] }], identity)).toBe(false)
    expect(judge(undefined, [{ domains: ['evil.example'] }], identity)).toBe(false)
    expect(identityFrom({ sub: 'm', email }, MAPPING)).toMatchObject({ unknown: ['email'] })
  })

  it('an address 1.0.0 stored as two ("carol@contractor.example, c@corp.example") is read as one that cannot be told', () => {
    const wire = { c: 1, t: { corp: { a: 'at' } }, i: { corp: { s: 'carol', j: 'carol-sub', m: 'carol@contractor.example, c@corp.example' } } } as unknown as WireRecord
    const identity = fromWire(wire).identities!.corp!
    expect(identity).toMatchObject({ unknown: ['email'] })
    expect(identity.email).toBeUndefined()
    expect(judge(undefined, [{ domains: ['contractor.example'] }], identity)).toBe(false)
    expect(judge([{ domains: ['corp.example'] }], [], identity)).toBe(false)
  })
})
