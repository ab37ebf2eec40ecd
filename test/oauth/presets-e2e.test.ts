// Each provider preset signs in end to end over real sockets: a browser-like client opens a route,
// signs in through the gateway, and the upstream receives the bearer token and the identity headers
// the preset promises. GitHub runs against a local stand-in answering as GitHub's docs show
// (test/helpers/provider-stubs.ts, at its Enterprise Server paths under `baseUrl`); the OIDC presets
// run against the real oidc-provider, reached through each preset's own keys where it has them
// (GitLab's `baseUrl`, Keycloak's `baseUrl` and `realm` with the provider at /realms/<realm>) and an
// explicit `issuer` otherwise (Google, Microsoft: their preset values are checked in
// test/config/presets.test.ts). The test provider releases `groups` with `openid`, as GitLab and a
// Keycloak realm with a group mapper do, and `preferred_username` and `nickname` with `profile`.
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { Browser } from '../helpers/browser.js'
import { reserveBaseUrl, startGateway, type TestGateway } from '../helpers/gateway.js'
import { startOidcProvider, type TestProvider } from '../helpers/oidc.js'
import { OCTOCAT, startGitHubStub, type GitHubStub } from '../helpers/provider-stubs.js'
import { startRedis, type TestRedis } from '../helpers/redis.js'
import { startUpstream, type Upstream } from '../helpers/upstream.js'

interface Seen { url: string, headers: Record<string, string | undefined> }

let redis: TestRedis
let upstream: Upstream

beforeAll(async () => {
  redis = await startRedis()
  upstream = await startUpstream()
})

afterAll(async () => {
  await upstream?.close()
  await redis?.release()
})

describe('preset github (GitHub Enterprise Server form, against a stand-in that answers as GitHub\'s docs show)', () => {
  let github: GitHubStub
  let gateway: TestGateway

  beforeAll(async () => {
    github = await startGitHubStub()
    const entry = { preset: 'github', baseUrl: github.url, clientId: github.clientId, clientSecret: github.clientSecret }
    gateway = await startGateway({
      store: { type: 'redis', url: redis.url },
      providers: { github: entry, narrow: { ...entry, scope: 'read:user' }, orgs: { ...entry, scope: 'read:user user:email read:org' } },
      routes: [
        // Each route forwards its own path: a route without allow rules that reached /gh-mail/'s
        // upstream paths (rewritePrefix: / on both) would be refused at start.
        { path: '/gh/', upstream: upstream.url, provider: 'github' },
        { path: '/gh-mail/', upstream: upstream.url, provider: 'github', allow: { emails: ['octocat@github.com'] } },
        { path: '/narrow/', upstream: upstream.url, provider: 'narrow' },
        { path: '/gh-team/', upstream: upstream.url, provider: 'orgs', allow: { groups: ['acme/platform'] } },
      ],
    })
  })

  afterAll(async () => {
    await gateway?.close()
    await github?.close()
  })

  async function signIn (path: string): Promise<{ response: Response, browser: Browser }> {
    const browser = new Browser()
    const response = await browser.navigate(`${gateway.url}${path}`)
    return { response, browser }
  }

  it('signs in: the user is the login, the e-mail the primary verified address from /user/emails, and the bearer is GitHub\'s token', async () => {
    github.account = OCTOCAT
    github.requests.length = 0
    const { response } = await signIn('/gh/repos')
    expect(response.status).toBe(200)
    const seen = await response.json() as Seen
    expect(seen.url).toBe('/gh/repos')
    expect(seen.headers.authorization).toBe(`Bearer ${github.tokens.at(-1)}`)
    expect(seen.headers['x-forwarded-user']).toBe('octocat')
    expect(seen.headers['x-forwarded-email']).toBe('octocat@github.com')

    // The token request asks for JSON; the API requests carry the headers GitHub's REST docs show.
    const token = github.requests.find((r) => r.path === '/login/oauth/access_token')!
    expect(token.headers.accept).toContain('application/json')
    const api = github.requests.filter((r) => r.path.startsWith('/api/v3/'))
    expect(api.map((r) => r.path)).toEqual(['/api/v3/user', '/api/v3/user/emails'])
    for (const request of api) {
      expect(request.headers).toMatchObject({
        accept: 'application/vnd.github+json',
        'x-github-api-version': '2022-11-28',
        authorization: `Bearer ${github.tokens.at(-1)}`,
      })
      expect(request.headers['user-agent']).toMatch(/\S/)
    }
    // No token or client secret in any log line.
    const logs = gateway.logs.join('\n')
    for (const secret of [...github.tokens, github.clientSecret]) expect(logs).not.toContain(secret)
  })

  it('takes the public e-mail address from /user and does not ask /user/emails', async () => {
    github.account = { ...OCTOCAT, login: 'hubot', email: 'hubot@example.com', emails: [{ email: 'hubot@example.com', primary: true, verified: true, visibility: 'public' }] }
    github.requests.length = 0
    const { response } = await signIn('/gh/')
    const seen = await response.json() as Seen
    expect(seen.headers).toMatchObject({ 'x-forwarded-user': 'hubot', 'x-forwarded-email': 'hubot@example.com' })
    expect(github.requests.map((r) => r.path)).not.toContain('/api/v3/user/emails')
  })

  it('never uses an unverified address: without a primary verified one the user has no e-mail, and an e-mail rule refuses with 403', async () => {
    github.account = {
      ...OCTOCAT,
      emails: [
        { email: 'octocat@github.com', primary: true, verified: false, visibility: 'private' },
        { email: 'octo@elsewhere.test', primary: false, verified: true, visibility: null },
      ],
    }
    const { response, browser } = await signIn('/gh/')
    const seen = await response.json() as Seen
    expect(seen.headers['x-forwarded-user']).toBe('octocat')
    expect(seen.headers['x-forwarded-email']).toBeUndefined()
    const refused = await browser.fetch(`${gateway.url}/gh-mail/`, { headers: { accept: 'application/json' } })
    expect(refused.status).toBe(403)
    expect(await refused.json()).toMatchObject({ error: 'forbidden' })
  })

  it('a scope without user:email signs in without an e-mail address', async () => {
    github.account = OCTOCAT
    const { response } = await signIn('/narrow/')
    expect(response.status).toBe(200)
    const seen = await response.json() as Seen
    expect(seen.headers['x-forwarded-user']).toBe('octocat')
    expect(seen.headers['x-forwarded-email']).toBeUndefined()
  })

  it('with read:org in the scope, the groups are the organisations and teams of every page, and a group rule admits', async () => {
    // 130 teams elsewhere first: the one that admits is on the second page of /user/teams.
    const others = Array.from({ length: 130 }, (_, i) => ({ org: 'other', slug: `team-${i}` }))
    github.account = { ...OCTOCAT, orgs: ['other', 'acme'], teams: [...others, { org: 'acme', slug: 'platform' }] }
    github.requests.length = 0
    const { response } = await signIn('/gh-team/')
    expect(response.status).toBe(200)
    const seen = await response.json() as Seen
    const groups = seen.headers['x-forwarded-groups']!.split(',')
    expect(groups.slice(0, 2)).toEqual(['other', 'acme'])
    expect(groups).toContain('acme/platform')
    expect(groups).toHaveLength(2 + 131)
    expect(github.requests.map((r) => r.path).filter((path) => path !== '/api/v3/user/emails' && path.startsWith('/api/v3/')))
      .toEqual(['/api/v3/user', '/api/v3/user/orgs', '/api/v3/user/teams', '/api/v3/user/teams'])
  })

  it('with read:org, a member of the organisation but not of the team is refused by the group rule (403)', async () => {
    github.account = { ...OCTOCAT, orgs: ['acme'], teams: [{ org: 'acme', slug: 'platform-tools' }, { org: 'acme-platform', slug: 'x' }] }
    const { response } = await signIn('/gh-team/')
    expect(response.status).toBe(403)
  })

  it('with read:org, a failing team list stops the sign-in with 502 token_exchange_failed, and no session', async () => {
    github.account = { ...OCTOCAT, orgs: ['acme'], teams: [{ org: 'acme', slug: 'platform' }] }
    github.orgsStatus = 500
    try {
      const { response, browser } = await signIn('/gh-team/')
      expect(response.status).toBe(502)
      expect(await response.text()).toContain('token_exchange_failed')
      expect(browser.cookies.has('gw_session')).toBe(false)
    } finally {
      github.orgsStatus = undefined
    }
  })

  it.each(['bad_verification_code', 'incorrect_client_credentials'] as const)('a token error GitHub answers with HTTP 200 (%s) is 502 token_exchange_failed naming it, and no session', async (code) => {
    github.account = OCTOCAT
    github.tokenError = code
    try {
      const browser = new Browser()
      const response = await browser.navigate(`${gateway.url}/gh/`)
      expect(response.status).toBe(502)
      const page = await response.text()
      expect(page).toContain('token_exchange_failed')
      expect(page).toContain(`The token endpoint refused the request (${code}).`)
      expect(browser.cookies.has('gw_session')).toBe(false)
      expect(browser.hops.at(-1)!.url).toContain('/oauth/authorized/github/')
    } finally {
      github.tokenError = undefined
    }
  })
})

describe('preset github with expiring user tokens (a GitHub App): refresh at GitHub\'s token endpoint', () => {
  let github: GitHubStub
  let gateway: TestGateway
  /** The gateway's clock: the wall clock plus an offset a test moves past the token's 8 hours. */
  const clock = { offset: 0, now: () => Date.now() + clock.offset }

  beforeAll(async () => {
    github = await startGitHubStub()
    github.expiringTokens = true
    gateway = await startGateway({
      store: { type: 'redis', url: redis.url },
      providers: { github: { preset: 'github', baseUrl: github.url, clientId: github.clientId, clientSecret: github.clientSecret } },
      routes: [{ path: '/gh/', upstream: upstream.url, provider: 'github', rewritePrefix: '/' }],
    }, { deps: { clock } })
  })

  afterAll(async () => {
    await gateway?.close()
    await github?.close()
  })

  it('an expired token is refreshed with GitHub\'s refresh token and the upstream gets the new one', async () => {
    clock.offset = 0
    const browser = new Browser()
    const first = await (await browser.navigate(`${gateway.url}/gh/`)).json() as Seen
    expect(first.headers.authorization).toBe(`Bearer ${github.tokens.at(-1)}`)
    clock.offset = 28_800_000
    const response = await browser.fetch(`${gateway.url}/gh/again`, { headers: { accept: 'application/json' } })
    expect(response.status).toBe(200)
    const second = await response.json() as Seen
    expect(github.tokens).toHaveLength(2)
    expect(second.headers.authorization).toBe(`Bearer ${github.tokens[1]}`)
    expect(second.headers['x-forwarded-user']).toBe('octocat')
  })

  it('a refresh GitHub refuses with HTTP 200 (bad_refresh_token) means signing in again, not a 502', async () => {
    clock.offset = 0
    const browser = new Browser()
    await browser.navigate(`${gateway.url}/gh/`)
    clock.offset = 28_800_000
    github.tokenError = 'bad_refresh_token'
    try {
      const response = await browser.fetch(`${gateway.url}/gh/again`, { headers: { accept: 'application/json' } })
      expect(response.status).toBe(401)
      expect(await response.json()).toMatchObject({ error: 'unauthenticated' })
      const page = await browser.fetch(`${gateway.url}/gh/again`)
      expect(page.status).toBe(302)
      expect(page.headers.get('location')).toContain('/oauth/login/github/')
    } finally {
      github.tokenError = undefined
      clock.offset = 0
    }
  })
})

describe('OIDC presets against the real oidc-provider', () => {
  let op: TestProvider
  let gateway: TestGateway
  const PRESETS = ['google', 'microsoft', 'gitlab', 'keycloak'] as const

  beforeAll(async () => {
    const { port, baseUrl } = await reserveBaseUrl()
    op = await startOidcProvider(PRESETS.map((name) => ({ client_id: `${name}-client`, client_secret: `${name}-secret-0123456789`, redirect_uris: [`${baseUrl}/oauth/authorized/${name}/`] })), {
      issuerPath: '/realms/staff',
      scopeClaims: { openid: ['sub', 'groups'], profile: ['name', 'preferred_username', 'nickname'], email: ['email', 'email_verified'] },
      extraClaims: (id) => ({ preferred_username: `${id}@staff.example.test`, nickname: `${id}-gl` }),
    })
    const origin = new URL(op.issuer).origin
    const client = (name: string) => ({ clientId: `${name}-client`, clientSecret: `${name}-secret-0123456789` })
    gateway = await startGateway({
      server: { port, baseUrl },
      store: { type: 'redis', url: redis.url },
      providers: {
        google: { preset: 'google', issuer: op.issuer, ...client('google') },
        microsoft: { preset: 'microsoft', issuer: op.issuer, ...client('microsoft') },
        gitlab: { preset: 'gitlab', baseUrl: op.issuer, ...client('gitlab') },
        keycloak: { preset: 'keycloak', baseUrl: origin, realm: 'staff', ...client('keycloak') },
      },
      // Each forwards its own path: with rewritePrefix: / every preset's route would reach the others'
      // upstream paths to anyone signed in at its own provider, which does not start.
      routes: PRESETS.map((name) => ({ path: `/${name}/`, upstream: upstream.url, provider: name })),
    })
  })

  afterAll(async () => {
    await gateway?.close()
    await op?.close()
  })

  it('the test provider answers at the Keycloak realm path', () => {
    expect(new URL(op.issuer).pathname).toBe('/realms/staff')
  })

  it.each<[typeof PRESETS[number], Record<string, string | undefined>]>([
    ['google', { 'x-forwarded-user': 'alice@example.test', 'x-forwarded-email': 'alice@example.test' }],
    ['microsoft', { 'x-forwarded-user': 'alice@staff.example.test', 'x-forwarded-email': 'alice@example.test', 'x-forwarded-groups': 'admins,staff' }],
    ['gitlab', { 'x-forwarded-user': 'alice-gl', 'x-forwarded-email': 'alice@example.test', 'x-forwarded-groups': 'admins,staff' }],
    ['keycloak', { 'x-forwarded-user': 'alice@staff.example.test', 'x-forwarded-email': 'alice@example.test', 'x-forwarded-groups': 'admins,staff' }],
  ])('preset %s signs in and the upstream gets the bearer and the identity the preset maps', async (name, identity) => {
    const browser = new Browser()
    const response = await browser.navigate(`${gateway.url}/${name}/hello`, { login: 'alice' })
    expect(response.status).toBe(200)
    const seen = await response.json() as Seen
    expect(seen.url).toBe(`/${name}/hello`)
    expect(seen.headers).toMatchObject(identity)
    const authorization = seen.headers.authorization!
    expect(authorization).toMatch(/^Bearer \S+$/)
    // The bearer is the provider's own access token: its userinfo endpoint accepts it.
    const userinfo = await fetch(`${op.issuer}/me`, { headers: { authorization } })
    expect(userinfo.status).toBe(200)
    expect(await userinfo.json()).toMatchObject({ sub: 'alice' })
  })
})
