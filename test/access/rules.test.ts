// Who may pass, on its own: the compiled judge (src/access/rules.ts) as a table of identities,
// methods and paths against rule lists, and fast-check properties: `deny` always wins, a rule with
// more conditions never admits more, the query never changes a decision, and what cannot be told
// (a method or path forward-auth was not given) is refused, never admitted.
import { domainToASCII } from 'node:url'
import fc from 'fast-check'
import { describe, expect, it } from 'vitest'
import { compileRules, allOf } from '../../src/access/rules.js'
import type { RuleYaml } from '../../src/config/rule-lists.js'
import type { Identity } from '../../src/session/record.js'
import { anyOf, lists } from '../helpers/rules.js'

/** A person whose user name is the provider's `sub` (the default mapping): the name is the subject. */
const id = (sub: string, extra: Partial<Identity> = {}): Identity => ({ sub, subject: sub, groups: [], ...extra })
const alice = id('alice', { email: 'alice@example.org', groups: ['staff', 'admins'], claims: { 'realm_access.roles': ['reporter'], level: ['3'], onsite: ['true'] } })
const bob = id('bob', { email: 'bob@contractor.example', groups: ['staff'] })
const eve = id('eve', { email: 'alice@example.org', emailVerified: false, groups: [] })

type Row = [what: string, allow: RuleYaml[] | undefined, deny: RuleYaml[], identity: Identity | undefined, method: string | undefined, path: string | undefined, admit: boolean, rule: string | undefined]

const TABLE: Row[] = [
  ['no rules: anyone signed in', undefined, [], bob, 'GET', '/x', true, undefined],
  ['a user by name', [{ users: ['alice'] }], [], alice, 'GET', '/x', true, 'allow[0]'],
  ['another user', [{ users: ['alice'] }], [], bob, 'GET', '/x', false, undefined],
  ['user names are exact (case)', [{ users: ['Alice'] }], [], alice, 'GET', '/x', false, undefined],
  ['an e-mail', [{ emails: ['alice@example.org'] }], [], alice, 'GET', '/x', true, 'allow[0]'],
  ['an unverified e-mail matches no e-mail rule', [{ emails: ['alice@example.org'] }], [], eve, 'GET', '/x', false, undefined],
  ['an unverified e-mail matches no domain rule', [{ domains: ['example.org'] }], [], eve, 'GET', '/x', false, undefined],
  ['an unverified e-mail matches a deny e-mail rule (kept out all the same)', undefined, [{ emails: ['alice@example.org'] }], eve, 'GET', '/x', false, 'deny[0]'],
  ['an unverified e-mail matches a deny domain rule', [{ users: ['eve'] }], [{ domains: ['example.org'] }], eve, 'GET', '/x', false, 'deny[0]'],
  ['a domain is the whole domain, not a suffix', [{ domains: ['example.org'] }], [], id('m', { email: 'm@evilexample.org' }), 'GET', '/x', false, undefined],
  ['a domain of a subdomain is another domain', [{ domains: ['example.org'] }], [], id('m', { email: 'm@x.example.org' }), 'GET', '/x', false, undefined],
  // One DNS name, one spelling: the root's trailing dot, IDNA's ASCII form and Unicode, any case.
  ['a deny domain holds on the address with the root\'s dot', undefined, [{ domains: ['contractor.example'] }], id('m', { email: 'm@contractor.example.' }), 'GET', '/x', false, 'deny[0]'],
  ['a deny e-mail holds on the address with the root\'s dot', undefined, [{ emails: ['m@contractor.example'] }], id('m', { email: 'm@contractor.example.' }), 'GET', '/x', false, 'deny[0]'],
  ['a deny domain holds on the address with the root\'s dot written twice', undefined, [{ domains: ['contractor.example'] }], id('m', { email: 'm@contractor.example..' }), 'GET', '/x', false, 'deny[0]'],
  ['a deny e-mail holds on the address with the root\'s dot written three times', undefined, [{ emails: ['m@contractor.example'] }], id('m', { email: 'm@CONTRACTOR.example...' }), 'GET', '/x', false, 'deny[0]'],
  ['a deny domain holds on an address whose domain is dots alone (which domain cannot be told)', undefined, [{ domains: ['contractor.example'] }], id('m', { email: 'm@..' }), 'GET', '/x', false, 'deny[0]'],
  ['a deny domain written with the root\'s dot holds on the address without', undefined, [{ domains: ['contractor.example.'] }], id('m', { email: 'm@contractor.example' }), 'GET', '/x', false, 'deny[0]'],
  ['a deny domain in Unicode holds on its IDNA form', undefined, [{ domains: ['bücher.example'] }], id('m', { email: 'm@xn--bcher-kva.example' }), 'GET', '/x', false, 'deny[0]'],
  ['a deny domain in IDNA form holds on its Unicode form, in capitals', undefined, [{ domains: ['xn--bcher-kva.example'] }], id('m', { email: 'm@BÜCHER.example' }), 'GET', '/x', false, 'deny[0]'],
  ['a deny e-mail in Unicode holds on its IDNA form', undefined, [{ emails: ['m@bücher.example'] }], id('m', { email: 'm@xn--bcher-kva.example' }), 'GET', '/x', false, 'deny[0]'],
  ['full-width letters are the ASCII domain', undefined, [{ domains: ['contractor.example'] }], id('m', { email: 'm@ｃｏｎｔｒａｃｔｏｒ.example' }), 'GET', '/x', false, 'deny[0]'],
  ['a deny domain holds on the address with an ideographic full stop as the root\'s dot', undefined, [{ domains: ['contractor.example'] }], id('m', { email: 'm@contractor.example\u3002' }), 'GET', '/x', false, 'deny[0]'],
  ['a deny domain holds on the address with a full-width full stop as the root\'s dot', undefined, [{ domains: ['contractor.example'] }], id('m', { email: 'm@contractor.example\uff0e' }), 'GET', '/x', false, 'deny[0]'],
  ['a deny domain holds on the address with a halfwidth ideographic full stop as the root\'s dot', undefined, [{ domains: ['contractor.example'] }], id('m', { email: 'm@contractor.example\uff61' }), 'GET', '/x', false, 'deny[0]'],
  ['a deny e-mail holds on the address with the root\'s dot and a soft hyphen', undefined, [{ emails: ['m@contractor.example'] }], id('m', { email: 'm@contractor.example.\u00ad' }), 'GET', '/x', false, 'deny[0]'],
  // A name IDNA refuses (a joiner inside a label; IDNA2003 would drop it): which domain it is cannot be told.
  ['a deny domain holds on an address whose domain IDNA refuses (a zero-width joiner)', undefined, [{ domains: ['contractor.example'] }], id('m', { email: 'm@contrac\u200dtor.example' }), 'GET', '/x', false, 'deny[0]'],
  ['a deny domain holds on an address whose domain IDNA refuses (a zero-width non-joiner)', undefined, [{ domains: ['other.example'] }], id('m', { email: 'm@contrac\u200ctor.example' }), 'GET', '/x', false, 'deny[0]'],
  ['a deny e-mail holds on an address whose domain IDNA refuses (the root\'s dot and a joiner)', undefined, [{ emails: ['m@contractor.example'] }], id('m', { email: 'm@contractor.example.\u200d' }), 'GET', '/x', false, 'deny[0]'],
  ['an allow domain does not admit an address whose domain IDNA refuses', [{ domains: ['contractor.example'] }], [], id('m', { email: 'm@contrac\u200dtor.example' }), 'GET', '/x', false, undefined],
  ['an allow domain admits the address with the root\'s dot', [{ domains: ['example.org'] }], [], id('m', { email: 'm@example.org.' }), 'GET', '/x', true, 'allow[0]'],
  ['another name is still another domain', undefined, [{ domains: ['bücher.example'] }], id('m', { email: 'm@bucher.example' }), 'GET', '/x', true, undefined],
  ['a group', [{ groups: ['admins'] }], [], alice, 'GET', '/x', true, 'allow[0]'],
  ['an array claim matches on any element', [{ claims: { 'realm_access.roles': ['auditor', 'reporter'] } }], [], alice, 'GET', '/x', true, 'allow[0]'],
  ['a number compares as written', [{ claims: { level: [3] } }], [], alice, 'GET', '/x', true, 'allow[0]'],
  ['a boolean compares as written', [{ claims: { onsite: [true] } }], [], alice, 'GET', '/x', true, 'allow[0]'],
  ['"3.0" is not 3', [{ claims: { level: ['3.0'] } }], [], alice, 'GET', '/x', false, undefined],
  ['a claim the session lacks never matches', [{ claims: { tid: ['t1'] } }], [], alice, 'GET', '/x', false, undefined],
  ['a claim path named like an inherited property matches nothing', [{ claims: { constructor: ['x'] } }, { claims: JSON.parse('{"__proto__": ["x"]}') as Record<string, string[]> }, { claims: { toString: ['x'] } }], [], alice, 'GET', '/x', false, undefined],
  ['every claim condition must hold', [{ claims: { level: [3], onsite: [false] } }], [], alice, 'GET', '/x', false, undefined],
  ['all conditions of a rule must hold', [{ groups: ['staff'], methods: ['GET'] }], [], bob, 'POST', '/x', false, undefined],
  ['GET does not cover HEAD', [{ groups: ['staff'], methods: ['GET'] }], [], bob, 'HEAD', '/x', false, undefined],
  ['the second rule admits', [{ groups: ['staff'], methods: ['GET'] }, { groups: ['admins'] }], [], alice, 'POST', '/x', true, 'allow[1]'],
  ['a path glob', [{ paths: ['/app/reports/*'] }], [], bob, 'GET', '/app/reports/q3', true, 'allow[0]'],
  ['a path glob never sees the query', [{ paths: ['/app/reports'] }], [], bob, 'GET', '/app/reports?x=/y', true, 'allow[0]'],
  ['a glob matching only in the query does not match', [{ paths: ['*secret*'] }], [], bob, 'GET', '/app?q=secret', false, undefined],
  ['deny wins over allow', [{ groups: ['staff'] }], [{ domains: ['contractor.example'] }], bob, 'GET', '/x', false, 'deny[0]'],
  ['deny names its own rule', [{ groups: ['staff'] }], [{ users: ['nobody'] }, { paths: ['/admin/*'] }], alice, 'GET', '/admin/x', false, 'deny[1]'],
  ['deny without allow lets the others in', undefined, [{ paths: ['/admin/*'] }], alice, 'GET', '/app', true, undefined],
  ['no identity matches no identity condition', [{ groups: ['staff'] }], [], undefined, 'GET', '/x', false, undefined],
  ['no identity: a deny about the person cannot be told, and holds', undefined, [{ groups: ['staff'] }], undefined, 'GET', '/x', false, 'deny[0]'],
  ['no identity: a deny about the path alone still decides on the path', undefined, [{ paths: ['/admin/*'] }], undefined, 'GET', '/x', true, undefined],
  ['a claim never read (a rule added since the sign-in) holds in a deny', undefined, [{ claims: { suspended: [true] } }], alice, 'GET', '/x', false, 'deny[0]'],
  ['a claim read and not found does not hold in a deny', undefined, [{ claims: { suspended: [true] } }], id('al', { claims: { suspended: [] } }), 'GET', '/x', true, undefined],
  // An outside tester's finding: GitHub spells the owner its way (`Evil-Corp`), the operator typed `evil-corp`.
  ['a deny claim holds in another letter case', undefined, [{ claims: { repository_owner: ['evil-corp'] } }], id('ci', { claims: { repository_owner: ['Evil-Corp'] } }), 'GET', '/x', false, 'deny[0]'],
  ['... and written in capitals, on the value in lower case', undefined, [{ claims: { repository_owner: ['EVIL-CORP'] } }], id('ci', { claims: { repository_owner: ['evil-corp'] } }), 'GET', '/x', false, 'deny[0]'],
  ['an allow claim admits only as written', [{ claims: { repository_owner: ['good-corp'] } }], [], id('ci', { claims: { repository_owner: ['Good-Corp'] } }), 'GET', '/x', false, undefined],
  ['a deny glob /admin/* covers /admin itself', undefined, [{ paths: ['/admin/*'] }], alice, 'GET', '/admin', false, 'deny[0]'],
  ['... and /admin with a query', undefined, [{ paths: ['/admin/*'] }], alice, 'GET', '/admin?tab=users', false, 'deny[0]'],
  ['... but not /administrator', undefined, [{ paths: ['/admin/*'] }], alice, 'GET', '/administrator', true, undefined],
  ['a deny on GET covers HEAD', undefined, [{ methods: ['GET'] }], alice, 'HEAD', '/x', false, 'deny[0]'],
  // What cannot be told: an allow rule needing it does not hold, a deny rule needing it does.
  ['an unknown method does not meet an allow', [{ methods: ['GET'] }], [], alice, undefined, '/x', false, undefined],
  ['an unknown path does not meet an allow', [{ paths: ['/x'] }], [], alice, 'GET', undefined, false, undefined],
  ['an unknown path meets a deny', undefined, [{ paths: ['/admin/*'], groups: ['staff'] }], alice, 'GET', undefined, false, 'deny[0]'],
  ['an unknown method meets a deny', [{ groups: ['staff'] }], [{ methods: ['DELETE'] }], alice, undefined, '/x', false, 'deny[0]'],
  ['an unknown path does not meet a deny whose identity part fails', undefined, [{ paths: ['/admin/*'], groups: ['contractors'] }], alice, 'GET', undefined, true, undefined],
]

/** Spellings of one mail domain: as written, in capitals, with the root's dot (once or twice), in IDNA's ASCII form, with other full stops. */
const SPELLINGS: Array<(domain: string) => string> = [(d) => d, (d) => d.toUpperCase(), (d) => `${d}.`, (d) => `${d}..`, (d) => domainToASCII(d), (d) => `${domainToASCII(d).toUpperCase()}.`, (d) => `${d}\u3002`, (d) => d.replaceAll('.', '\uff0e')]

describe('a mail domain in any spelling (property: the rule and the address are read one way)', () => {
  it('a deny rule written in one spelling holds on an address in any other', () => {
    const label = fc.constantFrom('bücher', 'contractor', 'éclair', 'ｅｘａｍｐｌｅ', 'xn--caf-dma', 'münchen-1')
    fc.assert(fc.property(label, fc.constantFrom('example', 'co.uk', 'test'), fc.nat(SPELLINGS.length - 1), fc.nat(SPELLINGS.length - 1), (name, tld, rule, address) => {
      const domain = `${name}.${tld}`
      const judge = compileRules(lists(undefined, [{ domains: [SPELLINGS[rule]!(domain)] }, { emails: [`m@${SPELLINGS[rule]!(domain)}`] }]))
      expect(judge(id('x', { email: `x@${SPELLINGS[address]!(domain)}` }), 'GET', '/x', undefined)).toMatchObject({ admit: false, rule: 'deny[0]' })
      expect(judge(id('m', { email: `m@${SPELLINGS[address]!(domain)}` }), 'GET', '/x', undefined).admit).toBe(false)
    }), { numRuns: 500 })
  })
})

describe('the judge (a table)', () => {
  it.each(TABLE)('%s', (_what, allow, deny, identity, method, path, admit, rule) => {
    const { partial: _partial, ...judgement } = compileRules(lists(allow, deny))(identity, method, path, undefined)
    expect(judgement).toEqual(admit ? { admit, rule } : { admit, rule, refusedBy: rule === undefined ? 'no_allow_rule' : expect.any(String) })
  })

  it('the earlier allow object: any of its conditions admits, naming which', () => {
    const judge = compileRules(anyOf({ emails: ['bob@contractor.example'], groups: ['admins'] }))
    expect(judge(alice, 'GET', '/x', undefined)).toEqual({ admit: true, rule: 'allow.groups' })
    expect(judge(bob, 'GET', '/x', undefined)).toEqual({ admit: true, rule: 'allow.emails' })
    expect(judge(eve, 'GET', '/x', undefined)).toEqual({ admit: false, rule: undefined, refusedBy: 'no_allow_rule' })
  })

  it('allOf: the first refusal decides; admissions are named together', () => {
    const query = compileRules(lists([{ groups: ['staff'] }]))
    const host = compileRules(lists(undefined, [{ domains: ['contractor.example'] }]))
    expect(allOf([query, host])(alice, 'GET', '/x', undefined)).toEqual({ admit: true, rule: 'allow[0]' })
    expect(allOf([query, host])(bob, 'GET', '/x', undefined)).toEqual({ admit: false, rule: 'deny[0]', refusedBy: expect.any(String) })
    expect(allOf([query, compileRules(lists([{ users: ['alice'] }]))])(alice, 'GET', '/x', undefined)).toEqual({ admit: true, rule: 'allow[0], allow[0]' })
  })
})

const USERS = ['alice', 'bob', 'carol']
const GROUPS = ['staff', 'admins', 'contractors']
const ROLES = ['reporter', 'viewer']
const METHODS = ['GET', 'HEAD', 'POST', 'DELETE']
const PATHS = ['/app/x', '/app/admin/x', '/docs/a', '/app/admin']
const GLOBS = ['/app/*', '/app/admin/*', '/docs/*', '*', '/app/admin']

const identityArb: fc.Arbitrary<Identity | undefined> = fc.option(fc.record({
  sub: fc.constantFrom(...USERS),
  domain: fc.constantFrom('example.org', 'contractor.example'),
  unverified: fc.boolean(),
  groups: fc.subarray(GROUPS),
  roles: fc.subarray(ROLES),
}).map(({ sub, domain, unverified, groups, roles }): Identity => ({
  sub, email: `${sub}@${domain}`, groups, ...(unverified ? { emailVerified: false as const } : {}), claims: { 'realm_access.roles': roles },
})), { nil: undefined })

const conditionsArb: fc.Arbitrary<RuleYaml> = fc.record({
  users: fc.subarray(USERS, { minLength: 1 }),
  domains: fc.subarray(['example.org', 'contractor.example'], { minLength: 1 }),
  groups: fc.subarray(GROUPS, { minLength: 1 }),
  claims: fc.subarray(ROLES, { minLength: 1 }).map((roles) => ({ 'realm_access.roles': roles })),
  methods: fc.subarray(METHODS, { minLength: 1 }),
  paths: fc.subarray(GLOBS, { minLength: 1 }),
}, { requiredKeys: [] }).filter((rule) => Object.keys(rule).length > 0)

const listsArb = fc.record({
  allow: fc.option(fc.array(conditionsArb, { minLength: 1, maxLength: 3 }), { nil: undefined }),
  deny: fc.array(conditionsArb, { maxLength: 2 }),
})
const requestArb = fc.record({ identity: identityArb, method: fc.constantFrom(...METHODS), path: fc.constantFrom(...PATHS) })

describe('a refusal of this request only (partial: another request of the route would pass)', () => {
  it.each([
    ['a deny on a path', undefined, [{ paths: ['/app/admin/*'] }], alice, 'GET', '/app/admin/x', true],
    ['a deny on a method', undefined, [{ methods: ['DELETE'] }], alice, 'DELETE', '/app/x', true],
    ['a deny on a group and a path, for a member', undefined, [{ groups: ['admins'], paths: ['/app/admin/*'] }], alice, 'GET', '/app/admin', true],
    ['a deny on a group: everywhere', undefined, [{ groups: ['admins'] }], alice, 'GET', '/app/x', false],
    ['a deny on a path, and one on a group that holds: everywhere', undefined, [{ paths: ['/app/admin/*'] }, { groups: ['admins'] }], alice, 'GET', '/app/admin/x', false],
    ['an allow on a path, refused elsewhere', [{ paths: ['/app/public/*'] }], [], eve, 'GET', '/app/x', true],
    ['an allow on a group and methods, refused for another method', [{ groups: ['staff'], methods: ['GET'] }], [], bob, 'POST', '/app/x', true],
    ['an allow on a group the person is not in: everywhere', [{ groups: ['admins'] }], [], bob, 'GET', '/app/x', false],
    ['an allow on a group and a path the person is not in: everywhere', [{ groups: ['admins'], paths: ['/app/admin/*'] }], [], bob, 'GET', '/app/admin/x', false],
    ['an allow for admins on admin paths, and the domain anywhere, for an unverified address: everywhere', [{ groups: ['admins'], paths: ['/app/admin/*'] }, { domains: ['example.org'] }], [], eve, 'GET', '/app/admin/x', false],
  ] as Array<[string, RuleYaml[] | undefined, RuleYaml[], Identity, string, string, boolean]>)('%s', (_what, allow, deny, identity, method, path, partial) => {
    const judge = compileRules(lists(allow, deny), '/app')
    const judgement = judge(identity, method, path, undefined)
    expect(judgement.admit).toBe(false)
    expect(judgement.partial !== undefined).toBe(partial)
    // The request it names is one the person really passes.
    if (judgement.partial !== undefined) expect(judge(identity, judgement.partial.method, judgement.partial.path, undefined).admit).toBe(true)
  })

  it.each([
    ['a deny on every path for the group', [{ groups: ['staff'] }], [{ groups: ['staff'], paths: ['/**'] }]],
    ['allow and deny on the same paths', [{ groups: ['staff'], paths: ['/app/admin/*'] }], [{ groups: ['staff'], paths: ['/app/admin/*'] }]],
    ['a deny on every method', undefined, [{ methods: ['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS'] }]],
  ] as Array<[string, RuleYaml[] | undefined, RuleYaml[]]>)('refused everywhere in fact: %s', (_what, allow, deny) => {
    expect(compileRules(lists(allow, deny), '/app')(bob, 'GET', '/app/x', undefined)).toMatchObject({ admit: false })
    expect(compileRules(lists(allow, deny), '/app')(bob, 'GET', '/app/x', undefined).partial).toBeUndefined()
  })

  it('allOf never says partial: another judge may refuse the person everywhere', () => {
    const judgement = allOf([compileRules(lists(undefined, [{ methods: ['DELETE'] }])), compileRules(lists([{ groups: ['admins'] }]))])(alice, 'DELETE', '/x', undefined)
    expect(judgement).toEqual({ admit: false, rule: 'deny[0]', refusedBy: 'methods' })
  })
})

describe('the judge (fast-check)', () => {
  it('a refusal names another request only where the person passes it, and never changes who passes', () => {
    fc.assert(fc.property(listsArb, requestArb, ({ allow, deny }, { identity, method, path }) => {
      const judge = compileRules(lists(allow, deny), '/app')
      const judgement = judge(identity, method, path, undefined)
      expect(judgement.admit).toBe(compileRules(lists(allow, deny))(identity, method, path, undefined).admit)
      if (judgement.partial !== undefined) expect(judge(identity, judgement.partial.method, judgement.partial.path, undefined).admit).toBe(true)
    }), { numRuns: 500, seed: 24 })
  })

  it('deny always wins: when a deny rule holds alone, no allow list admits', () => {
    fc.assert(fc.property(listsArb, requestArb, ({ allow, deny }, { identity, method, path }) => {
      const denied = deny.some((rule) => compileRules(lists([rule]))(identity, method, path, undefined).admit)
      if (denied) expect(compileRules(lists(allow, deny))(identity, method, path, undefined).admit).toBe(false)
    }), { numRuns: 500, seed: 24 })
  })

  it('a rule with more conditions never admits more', () => {
    fc.assert(fc.property(conditionsArb, conditionsArb, requestArb, (rule, extra, { identity, method, path }) => {
      const wider = compileRules(lists([rule]))(identity, method, path, undefined).admit
      const narrower = compileRules(lists([{ ...extra, ...rule }]))(identity, method, path, undefined).admit
      if (narrower) expect(wider).toBe(true)
    }), { numRuns: 500, seed: 24 })
  })

  it('the query never changes a decision: paths are judged on the path only', () => {
    fc.assert(fc.property(listsArb, requestArb, fc.constantFrom('', '?a=1', '?next=/app/admin/x', '?/docs/a', '?'), ({ allow, deny }, { identity, method, path }, query) => {
      const judge = compileRules(lists(allow, deny))
      expect(judge(identity, method, path + query, undefined)).toEqual(judge(identity, method, path, undefined))
    }), { numRuns: 500, seed: 24 })
  })

  it('what cannot be told is never admitted where the told value would be refused', () => {
    fc.assert(fc.property(listsArb, requestArb, ({ allow, deny }, { identity, method, path }) => {
      const judge = compileRules(lists(allow, deny))
      if (judge(identity, undefined, undefined, undefined).admit) {
        expect(judge(identity, method, path, undefined).admit).toBe(true)
      }
    }), { numRuns: 500, seed: 24 })
  })
})
