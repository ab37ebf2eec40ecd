// Sign-out and sign-in integrity: a cross-site request cannot end a session (it only gets a
// confirmation page whose button POSTs), a plain browser form can, proxied bodies stay untouched,
// a sign-in retires the browser's previous session id at once on every instance, and a sign-out with
// a cookie that opens no session costs the store no write and no broadcast.
import { createServer } from 'node:http'
import { Redis } from 'ioredis'
import { afterAll, describe, expect } from 'vitest'
import { Browser } from '../helpers/browser.js'
import { endedElsewhere, oidcClient, sessionStatus, startGateway, type TestGateway } from '../helpers/gateway.js'
import { close, listen } from '../helpers/net.js'
import type { TestRedis } from '../helpers/redis.js'
import { test as it } from '../helpers/stack.js'
import { randomToken } from '../../src/session/seal.js'

let redis: TestRedis
let gateway: TestGateway
let second: TestGateway
let bodies: ReturnType<typeof createServer>
let bodiesUrl: string
const received: Array<{ type: string | undefined, body: string }> = []

it.beforeAll(async ({ startStack, op, redis: fileRedis, upstream }) => {
  redis = fileRedis
  bodies = createServer((req, res) => {
    const chunks: Buffer[] = []
    req.on('data', (chunk: Buffer) => chunks.push(chunk))
    req.on('end', () => {
      received.push({ type: req.headers['content-type'], body: Buffer.concat(chunks).toString() })
      res.end('ok')
    })
  })
  bodiesUrl = await listen(bodies)
  const raw = {
    // A long cache, so a stale cached session would show.
    session: { cacheTtl: '10s' },
    store: { type: 'redis', url: redis.url },
    providers: { demo: oidcClient(op.issuer, 'c', 's') },
    routes: [
      { path: '/app/', upstream: upstream.url, provider: 'demo' },
      { path: '/form/', upstream: bodiesUrl, auth: 'none' },
    ],
  }
  gateway = await startStack(raw)
  second = await startGateway(raw)
})

afterAll(async () => {
  await Promise.all([gateway?.close(), second?.close()])
  if (bodies) await close(bodies)
})

async function signedIn (): Promise<{ browser: Browser, cookie: string }> {
  const browser = new Browser()
  expect((await browser.navigate(`${gateway.url}/app/`)).status).toBe(200)
  return { browser, cookie: browser.cookies.get('gw_session')!.value }
}

async function sessionWorks (cookie: string, on = gateway): Promise<boolean> {
  return await sessionStatus(on, cookie) === 200
}

function logout (cookie: string, headers: Record<string, string>, init: RequestInit = {}, query = '?next=%2Fapp%2Fbye') {
  return fetch(`${gateway.url}/oauth/logout/${query}`, { redirect: 'manual', ...init, headers: { accept: 'text/html', cookie: `gw_session=${cookie}`, ...headers } })
}

describe('logout from another site only asks', () => {
  it.each([
    ['Sec-Fetch-Site: cross-site', { 'sec-fetch-site': 'cross-site' }],
    ['Sec-Fetch-Site: same-site (a sibling host)', { 'sec-fetch-site': 'same-site' }],
    ['a foreign Origin', { origin: 'https://evil.example' }],
    ['Origin: null', { origin: 'null' }],
    ['a same-origin Sec-Fetch-Site with a foreign Origin', { 'sec-fetch-site': 'same-origin', origin: 'https://evil.example' }],
    // An outside tester's finding: an image (or a frame, a script) in an application's own page.
    ['an <img> on a page of the gateway\'s own origin', { 'sec-fetch-site': 'same-origin', 'sec-fetch-dest': 'image', 'sec-fetch-mode': 'no-cors' }],
    ['an <iframe> on a page of the gateway\'s own origin', { 'sec-fetch-site': 'same-origin', 'sec-fetch-dest': 'iframe', 'sec-fetch-mode': 'navigate' }],
    ['a <script> on a page of the gateway\'s own origin', { 'sec-fetch-site': 'same-origin', 'sec-fetch-dest': 'script', 'sec-fetch-mode': 'no-cors' }],
    ['an image from a browser that sends no Fetch Metadata', { accept: 'image/avif,image/webp,image/png,*/*;q=0.5' }],
    // A re-reader's finding: a page's <link rel=preload as=fetch crossorigin>, as Chromium 156 sends
    // it (without crossorigin its mode is no-cors, which Node's fetch does not let a test send).
    ['a <link rel=preload as=fetch crossorigin>', () => ({ 'sec-fetch-site': 'same-origin', 'sec-fetch-dest': 'empty', 'sec-fetch-mode': 'cors', origin: new URL(gateway.url).origin })],
  ])('GET with %s answers 200 with a confirmation page and keeps the session', async (_name, headers) => {
    const { cookie } = await signedIn()
    const response = await logout(cookie, typeof headers === 'function' ? headers() : headers)
    expect(response.status).toBe(200)
    expect(response.headers.get('content-type')).toMatch(/^text\/html/)
    expect(response.headers.getSetCookie()).toEqual([])
    const page = await response.text()
    expect(page).toContain('<form method="post" action="/oauth/logout/">')
    expect(page).toContain('<input type="hidden" name="next" value="/app/bye">')
    expect(page).toMatch(/<button type="submit"[^>]*>Sign out<\/button>/)
    // Not to be framed by the site that sent the browser here (clickjacking the button).
    expect(response.headers.get('content-security-policy')).toContain("frame-ancestors 'none'")
    expect(response.headers.get('x-frame-options')).toBe('DENY')
    expect(await sessionWorks(cookie)).toBe(true)
  })

  it('a cross-site form POST also only gets the confirmation page', async () => {
    const { cookie } = await signedIn()
    const response = await logout(cookie, { 'sec-fetch-site': 'cross-site', origin: 'https://evil.example', 'content-type': 'application/x-www-form-urlencoded' }, { method: 'POST', body: 'next=%2Fapp%2F' }, '')
    expect(response.status).toBe(200)
    expect(await response.text()).toContain('action="/oauth/logout/"')
    expect(await sessionWorks(cookie)).toBe(true)
  })

  it('leaves the hidden next out when there was none, and escapes one that would break the page', async () => {
    const { cookie } = await signedIn()
    const bare = await (await logout(cookie, { 'sec-fetch-site': 'cross-site' }, {}, '')).text()
    expect(bare).toContain('<form method="post" action="/oauth/logout/">')
    expect(bare).not.toContain('name="next"')
    const page = await (await logout(cookie, { 'sec-fetch-site': 'cross-site' }, {}, '?next=%2F%22%3E%3Cscript%3E')).text()
    expect(page).not.toContain('"><script>')
    expect(page).toMatch(/<input type="hidden" name="next" value="\/[^"<>]*">/)
  })
})

describe('logout from the gateway itself signs out', () => {
  it.each([
    ['Sec-Fetch-Site: same-origin', { 'sec-fetch-site': 'same-origin' }],
    ['Sec-Fetch-Site: none (typed or bookmarked)', { 'sec-fetch-site': 'none' }],
    ['the gateway\'s own Origin', () => ({ origin: new URL(gateway.url).origin })],
    ['neither header', {}],
    ['a link the person followed (Sec-Fetch-Dest: document)', { 'sec-fetch-site': 'same-origin', 'sec-fetch-dest': 'document', 'sec-fetch-mode': 'navigate' }],
    ['a script of the application\'s own (fetch: Sec-Fetch-Dest: empty)', { 'sec-fetch-site': 'same-origin', 'sec-fetch-dest': 'empty', 'sec-fetch-mode': 'same-origin' }],
  ])('GET with %s ends the session and redirects to next', async (_name, headers) => {
    const { cookie } = await signedIn()
    const response = await logout(cookie, typeof headers === 'function' ? headers() : headers)
    expect([response.status, response.headers.get('location')]).toEqual([302, '/app/bye'])
    expect(response.headers.getSetCookie()[0]).toMatch(/^gw_session=; Max-Age=0; Path=\//)
    expect(await sessionWorks(cookie)).toBe(false)
  })

  it('the confirmation page\'s button (a same-origin form POST) ends the session and goes to next from the body', async () => {
    const { cookie } = await signedIn()
    const page = await (await logout(cookie, { 'sec-fetch-site': 'cross-site' })).text()
    const next = /name="next" value="([^"]*)"/.exec(page)![1]!
    const response = await logout(cookie, { 'sec-fetch-site': 'same-origin', origin: new URL(gateway.url).origin, 'content-type': 'application/x-www-form-urlencoded' },
      { method: 'POST', body: new URLSearchParams({ next }).toString() }, '')
    expect([response.status, response.headers.get('location')]).toEqual([302, '/app/bye'])
    expect(await sessionWorks(cookie)).toBe(false)
  })

  it('a form POST takes next from the query when the body has none, and still refuses an unsafe one', async () => {
    const { cookie } = await signedIn()
    const form = { 'sec-fetch-site': 'same-origin', 'content-type': 'application/x-www-form-urlencoded' }
    const response = await logout(cookie, form, { method: 'POST', body: 'other=1' }, '?next=%2Fapp%2Fq')
    expect([response.status, response.headers.get('location')]).toEqual([302, '/app/q'])
    const unsafe = await logout(cookie, form, { method: 'POST', body: 'next=%2F%2Fevil.example' }, '')
    expect(unsafe.status).toBe(302)
    expect(unsafe.headers.get('location')).not.toContain('evil.example')
  })

  it('a form POST without next shows a browser the signed-out page', async () => {
    const { cookie } = await signedIn()
    const response = await logout(cookie, { 'content-type': 'application/x-www-form-urlencoded' }, { method: 'POST', body: '' }, '')
    expect(response.status).toBe(200)
    expect(await response.text()).toContain('You are signed out')
    expect(await sessionWorks(cookie)).toBe(false)
  })
})

describe('a sign-out with a cookie that opens no session costs nothing', () => {
  /** Redis's count of each command it ran, by name (INFO commandstats), from a CONFIG RESETSTAT on. */
  async function commandsDuring (action: () => Promise<void>): Promise<Record<string, number>> {
    const client = new Redis(redis.url)
    try {
      await client.config('RESETSTAT')
      await action()
      const stats = await client.info('commandstats')
      return Object.fromEntries([...stats.matchAll(/^cmdstat_([^:]+):calls=(\d+)/gm)].map(([, name, calls]) => [name!, Number(calls)]))
    } finally {
      client.disconnect()
    }
  }

  /** Every command that writes, deletes or broadcasts (a read that touches an absent key writes nothing). */
  const WRITES = ['set', 'del', 'unlink', 'getdel', 'publish', 'spublish', 'eval', 'evalsha', 'expire', 'pexpire', 'sadd', 'srem', 'incr', 'incrby']
  const writesOf = (stats: Record<string, number>) => Object.fromEntries(Object.entries(stats).filter(([name]) => WRITES.includes(name)))

  it.each([
    ['a well-formed made-up value', async () => randomToken()],
    ['a real cookie with one character changed', async () => { const { cookie } = await signedIn(); return (cookie[0] === 'A' ? 'B' : 'A') + cookie.slice(1) }],
    ['the cookie of a session already signed out', async () => { const { cookie } = await signedIn(); await logout(cookie, {}); return cookie }],
    ['a made-up value first, a real session second', async () => `${randomToken()}; gw_session=${(await signedIn()).cookie}`],
    ['a value too long', async () => randomToken() + 'A'],
    ['a value of the right length with a character outside base64url', async () => randomToken().slice(0, 42) + '%'],
  ])('with %s: signed out (302, cookie cleared), no store write, no broadcast', async (_name, value) => {
    const cookie = await value()
    let response!: Response
    const stats = await commandsDuring(async () => {
      response = await logout(cookie, { 'sec-fetch-site': 'same-origin' })
    })
    expect([response.status, response.headers.get('location')]).toEqual([302, '/app/bye'])
    expect(response.headers.getSetCookie()[0]).toMatch(/^gw_session=; Max-Age=0; Path=\//)
    expect(writesOf(stats)).toEqual({})
    expect(stats.getex ?? 0).toBeLessThanOrEqual(1)
  })

  it("a real session's sign-out still deletes it and tells every instance", async () => {
    const { cookie } = await signedIn()
    expect(await sessionWorks(cookie, second)).toBe(true)
    const stats = await commandsDuring(async () => {
      expect((await logout(cookie, { 'sec-fetch-site': 'same-origin' })).status).toBe(302)
    })
    expect(stats).toMatchObject({ del: 1, publish: 2 })
    expect(await sessionWorks(cookie)).toBe(false)
    await endedElsewhere(second, cookie)
  })
})

// Re-readers' findings: prefetches and prerenders a page asks for signed its reader out, and a 2xx
// page in their place was what the person's click then showed.
describe('a prefetch or prerender of the sign-out or sign-in address', () => {
  const PREFETCHES: Array<[string, Record<string, string>]> = [
    ['a <link rel=prefetch>', { 'sec-fetch-site': 'same-origin', 'sec-fetch-dest': 'empty', 'sec-fetch-mode': 'no-cors', 'sec-purpose': 'prefetch' }],
    ['a speculation rules prerender', { 'sec-fetch-site': 'none', 'sec-fetch-dest': 'document', 'sec-fetch-mode': 'navigate', 'sec-purpose': 'prefetch;prerender' }],
    ['Firefox\'s older prefetch', { 'x-moz': 'prefetch' }],
  ]
  it.each(PREFETCHES)('%s: 503, empty and not stored, which no browser uses; the session is kept, no sign-in begun', async (_name, headers) => {
    const { cookie } = await signedIn()
    const out = await logout(cookie, headers)
    expect([out.status, out.headers.get('cache-control'), await out.text()]).toEqual([503, 'no-store', ''])
    expect(await sessionWorks(cookie)).toBe(true)
    const login = await fetch(`${gateway.url}/oauth/login/demo/?next=%2Fapp%2F`, { headers, redirect: 'manual' })
    expect([login.status, await login.text()]).toEqual([503, ''])
    expect(login.headers.getSetCookie()).toEqual([])
  })
})

// A re-reader's finding: each sign-in begun moves the browser's flow cookie on, and images of the
// sign-in address loading one by one down a page dropped a sign-in under way in another tab.
describe('a sign-in address asked for by an embed', () => {
  it.each([
    ['an <img>', { 'sec-fetch-site': 'same-origin', 'sec-fetch-dest': 'image', 'sec-fetch-mode': 'no-cors' }],
    ['a <link rel=preload as=fetch crossorigin>', () => ({ 'sec-fetch-site': 'same-origin', 'sec-fetch-dest': 'empty', 'sec-fetch-mode': 'cors', origin: new URL(gateway.url).origin })],
  ])('%s begins no sign-in: a page with a link to it, and no cookie', async (_name, headers) => {
    const response = await fetch(`${gateway.url}/oauth/login/demo/?next=%2Fapp%2F`, { headers: typeof headers === 'function' ? headers() : headers, redirect: 'manual' })
    expect(response.status).toBe(200)
    expect(response.headers.getSetCookie()).toEqual([])
    expect(await response.text()).toContain('<a class="button" href="/oauth/login/demo/?next=%2Fapp%2F">Sign in with demo</a>')
  })

  it('a link the person follows begins one', async () => {
    const response = await fetch(`${gateway.url}/oauth/login/demo/?next=%2Fapp%2F`, { headers: { 'sec-fetch-site': 'same-origin', 'sec-fetch-dest': 'document', 'sec-fetch-mode': 'navigate' }, redirect: 'manual' })
    await response.arrayBuffer()
    expect(response.status).toBe(302)
    expect(response.headers.getSetCookie()).toHaveLength(1)
  })
})

describe('form bodies on proxied routes', () => {
  it('forwards a urlencoded POST body byte for byte (the logout form parser stays in /oauth/)', async () => {
    received.length = 0
    const body = 'next=%2Fapp%2F&a=b+c&a=%ZZ&x'
    const response = await fetch(`${gateway.url}/form/post`, { method: 'POST', body, headers: { 'content-type': 'application/x-www-form-urlencoded' } })
    expect(response.status).toBe(200)
    expect(received).toEqual([{ type: 'application/x-www-form-urlencoded', body }])
  })
})

describe('a sign-in retires the previous session id at once', () => {
  it('on this instance (cache included) and on a second instance sharing the store', async () => {
    const { browser, cookie: old } = await signedIn()
    // Both instances have just served (and cached) the old session.
    expect(await sessionWorks(old, gateway)).toBe(true)
    expect(await sessionWorks(old, second)).toBe(true)
    await browser.navigate(`${gateway.url}/oauth/login/demo/?next=/app/`)
    const fresh = browser.cookies.get('gw_session')!.value
    expect(fresh).not.toBe(old)
    // This instance at once; the second as the broadcast reaches it (within a second, against a
    // 10 s cache; seen once to arrive just after this instance answered).
    expect(await sessionWorks(old, gateway)).toBe(false)
    await endedElsewhere(second, old)
    expect(await sessionWorks(fresh, second)).toBe(true)
  })
})
