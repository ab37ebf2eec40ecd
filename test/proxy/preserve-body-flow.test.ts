// A kept form is bound to its sign-in flow (security round 4): the form cookie alone replays
// nothing. A kept form planted in another browser (the attacker's own kept-form cookie) or one kept
// before a different sign-in completes is neither offered by that sign-in's callback nor delivered
// by a marker POST; the flow the form started still delivers it. A table of hostile `form` values on
// the login address (near misses, repeated, another case of the key) binds no sign-in to it. With a `__Host-` session cookie
// the form cookie is `__Host-<name>_form` (Path=/, Secure, no Domain), end to end, and a cookie of
// the plain name is not read. Real sockets, real Redis, the real authorization server.
import { Redis } from 'ioredis'
import { afterAll, beforeEach, describe, expect } from 'vitest'
import { Browser } from '../helpers/browser.js'
import { send, startFormUpstream, type Answer, type FormUpstream } from '../helpers/form-upstream.js'
import { type TestGateway } from '../helpers/gateway.js'
import { test as it } from '../helpers/stack.js'
import type { TestRedis } from '../helpers/redis.js'

const MARKER = 'gateway-preserved-form=1'
const URLENCODED = 'application/x-www-form-urlencoded'
const SESSION = '__Host-gw'
const FORM = `${SESSION}_form`

let redis: TestRedis
let client: Redis
let upstream: FormUpstream
let gateway: TestGateway

it.beforeAll(async ({ startStack, redis: fileRedis }) => {
  redis = fileRedis
  client = new Redis(redis.url)
  upstream = await startFormUpstream()
  gateway = await startStack({
    store: { type: 'redis', url: redis.url },
    // Secure cookies on the test's http address: what an https deployment sets.
    session: { cacheTtl: 0, cookieName: SESSION, cookieSecure: true },
    routes: [{ path: '/app/', upstream: upstream.url, provider: 'demo', preserveBody: '1KiB' }],
  })
})

afterAll(async () => {
  await gateway?.close()
  client?.disconnect()
  await upstream?.close()
})

beforeEach(async () => {
  const keys = await client.keys('gw:preserved-body:*')
  if (keys.length > 0) await client.del(...keys)
})

/** A browser's form POST of one of the gateway's own pages, with no session: kept, and sent to sign in. */
async function keepForm (path: string, body: string, cookie = ''): Promise<{ token: string, login: string, setCookie: string }> {
  const answer = await send(`${gateway.url}${path}`, { body, headers: { 'content-type': URLENCODED, 'sec-fetch-site': 'same-origin', 'sec-fetch-mode': 'navigate', cookie } })
  expect(answer.status).toBe(302)
  const setCookie = (answer.headers['set-cookie'] ?? []).find((line) => line.startsWith(`${FORM}=`))
  expect(setCookie).toBeDefined()
  return { token: setCookie!.slice(FORM.length + 1).split(';', 1)[0]!, login: new URL(answer.headers.location!, gateway.url).href, setCookie: setCookie! }
}

/** The marker POST of the callback's page, from `browser`. */
async function submitMarker (browser: Browser, path: string): Promise<Answer> {
  return await send(`${gateway.url}${path}`, { body: MARKER, headers: { 'content-type': URLENCODED, 'sec-fetch-site': 'same-origin', cookie: browser.cookieHeader(`${gateway.url}${path}`) ?? '' } })
}

/** A plain sign-in of `browser` as `login` toward `next` (not the one a kept form started). */
async function signInToward (browser: Browser, next: string, login: string): Promise<Response> {
  return await browser.navigate(`${gateway.url}/oauth/login/demo/?next=${encodeURIComponent(next)}`, { login })
}

describe('a kept form and the sign-in flow it started', () => {
  it('another browser\'s kept-form cookie, planted before the victim\'s own sign-in, is neither offered nor delivered', async () => {
    const before = upstream.posts.length
    const attacker = await keepForm('/app/form', 'transfer=all-to-mallory')
    const victim = new Browser()
    victim.cookies.set(FORM, { value: attacker.token, path: '/' })
    const landed = await signInToward(victim, '/app/form', 'alice')
    // The callback sends the victim on to /app/form (the upstream's form page), with no replay page.
    expect(landed.status).toBe(200)
    expect(await landed.text()).toContain('<h1>Comment</h1>')
    const marker = await submitMarker(victim, '/app/form')
    expect(marker.status).toBe(400)
    expect(upstream.posts.length).toBe(before)
  })

  it('a form kept before a different sign-in is not replayed by it; the sign-in it started delivers it once', async () => {
    const before = upstream.posts.length
    const browser = new Browser()
    const kept = await keepForm('/app/form', 'title=mine')
    browser.cookies.set(FORM, { value: kept.token, path: '/' })
    // Another sign-in toward the same path (another tab's, a bookmarked login link) completes first.
    const other = await signInToward(browser, '/app/form', 'alice')
    expect(await other.text()).toContain('<h1>Comment</h1>')
    expect((await submitMarker(browser, '/app/form')).status).toBe(400)
    expect(upstream.posts.length).toBe(before)

    // The sign-in the kept form started: offered, then delivered once.
    const page = await browser.navigate(kept.login, { login: 'alice' })
    expect(page.status).toBe(200)
    expect(await page.text()).toContain('action="/app/form"')
    const delivered = await submitMarker(browser, '/app/form')
    expect(delivered.status).toBe(200)
    expect(upstream.posts.length).toBe(before + 1)
    expect(upstream.posts.at(-1)!.body.toString()).toBe('title=mine')
    expect((await submitMarker(browser, '/app/form')).status).toBe(400)
  })
})

describe('the login address\'s form binding, as a stranger may write it', () => {
  it('no value but the kept form\'s own binding has its sign-in offer the form', async () => {
    const kept = await keepForm('/app/form', 'title=bound')
    const binding = new URL(kept.login).searchParams.get('form')!
    expect(binding).toMatch(/^[A-Za-z0-9_-]{43}$/)
    const flipped = `${binding.slice(0, -1)}${binding.endsWith('A') ? 'B' : 'A'}`
    const hostile = ['', 'x', binding.slice(0, 42), `${binding}x`, flipped, `${binding}.${binding}`, ` ${binding}`, `${binding}%00`, 'a'.repeat(5000)]
    const login = (form: string) => `${gateway.url}/oauth/login/demo/?next=%2Fapp%2Fform&form=${encodeURIComponent(form)}`
    const spellings = [...hostile.map(login), `${login(binding)}&form=${binding}`, `${gateway.url}/oauth/login/demo/?next=%2Fapp%2Fform&FORM=${binding}`]
    for (const address of spellings) {
      const browser = new Browser()
      browser.cookies.set(FORM, { value: kept.token, path: '/' })
      const page = await browser.navigate(address, { login: 'alice' })
      expect(page.status, address).toBe(200)
      expect(await page.text(), address).toContain('<h1>Comment</h1>')
    }
    const browser = new Browser()
    browser.cookies.set(FORM, { value: kept.token, path: '/' })
    expect(await (await browser.navigate(login(binding), { login: 'alice' })).text()).toContain('action="/app/form"')
  })
})

describe('the kept form\'s cookie with a __Host- session cookie', () => {
  it('is __Host-<name>_form with Path=/, Secure and no Domain, and a cookie of the plain name is not read', async () => {
    const kept = await keepForm('/app/form', 'title=host')
    expect(kept.setCookie).toMatch(/; Path=\/(;|$)/)
    expect(kept.setCookie).toMatch(/; Secure(;|$)/)
    expect(kept.setCookie).toMatch(/; HttpOnly(;|$)/)
    expect(kept.setCookie).not.toMatch(/Domain=/i)

    // The same token under the plain name (what a sibling host could plant) finds nothing.
    const planted = new Browser()
    planted.cookies.set('gw_form', { value: kept.token, path: '/' })
    planted.cookies.set('gw_session_form', { value: kept.token, path: '/' })
    const page = await planted.navigate(kept.login, { login: 'alice' })
    expect(await page.text()).toContain('<h1>Comment</h1>')

    // Under its own name, the sign-in it started delivers it.
    const browser = new Browser()
    browser.cookies.set(FORM, { value: kept.token, path: '/' })
    const before = upstream.posts.length
    const offered = await browser.navigate(kept.login, { login: 'alice' })
    expect(await offered.text()).toContain('action="/app/form"')
    const delivered = await submitMarker(browser, '/app/form')
    expect(delivered.status).toBe(200)
    expect(delivered.headers['set-cookie']?.some((line) => line.startsWith(`${FORM}=;`) && /Max-Age=0/i.test(line))).toBe(true)
    expect(upstream.posts.length).toBe(before + 1)
  })
})
