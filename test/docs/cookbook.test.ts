// docs/cookbook.md stays true: each of its policies (a heading and one YAML block) is read from the
// page, parsed by the gateway's config parser with the providers it names filled in around it, and
// judged for a table of people, methods and paths: the claims each provider sends become an
// identity as at sign-in (only the claims the rules name are kept), the request target is made
// canonical as at the edge, and the route's gate (or the forward-auth host's rules) decides.
import { readFileSync } from 'node:fs'
import { describe, expect, it } from 'vitest'
import { compileGate, decide, signedIn } from '../../src/access/gate.js'
import { compileRules } from '../../src/access/rules.js'
import { parseConfig } from '../../src/config/config.js'
import type { GatewayConfig } from '../../src/config/types.js'
import { canonicalTarget } from '../../src/config/canonical.js'
import { identityFrom } from '../../src/oauth/claims.js'

const PAGE = 'docs/cookbook.md'

/** The providers the cookbook's snippets name, as providers.md configures them. */
const PROVIDERS = `
providers:
  corp: { issuer: https://login.example.com, clientId: c, clientSecret: s, scope: openid email }
  keycloak: { preset: keycloak, baseUrl: https://keycloak.example.com, realm: acme, clientId: wiki, clientSecret: s }
  microsoft: { preset: microsoft, tenant: 72f988bf-86f1-41af-91ab-2d7cd011db47, clientId: c, clientSecret: s }
  gitlab: { preset: gitlab, clientId: c, clientSecret: s }
  github: { preset: github, clientId: c, clientSecret: s, scope: read:user user:email read:org }
`

/** Each policy of the page: its heading and its YAML block. */
function policies (text: string): Array<{ heading: string, yaml: string[] }> {
  return text.split(/^## /m).slice(1).map((section) => ({
    heading: section.slice(0, section.indexOf('\n')).trim(),
    yaml: [...section.matchAll(/^```yaml\n([\s\S]*?)^```$/gm)].map(([, block]) => block!),
  }))
}

/** What the provider sends (ID token and userinfo claims together), by who it is. */
type People = Record<string, Record<string, unknown>>

/**
 * `who`, `METHOD target` (`? ?`: forward-auth without the original method and path), then
 * `public`, `admit <rule>`, `admit` (no rule needed), `refuse <rule>` or `refuse` (no allow rule held).
 */
type Row = [who: string, request: string, outcome: string]

interface Policy {
  people: People
  rows: Row[]
}

const corp = (sub: string, extra: Record<string, unknown> = {}): Record<string, unknown> => ({ sub, email: `${sub}@example.com`, ...extra })

/** The expectations, one table per heading of the page. */
const EXPECTED: Record<string, Policy> = {
  'Read-only staff, writes for admins': {
    people: { sam: corp('sam', { groups: ['staff'] }), ada: corp('ada', { groups: ['admins'] }), eve: corp('eve', { groups: ['visitors'] }) },
    rows: [
      ['sam', 'GET /wiki/page', 'admit allow[0]'],
      ['sam', 'HEAD /wiki/page', 'admit allow[0]'],
      ['sam', 'POST /wiki/page', 'refuse'],
      ['sam', 'DELETE /wiki/page', 'refuse'],
      ['sam', 'OPTIONS /wiki/page', 'refuse'],
      ['ada', 'GET /wiki/page', 'admit allow[1]'],
      ['ada', 'POST /wiki/page', 'admit allow[1]'],
      ['eve', 'GET /wiki/page', 'refuse'],
    ],
  },
  'Admin pages only for admins': {
    people: { sam: corp('sam', { groups: ['staff'] }), ada: corp('ada', { groups: ['admins'] }), eve: corp('eve') },
    rows: [
      ['sam', 'GET /app/', 'admit allow[1]'],
      ['sam', 'GET /app/reports/2024?year=1', 'admit allow[1]'],
      ['sam', 'POST /app/api/orders', 'admit allow[1]'],
      ['sam', 'GET /app/admin/', 'refuse'],
      ['sam', 'GET /app/settings', 'refuse'],
      ['sam', 'GET /app', 'refuse'],
      // A query or an encoded dot segment does not reach a listed path's neighbour.
      ['sam', 'GET /app/admin?x=/app/reports/', 'refuse'],
      ['sam', 'GET /app/reports/%2e%2e/admin/', 'refuse'],
      ['sam', 'GET /app/%72eports/q', 'admit allow[1]'],
      ['ada', 'GET /app/admin/users', 'admit allow[0]'],
      ['eve', 'GET /app/', 'refuse'],
    ],
  },
  'Contractors never under /admin/': {
    people: {
      cole: corp('cole', { email: 'cole@contractor.example' }),
      emma: corp('emma'),
      mal: corp('mal', { email: 'mal@contractor.example', email_verified: false }),
      eve: corp('eve', { email: 'eve@elsewhere.example' }),
    },
    rows: [
      ['cole', 'GET /page', 'admit hosts.wiki.example.com.allow'],
      ['cole', 'GET /admin', 'refuse hosts.wiki.example.com.deny'],
      ['cole', 'POST /admin/users/1', 'refuse hosts.wiki.example.com.deny'],
      ['cole', 'GET /admin/?next=/page', 'refuse hosts.wiki.example.com.deny'],
      ['cole', 'GET /%61dmin/x', 'refuse hosts.wiki.example.com.deny'],
      ['cole', 'GET /page/../admin/x', 'refuse hosts.wiki.example.com.deny'],
      // Spellings a case-insensitive application (Express, IIS) reads as /admin/...
      ['cole', 'GET /ADMIN/users', 'refuse hosts.wiki.example.com.deny'],
      ['cole', 'GET /Admin./Users', 'refuse hosts.wiki.example.com.deny'],
      ['cole', 'GET /admin%20/x', 'refuse hosts.wiki.example.com.deny'],
      ['cole', 'GET /administrator', 'admit hosts.wiki.example.com.allow'],
      ['cole', '? ?', 'refuse hosts.wiki.example.com.deny'],
      ['emma', 'GET /admin/users', 'admit hosts.wiki.example.com.allow'],
      ['emma', '? ?', 'admit hosts.wiki.example.com.allow'],
      // An address the provider has not verified matches neither rule: the allow list keeps it out.
      ['mal', 'GET /page', 'refuse'],
      ['eve', 'GET /page', 'refuse'],
    ],
  },
  'Keycloak realm role': {
    people: {
      rita: { preferred_username: 'rita', realm_access: { roles: ['offline_access', 'reporter'] } },
      otto: { preferred_username: 'otto', realm_access: { roles: ['offline_access'] }, resource_access: { reports: { roles: ['reporter'] } } },
      gus: { preferred_username: 'gus', groups: ['reporter'], reporter: true },
    },
    rows: [
      ['rita', 'GET /reports/q3', 'admit allow'],
      ['rita', 'POST /reports/q3', 'admit allow'],
      // A client role or a group of the same name is not the realm role.
      ['otto', 'GET /reports/q3', 'refuse'],
      ['gus', 'GET /reports/q3', 'refuse'],
    ],
  },
  'Keycloak client role': {
    people: {
      ed: { preferred_username: 'ed', resource_access: { wiki: { roles: ['editor'] } } },
      vi: { preferred_username: 'vi', resource_access: { wiki: { roles: ['viewer'] }, other: { roles: ['editor'] } } },
      rex: { preferred_username: 'rex', realm_access: { roles: ['editor'] } },
    },
    rows: [
      ['ed', 'PUT /wiki/page', 'admit allow[0]'],
      ['vi', 'GET /wiki/page', 'admit allow[1]'],
      ['vi', 'HEAD /wiki/page', 'admit allow[1]'],
      ['vi', 'PUT /wiki/page', 'refuse'],
      ['rex', 'PUT /wiki/page', 'refuse'],
    ],
  },
  'Entra app roles': {
    people: {
      olga: { preferred_username: 'olga@contoso.com', roles: ['Orders.Admin'] },
      rob: { preferred_username: 'rob@contoso.com', roles: ['Orders.Read'] },
      nia: { preferred_username: 'nia@contoso.com', roles: 'Orders.Read Orders.Admin' },
      zed: { preferred_username: 'zed@contoso.com', groups: ['Orders.Admin'] },
    },
    rows: [
      ['olga', 'DELETE /orders/7', 'admit allow[0]'],
      ['rob', 'GET /orders/7', 'admit allow[1]'],
      ['rob', 'PATCH /orders/7', 'refuse'],
      // One string is one value, not a list split at spaces.
      ['nia', 'GET /orders/7', 'refuse'],
      ['zed', 'DELETE /orders/7', 'refuse'],
    ],
  },
  'GitHub organisation and team': {
    // The groups src/oauth/github.ts makes of /user/orgs and /user/teams.
    people: {
      pat: { login: 'pat', groups: ['acme', 'acme/platform'] },
      ora: { login: 'ora', groups: ['acme', 'acme/platform-tools', 'acme/platform/x'] },
      out: { login: 'out', groups: ['other', 'other/platform', 'Acme/platform'] },
    },
    rows: [
      ['pat', 'POST /deploy/run', 'admit allow[0]'],
      ['ora', 'GET /deploy/', 'admit allow[1]'],
      ['ora', 'POST /deploy/run', 'refuse'],
      ['out', 'GET /deploy/', 'refuse'],
    ],
  },
  'One tenant only': {
    people: {
      tia: corp('tia', { tid: '72f988bf-86f1-41af-91ab-2d7cd011db47' }),
      gil: corp('gil', { tid: '9188040d-6c67-4c5b-b112-36a304b66dad' }),
      upp: corp('upp', { tid: '72F988BF-86F1-41AF-91AB-2D7CD011DB47' }),
      nob: corp('nob'),
    },
    rows: [
      ['tia', 'GET /app/', 'admit allow'],
      ['gil', 'GET /app/', 'refuse'],
      ['upp', 'GET /app/', 'refuse'],
      ['nob', 'GET /app/', 'refuse'],
    ],
  },
  'A few named people': {
    // As src/oauth/github.ts gives them: `sub` is the account's numeric id.
    people: {
      octocat: { login: 'octocat', id: 583231, sub: '583231', email: 'octocat@github.com' },
      second: { login: 'monalisa', id: 1024025, sub: '1024025' },
      renamed: { login: 'octocat', id: 99000001, sub: '99000001' },
      other: { login: 'hubot', id: 7, sub: '7', name: 'octocat' },
    },
    rows: [
      ['octocat', 'GET /admin/', 'admit allow'],
      ['second', 'POST /admin/x', 'admit allow'],
      ['renamed', 'GET /admin/', 'refuse'],
      ['other', 'GET /admin/', 'refuse'],
    ],
  },
  'A domain kept out, except on public docs': {
    people: { riv: corp('riv', { email: 'riv@rival.example' }), emma: corp('emma'), sub: corp('sub', { email: 'x@sub.rival.example' }), unv: corp('unv', { email: 'unv@rival.example', email_verified: 'false' }) },
    rows: [
      ['riv', 'GET /app/docs/intro', 'public'],
      ['riv', 'HEAD /app/docs/intro', 'public'],
      ['riv', 'GET /app/', 'refuse deny'],
      ['riv', 'POST /app/docs/intro', 'refuse deny'],
      ['riv', 'GET /app/docs/../orders', 'refuse deny'],
      ['emma', 'GET /app/orders', 'admit'],
      // An address the provider has not verified is kept out too: what cannot be vouched for is refused.
      ['unv', 'GET /app/orders', 'refuse deny'],
      // A domain is the whole domain of the address, not a suffix.
      ['sub', 'GET /app/orders', 'admit'],
    ],
  },
}

/** The provider a policy's people sign in with: its route's, or `corp` for a forward-auth host. */
function providerOf (config: GatewayConfig): string {
  return config.routes[0]?.provider ?? 'corp'
}

/** The outcome of `who` asking `request` under `config` (its one route, or its one forward-auth host). */
function outcome (config: GatewayConfig, claims: Record<string, unknown>, request: string): string {
  const [method, raw] = request.split(' ') as [string, string]
  const target = raw === '?' ? undefined : canonicalTarget(raw)
  if (target !== undefined && !target.ok) return `unjudgeable ${target.reason}`
  const path = target?.url
  const route = config.routes[0]
  const providerName = providerOf(config)
  const provider = config.providers[providerName]!
  const identity = identityFrom(claims, provider.claims, provider.keptClaims)
  if (route === undefined) {
    const [rules] = [...config.forwardAuth.hosts.values()]
    const judgement = compileRules(rules!)(identity, method === '?' ? undefined : method, path, undefined)
    return [judgement.admit ? 'admit' : 'refuse', judgement.rule].filter(Boolean).join(' ')
  }
  const gate = compileGate(route, (next) => `/oauth/login/${providerName}/?next=${next}`)
  const decision = decide(gate, { method, target: path!, address: undefined }, false, signedIn('token', identity))
  if (decision.kind === 'allow') return ['admit', decision.rule].filter(Boolean).join(' ')
  if (decision.kind === 'forbidden') return ['refuse', decision.rule].filter(Boolean).join(' ')
  return decision.kind
}

const text = readFileSync(PAGE, 'utf8')
const found = policies(text)

describe('the rules cookbook (docs/cookbook.md)', () => {
  it('has ten policies, each with one YAML block and its own table here', () => {
    expect(found.map((policy) => policy.heading).sort()).toEqual(Object.keys(EXPECTED).sort())
    expect(found).toHaveLength(10)
    for (const policy of found) expect([policy.heading, policy.yaml.length]).toEqual([policy.heading, 1])
  })

  describe.each(found)('$heading', ({ heading, yaml }) => {
    // A heading without a table, or without a block, fails the test above rather than the collection.
    const expected = EXPECTED[heading] ?? { people: {}, rows: [] }
    const config = parseConfig(PROVIDERS + (yaml[0] ?? ''), {}, PAGE)

    it('keeps in the session only the claims its rules name', () => {
      const lists = [...config.routes.map((route) => route.rules), ...config.forwardAuth.hosts.values()]
      const named = lists.flatMap((rules) => [...rules.allow ?? [], ...rules.deny]).flatMap((rule) => rule.claims.map((claim) => claim.path))
      expect(config.providers[providerOf(config)]!.keptClaims).toEqual([...new Set(named)].sort())
    })

    it.each(expected.rows)('%s: %s -> %s', (who, request, want) => {
      expect(outcome(config, expected.people[who]!, request)).toBe(want)
    })
  })
})

describe('the rule examples of the other pages', () => {
  const examples = ['docs/endpoints.md', 'docs/providers.md'].flatMap((page) =>
    [...readFileSync(page, 'utf8').matchAll(/^```yaml\n((?:routes|forwardAuth):[\s\S]*?)^```$/gm)].map(([, yaml]) => [page, yaml!] as const))

  it('are there to check', () => {
    expect(examples.length).toBeGreaterThanOrEqual(6)
  })

  it.each(examples)('%s: a rule example is a valid gateway.yaml', (page, yaml) => {
    expect(() => parseConfig(PROVIDERS + yaml, {}, page)).not.toThrow()
  })
})
