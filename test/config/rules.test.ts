// `allow`, `deny` and `headers` as gateway.yaml writes them: what they read as (names, normalised
// values, kept claims), and a table of bad inputs, each a `--check` problem at its key path and line,
// never a rule that silently admits everyone or matches nothing.
import { describe, expect, it } from 'vitest'
import { stringify } from 'yaml'
import { parseConfig } from '../../src/config/config.js'
import { configWarnings } from '../../src/config/safety.js'
import { configProblems } from '../helpers/config.js'
import { TEST_SECRET } from '../helpers/gateway.js'

const PROVIDER = { clientId: 'c', clientSecret: 's', authorizeUrl: 'https://op.example/a', tokenUrl: 'https://op.example/t', scope: 'read' }

function yamlOf (route: Record<string, unknown>, forwardAuth?: Record<string, unknown>): string {
  return stringify({
    session: { secret: TEST_SECRET },
    providers: { demo: PROVIDER, other: PROVIDER },
    routes: [{ path: '/app/', upstream: 'http://127.0.0.1:9100', provider: 'demo', ...route }],
    // The proxy in front, which forwardAuth.hosts needs to be trusted.
    ...(forwardAuth ? { forwardAuth, server: { trustProxy: ['10.0.0.5'] } } : {}),
  })
}

describe('rules as read', () => {
  it('names each rule by its place, normalises values, and keeps exactly the claims rules and headers name', () => {
    const config = parseConfig(yamlOf({
      allow: [{ emails: [' Alice@Example.ORG '], methods: ['get'] }, { claims: { 'realm_access.roles': ['reporter'], level: [3], onsite: [true] } }],
      deny: { domains: ['@Contractor.example'], paths: ['/app/admin/*'] },
      headers: { 'X-Tenant': 'claims.tid' },
    }, { hosts: { 'wiki.example.com': { allow: { claims: { '/https:~1~1example.com~1roles': ['wiki'] } } } } }), {})
    const route = config.routes[0]!
    expect(route.rules.allow?.map((rule) => rule.name)).toEqual(['allow[0]', 'allow[1]'])
    expect(route.rules.allow?.[0]).toMatchObject({ emails: ['alice@example.org'], methods: ['GET'] })
    expect(route.rules.allow?.[1]?.claims).toEqual([{ path: 'realm_access.roles', values: ['reporter'] }, { path: 'level', values: ['3'] }, { path: 'onsite', values: ['true'] }])
    expect(route.rules.deny).toEqual([expect.objectContaining({ name: 'deny', domains: ['contractor.example'], paths: ['/app/admin/*'] })])
    expect(route.headers).toEqual([{ name: 'x-tenant', claim: 'tid' }])
    expect(config.forwardAuth.hosts.get('wiki.example.com')?.allow?.[0]?.name).toBe('hosts.wiki.example.com.allow')
    // Host rules may judge any provider's session; a route's only its own provider's.
    expect(config.providers.demo!.keptClaims).toEqual(['/https:~1~1example.com~1roles', 'level', 'onsite', 'realm_access.roles', 'tid'])
    expect(config.providers.other!.keptClaims).toEqual(['/https:~1~1example.com~1roles'])
  })

  it('a route\'s earlier allow object keeps its any-of meaning, with a warning that names the list form', () => {
    const config = parseConfig(yamlOf({ allow: { groups: ['admins'], emails: ['a@x.org'] } }), {})
    expect(config.routes[0]!.rules.allow?.map((rule) => rule.name)).toEqual(['allow.emails', 'allow.groups'])
    expect(configWarnings(config)).toEqual([expect.stringMatching(/^routes\[0\]\.allow: .*any of emails, groups.*list of rules/)])
    // One condition, or the list form: no warning.
    expect(configWarnings(parseConfig(yamlOf({ allow: { groups: ['admins'] } }), {}))).toEqual([])
    expect(configWarnings(parseConfig(yamlOf({ allow: [{ groups: ['admins'], emails: ['a@x.org'] }] }), {}))).toEqual([])
  })
})

describe('bad rules are refused at their key path', () => {
  it.each([
    ['an unknown condition', { allow: [{ group: ['admins'] }] }, /^routes\[0\]\.allow\[0\]\.group: unknown key/],
    ['an unknown condition in deny', { deny: { role: ['x'] } }, /^routes\[0\]\.deny\.role: unknown key/],
    ['an empty list of values', { allow: [{ groups: [] }] }, /^routes\[0\]\.allow\[0\]\.groups: must be a non-empty list of strings/],
    ['an empty list of rules', { allow: [] }, /^routes\[0\]\.allow: allows nobody/],
    ['a rule with no condition', { deny: [{}] }, /^routes\[0\]\.deny\[0\]: gives no condition/],
    ['blank values only', { allow: { users: ['  '] } }, /^routes\[0\]\.allow: gives no condition/],
    ['an empty list of claim values', { allow: { claims: { tid: [] } } }, /^routes\[0\]\.allow\.claims\.tid: /],
    ['a claim path with an empty step', { allow: { claims: { 'realm_access..roles': ['x'] } } }, /^routes\[0\]\.allow\.claims\.realm_access\.\.roles: must be a dotted claim path/],
    ['a claim path ending in a dot', { allow: { claims: { 'roles.': ['x'] } } }, /must be a dotted claim path/],
    ['a claim path with a space', { allow: { claims: { 'realm access': ['x'] } } }, /must be a dotted claim path/],
    ['a claim value that is a mapping', { allow: { claims: { tid: [{ a: 1 }] } } }, /^routes\[0\]\.allow\.claims\.tid\[0\]: /],
    ['a glob with //', { deny: { paths: ['/app//admin/*'] } }, /^routes\[0\]\.deny\.paths\[0\]: has an empty segment/],
    ['a glob with ..', { deny: { paths: ['/app/x/../admin/*'] } }, /^routes\[0\]\.deny\.paths\[0\]: has a \. or \.\. segment/],
    ['a glob with .', { deny: { paths: ['/app/./admin'] } }, /has a \. or \.\. segment/],
    ['a glob with a query', { allow: { paths: ['/app/x?y=1'] } }, /^routes\[0\]\.allow\.paths\[0\]: may not hold/],
    ['a glob with a backslash', { allow: { paths: ['/app\\admin'] } }, /may not hold/],
    ['a glob not starting with /', { allow: { paths: ['app/*'] } }, /^routes\[0\]\.allow\.paths\[0\]: must start with \//],
    ['a glob outside the route\'s path (the upstream\'s path, after rewritePrefix)', { rewritePrefix: '/', deny: [{ paths: ['/admin/*'], groups: ['contractors'] }] }, /^routes\[0\]\.deny\[0\]\.paths\[0\]: is outside the route's path \/app\//],
    ['an allow glob outside the route\'s path', { allow: [{ paths: ['/other/*'] }] }, /^routes\[0\]\.allow\[0\]\.paths\[0\]: is outside/],
    ['a wildcard domain', { deny: [{ domains: ['*.contractor.example'] }] }, /^routes\[0\]\.deny\[0\]\.domains\[0\]: must be a domain/],
    ['a wildcard e-mail address', { deny: [{ emails: ['*@contractor.example'] }] }, /^routes\[0\]\.deny\[0\]\.emails\[0\]: must be one e-mail address/],
    ['a domain written as a URL', { deny: [{ domains: ['https://contractor.example'] }] }, /must be a domain/],
    ['an e-mail address with two @', { deny: [{ emails: ['mallory@@evil.test'] }] }, /must be one e-mail address/],
    ['an e-mail address without a domain', { allow: { emails: ['mallory'] } }, /must be one e-mail address/],
    ['a method that is not one', { allow: { methods: ['GET /x'] } }, /^routes\[0\]\.allow\.methods\[0\]: must be a request method/],
    ['the any-of object mixed with a new condition', { allow: { emails: ['a@x.org'], groups: ['g'], methods: ['GET'] } }, /^routes\[0\]\.allow: names emails and groups with other conditions/],
    ['a claim header not from claims', { headers: { 'X-Roles': 'realm_access.roles' } }, /^routes\[0\]\.headers\.X-Roles: must be claims\.<path>/],
    ['a claim header with a bad path', { headers: { 'X-Roles': 'claims.a..b' } }, /must be claims\.<path>/],
    ['a claim header named Authorization', { headers: { Authorization: 'claims.tid' } }, /^routes\[0\]\.headers\.Authorization: must not be a header the gateway sets itself/],
    ['a claim header named Host', { headers: { host: 'claims.tid' } }, /must not be a header the gateway sets itself/],
    ['a claim header named Transfer-Encoding', { headers: { 'Transfer-Encoding': 'claims.tid' } }, /must not be/],
    ['a claim header named Connection', { headers: { Connection: 'claims.tid' } }, /must not be/],
    ['a claim header named Cookie', { headers: { Cookie: 'claims.tid' } }, /must not be/],
    ['a claim header named Content-Length', { headers: { 'Content-Length': 'claims.tid' } }, /must not be/],
    ['a claim header with _ (CGI reads it as -)', { headers: { X_Roles: 'claims.tid' } }, /must be a header name of letters, digits and "-" only/],
    ['a claim header named X-Forwarded-For', { headers: { 'X-Forwarded-For': 'claims.tid' } }, /^routes\[0\]\.headers\.X-Forwarded-For: must not be a header the gateway sets itself/],
    ['a claim header named X-Real-IP', { headers: { 'X-Real-IP': 'claims.tid' } }, /must not be a header the gateway sets itself/],
    ['a claim header named as the assertion header', { headers: { 'X-Gateway-Assertion': 'claims.tid' } }, /^routes\[0\]\.headers: names x-gateway-assertion, which is one of this route's identity headers or the assertion header/],
    ['allow on a route without a session', { auth: 'none', provider: undefined, allow: { groups: ['staff'] } }, /^routes\[0\]\.allow: needs auth: required/],
    ['deny on a route without a session', { auth: 'none', provider: undefined, deny: [{ paths: ['/app/admin/*'] }] }, /^routes\[0\]\.deny: needs auth: required/],
    ['one claim header name twice, in two cases', { headers: { 'X-Roles': 'claims.roles', 'x-roles': 'claims.sub' } }, /^routes\[0\]\.headers\.x-roles: names the header x-roles a second time/],
    ['an empty list says so', { allow: { groups: [] } }, /got an empty list/],
    ['claim headers on a route without a session', { auth: 'none', provider: undefined, headers: { 'X-Roles': 'claims.tid' } }, /^routes\[0\]\.headers: needs auth: required/],
    ['a claim header that is an identity header', { identityHeaders: { user: 'X-User' }, headers: { 'X-User': 'claims.tid' } }, /^routes\[0\]\.headers: names x-user, which is one of this route's identity headers/],
  ])('%s', (_what, route, problem) => {
    const problems = configProblems(yamlOf(route))
    expect(problems).toEqual([expect.stringMatching(problem)])
    expect(problems[0]).toMatch(/\(line \d+\)$/)
  })

  it('a forward-auth host\'s rules are checked the same way', () => {
    expect(configProblems(yamlOf({}, { hosts: { 'a.example.com': { deny: { paths: ['/x//y'] } } } })))
      .toEqual([expect.stringMatching(/^forwardAuth\.hosts\.a\.example\.com\.deny\.paths\[0\]: has an empty segment/)])
  })
})
