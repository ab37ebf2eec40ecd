// Your sessions, revoke, and sign out everywhere, against a real authorization server and two
// gateway instances on one Redis (sessions cached 10 s, so an instance that missed the broadcast
// would still serve an ended session): alice signs in from several browsers, bob from one. The list
// shows one's own sessions only, the current one marked; revoking ends a session on both
// instances; another person's public id is 404; a cross-site revoke ends nothing; "everywhere" ends
// every session of the person and no one else's. Hostile public ids each get a 4xx and end nothing.
import { Redis } from 'ioredis'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { Browser } from '../helpers/browser.js'
import { endedElsewhere, oidcClient, reserveBaseUrl, sessionStatus, startGateway, type TestGateway } from '../helpers/gateway.js'
import { gatewayClient, startOidcProvider, type TestProvider } from '../helpers/oidc.js'
import { startRedis, type TestRedis } from '../helpers/redis.js'
import { startUpstream, type Upstream } from '../helpers/upstream.js'

const FIREFOX = 'Mozilla/5.0 (X11; Linux x86_64; rv:128.0) Gecko/20100101 Firefox/128.0'
const CHROME = 'Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Safari/537.36'

let redis: TestRedis
let op: TestProvider
let upstream: Upstream
let first: TestGateway
let second: TestGateway

beforeAll(async () => {
  redis = await startRedis()
  upstream = await startUpstream()
  const { port, baseUrl } = await reserveBaseUrl()
  op = await startOidcProvider([gatewayClient(baseUrl, 'demo', 'c')])
  const raw = {
    session: { cacheTtl: '10s' },
    store: { type: 'redis', url: redis.url },
    providers: { demo: oidcClient(op.issuer, 'c', 's', 'openid email') },
    routes: [{ path: '/app/', upstream: upstream.url, provider: 'demo' }],
  }
  first = await startGateway({ ...raw, server: { port, baseUrl } })
  second = await startGateway(raw)
})

afterAll(async () => {
  await Promise.all([first?.close(), second?.close()])
  await Promise.all([op?.close(), upstream?.close()])
  await redis?.release()
})

/** A browser that sends `userAgent` with every request. */
class AgentBrowser extends Browser {
  constructor (private readonly userAgent: string) { super() }

  override async fetch (url: string, init: RequestInit = {}): Promise<Response> {
    const headers = new Headers(init.headers)
    headers.set('user-agent', this.userAgent)
    return await super.fetch(url, { ...init, headers })
  }
}

interface SignedIn { browser: AgentBrowser, cookie: string }

/** `login` signed in at the first instance from a browser that calls itself `userAgent`; the session used on both instances (cached on each). */
async function signedIn (login: string, userAgent: string): Promise<SignedIn> {
  const browser = new AgentBrowser(userAgent)
  expect((await browser.navigate(`${first.url}/app/`, { login })).status).toBe(200)
  const cookie = browser.cookies.get('gw_session')!.value
  for (const gateway of [first, second]) expect(await sessionStatus(gateway, cookie)).toBe(200)
  return { browser, cookie }
}

interface Listed { id: string, started: string, lastSeen: string, browser: string, providers: string[], current: boolean }

async function list (who: SignedIn, on = first): Promise<Listed[]> {
  const response = await who.browser.fetch(`${on.url}/oauth/sessions/`, { headers: { accept: 'application/json' } })
  expect(response.status).toBe(200)
  return ((await response.json()) as { sessions: Listed[] }).sessions
}

function revoke (who: SignedIn, id: string, on = first, headers: Record<string, string> = { accept: 'application/json' }): Promise<Response> {
  return who.browser.fetch(`${on.url}/oauth/sessions/${id}/revoke`, { method: 'POST', headers })
}

/** Ended on `on` at once (it handled it), and on the other instance within a second (the broadcast). */
async function endedEverywhere (cookie: string, on = first): Promise<void> {
  expect(await sessionStatus(on, cookie)).toBe(401)
  await endedElsewhere(on === first ? second : first, cookie)
}

describe('your sessions', () => {
  it('lists only the person\'s own sessions, the current one marked, with browser, times and providers; from either instance', async () => {
    const firefox = await signedIn('list-alice', FIREFOX)
    const chrome = await signedIn('list-alice', CHROME)
    const bob = await signedIn('list-bob', 'curl/8.5.0')
    const seen = await list(firefox, second)
    expect(seen.map((s) => [s.browser, s.current, s.providers])).toEqual([['Chrome', false, ['demo']], ['Firefox', true, ['demo']]])
    for (const s of seen) {
      expect(s.id).toMatch(/^[A-Za-z0-9_-]{22}$/)
      expect(s.id).not.toBe(firefox.cookie)
      expect(Date.parse(s.lastSeen)).toBeGreaterThanOrEqual(Date.parse(s.started))
    }
    expect((await list(chrome)).map((s) => [s.browser, s.current])).toEqual([['Chrome', true], ['Firefox', false]])
    expect((await list(bob)).map((s) => [s.browser, s.current])).toEqual([['curl', true]])

    const page = await firefox.browser.fetch(`${first.url}/oauth/sessions/`)
    expect(page.headers.get('content-type')).toMatch(/^text\/html/)
    const html = await page.text()
    expect(html).toContain('(this browser)')
    // Another session's row revokes it; this browser's own row signs out (the providers' sign-out included).
    for (const s of seen) {
      if (s.current) expect(html).not.toContain(`action="/oauth/sessions/${s.id}/revoke"`)
      else expect(html).toContain(`action="/oauth/sessions/${s.id}/revoke"`)
    }
    expect(html).toContain('action="/oauth/logout/"')
    expect(html).toContain('action="/oauth/logout/?everywhere=1"')
    // Linked from the home page, with the everywhere button.
    const home = await (await firefox.browser.fetch(`${first.url}/oauth/`)).text()
    expect(home).toContain('href="/oauth/sessions/"')
    expect(home).toContain('action="/oauth/logout/?everywhere=1"')
  })

  it('not signed in: 401 for an API client, the sign-in page\'s remedy for a browser, as /oauth/userinfo/', async () => {
    const response = await fetch(`${first.url}/oauth/sessions/`, { headers: { accept: 'application/json' } })
    expect(response.status).toBe(401)
    expect(((await response.json()) as { error: string }).error).toBe('unauthenticated')
    const userinfo = await fetch(`${first.url}/oauth/userinfo/`, { headers: { accept: 'text/html' } })
    const page = await fetch(`${first.url}/oauth/sessions/`, { headers: { accept: 'text/html' } })
    expect(page.status).toBe(userinfo.status)
  })

  it('a store dump shows no user id, public id or browser', async () => {
    const alice = await signedIn('dump-alice-unique', FIREFOX)
    const [listed] = await list(alice)
    const raw = new Redis(redis.url)
    try {
      const keys = await raw.keys('*person:*')
      expect(keys.length).toBeGreaterThan(0)
      const dump = [...keys, ...(await Promise.all(keys.map((key) => raw.zrange(key, 0, -1)))).flat()].join(' ')
      for (const secret of ['dump-alice-unique', listed!.id, 'Firefox']) expect(dump).not.toContain(secret)
    } finally {
      raw.disconnect()
    }
  })
})

describe('revoke', () => {
  it('ends that session on both instances; the others go on', async () => {
    const firefox = await signedIn('revoke-alice', FIREFOX)
    const chrome = await signedIn('revoke-alice', CHROME)
    const target = (await list(firefox)).find((s) => !s.current)!
    const response = await revoke(firefox, target.id, second)
    expect(response.status).toBe(200)
    expect(await response.json()).toEqual({ revoked: true })
    await endedEverywhere(chrome.cookie, second)
    expect(await sessionStatus(first, firefox.cookie)).toBe(200)
    expect((await list(firefox)).map((s) => s.browser)).toEqual(['Firefox'])
    // Once more: it is gone.
    expect((await revoke(firefox, target.id)).status).toBe(404)
  })

  it("a browser's form POST: 303 back to the list; revoking its own session signs it out", async () => {
    const firefox = await signedIn('revoke-own', FIREFOX)
    const chrome = await signedIn('revoke-own', CHROME)
    const [newest, own] = await list(firefox)
    expect(own!.current).toBe(true)
    const other = await revoke(firefox, newest!.id, first, { accept: 'text/html', 'content-type': 'application/x-www-form-urlencoded' })
    expect([other.status, other.headers.get('location')]).toEqual([303, '/oauth/sessions/'])
    await endedEverywhere(chrome.cookie)
    const self = await revoke(firefox, own!.id, first, { accept: 'text/html' })
    expect([self.status, self.headers.get('location')]).toEqual([303, '/oauth/'])
    expect(self.headers.getSetCookie().join()).toMatch(/gw_session=;/)
    await endedEverywhere(firefox.cookie)
  })

  it("another person's public id is 404 and ends nothing", async () => {
    const alice = await signedIn('owner-alice', FIREFOX)
    const bob = await signedIn('owner-bob', FIREFOX)
    const [bobs] = await list(bob)
    const response = await revoke(alice, bobs!.id)
    expect(response.status).toBe(404)
    expect(((await response.json()) as { error: string }).error).toBe('not_found')
    expect(await sessionStatus(first, bob.cookie)).toBe(200)
    expect(await list(bob)).toHaveLength(1)
  })

  it('a POST another site made the browser send is refused and ends nothing', async () => {
    const firefox = await signedIn('csrf-alice', FIREFOX)
    const chrome = await signedIn('csrf-alice', CHROME)
    const target = (await list(firefox)).find((s) => !s.current)!
    const foreign: Array<Record<string, string>> = [{ 'sec-fetch-site': 'cross-site' }, { 'sec-fetch-site': 'same-site' }, { origin: 'https://evil.example' }, { origin: 'null' }]
    for (const headers of foreign) {
      const response = await revoke(firefox, target.id, first, { accept: 'application/json', ...headers })
      expect(response.status, JSON.stringify(headers)).toBe(403)
    }
    expect(await sessionStatus(first, chrome.cookie)).toBe(200)
    expect(await list(firefox)).toHaveLength(2)
  })

  it('a hostile public id gets a 4xx and ends nothing', async () => {
    const firefox = await signedIn('hostile-alice', FIREFOX)
    const chrome = await signedIn('hostile-alice', CHROME)
    const [listed] = await list(firefox)
    const table: Array<[string, string, number]> = [
      ['the other session\'s cookie', chrome.cookie, 404],
      ['a made-up id of the right shape', 'A'.repeat(22), 404],
      ['the right id, one character changed', `${listed!.id.slice(0, 21)}${listed!.id.endsWith('A') ? 'B' : 'A'}`, 404],
      ['the right id and more', `${listed!.id}x`, 404],
      ['too short', 'abc', 404],
      ['dots', '..', 404],
      // The edge refuses an encoded slash before any route (src/config/canonical.ts).
      ['an encoded slash', '..%2F..%2Foauth', 400],
      ['a NUL', `${listed!.id.slice(0, 21)}%00`, 400],
      ['markup', '%3Cscript%3E', 404],
      ['a broken escape', '%E0%A4%A', 400],
      ['very long (past the router\'s parameter length)', 'A'.repeat(4000), 400],
      ['unicode', '%C3%A9'.repeat(22), 404],
    ]
    for (const [name, id, status] of table) {
      const response = await revoke(firefox, id)
      expect(response.status, name).toBe(status)
      await response.arrayBuffer()
    }
    for (const who of [firefox, chrome]) expect(await sessionStatus(first, who.cookie)).toBe(200)
    expect(await list(firefox)).toHaveLength(2)
    // An empty id is no route of revoke's.
    expect((await revoke(firefox, '')).status).toBe(404)
  })
})

describe('sign out everywhere', () => {
  it("ends every session of the person on both instances, and nobody else's", async () => {
    const sessions = [await signedIn('all-alice', FIREFOX), await signedIn('all-alice', CHROME), await signedIn('all-alice', 'curl/8.5.0')]
    const bob = await signedIn('all-bob', FIREFOX)
    const response = await sessions[0]!.browser.fetch(`${first.url}/oauth/logout/?everywhere=1`, { method: 'POST', headers: { accept: 'application/json' } })
    expect(response.status).toBe(302)
    for (const { cookie } of sessions) await endedEverywhere(cookie)
    expect(await sessionStatus(first, bob.cookie)).toBe(200)
    expect(await sessionStatus(second, bob.cookie)).toBe(200)
  })

  it('asked by another site: only the confirmation page, whose button keeps "everywhere"; nothing ends before it', async () => {
    const firefox = await signedIn('confirm-alice', FIREFOX)
    const chrome = await signedIn('confirm-alice', CHROME)
    const asked = await firefox.browser.fetch(`${first.url}/oauth/logout/?everywhere=1`, { method: 'POST', headers: { 'sec-fetch-site': 'cross-site' } })
    expect(asked.status).toBe(200)
    expect(await asked.text()).toContain('<input type="hidden" name="everywhere" value="1">')
    for (const who of [firefox, chrome]) expect(await sessionStatus(first, who.cookie)).toBe(200)
    // The button: a same-origin form POST of that field.
    const confirmed = await firefox.browser.fetch(`${first.url}/oauth/logout/`, {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded', 'sec-fetch-site': 'same-origin' },
      body: 'everywhere=1',
    })
    expect(confirmed.status).toBe(200)
    for (const who of [firefox, chrome]) await endedEverywhere(who.cookie)
  })

  it('a plain sign-out ends only its own session', async () => {
    const firefox = await signedIn('plain-alice', FIREFOX)
    const chrome = await signedIn('plain-alice', CHROME)
    await (await firefox.browser.fetch(`${first.url}/oauth/logout/`, { method: 'POST', headers: { accept: 'application/json' } })).arrayBuffer()
    await endedEverywhere(firefox.cookie)
    expect(await sessionStatus(first, chrome.cookie)).toBe(200)
    expect((await list(chrome)).map((s) => s.browser)).toEqual(['Chrome'])
  })
})
