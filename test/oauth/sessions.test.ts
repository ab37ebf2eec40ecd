// Your sessions, revoke, and sign out everywhere, against a real authorization server and two
// gateway instances on one Redis (sessions cached 10 s, so an instance that missed the broadcast
// would still serve an ended session): alice signs in from several browsers, bob from one. The list
// shows one's own sessions only, the current one marked, each with its browser, operating system
// and the address it signed in from (the first instance trusts its loopback peer as a proxy, so a
// browser's X-Forwarded-For is its address); a browser's Revoke asks first and only the answer's
// POST ends the session; revoking ends a session on both instances; another person's public id is
// 404, asked or revoked; a cross-site revoke ends nothing; "everywhere" ends every session of the
// person and no one else's. Hostile public ids each get a 4xx and end nothing.
import { Redis } from 'ioredis'
import { afterAll, describe, expect } from 'vitest'
import { Browser } from '../helpers/browser.js'
import { endedElsewhere, oidcClient, sessionStatus, startGateway, type TestGateway } from '../helpers/gateway.js'
import type { TestRedis } from '../helpers/redis.js'
import { test as it } from '../helpers/stack.js'

const FIREFOX = 'Mozilla/5.0 (X11; Linux x86_64; rv:128.0) Gecko/20100101 Firefox/128.0'
const CHROME = 'Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Safari/537.36'
const CHROME_MAC = 'Mozilla/5.0 (Macintosh; Intel Mac OS X 10_15_7) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Safari/537.36'
const SAFARI_IPHONE = 'Mozilla/5.0 (iPhone; CPU iPhone OS 17_5 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.5 Mobile/15E148 Safari/604.1'
/** A browser's form POST from the gateway's own page. */
const FORM = { accept: 'text/html', 'content-type': 'application/x-www-form-urlencoded', 'sec-fetch-site': 'same-origin' }

let redis: TestRedis
let first: TestGateway
let second: TestGateway

it.beforeAll(async ({ startStack, op, redis: fileRedis, upstream }) => {
  redis = fileRedis
  const raw = {
    session: { cacheTtl: '10s' },
    store: { type: 'redis', url: redis.url },
    providers: { demo: oidcClient(op.issuer, 'c', 's', 'openid email') },
    routes: [{ path: '/app/', upstream: upstream.url, provider: 'demo' }],
  }
  // Its peer (the test, on loopback) is a trusted proxy: a browser's X-Forwarded-For is its address.
  first = await startStack({ ...raw, server: { trustProxy: ['127.0.0.1'] } })
  second = await startGateway(raw)
})

afterAll(async () => {
  await second?.close()
})

/** A browser that sends `userAgent` with every request, and `forwardedFor` as its X-Forwarded-For. */
class AgentBrowser extends Browser {
  constructor (private readonly userAgent: string, private readonly forwardedFor?: string) { super() }

  override async fetch (url: string, init: RequestInit = {}): Promise<Response> {
    const headers = new Headers(init.headers)
    headers.set('user-agent', this.userAgent)
    if (this.forwardedFor !== undefined) headers.set('x-forwarded-for', this.forwardedFor)
    return await super.fetch(url, { ...init, headers })
  }
}

interface SignedIn { browser: AgentBrowser, cookie: string }

/**
 * `login` signed in at the first instance from a browser that calls itself `userAgent` (at
 * `forwardedFor`, else the loopback address); the session used on both instances (cached on each).
 */
async function signedIn (login: string, userAgent: string, forwardedFor?: string): Promise<SignedIn> {
  const browser = new AgentBrowser(userAgent, forwardedFor)
  expect((await browser.navigate(`${first.url}/app/`, { login })).status).toBe(200)
  const cookie = browser.cookies.get('gw_session')!.value
  for (const gateway of [first, second]) expect(await sessionStatus(gateway, cookie)).toBe(200)
  return { browser, cookie }
}

interface Listed { id: string, started: string, lastSeen: string, browser: string, os?: string, address?: string, providers: string[], current: boolean }

async function list (who: SignedIn, on = first): Promise<Listed[]> {
  const response = await who.browser.fetch(`${on.url}/oauth/sessions/`, { headers: { accept: 'application/json' } })
  expect(response.status).toBe(200)
  return ((await response.json()) as { sessions: Listed[] }).sessions
}

function revoke (who: SignedIn, id: string, on = first, headers: Record<string, string> = { accept: 'application/json' }, body?: string): Promise<Response> {
  return who.browser.fetch(`${on.url}/oauth/sessions/${id}/revoke`, { method: 'POST', headers, ...(body === undefined ? {} : { body }) })
}

/** The confirmation page's GET (a browser's, unless `accept` says otherwise). */
function askToRevoke (who: SignedIn, id: string, accept = 'text/html'): Promise<Response> {
  return who.browser.fetch(`${first.url}/oauth/sessions/${id}/revoke`, { headers: { accept } })
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
    // Another session's row leads to the question before its revoke (a link: nothing ends from the
    // list); this browser's own row signs out (the providers' sign-out included).
    expect(html).not.toMatch(/action="\/oauth\/sessions\//)
    for (const s of seen) {
      if (s.current) expect(html).not.toContain(`href="/oauth/sessions/${s.id}/revoke"`)
      else expect(html).toContain(`href="/oauth/sessions/${s.id}/revoke"`)
    }
    expect(html).toContain('action="/oauth/logout/"')
    expect(html).toContain('action="/oauth/logout/?everywhere=1"')
    // Linked from the home page, with the everywhere button.
    const home = await (await firefox.browser.fetch(`${first.url}/oauth/`)).text()
    expect(home).toContain('href="/oauth/sessions/"')
    expect(home).toContain('action="/oauth/logout/?everywhere=1"')
  })

  it('tells sessions apart: each with its browser, operating system and the address it signed in from, in JSON and on the page', async () => {
    const mac = await signedIn('apart-alice', CHROME_MAC, '203.0.113.7')
    const linux = await signedIn('apart-alice', FIREFOX, '2001:db8:aaaa:bbbb:1:2:3:4')
    // Only the hop the trusted proxy (the peer) appended counts; what the client wrote before it does not.
    const phone = await signedIn('apart-alice', SAFARI_IPHONE, '198.51.100.23, 10.0.0.9')
    // No X-Forwarded-For: the peer's own address.
    const script = await signedIn('apart-alice', 'curl/8.5.0')
    // Markup as the browser and as the address: escaped, and no address kept.
    const hostile = await signedIn('apart-alice', '<b>Chrome/1</b>\t(Windows)', '<script>alert(1)</script>')
    const seen = await list(mac, second)
    expect(seen.map(({ browser, os, address, current }) => ({ browser, os, address, current }))).toEqual([
      { browser: 'Chrome', os: 'Windows', address: undefined, current: false },
      { browser: 'curl', os: 'other', address: '127.0.0.1', current: false },
      { browser: 'Safari', os: 'iOS', address: '10.0.0.9', current: false },
      { browser: 'Firefox', os: 'Linux', address: '2001:db8:aaaa:bbbb::/64', current: false },
      { browser: 'Chrome', os: 'macOS', address: '203.0.113.7', current: true },
    ])

    const html = await (await mac.browser.fetch(`${first.url}/oauth/sessions/`)).text()
    const rows = html.split('<tr').slice(2)
    expect(rows).toHaveLength(5)
    const row = (id: string) => rows.find((r) => r.includes(`href="/oauth/sessions/${id}/revoke"`))!
    expect(rows.find((r) => r.startsWith(' class="current"'))).toContain('<td>Chrome on macOS <strong>(this browser)</strong></td><td data-label="Signed in from"><code>203.0.113.7</code></td>')
    expect(row(seen[3]!.id)).toContain('Firefox on Linux</td><td data-label="Signed in from"><code>2001:db8:aaaa:bbbb::/64</code>')
    expect(row(seen[2]!.id)).toContain('Safari on iOS</td><td data-label="Signed in from"><code>10.0.0.9</code>')
    expect(row(seen[1]!.id)).toContain('<td>curl</td><td data-label="Signed in from"><code>127.0.0.1</code>')
    expect(row(seen[0]!.id)).toContain('<td>Chrome on Windows</td><td data-label="Signed in from">&mdash;</td>')
    expect(html).not.toContain('<script>alert')
    expect(html).not.toContain('<b>')
    for (const who of [linux, phone, script, hostile]) expect(await sessionStatus(first, who.cookie)).toBe(200)
  })

  it('not signed in: 401 for an API client; a browser is sent to sign in at the one provider, and back here', async () => {
    const response = await fetch(`${first.url}/oauth/sessions/`, { headers: { accept: 'application/json' } })
    expect(response.status).toBe(401)
    expect(((await response.json()) as { error: string }).error).toBe('unauthenticated')
    // A person who approved an agent from a CLI may never have signed in here (a newcomer read the
    // 401 page they got as a failure): as a protected route does, the page sends them to sign in.
    const page = await fetch(`${first.url}/oauth/sessions/`, { headers: { accept: 'text/html' }, redirect: 'manual' })
    expect(page.status).toBe(302)
    expect(page.headers.get('location')).toBe(`${first.url}/oauth/login/demo/?next=%2Foauth%2Fsessions%2F`)
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

  it("a browser's Revoke asks first: the question's GET names the session and ends nothing; only its button's POST does", async () => {
    const firefox = await signedIn('confirm-ask', FIREFOX, '192.0.2.10')
    const chrome = await signedIn('confirm-ask', CHROME_MAC, '192.0.2.20')
    const target = (await list(firefox)).find((s) => !s.current)!
    const asked = await askToRevoke(firefox, target.id)
    expect(asked.status).toBe(200)
    expect(asked.headers.get('content-type')).toMatch(/^text\/html/)
    expect(asked.headers.get('x-frame-options')).toBe('DENY')
    const page = await asked.text()
    expect(page).toContain('<h1>Revoke this session?</h1>')
    expect(page).toContain('Chrome on macOS')
    expect(page).toContain('<code>192.0.2.20</code>')
    expect(page).toContain(`<dd>${target.started.slice(0, 16).replace('T', ' ')} UTC</dd>`)
    expect(page).toContain(`<form method="post" action="/oauth/sessions/${target.id}/revoke"><input type="hidden" name="confirm" value="1"><button type="submit" class="button">Revoke this session</button></form>`)
    expect(page).toContain('<a href="/oauth/sessions/">Cancel</a>')
    // Asked again, and by an API client: still nothing ended.
    expect(((await (await askToRevoke(firefox, target.id, 'application/json')).json()) as { session: Listed }).session).toMatchObject({ id: target.id, browser: 'Chrome', os: 'macOS', address: '192.0.2.20' })
    expect(await sessionStatus(first, chrome.cookie)).toBe(200)
    expect(await sessionStatus(second, chrome.cookie)).toBe(200)
    expect(await list(firefox)).toHaveLength(2)

    // A browser's POST without the answer (a list page from before the question) is asked it, and ends nothing.
    const unanswered = await revoke(firefox, target.id, first, FORM, '')
    expect([unanswered.status, unanswered.headers.get('location')]).toEqual([303, `/oauth/sessions/${target.id}/revoke`])
    expect(await sessionStatus(first, chrome.cookie)).toBe(200)

    const answered = await revoke(firefox, target.id, first, FORM, 'confirm=1')
    expect([answered.status, answered.headers.get('location')]).toEqual([303, '/oauth/sessions/?revoked=1'])
    await endedEverywhere(chrome.cookie)
    expect((await list(firefox)).map((s) => s.current)).toEqual([true])
  })

  it("the question for an id the person does not hold is 404, as the revoke is: another person's, a made-up one, one already revoked", async () => {
    const alice = await signedIn('confirm-owner-alice', FIREFOX)
    const bob = await signedIn('confirm-owner-bob', CHROME)
    const [bobs] = await list(bob)
    for (const id of [bobs!.id, 'A'.repeat(22), '%3Cscript%3E']) {
      const page = await askToRevoke(alice, id)
      expect(page.status, id).toBe(404)
      expect(await page.text(), id).not.toContain('Revoke this session')
      const json = await askToRevoke(alice, id, 'application/json')
      expect([json.status, ((await json.json()) as { error: string }).error], id).toEqual([404, 'not_found'])
      // A browser's POST without the answer is 404 too, not sent to a question that is not there.
      expect((await revoke(alice, id, first, FORM, '')).status, id).toBe(404)
    }
    expect(await sessionStatus(first, bob.cookie)).toBe(200)
    // Not signed in: as the list.
    expect((await fetch(`${first.url}/oauth/sessions/${bobs!.id}/revoke`, { headers: { accept: 'application/json' } })).status).toBe(401)
  })

  it("a browser's answered POST: 303 back to the list; revoking its own session signs it out", async () => {
    const firefox = await signedIn('revoke-own', FIREFOX)
    const chrome = await signedIn('revoke-own', CHROME)
    const [newest, own] = await list(firefox)
    expect(own!.current).toBe(true)
    const other = await revoke(firefox, newest!.id, first, FORM, 'confirm=1')
    expect([other.status, other.headers.get('location')]).toEqual([303, '/oauth/sessions/?revoked=1'])
    await endedEverywhere(chrome.cookie)
    // The list it goes back to says what happened (a newcomer's reading: the row only disappeared).
    const back = await firefox.browser.fetch(`${first.url}/oauth/sessions/?revoked=1`, { headers: { accept: 'text/html' } })
    expect(await back.text()).toContain('The session was revoked')
    // Not when another site's link says so: a link cannot tell a person that one of their sessions was ended.
    const told = await firefox.browser.fetch(`${first.url}/oauth/sessions/?revoked=1`, { headers: { accept: 'text/html', 'sec-fetch-site': 'cross-site' } })
    expect(await told.text()).not.toContain('was revoked')
    // Its own session's question says so.
    expect(await (await askToRevoke(firefox, own!.id)).text()).toContain('This is the browser you are using now')
    const self = await revoke(firefox, own!.id, first, FORM, 'confirm=1')
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
      // The question's own form, answered, from another site: refused all the same.
      const answered = await revoke(firefox, target.id, first, { ...FORM, ...headers }, 'confirm=1')
      expect(answered.status, JSON.stringify(headers)).toBe(403)
      await answered.arrayBuffer()
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
      // The question before a revoke: the same answer, and no page for it.
      const asked = await askToRevoke(firefox, id)
      expect(asked.status, name).toBe(status)
      expect(await asked.text(), name).not.toContain('Revoke this session')
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
