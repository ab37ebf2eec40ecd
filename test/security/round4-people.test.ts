// People are keyed on the provider's subject, never on a mapped, reassignable name.
// A real authorization server has two accounts (subjects `alice-a` and `alice-b`) whose
// `preferred_username` is the same `alice`, as a Keycloak realm or a Microsoft tenant lets a name pass
// to another account; the gateway maps the user from `preferred_username` (the keycloak and microsoft
// presets' mapping). Each signs in in its own cookie jar: the sessions list of one shows only its
// own sessions, sign out everywhere by one ends only its own, a `users:` allow rule naming the first
// one's subject does not admit the second, and a `deny` rule holds for the one it names (by subject, or
// by the shared name for both). Upstreams still see the name. Then GitHub: a `login` given to another
// account (another numeric `id`) is another person.
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { Browser } from '../helpers/browser.js'
import { oidcClient, reserveBaseUrl, sessionStatus, startGateway, type TestGateway } from '../helpers/gateway.js'
import { gatewayClient, startOidcProvider, type TestProvider } from '../helpers/oidc.js'
import { OCTOCAT, startGitHubStub, type GitHubStub } from '../helpers/provider-stubs.js'
import { startRedis, type TestRedis } from '../helpers/redis.js'
import { startUpstream, type Upstream } from '../helpers/upstream.js'

let redis: TestRedis
let op: TestProvider
let github: GitHubStub
let upstream: Upstream
let gateway: TestGateway

/** Both accounts call themselves alice: the provider lets a name pass from one account to another. */
const SAME_NAME = { profile: ['name', 'preferred_username'], openid: ['sub'], email: ['email', 'email_verified'] }

beforeAll(async () => {
  redis = await startRedis()
  upstream = await startUpstream()
  github = await startGitHubStub()
  const { port, baseUrl } = await reserveBaseUrl()
  op = await startOidcProvider([gatewayClient(baseUrl, 'corp', 'c')], {
    scopeClaims: SAME_NAME,
    extraClaims: () => ({ preferred_username: 'alice' }),
  })
  const route = (path: string, rules: Record<string, unknown> = {}) => ({ path, upstream: upstream.url, provider: 'corp', ...rules })
  gateway = await startGateway({
    server: { port, baseUrl },
    store: { type: 'redis', url: redis.url },
    providers: {
      corp: { ...oidcClient(op.issuer, 'c', 's', 'openid profile email'), claims: { user: 'preferred_username' } },
      github: { preset: 'github', baseUrl: github.url, clientId: github.clientId, clientSecret: github.clientSecret },
    },
    routes: [
      route('/app/'),
      route('/allow-a/', { allow: [{ users: ['alice-a'] }] }),
      route('/allow-name/', { allow: [{ users: ['alice'] }] }),
      route('/deny-a/', { deny: [{ users: ['alice-a'] }] }),
      route('/deny-name/', { deny: [{ users: ['alice'] }] }),
      { path: '/gh/', upstream: upstream.url, provider: 'github', allow: [{ users: [String(OCTOCAT.id)] }] },
      { path: '/gh-deny/', upstream: upstream.url, provider: 'github', deny: [{ users: [String(OCTOCAT.id)] }] },
    ],
  })
})

afterAll(async () => {
  await gateway?.close()
  await Promise.all([op?.close(), upstream?.close(), github?.close()])
  await redis?.release()
})

interface SignedIn { browser: Browser, cookie: string }

/** Signed in as the account `login` (its subject) in a cookie jar of its own. */
async function signedIn (login: string): Promise<SignedIn> {
  const browser = new Browser()
  expect((await browser.navigate(`${gateway.url}/app/`, { login })).status).toBe(200)
  return { browser, cookie: browser.cookies.get('gw_session')!.value }
}

async function listed (who: SignedIn): Promise<string[]> {
  const response = await who.browser.fetch(`${gateway.url}/oauth/sessions/`, { headers: { accept: 'application/json' } })
  expect(response.status).toBe(200)
  return ((await response.json()) as { sessions: Array<{ id: string }> }).sessions.map((session) => session.id)
}

async function status (who: SignedIn, path: string): Promise<number> {
  return (await who.browser.fetch(`${gateway.url}${path}`)).status
}

describe('two accounts with the same preferred_username', () => {
  it('each lists only its own sessions, and upstreams still see the shared name', async () => {
    const a1 = await signedIn('alice-a')
    const a2 = await signedIn('alice-a')
    const b = await signedIn('alice-b')
    expect((await listed(a1)).length).toBe(2)
    expect(await listed(a2)).toEqual(await listed(a1))
    const own = await listed(b)
    expect(own.length).toBe(1)
    for (const id of own) expect(await listed(a1)).not.toContain(id)
    const seen = await (await b.browser.fetch(`${gateway.url}/app/who`)).json() as { headers: Record<string, string> }
    expect(seen.headers['x-forwarded-user']).toBe('alice')
    // Another account's public id is not the second account's to revoke.
    const theirs = (await listed(a1))[0]!
    const revoke = await b.browser.fetch(`${gateway.url}/oauth/sessions/${theirs}/revoke`, { method: 'POST', headers: { accept: 'application/json' } })
    expect(revoke.status).toBe(404)
    expect(await sessionStatus(gateway, a1.cookie)).toBe(200)
  })

  it('sign out everywhere by one ends only its own sessions', async () => {
    const a = await signedIn('alice-a')
    const b1 = await signedIn('alice-b')
    const b2 = await signedIn('alice-b')
    const response = await b1.browser.fetch(`${gateway.url}/oauth/logout/?everywhere=1`, { method: 'POST', headers: { accept: 'application/json' } })
    expect(response.status).toBeLessThan(400)
    expect(await sessionStatus(gateway, b1.cookie)).toBe(401)
    expect(await sessionStatus(gateway, b2.cookie)).toBe(401)
    expect(await sessionStatus(gateway, a.cookie)).toBe(200)
  })

  it('an allow rule naming the first account\'s subject does not admit the second; the shared name admits neither', async () => {
    const a = await signedIn('alice-a')
    const b = await signedIn('alice-b')
    expect(await status(a, '/allow-a/x')).toBe(200)
    expect(await status(b, '/allow-a/x')).toBe(403)
    expect(await status(a, '/allow-name/x')).toBe(403)
    expect(await status(b, '/allow-name/x')).toBe(403)
  })

  it('a deny rule holds for the account it names by subject, and for both by the shared name', async () => {
    const a = await signedIn('alice-a')
    const b = await signedIn('alice-b')
    expect(await status(a, '/deny-a/x')).toBe(403)
    expect(await status(b, '/deny-a/x')).toBe(200)
    expect(await status(a, '/deny-name/x')).toBe(403)
    expect(await status(b, '/deny-name/x')).toBe(403)
  })
})

describe('GitHub: a login given to another account', () => {
  /** Signed in at the GitHub stand-in as `account`, on `path`. */
  async function atGitHub (account: typeof OCTOCAT, path: string): Promise<{ browser: Browser, status: number }> {
    github.account = account
    const browser = new Browser()
    return { browser, status: (await browser.navigate(`${gateway.url}${path}`)).status }
  }

  it('is another person: the allow rule on the numeric id admits only the first, the deny holds only for it, and their sessions stay apart', async () => {
    const reassigned = { ...OCTOCAT, id: 99_000_001, name: 'New Octocat' }
    const first = await atGitHub(OCTOCAT, '/gh/x')
    expect(first.status).toBe(200)
    const second = await atGitHub(reassigned, '/gh/x')
    expect(second.status).toBe(403)
    expect((await atGitHub(OCTOCAT, '/gh-deny/x')).status).toBe(403)
    const other = await atGitHub(reassigned, '/gh-deny/x')
    expect(other.status).toBe(200)
    const seen = await (await other.browser.fetch(`${gateway.url}/gh-deny/who`)).json() as { headers: Record<string, string> }
    expect(seen.headers['x-forwarded-user']).toBe('octocat')
    // Each signed in twice (the refused sign-ins made sessions too): each lists its own two.
    const list = async (browser: Browser) => ((await (await browser.fetch(`${gateway.url}/oauth/sessions/`, { headers: { accept: 'application/json' } })).json()) as { sessions: Array<{ id: string }> }).sessions.map((s) => s.id)
    const theirs = await list(first.browser)
    const own = await list(other.browser)
    expect([theirs.length, own.length]).toEqual([2, 2])
    for (const id of own) expect(theirs).not.toContain(id)
  })
})
