// Token-only issuers: a provider that is just `issuer:` (no client id or secret), for the tokens CI
// systems and workloads mint, usable only in `bearer.issuers`; rules on their claims decide which
// pipelines pass. A real oidc-provider stands in for a CI issuer (client-credentials JWTs carrying a
// `repository` claim); GitHub Actions and Kubernetes, which cannot be reached from here, answer as
// their public documentation shows (a discovery document with keys and no sign-in endpoints), and
// the rules are the recipes' in docs/machine-clients.md, as written there.
import { readFileSync } from 'node:fs'
import { expect } from 'vitest'
import { parse, stringify } from 'yaml'
import { startCiIssuer, type CiIssuer } from '../helpers/ci-issuers.js'
import { configProblems } from '../helpers/config.js'
import { parseConfig } from '../../src/config/config.js'
import { configWarnings } from '../../src/config/safety.js'
import { TEST_SECRET, type TestGateway } from '../helpers/gateway.js'
import { clientCredentialsToken } from '../helpers/machine.js'
import { startOidcProvider, type TestProvider } from '../helpers/oidc.js'
import { test as it } from '../helpers/stack.js'
import type { Upstream } from '../helpers/upstream.js'

const DEPLOY = 'api://deploy'
/** The documented example job's subject (test/helpers/ci-issuers.ts). */
const PINNED_SUB = 'repo:octo-org/octo-repo:ref:refs/heads/main'
const APP = { id: 'ci-app', secret: 'ci-app-secret' }
const OTHER = { id: 'ci-other', secret: 'ci-other-secret' }

/** The `routes[0]` of the recipe under `heading` in docs/machine-clients.md (its first yaml block). */
function recipeRoute (heading: string): { bearer: { audience: string }, allow: unknown } {
  const docs = readFileSync('docs/machine-clients.md', 'utf8')
  const section = docs.slice(docs.indexOf(`### ${heading}`))
  const block = /```yaml\n([\s\S]*?)```/.exec(section)?.[1]
  if (block === undefined) throw new Error(`docs/machine-clients.md has no yaml block under "${heading}"`)
  return (parse(block) as { routes: Array<{ bearer: { audience: string }, allow: unknown }> }).routes[0]!
}

let gateway: TestGateway
let upstream: Upstream
let ci: TestProvider
let github: CiIssuer
let cluster: CiIssuer
const githubRoute = recipeRoute('GitHub Actions')
const clusterRoute = recipeRoute('Kubernetes service accounts')

it.beforeAll(async ({ startStack, upstream: echo }) => {
  upstream = echo
  ci = await startOidcProvider([], {
    machineClients: [{ client_id: APP.id, client_secret: APP.secret }, { client_id: OTHER.id, client_secret: OTHER.secret }],
    resources: { [DEPLOY]: { scope: 'deploy' } },
    tokenClaims: (clientId) => ({ repository: clientId === APP.id ? 'org/app' : 'org/other', ref: 'refs/heads/main' }),
  })
  github = await startCiIssuer('github')
  cluster = await startCiIssuer('kubernetes')
  gateway = await startStack({
    providers: { ci: { issuer: ci.issuer }, 'github-actions': { issuer: github.issuer }, cluster: { issuer: cluster.issuer } },
    routes: [
      { path: '/deploy/', upstream: echo.url, provider: 'demo', bearer: { issuers: ['ci'], audience: DEPLOY }, allow: [{ claims: { repository: ['org/app'], ref: ['refs/heads/main'] } }] },
      { path: '/gh/', upstream: echo.url, provider: 'demo', bearer: { issuers: ['github-actions'], audience: githubRoute.bearer.audience }, allow: githubRoute.allow },
      { path: '/k8s/', upstream: echo.url, provider: 'demo', bearer: { issuers: ['cluster'], audience: clusterRoute.bearer.audience }, allow: clusterRoute.allow },
      { path: '/gh-users/', upstream: echo.url, provider: 'demo', bearer: { issuers: ['github-actions'], audience: githubRoute.bearer.audience }, allow: [{ users: [`github-actions:${PINNED_SUB}`] }] },
    ],
  })
})

it.afterAll(async () => {
  await gateway?.close()
  await Promise.all([ci?.close(), github?.close(), cluster?.close()])
})

async function call (path: string, token?: string): Promise<{ status: number, body: Record<string, unknown> }> {
  const response = await fetch(`${gateway.url}${path}`, { headers: { accept: 'application/json', ...(token === undefined ? {} : { authorization: `Bearer ${token}` }) } })
  const text = await response.text()
  return { status: response.status, body: text === '' ? {} : JSON.parse(text) as Record<string, unknown> }
}

it('a pipeline of the named repository passes, its token unchanged; another repository of the same issuer is refused', async () => {
  const token = await clientCredentialsToken(ci, APP, DEPLOY)
  const seen = upstream.seen.length
  expect((await call('/deploy/run', token)).status).toBe(200)
  expect(upstream.seen.slice(seen).map((request) => request.headers.authorization)).toEqual([`Bearer ${token}`])
  const other = await call('/deploy/run', await clientCredentialsToken(ci, OTHER, DEPLOY))
  expect(other).toMatchObject({ status: 403, body: { error: 'forbidden', rule: null } })
  expect(upstream.seen.length - seen).toBe(1)
})

it('a token for another audience, or none, is refused as on any bearer route', async () => {
  const wrongAudience = await call('/gh/run', await github.mint('https://github.com/octo-org'))
  expect(wrongAudience).toMatchObject({ status: 401, body: { error: 'invalid_token' } })
  expect((await call('/deploy/run')).status).toBe(401)
})

it('GitHub Actions: the recipe\'s rule passes the repository\'s main branch only', async () => {
  const audience = githubRoute.bearer.audience
  expect((await call('/gh/run', await github.mint(audience))).status).toBe(200)
  expect((await call('/gh/run', await github.mint(audience, { ref: 'refs/heads/feature', sub: 'repo:octo-org/octo-repo:ref:refs/heads/feature' }))).status).toBe(403)
  // A repository of that name recreated by someone else (GitHub's advice: pin the id as well).
  expect((await call('/gh/run', await github.mint(audience, { repository_id: '999' }))).status).toBe(403)
  expect((await call('/gh/run', await github.mint(audience, { repository: 'octo-org/other-repo' }))).status).toBe(403)
})

// An attacker's finding: a `sub` with white space at an end was trimmed, so another subject at the
// issuer passed a `users` rule on the pinned one and reached the upstream under its name; and a
// lone surrogate went as U+FFFD, one X-Forwarded-User for two subjects.
it('a subject is the issuer\'s as written: one with white space at an end or a lone surrogate passes no rule on another and reaches no upstream', async () => {
  const audience = githubRoute.bearer.audience
  expect((await call('/gh-users/run', await github.mint(audience, { sub: PINNED_SUB }))).status).toBe(200)
  const seen = upstream.seen.length
  const statuses: Array<[string, number]> = []
  for (const sub of [`${PINNED_SUB}\t`, `${PINNED_SUB}\n`, ` ${PINNED_SUB}`, `${PINNED_SUB}\r\n`, `${PINNED_SUB} `]) {
    statuses.push([sub, (await call('/gh-users/run', await github.mint(audience, { sub }))).status])
    // The recipe's rule is on claims, which are the pinned job's: still refused, never sent on as another name.
    statuses.push([sub, (await call('/gh/run', await github.mint(audience, { sub }))).status])
  }
  const lone = `${PINNED_SUB}\ud800`
  statuses.push([lone, (await call('/gh/run', await github.mint(audience, { sub: lone }))).status])
  expect(statuses.filter(([, status]) => status === 200)).toEqual([])
  expect(upstream.seen.length).toBe(seen)
  // The control: U+FFFD itself is a character an issuer may write.
  expect((await call('/gh/run', await github.mint(audience, { sub: `${PINNED_SUB}\ufffd` }))).status).toBe(200)
})

it('Kubernetes: the recipe\'s rule passes the named service account of the namespace only', async () => {
  const audience = clusterRoute.bearer.audience
  expect((await call('/k8s/run', await cluster.mint(audience))).status).toBe(200)
  const otherNamespace = { sub: 'system:serviceaccount:dev:deployer', 'kubernetes.io': { namespace: 'dev', serviceaccount: { name: 'deployer', uid: 'u' } } }
  expect((await call('/k8s/run', await cluster.mint(audience, otherNamespace))).status).toBe(403)
  const otherAccount = { sub: 'system:serviceaccount:deploy:default', 'kubernetes.io': { namespace: 'deploy', serviceaccount: { name: 'default', uid: 'u' } } }
  expect((await call('/k8s/run', await cluster.mint(audience, otherAccount))).status).toBe(403)
})

it('nobody signs in with a token-only issuer: no login, no forward-auth, not on the home page', async () => {
  for (const path of ['/oauth/login/ci/', '/oauth/authorized/ci/?code=x&state=y', '/oauth/auth/ci/', '/oauth/backchannel-logout/ci/']) {
    const response = await fetch(`${gateway.url}${path}`, { method: path.includes('backchannel') ? 'POST' : 'GET', headers: { accept: 'application/json' }, redirect: 'manual' })
    expect([path, response.status, (await response.json() as { error: string }).error]).toEqual([path, 404, 'unknown_provider'])
  }
  const home = await (await fetch(`${gateway.url}/oauth/`, { headers: { accept: 'text/html' } })).text()
  expect(home).toContain('/oauth/login/demo/')
  expect(home).not.toMatch(/oauth\/login\/(?:ci|github-actions|cluster)\//)
})

it('--check: only an issuer, named only in bearer.issuers, never asked to introspect', () => {
  const config = (providers: Record<string, unknown>, route: Record<string, unknown>): string => stringify({
    session: { secret: TEST_SECRET },
    providers: { corp: { clientId: 'c', clientSecret: 's', authorizeUrl: 'https://op.example/a', tokenUrl: 'https://op.example/t', scope: 'read' }, ...providers },
    routes: [{ path: '/deploy/', upstream: 'http://127.0.0.1:9100', provider: 'corp', ...route }],
  })
  const gha = { gha: { issuer: 'https://token.actions.githubusercontent.com' } }
  const bearer = { bearer: { issuers: ['gha'], audience: 'https://gw.example/deploy' } }
  expect(configProblems(config(gha, bearer))).toEqual([])
  const TABLE: Array<[Record<string, unknown>, Record<string, unknown>, RegExp]> = [
    [gha, { provider: 'gha' }, /^routes\[0\]\.provider: names gha, a token-only issuer \(no clientId and clientSecret\): nobody can sign in with it; name a provider people sign in with here, and gha in bearer\.issuers/],
    [{ gha: {} }, bearer, /^providers\.gha\.issuer: is required for a provider without clientId and clientSecret \(a token-only issuer\)/],
    [{ gha: { issuer: 'https://token.actions.githubusercontent.com', scope: 'openid' } }, bearer, /^providers\.gha\.scope: is for signing in, and this provider has no clientId and clientSecret/],
    [{ gha: { issuer: 'https://token.actions.githubusercontent.com', tokenUrl: 'https://x.example/t' } }, bearer, /^providers\.gha\.tokenUrl: is for signing in/],
    [{ gha: { preset: 'google' } }, bearer, /^providers\.gha\.preset: fills in a sign-in client, and this provider has no clientId and clientSecret/],
    [{ gha: { issuer: 'https://token.actions.githubusercontent.com', scope: 'openid', clientId: 'x' } }, bearer, /^providers\.gha\.clientSecret: is required with clientId; leave out both for a provider whose tokens machine clients bring/],
    [{ gha: { issuer: 'https://token.actions.githubusercontent.com', scope: 'openid', clientSecret: 'long-enough-secret-value' } }, bearer, /^providers\.gha\.clientId: is required with clientSecret/],
    [gha, { bearer: { issuers: ['gha'], audience: 'a', introspect: true } }, /^routes\[0\]\.bearer\.introspect: asks gha's introspection endpoint, and gha is a token-only issuer/],
    [gha, { bearer: { issuers: ['gha'], audience: 'a', claimsFrom: 'introspection' } }, /^routes\[0\]\.bearer\.claimsFrom: asks gha's introspection endpoint/],
    [{ gha: { issuer: 'http://ci.example.com' } }, bearer, /^providers\.gha\.issuer: .*plain http/],
  ]
  for (const [providers, route, problem] of TABLE) expect([problem, configProblems(config(providers, route))]).toEqual([problem, [expect.stringMatching(problem)]])
  // One issuer under two names in one list: its tokens would be judged as the first's.
  const twice = { gha: { issuer: 'https://token.actions.githubusercontent.com' }, 'gha-2': { issuer: 'https://token.actions.githubusercontent.com' } }
  expect(configProblems(config(twice, { bearer: { issuers: ['gha', 'gha-2'], audience: 'a' } }))).toEqual([expect.stringMatching(/^routes\[0\]\.bearer\.issuers\[1\]: names gha-2, whose issuer "https:\/\/token\.actions\.githubusercontent\.com" is gha's too/)])
  // However the second writes it: discovery reads these as the same issuer (tester's finding, round 4).
  for (const spelling of ['https://Token.Actions.GitHubUserContent.com', 'https://token.actions.githubusercontent.com:443/', 'https://token.actions.githubusercontent.com//']) {
    const spelled = { gha: twice.gha, 'gha-2': { issuer: spelling } }
    expect([spelling, configProblems(config(spelled, { bearer: { issuers: ['gha', 'gha-2'], audience: 'a' } }))]).toEqual([spelling, [expect.stringMatching(/^routes\[0\]\.bearer\.issuers\[1\]: names gha-2, whose issuer .* is gha's too/)]])
  }
  // Another path is another issuer (GitLab's groups, Keycloak's realms).
  expect(configProblems(config({ gha: twice.gha, 'gha-2': { issuer: 'https://token.actions.githubusercontent.com/other' } }, { bearer: { issuers: ['gha', 'gha-2'], audience: 'a' } }))).toEqual([])
  // A rule on a provider whose people and tokens never reach the route could never hold.
  expect(configProblems(config(gha, { ...bearer, allow: [{ providers: ['github'] }] }))).toEqual([expect.stringMatching(/^routes\[0\]\.allow\[0\]\.providers\[0\]: names "github", whose people and tokens never reach here/)])
  expect(configProblems(config(gha, { ...bearer, allow: [{ providers: ['gha'], claims: { repository: ['o/r'] } }, { providers: ['corp'] }] }))).toEqual([])
})

it('--check warns where a token-only issuer\'s tokens pass without a rule on who the caller is', () => {
  const warn = (allow?: unknown[]): string[] => configWarnings(parseConfig(stringify({
    session: { secret: TEST_SECRET },
    providers: { corp: { clientId: 'c', clientSecret: 's', authorizeUrl: 'https://op.example/a', tokenUrl: 'https://op.example/t', scope: 'read' }, gha: { issuer: 'https://token.actions.githubusercontent.com' } },
    routes: [{ path: '/deploy/', upstream: 'http://127.0.0.1:9100', provider: 'corp', bearer: { issuers: ['gha'], audience: 'a' }, ...(allow === undefined ? {} : { allow }) }],
  }), {})).filter((warning) => warning.includes('takes tokens of'))
  const unpinned = [expect.stringMatching(/^routes\[0\]\.allow: takes tokens of gha, which mints them for every repository, project or pod it serves/)]
  expect(warn()).toEqual(unpinned)
  expect(warn([{ methods: ['POST'] }])).toEqual(unpinned)
  expect(warn([{ claims: { repository: ['o/r'] } }, { groups: ['deployers'] }])).toEqual(unpinned)
  expect(warn([{ claims: { repository: ['o/r'] } }, { users: ['alice'] }])).toEqual([])
  // Claims every repository can present for itself pin nobody: its own main branch, an environment
  // it names production, a push (tester's finding, round 4).
  for (const claims of [
    { ref: ['refs/heads/main'] },
    { environment: ['production'] },
    { '/ref': ['refs/heads/main'], ref_type: ['branch'], event_name: ['push'] },
    { runner_environment: ['github-hosted'], repository_visibility: ['private'] },
    // The reusable workflow or pipeline file run, not the repository that runs it (any may call a
    // public one); GitLab's visibility and the caller's access level, which everyone has for their own.
    { job_workflow_ref: ['o/r/.github/workflows/deploy.yml@refs/heads/main'] },
    { ci_config_ref_uri: ['gitlab.example.com/o/r//.gitlab-ci.yml@refs/heads/main'] },
    { project_visibility: ['private'], user_access_level: ['owner'] },
  ]) expect([claims, warn([{ claims }])]).toEqual([claims, unpinned])
  expect(warn([{ claims: { repository_owner_id: ['123'], ref: ['refs/heads/main'] } }])).toEqual([])
  expect(warn([{ claims: { repository_owner: ['o'], job_workflow_ref: ['o/r/.github/workflows/deploy.yml@refs/heads/main'] } }])).toEqual([])
})

it('reads a claim value written as a YAML number as written: `1.10` is the ref "1.10", not 1.1', () => {
  const text = `
session: { secret: ${TEST_SECRET} }
providers:
  corp: { clientId: c, clientSecret: s, authorizeUrl: "https://op.example/a", tokenUrl: "https://op.example/t", scope: read }
  gitlab-ci: { issuer: "https://gitlab.example.com" }
routes:
  - path: /deploy/
    upstream: http://127.0.0.1:9100
    provider: corp
    bearer: { issuers: [gitlab-ci], audience: "https://gw.example/deploy" }
    allow:
      - { providers: [gitlab-ci], claims: { project_id: [42], ref: [1.10, 2.0, 1e3, 0x2A, "1.20"], ref_protected: [true] } }
    deny:
      claims: { ref: [3.0] }
`
  const { rules } = parseConfig(text, {}).routes[0]!
  expect(rules.allow![0]!.claims).toEqual([
    { path: 'project_id', values: ['42'] },
    { path: 'ref', values: ['1.10', '2.0', '1e3', '0x2A', '1.20'] },
    { path: 'ref_protected', values: ['true'] },
  ])
  expect(rules.deny[0]!.claims).toEqual([{ path: 'ref', values: ['3.0'] }])
})

/**
 * --check's warnings that contain `about`, for a route of `providers` (of `corp` unless it names
 * `providers`) and, with `host`, a forward-auth host deploy.example.com.
 */
function placeWarnings (providers: Record<string, unknown>, about: string, route: Record<string, unknown>, host?: Record<string, unknown>): string[] {
  return configWarnings(parseConfig(stringify({
    server: { trustProxy: ['127.0.0.1'] },
    session: { secret: TEST_SECRET },
    providers,
    routes: [{ path: '/orders/', upstream: 'http://127.0.0.1:9100', ...('providers' in route ? {} : { provider: 'corp' }), ...route }],
    ...(host === undefined ? {} : { forwardAuth: { hosts: { 'deploy.example.com': host } } }),
  }), {})).filter((warning) => warning.includes(about))
}

/** A route's or host's bearer block taking tokens of `issuers`. */
const tokens = (issuers: string[]) => ({ bearer: { issuers, audience: 'a' } })

it('--check warns where a rule admits another issuer\'s people or tokens by groups or e-mail as the own provider\'s, on a route or a forward-auth host', () => {
  const providers = {
    corp: { clientId: 'c', clientSecret: 's', issuer: 'https://corp.example', scope: 'openid' },
    github: { preset: 'github', clientId: 'g', clientSecret: 'gs', scope: 'read:user user:email read:org' },
    partner: { issuer: 'https://partner.example' },
  }
  const warn = (route: Record<string, unknown>, host?: Record<string, unknown>): string[] => placeWarnings(providers, 'told apart by issuer', route, host)
  expect(warn({ ...tokens(['corp', 'partner']), allow: [{ groups: ['admins'] }] })).toEqual([expect.stringMatching(/^routes\[0\]\.allow\[0\]: admits by groups the people and tokens of partner as well as corp's, .* Add providers: \[corp\] to the rule/)])
  expect(warn({ ...tokens(['corp', 'partner']), allow: [{ users: ['alice'] }, { emails: ['alice@corp.example'], domains: ['corp.example'] }] })).toEqual([expect.stringMatching(/^routes\[0\]\.allow\[1\]: admits by emails and domains the people and tokens of partner/)])
  // A second sign-in provider's people: a GitHub organisation anyone can create is a group there.
  expect(warn({ providers: ['corp', 'github'], allow: [{ groups: ['payroll'] }] })).toEqual([expect.stringMatching(/^routes\[0\]\.allow\[0\]: admits by groups the people and tokens of github as well as corp's/)])
  // A forward-auth host, checked as a route is: whose provider the URL names.
  expect(warn({}, { ...tokens(['corp', 'partner']), allow: [{ groups: ['admins'] }] })).toEqual([expect.stringMatching(/^forwardAuth\.hosts\.deploy\.example\.com\.allow\[0\]: admits by groups the people and tokens of corp, partner/)])
  // One issuer: the URL's provider's people meet its tokens under the same rule.
  expect(warn({}, { bearer: { issuers: ['partner'], audience: 'a' }, allow: [{ groups: ['admins'] }] })).toEqual([expect.stringMatching(/^forwardAuth\.hosts\.deploy\.example\.com\.allow\[0\]: admits by groups the people and tokens of partner as well as those of the provider its URL names .* Add providers: \[<that provider>\]/)])
  expect(warn({}, { bearer: { issuers: ['partner'], audience: 'a' } })).toEqual([])
  // Named by several providers: their groups and addresses meet under one rule as well.
  expect(warn({ ...tokens(['corp', 'partner']), allow: [{ groups: ['admins'], providers: ['corp', 'partner'] }] })).toEqual([expect.stringMatching(/^routes\[0\]\.allow\[0\]: admits by groups the people and tokens of corp, partner under one rule, .* partner's groups and the addresses it vouches for count as corp's\. Write a rule for each provider/)])
  expect(warn({ providers: ['corp', 'github'], allow: [{ emails: ['a@corp.example'], providers: ['github', 'corp'] }] })).toEqual([expect.stringMatching(/^routes\[0\]\.allow\[0\]: admits by emails the people and tokens of github, corp under one rule/)])
  expect(warn({}, { ...tokens(['corp', 'partner']), allow: [{ domains: ['corp.example'], providers: ['corp', 'partner'] }] })).toEqual([expect.stringMatching(/^forwardAuth\.hosts\.deploy\.example\.com\.allow\[0\]: admits by domains the people and tokens of corp, partner under one rule/)])
  expect(warn({ ...tokens(['corp', 'partner']), allow: [{ groups: ['admins'], providers: ['corp'] }, { groups: ['admins'], providers: ['partner'] }] })).toEqual([])
  // Named by provider, by user only, or no other issuer: nothing to say.
  expect(warn({ ...tokens(['corp', 'partner']), allow: [{ groups: ['admins'], providers: ['corp'] }, { users: ['partner:bot'] }] })).toEqual([])
  expect(warn({ ...tokens(['corp']), allow: [{ groups: ['admins'] }] })).toEqual([])
})

// An outside tester's finding: the GitHub Actions recipe's rule (a repository's name and ids
// pinned) admitted a second GitHub's token with the same values, and a partner directory's person
// with a claim a rule named; --check said nothing, as it does for groups.
it('--check warns where a rule admits by claims at a place of several providers\' people or tokens and names no one provider', () => {
  const providers = {
    corp: { clientId: 'c', clientSecret: 's', issuer: 'https://corp.example', scope: 'openid' },
    partner: { clientId: 'p', clientSecret: 'ps', issuer: 'https://partner.example', scope: 'openid' },
    gha: { issuer: 'https://token.actions.githubusercontent.com' },
    ghes: { issuer: 'https://ghes.partner.example/_services/token' },
  }
  const PINNED = { repository: ['octo-org/octo-repo'], repository_id: ['456'], ref: ['refs/heads/main'] }
  const warn = (route: Record<string, unknown>, host?: Record<string, unknown>): string[] => placeWarnings(providers, 'admits by claims', route, host)
  expect(warn({ ...tokens(['gha', 'ghes']), allow: [{ claims: PINNED }] })).toEqual([expect.stringMatching(/^routes\[0\]\.allow\[0\]: admits by claims \(repository, repository_id, ref\) whoever carries those values among the people and tokens of corp, gha, ghes: .* Add providers: \[<the one it is for>\]/)])
  // The recipe's route: people of corp and tokens of gha.
  expect(warn({ ...tokens(['gha']), allow: [{ claims: PINNED }] })).toHaveLength(1)
  expect(warn({ providers: ['corp', 'partner'], allow: [{ claims: { department: ['finance'] } }] })).toEqual([expect.stringMatching(/^routes\[0\]\.allow\[0\]: admits by claims \(department\) whoever carries those values among the people and tokens of corp, partner:/)])
  expect(warn({}, { ...tokens(['gha']), allow: [{ claims: PINNED }] })).toEqual([expect.stringMatching(/^forwardAuth\.hosts\.deploy\.example\.com\.allow\[0\]: admits by claims .* of gha and the provider its URL names:/)])
  // Named by its one provider, pinned by users as well, or one party only: nothing to say.
  expect(warn({ ...tokens(['gha', 'ghes']), allow: [{ claims: PINNED, providers: ['gha'] }, { claims: { client_id: ['ci'] }, users: ['ghes:bot'] }] })).toEqual([])
  expect(warn({ ...tokens(['corp']), allow: [{ claims: { client_id: ['ci'] } }] })).toEqual([])
})

it('--check warns where opaque tokens of several issuers are introspected: each issuer sees the tokens of those listed after it', () => {
  const warn = (bearer: Record<string, unknown>, host?: Record<string, unknown>): string[] => configWarnings(parseConfig(stringify({
    server: { trustProxy: ['127.0.0.1'] },
    session: { secret: TEST_SECRET },
    providers: { corp: { clientId: 'c', clientSecret: 's', issuer: 'https://corp.example', scope: 'openid' }, partner: { clientId: 'p', clientSecret: 'ps', issuer: 'https://partner.example', scope: 'openid' } },
    routes: [{ path: '/api/', upstream: 'http://127.0.0.1:9100', provider: 'corp', bearer: { audience: 'api://a', ...bearer } }],
    ...(host === undefined ? {} : { forwardAuth: { hosts: { 'api.example.com': { bearer: { audience: 'api://a', ...host } } } } }),
  }), {})).filter((warning) => warning.includes('introspect'))
  expect(warn({ issuers: ['partner', 'corp'], introspect: true })).toEqual([expect.stringMatching(/^routes\[0\]\.bearer\.introspect: an opaque token names no issuer, so it is introspected at partner, then corp in turn .* \(partner those of corp\)/)])
  expect(warn({ issuers: ['corp'], introspect: true }, { issuers: ['corp', 'partner'], introspect: true })).toEqual([expect.stringMatching(/^forwardAuth\.hosts\.api\.example\.com\.bearer\.introspect: .* at corp, then partner/)])
  expect(warn({ issuers: ['partner', 'corp'], introspect: true })[0]).toContain('Name the one issuer whose tokens are opaque (introspect: partner)')
  // One issuer introspected (by name, or the only one listed), or several that only sign JWTs: nothing to say.
  expect(warn({ issuers: ['partner', 'corp'], introspect: 'corp' })).toEqual([])
  expect(warn({ issuers: ['corp'], introspect: true })).toEqual([])
  expect(warn({ issuers: ['partner', 'corp'] })).toEqual([])
})

it('--check warns about a forward-auth host that takes a token-only issuer\'s tokens without pinning who may pass, as about a route', () => {
  const warn = (host: Record<string, unknown>): string[] => configWarnings(parseConfig(stringify({
    server: { trustProxy: ['127.0.0.1'] },
    session: { secret: TEST_SECRET },
    providers: { corp: { clientId: 'c', clientSecret: 's', issuer: 'https://corp.example', scope: 'openid' }, gha: { issuer: 'https://token.actions.githubusercontent.com' } },
    routes: [{ path: '/app/', upstream: 'http://127.0.0.1:9100', provider: 'corp' }],
    forwardAuth: { hosts: { 'deploy.example.com': host } },
  }), {})).filter((warning) => warning.includes('every repository'))
  expect(warn({ bearer: { issuers: ['gha'], audience: 'https://deploy.example.com' } })).toEqual([expect.stringMatching(/^forwardAuth\.hosts\.deploy\.example\.com\.allow: takes tokens of gha, which mints them for every repository/)])
  expect(warn({ bearer: { issuers: ['gha'], audience: 'https://deploy.example.com' }, allow: [{ claims: { repository: ['org/app'] } }] })).toEqual([])
})
