// `users:` conditions name a person by the provider's stable subject: a table of
// identities a second account can present (the same `preferred_username` or GitHub `login` as the
// person a rule names, spellings of it, a session from before the subject was kept), and fast-check
// properties: an `allow` entry naming one subject never admits another subject whatever their user
// names, and a `deny` entry holds for every identity whose subject or user name it names.
import fc from 'fast-check'
import { describe, expect, it } from 'vitest'
import { compileRules } from '../../src/access/rules.js'
import { foldName, type RuleYaml } from '../../src/config/rule-lists.js'
import type { Identity } from '../../src/session/record.js'
import { lists } from '../helpers/rules.js'

/** A person whose user name `sub` comes from a reassignable claim (`preferred_username`), at subject `subject`. */
const person = (sub: string, subject: string | undefined, extra: Partial<Identity> = {}): Identity =>
  ({ sub, ...(subject === undefined ? {} : { subject }), groups: [], ...extra })

const ALICE = person('alice', 'f3b1c2d4-0000-4000-8000-000000000001')
const SECOND = person('alice', 'f3b1c2d4-0000-4000-8000-000000000002')
const MAILED = person('alice@example.org', '10769150350006150715113082367', { email: 'alice@example.org' })

type Row = [what: string, allow: RuleYaml[] | undefined, deny: RuleYaml[], identity: Identity, admit: boolean]

const TABLE: Row[] = [
  ['allow: the subject admits its person', [{ users: [ALICE.subject!] }], [], ALICE, true],
  ['allow: the subject does not admit a second account with the same name', [{ users: [ALICE.subject!] }], [], SECOND, false],
  ['allow: a reassignable name admits no one', [{ users: ['alice'] }], [], ALICE, false],
  ['allow: ... not the second account either', [{ users: ['alice'] }], [], SECOND, false],
  ['allow: a name that is the person\'s verified address admits (as an emails entry would)', [{ users: ['alice@example.org'] }], [], MAILED, true],
  ['allow: a name that is an unverified address does not', [{ users: ['alice@example.org'] }], [], { ...MAILED, emailVerified: false }, false],
  ['allow: a name that looks like an address but is not the person\'s address does not', [{ users: ['alice@example.org'] }], [], person('alice@example.org', 'x', { email: 'mallory@example.org' }), false],
  ['allow: a name that is an address, without any address claim, does not', [{ users: ['alice@example.org'] }], [], person('alice@example.org', 'x'), false],
  ['allow: a subject in another case does not', [{ users: [ALICE.subject!.toUpperCase()] }], [], ALICE, false],
  ['allow: a fullwidth look-alike of a subject does not', [{ users: ['１２３'] }], [], person('n', '123'), false],
  ['allow: a subject named __proto__ is only itself', [{ users: ['__proto__'] }], [], person('n', 'constructor'), false],
  ['allow: a name equal to another person\'s subject does not admit', [{ users: [ALICE.subject!] }], [], person(ALICE.subject!, 'other'), false],
  ['allow: a session from before the subject was kept is not admitted by a name', [{ users: ['alice'] }], [], person('alice', undefined), false],
  ['allow: ... unless the name is its verified address', [{ users: ['alice@example.org'] }], [], person('alice@example.org', undefined, { email: 'alice@example.org' }), true],
  ['deny: the subject holds for its person', undefined, [{ users: [ALICE.subject!] }], ALICE, false],
  ['deny: the subject does not hold for another subject', undefined, [{ users: [ALICE.subject!] }], SECOND, true],
  ['deny: a reassignable name holds for every account holding it', undefined, [{ users: ['alice'] }], SECOND, false],
  ['deny: a session from before the subject was kept cannot be told, and is refused', undefined, [{ users: [ALICE.subject!] }], person('bob', undefined), false],
  ['deny: an unverified address as the name still holds', undefined, [{ users: ['alice@example.org'] }], { ...MAILED, emailVerified: false }, false],
  // A name's case is the provider's display: GitHub lets mallory rename to Mallory, an Azure UPN keeps the case typed.
  ['deny: a user name in another case holds', undefined, [{ users: ['mallory'] }], person('Mallory', '4242'), false],
  ['deny: an entry in another case holds for the name', undefined, [{ users: ['MALLORY'] }], person('mallory', '4242'), false],
  ['deny: an address name in another case, its domain ending in the root\'s dot, holds', undefined, [{ users: ['mallory@corp.example'] }], person('Mallory@CORP.example.', 'x'), false],
  ['deny: an address name with an IDNA domain holds for its ASCII form', undefined, [{ users: ['mallory@xn--bcher-kva.example'] }], person('mallory@Bücher.example', 'x'), false],
  ['deny: a subject in another case holds (a deny refuses more, never less)', undefined, [{ users: [ALICE.subject!.toUpperCase()] }], ALICE, false],
  ['deny: a name that differs by more than case does not hold', undefined, [{ users: ['mallory'] }], person('mallory2', '4242'), true],
  // A session in 1.0's record form (signed in under 1.0, or refreshed by a 1.0.0 instance during a rolling upgrade,
  // which drops the mark of groups that could not be read): its groups cannot be told (an outside tester's finding).
  ['deny on groups: a session in 1.0\'s record form is refused, whatever groups it lists', undefined, [{ groups: ['contractors'] }], person('zed', undefined, { groups: ['staff'], untoldGroups: true }), false],
  ['deny on groups: a session with its subject has its groups read', undefined, [{ groups: ['contractors'] }], person('zed', '77', { groups: ['staff'] }), true],
  // A re-reading's finding: a token without `sub` (an introspected client-credentials token) whose groups are read was refused too.
  ['deny on groups: a token without sub has its groups read', undefined, [{ groups: ['contractors'] }], person('ci-job', undefined, { groups: ['deployers'] }), true],
  ['allow on groups: a session in 1.0\'s record form is admitted by its groups as ever', [{ groups: ['staff'] }], [], person('zed', undefined, { groups: ['staff'], untoldGroups: true }), true],
]

describe('users conditions key a person on the subject', () => {
  it.each(TABLE)('%s', (_what, allow, deny, identity, admit) => {
    expect(compileRules(lists(allow, deny))(identity, 'GET', '/x', undefined).admit).toBe(admit)
  })

  // Entries as the config keeps them (it trims each).
  const text = fc.string({ minLength: 1, maxLength: 20 }).filter((value) => value.trim() === value && value !== '')

  it('an allow entry naming one subject never admits another subject, whatever the user names', () => {
    fc.assert(fc.property(text, text, text, text, (subject, other, name, otherName) => {
      // The rule lists the first person's subject and (by mistake) their reassignable name.
      fc.pre(other !== subject && other !== name)
      const judge = compileRules(lists([{ users: [subject, name] }]))
      expect(judge(person(name, other), 'GET', '/x', undefined).admit).toBe(false)
      expect(judge(person(otherName, other), 'GET', '/x', undefined).admit).toBe(false)
      expect(judge(person(otherName, subject), 'GET', '/x', undefined).admit).toBe(true)
    }), { numRuns: 300 })
  })

  /** `value` with the letters at the `upper` positions in upper case and the rest in lower case. */
  const cased = (value: string, upper: boolean[]) => [...value].map((char, index) => upper[index % upper.length] ? char.toUpperCase() : char.toLowerCase()).join('')
  const casing = fc.array(fc.boolean(), { minLength: 1, maxLength: 8 })

  it('a deny entry holds for every identity whose subject or user name it names, in any case', () => {
    fc.assert(fc.property(text, text, text, casing, casing, (entry, subject, name, entryCase, nameCase) => {
      const judge = compileRules(lists(undefined, [{ users: [cased(entry, entryCase)] }]))
      expect(judge(person(cased(entry, nameCase), subject), 'GET', '/x', undefined).admit).toBe(false)
      expect(judge(person(name, cased(entry, nameCase)), 'GET', '/x', undefined).admit).toBe(false)
      const same = (a: string, b: string) => foldName(a) === foldName(b)
      expect(judge(person(name, subject), 'GET', '/x', undefined).admit).toBe(!same(entry, name) && !same(entry, subject))
    }), { numRuns: 300 })
  })

  it('an address as a deny entry holds for the name in every spelling its domain folds from', () => {
    const label = fc.stringMatching(/^[a-z][a-z0-9]{0,8}$/)
    fc.assert(fc.property(label, label, casing, fc.boolean(), (local, domain, nameCase, rootDot) => {
      const judge = compileRules(lists(undefined, [{ users: [`${local}@${domain}.example`] }]))
      const name = `${cased(`${local}@${domain}.example`, nameCase)}${rootDot ? '.' : ''}`
      expect(judge(person(name, 'subject-1'), 'GET', '/x', undefined).admit).toBe(false)
    }), { numRuns: 200 })
  })
})
