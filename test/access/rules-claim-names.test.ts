// Review finding: a claim condition looks its claim up as `identity.claims[path]` on a plain object,
// so a claim path that names an Object.prototype member (`constructor`, `toString`,
// `hasOwnProperty`, `valueOf`...) which the person's token does not carry finds the
// prototype's function (or the prototype itself), and `.some` on it throws a TypeError: the
// request answers 500 instead of being judged. The config accepts such a path (`constructor` is a
// valid dotted claim path), and the session keeps claims as soon as any rule names one, so it hits
// every person with some other kept claim. The suggested fix: look claims up with
// Object.hasOwn (or keep them in a Map / a null-prototype object after reading the session).
import { describe, expect, it } from 'vitest'
import { parseConfig } from '../../src/config/config.js'
import { compileRules } from '../../src/access/rules.js'
import type { Identity } from '../../src/session/record.js'
import { TEST_SECRET } from '../helpers/gateway.js'
import { lists } from '../helpers/rules.js'

/** A person whose token carried `roles` (kept, as another rule names it) and nothing else the rules name. */
const reporter: Identity = JSON.parse(JSON.stringify({ sub: 'rita', groups: [], claims: { roles: ['reporter'] } })) as Identity

const NAMES = ['constructor', 'toString', 'hasOwnProperty', 'valueOf', 'isPrototypeOf', 'propertyIsEnumerable', 'toLocaleString', '__defineGetter__']
// (`__proto__` never reaches a rule: the config reader drops the key, and the empty rule is refused.)

describe('claim paths named like Object.prototype members', () => {
  it.each(NAMES)('the config accepts `claims: { %s: [...] }` as a rule', (name) => {
    const yaml = JSON.stringify({
      session: { secret: TEST_SECRET },
      providers: { demo: { clientId: 'c', clientSecret: 's', authorizeUrl: 'https://op.example/a', tokenUrl: 'https://op.example/t', scope: 'read' } },
      routes: [{ path: '/app/', upstream: 'http://127.0.0.1:9100', provider: 'demo', allow: [{ claims: { [name]: ['x'] } }, { claims: { roles: ['reporter'] } }] }],
    })
    expect(parseConfig(yaml, {}).routes[0]!.rules.allow?.[0]?.claims).toEqual([{ path: name, values: ['x'] }])
  })

  it.each(NAMES)('an allow rule on %s that does not hold lets the next rule decide (no throw)', (name) => {
    const judge = compileRules(lists([{ claims: { [name]: ['x'] } }, { claims: { roles: ['reporter'] } }]))
    expect(judge(reporter, 'GET', '/app/', undefined)).toEqual({ admit: true, rule: 'allow[1]' })
  })

  it.each(NAMES)('a deny rule on %s that does not hold refuses nobody (no throw)', (name) => {
    const judge = compileRules(lists(undefined, [{ claims: { [name]: ['x'] } }, { claims: { roles: ['banned'] } }]))
    // As a session keeps it: the claim was read at sign-in (both rules name it) and not found.
    const read: Identity = JSON.parse(JSON.stringify({ ...reporter, claims: { ...reporter.claims, [name]: [] } })) as Identity
    expect(judge(read, 'GET', '/app/', undefined)).toEqual({ admit: true, rule: undefined })
    // Never read (a rule added since the sign-in): it cannot be told, and the deny holds.
    expect(judge(reporter, 'GET', '/app/', undefined)).toEqual({ admit: false, rule: 'deny[0]', refusedBy: 'claims' })
  })
})
