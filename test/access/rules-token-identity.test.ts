// Security round 4, as a property: the rules judging a machine client's token identity
// (oauth/claims.ts tokenIdentity) must agree with the rules judging the person it names
// (identityFrom, as a session reads them). Whatever the claims the token lacks really are, a token
// is never admitted where that person would be refused; a token carrying every claim is judged
// exactly as the person.
import fc from 'fast-check'
import { describe, expect, it } from 'vitest'
import { compileRules } from '../../src/access/rules.js'
import type { RuleYaml } from '../../src/config/rule-lists.js'
import type { ClaimsMapping } from '../../src/config/types.js'
import { identityFrom, tokenIdentity } from '../../src/oauth/claims.js'
import { lists } from '../helpers/rules.js'

const MAPPING: ClaimsMapping = { user: 'sub', email: 'email', name: 'name', groups: 'groups' }
const ROLES_PATH = 'realm_access.roles'
const USERS = ['alice', 'mallory']
const EMAILS = ['alice@example.org', 'mallory@evil.test', 'bob@evil.test']
const GROUPS = ['admins', 'staff']
const ROLES = ['deployer', 'reader']

/** A person's claims, in full. */
const personArb = fc.record({
  sub: fc.constantFrom(...USERS),
  email: fc.constantFrom(...EMAILS),
  groups: fc.subarray(GROUPS),
  roles: fc.subarray(ROLES),
})

/**
 * How a token carries a list claim of the person's: not at all, as a list of texts, or in a shape
 * the gateway does not read (its values in a nested list, as objects, as an object's keys, beside a
 * null, or one of them nested and the rest plain).
 */
const SHAPES = {
  plain: (values: string[]): unknown => values,
  nested: (values: string[]): unknown => [values],
  objects: (values: string[]): unknown => values.map((name) => ({ name })),
  keyed: (values: string[]): unknown => Object.fromEntries(values.map((value) => [value, true])),
  nulls: (values: string[]): unknown => [...values, null],
  mixed: (values: string[]): unknown => values.length === 0 ? [[]] : [[values[0]], ...values.slice(1)],
}
type Shape = keyof typeof SHAPES | false
const shapeArb = fc.constantFrom<Shape>(false, ...Object.keys(SHAPES) as Array<keyof typeof SHAPES>)

/** Which of the person's claims the token carries, and how. */
const carriedArb = fc.record({ email: fc.boolean(), groups: shapeArb, roles: shapeArb })

const ruleArb: fc.Arbitrary<RuleYaml> = fc.record({
  users: fc.subarray(USERS, { minLength: 1 }),
  emails: fc.subarray(EMAILS, { minLength: 1 }),
  domains: fc.subarray(['example.org', 'evil.test'], { minLength: 1 }),
  groups: fc.subarray(GROUPS, { minLength: 1 }),
  claims: fc.subarray(ROLES, { minLength: 1 }).map((roles) => ({ [ROLES_PATH]: roles })),
  paths: fc.constantFrom<string[]>(['/admin/*'], ['/*']),
}, { requiredKeys: [] }).filter((rule) => Object.keys(rule).length > 0)

const listsArb = fc.record({ allow: fc.option(fc.array(ruleArb, { minLength: 1, maxLength: 3 }), { nil: undefined }), deny: fc.array(ruleArb, { maxLength: 3 }) })

interface Person { sub: string, email: string, groups: string[], roles: string[] }
interface Carried { email: boolean, groups: Shape, roles: Shape }
const ALL: Carried = { email: true, groups: 'plain', roles: 'plain' }

function claimsOf (person: Person, carried: Carried): Record<string, unknown> {
  return {
    sub: person.sub,
    ...(carried.email ? { email: person.email } : {}),
    ...(carried.groups ? { groups: SHAPES[carried.groups](person.groups) } : {}),
    ...(carried.roles ? { realm_access: { roles: SHAPES[carried.roles](person.roles) } } : {}),
  }
}

describe('a token identity and the person it names, under the same rules', () => {
  it('a token is never admitted where its person is refused, whatever the claims it lacks are', () => {
    fc.assert(fc.property(personArb, carriedArb, listsArb, fc.constantFrom('/admin/users', '/wiki'), (person, carried, rules, path) => {
      const judge = compileRules(lists(rules.allow, rules.deny))
      const token = tokenIdentity(claimsOf(person, carried), MAPPING, [ROLES_PATH])
      const session = identityFrom(claimsOf(person, ALL), MAPPING, [ROLES_PATH])
      if (judge(token, 'GET', path, undefined).admit) expect(judge(session, 'GET', path, undefined).admit).toBe(true)
    }), { numRuns: 2000 })
  })

  it('a token that carries every claim is judged exactly as its person', () => {
    fc.assert(fc.property(personArb, listsArb, fc.constantFrom('/admin/users', '/wiki'), (person, rules, path) => {
      const judge = compileRules(lists(rules.allow, rules.deny))
      const claims = claimsOf(person, ALL)
      expect(judge(tokenIdentity(claims, MAPPING, [ROLES_PATH]), 'GET', path, undefined)).toEqual(judge(identityFrom(claims, MAPPING, [ROLES_PATH]), 'GET', path, undefined))
    }), { numRuns: 1000 })
  })

  it('a session whose provider gives its address in a shape the gateway does not read is never admitted where the person is refused, and is judged as a token carrying it so', () => {
    // A list of addresses (SCIM's `emails: [{ value }]` mapped as `emails.value`), an object, a nested list.
    const emailShapeArb = fc.constantFrom<Array<(email: string) => unknown>>((email) => [email], (email) => [email, 'other@example.org'], (email) => ({ value: email }), (email) => [[email]], () => true)
    fc.assert(fc.property(personArb, emailShapeArb, listsArb, fc.constantFrom('/admin/users', '/wiki'), (person, emailShape, rules, path) => {
      const judge = compileRules(lists(rules.allow, rules.deny))
      const claims = { ...claimsOf(person, ALL), email: emailShape(person.email) }
      const unread = identityFrom(claims, MAPPING, [ROLES_PATH])
      if (judge(unread, 'GET', path, undefined).admit) expect(judge(identityFrom(claimsOf(person, ALL), MAPPING, [ROLES_PATH]), 'GET', path, undefined).admit).toBe(true)
      expect(judge(unread, 'GET', path, undefined).admit).toBe(judge(tokenIdentity(claims, MAPPING, [ROLES_PATH]), 'GET', path, undefined).admit)
    }), { numRuns: 2000 })
  })

  it('a person condition the token cannot answer refuses in deny and does not admit in allow', () => {
    const token = tokenIdentity({ sub: 'mallory' }, MAPPING, [ROLES_PATH])
    expect(token).toMatchObject({ sub: 'mallory', unknown: ['email', 'groups'] })
    expect(token).not.toHaveProperty(['claims', ROLES_PATH])
    for (const condition of [{ emails: ['x@example.org'] }, { domains: ['example.org'] }, { groups: ['admins'] }, { claims: { [ROLES_PATH]: ['deployer'] } }]) {
      expect(compileRules(lists(undefined, [condition]))(token, 'GET', '/x', undefined).admit).toBe(false)
      expect(compileRules(lists([condition]))(token, 'GET', '/x', undefined).admit).toBe(false)
    }
    // A claim in a shape the gateway does not read is one the token cannot answer.
    for (const [groups, roles] of [[[['admins']], { deployer: true }], [[null], [{ name: 'deployer' }]], [['staff', ['admins']], ['reader', ['deployer']]]]) {
      const shaped = tokenIdentity({ sub: 'mallory', email: 'm@evil.test', groups, realm_access: { roles } }, MAPPING, [ROLES_PATH])
      expect(shaped).toMatchObject({ unknown: ['groups'] })
      expect(shaped).not.toHaveProperty(['claims', ROLES_PATH])
      expect(compileRules(lists(undefined, [{ groups: ['admins'] }]))(shaped, 'GET', '/x', undefined).admit).toBe(false)
      expect(compileRules(lists(undefined, [{ claims: { [ROLES_PATH]: ['deployer'] } }]))(shaped, 'GET', '/x', undefined).admit).toBe(false)
    }
    // Controls: an empty list says "none", and numbers and booleans are read as text.
    const plain = tokenIdentity({ sub: 'mallory', groups: [], realm_access: { roles: [7, true] } }, MAPPING, [ROLES_PATH])
    expect(plain).toMatchObject({ groups: [], unknown: ['email'], claims: { [ROLES_PATH]: ['7', 'true'] } })
    expect(compileRules(lists(undefined, [{ groups: ['admins'] }]))(plain, 'GET', '/x', undefined).admit).toBe(true)
    // A session's provider that says nothing means "none": the deny rule does not hold.
    expect(compileRules(lists(undefined, [{ emails: ['x@example.org'] }]))(identityFrom({ sub: 'mallory' }, MAPPING), 'GET', '/x', undefined).admit).toBe(true)
    expect(compileRules(lists(undefined, [{ claims: { [ROLES_PATH]: ['deployer'] } }]))(identityFrom({ sub: 'mallory' }, MAPPING, [ROLES_PATH]), 'GET', '/x', undefined).admit).toBe(true)
    // A session's groups or claim in a shape the gateway does not read cannot be told: a deny on it holds, an allow does not admit.
    for (const groups of [[['admins']], [{ name: 'admins' }], { admins: true }, ['staff', null]]) {
      const session = identityFrom({ sub: 'mallory', groups }, MAPPING)
      expect(session).toMatchObject({ unknown: ['groups'] })
      expect(compileRules(lists(undefined, [{ groups: ['admins'] }]))(session, 'GET', '/x', undefined).admit).toBe(false)
      expect(compileRules(lists([{ groups: ['staff'] }]))(session, 'GET', '/x', undefined).admit).toBe(false)
    }
    expect(identityFrom({ sub: 'mallory', groups: 'staff, ops' }, MAPPING)).not.toHaveProperty('unknown')
    expect(identityFrom({ sub: 'mallory' }, MAPPING)).not.toHaveProperty('unknown')
    for (const roles of [[['deployer']], { deployer: true }, ['reader', null]]) {
      const session = identityFrom({ sub: 'mallory', realm_access: { roles } }, MAPPING, [ROLES_PATH])
      expect(session).not.toHaveProperty(['claims', ROLES_PATH])
      expect(compileRules(lists(undefined, [{ claims: { [ROLES_PATH]: ['deployer'] } }]))(session, 'GET', '/x', undefined).admit).toBe(false)
      expect(compileRules(lists([{ claims: { [ROLES_PATH]: ['reader'] } }]))(session, 'GET', '/x', undefined).admit).toBe(false)
    }
  })

  it('a token whose user name another claim stands in for is never admitted where its person is refused (a users rule lists subjects and names)', () => {
    fc.assert(fc.property(namedPersonArb, namedCarriedArb, namedListsArb, fc.constantFrom(NAMED, MAPPING), (person, carried, rules, mapping) => {
      const judge = compileRules(lists(rules.allow, rules.deny))
      const token = tokenIdentity(namedClaimsOf(person, carried), mapping, [])
      const session = identityFrom(namedClaimsOf(person, { sub: true, name: true, clientId: true }), mapping)
      if (token !== undefined && judge(token, 'GET', '/x', undefined).admit) expect(judge(session, 'GET', '/x', undefined).admit).toBe(true)
    }), { numRuns: 2000 })
  })

  it('a users deny holds on a token without the mapped name or without sub, and a client_id or a name never stands for a subject', () => {
    const deny = (users: string[], claims: Record<string, unknown>) => compileRules(lists(undefined, [{ users }]))(tokenIdentity(claims, NAMED, [])!, 'GET', '/x', undefined).admit
    const allow = (users: string[], claims: Record<string, unknown>) => compileRules(lists([{ users }]))(tokenIdentity(claims, NAMED, [])!, 'GET', '/x', undefined).admit
    // Her name is not in the token: who it is cannot be told.
    expect(deny(['mallory'], { sub: 's-mallory' })).toBe(false)
    // No sub: her subject cannot be told.
    expect(deny(['s-mallory'], { preferred_username: 'mallory', client_id: 'mallory-cli' })).toBe(false)
    // A name, or a client id, equal to Alice's subject.
    expect(allow(['s-alice'], { preferred_username: 's-alice', client_id: 'mallory-cli' })).toBe(false)
    expect(allow(['s-alice'], { client_id: 's-alice' })).toBe(false)
    // The default mapping (claims.user: sub) and a token without sub, named by a client_id that is a listed address.
    const byClientId = tokenIdentity({ client_id: 'alice@corp.example', email: 'alice@corp.example' }, MAPPING, [])!
    expect(compileRules(lists([{ users: ['alice@corp.example'] }]))(byClientId, 'GET', '/x', undefined).admit).toBe(false)
    expect(compileRules(lists(undefined, [{ users: ['someone-else'] }]))(byClientId, 'GET', '/x', undefined).admit).toBe(false)
    // Controls: the subject admits; a token with both, not listed, passes a deny.
    expect(allow(['s-alice'], { sub: 's-alice' })).toBe(true)
    expect(deny(['mallory'], { sub: 's-alice', preferred_username: 'alice' })).toBe(true)
  })
})

/** A provider that names its people by a reassignable user name (preset: keycloak's mapping). */
const NAMED: ClaimsMapping = { user: 'preferred_username', email: 'email', name: 'name', groups: 'groups' }
/** Subjects, and names: `s-alice` is also a name another account can take. */
const SUBJECTS = ['s-alice', 's-mallory']
const NAMES = ['alice', 'mallory', 's-alice']

/** A verified address, which a `users` entry may name (and a client may be registered as). */
const ADDRESS = 'alice@corp.example'
const namedPersonArb = fc.record({ sub: fc.constantFrom(...SUBJECTS), name: fc.constantFrom(...NAMES), clientId: fc.constantFrom('cli', ADDRESS, ...SUBJECTS), email: fc.constantFrom(ADDRESS, 'm@evil.test') })
const namedCarriedArb = fc.record({ sub: fc.boolean(), name: fc.boolean(), clientId: fc.boolean() })
const usersRuleArb: fc.Arbitrary<RuleYaml> = fc.subarray([...SUBJECTS, ...NAMES, ADDRESS], { minLength: 1 }).map((users) => ({ users }))
const namedListsArb = fc.record({ allow: fc.option(fc.array(usersRuleArb, { minLength: 1, maxLength: 2 }), { nil: undefined }), deny: fc.array(usersRuleArb, { maxLength: 2 }) })

function namedClaimsOf (person: { sub: string, name: string, clientId: string, email: string }, carried: { sub: boolean, name: boolean, clientId: boolean }): Record<string, unknown> {
  return {
    email: person.email,
    ...(carried.sub ? { sub: person.sub } : {}),
    ...(carried.name ? { preferred_username: person.name } : {}),
    ...(carried.clientId ? { client_id: person.clientId } : {}),
  }
}
