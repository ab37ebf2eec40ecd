// Sign out everywhere only by POST (security round 4): a page of an application behind the gateway
// (the gateway's own origin) that embeds `<img src="/oauth/logout/?everywhere=1">`, in every
// spelling a query may take, loaded in a signed-in Chromium, ends none of the person's sessions:
// a GET naming `everywhere` gets the confirmation page, and only its button (a same-origin POST)
// signs out everywhere. Real Chromium, a real authorization server, real Redis, a real upstream.
// A property: no spelling of the key (any letter case, percent-encoded letters, any value, repeated)
// makes a same-origin GET more than the confirmation page. And no page of the gateway's own can be
// framed: a page on another port of the same host (the same site, so the Lax session cookie goes
// into its frame) that frames /oauth/ shows nothing there, and a click ends nothing.
import { createServer } from 'node:http'
import fc from 'fast-check'
import type { BrowserContext } from 'playwright-core'
import { afterAll, describe, expect } from 'vitest'
import { sharedChromium, signInAt } from '../helpers/chromium.js'
import { endedElsewhere, sessionCookie, sessionStatus, type TestGateway } from '../helpers/gateway.js'
import { test as it } from '../helpers/stack.js'
import { close, listen } from '../helpers/net.js'
import type { TestRedis } from '../helpers/redis.js'

/** Every spelling of "everywhere" a query may carry: the parser's own, and those it reads otherwise. */
const SPELLINGS = [
  'everywhere=1', 'everywhere=true', 'everywhere=1&everywhere=1', 'everywhere=', 'everywhere',
  'EVERYWHERE=1', 'EveryWhere=1', '%65verywhere=1', 'next=/&everywhere=1', 'everywhere=1&switch=demo',
]

/** An application page behind the gateway: one `<img>` per spelling, each a GET of the sign-out. */
const PAGE = `<!doctype html><html><body><h1>Hostile page</h1>
${SPELLINGS.map((query) => `<img src="/oauth/logout/?${query}" alt="">`).join('\n')}
</body></html>`

let redis: TestRedis
let gateway: TestGateway
let context: BrowserContext
const app = createServer((req, res) => {
  res.setHeader('content-type', 'text/html; charset=utf-8')
  res.end(req.url === '/app/hostile' ? PAGE : '<!doctype html><h1>Home</h1>')
})
/** A page of another port of the same host, that frames the gateway address its `?src=` names. */
const framing = createServer((req, res) => {
  const src = new URL(req.url ?? '/', 'http://framing').searchParams.get('src') ?? ''
  res.setHeader('content-type', 'text/html; charset=utf-8')
  res.end(`<!doctype html><h1>Win a prize</h1><iframe src="${src.replaceAll('"', '')}" width="800" height="600"></iframe>`)
})
let framingUrl: string

it.beforeAll(async ({ startStack, redis: fileRedis }) => {
  redis = fileRedis
  const upstream = await listen(app)
  gateway = await startStack({
    store: { type: 'redis', url: redis.url },
    session: { cacheTtl: '10s' },
    routes: [{ path: '/app/', upstream, provider: 'demo' }, { path: '/staff/', upstream, provider: 'demo', allow: [{ users: ['bob'] }] }],
  })
  framingUrl = await listen(framing)
  context = await (await sharedChromium()).newContext()
})

afterAll(async () => {
  // The Chromium context first: a connection it keeps open to the gateway would hold the gateway's close.
  await context?.close()
  await gateway?.close()
  await close(app)
  await close(framing)
})

/** The Chromium context's session cookie's value. */
async function chromiumCookie (): Promise<string> {
  const cookie = (await context.cookies(gateway.url)).find((c) => c.name === 'gw_session')
  expect(cookie).toBeDefined()
  return cookie!.value
}

describe('sign out everywhere from an application page', () => {
  it('an <img> of every spelling ends no session; the confirmation page\'s button signs out everywhere', async () => {
    const page = await context.newPage()
    await signInAt(page, `${gateway.url}/app/`, 'alice')
    // alice's other device: a second cookie jar.
    const other = (await sessionCookie(gateway, 'alice')).slice('gw_session='.length)
    const own = await chromiumCookie()
    expect(await sessionStatus(gateway, other)).toBe(200)

    const answers: Array<{ url: string, status: number, type: string | undefined }> = []
    page.on('response', (response) => {
      if (response.url().includes('/oauth/logout/')) answers.push({ url: response.url(), status: response.status(), type: response.headers()['content-type'] })
    })
    await page.goto(`${gateway.url}/app/hostile`, { waitUntil: 'load' })
    expect(answers).toHaveLength(SPELLINGS.length)
    // Each GET got the confirmation page (200 HTML), never a sign-out's redirect.
    for (const answer of answers) expect(answer, answer.url).toMatchObject({ status: 200, type: 'text/html; charset=utf-8' })
    expect(await sessionStatus(gateway, other)).toBe(200)
    expect(await sessionStatus(gateway, own)).toBe(200)

    // The person's own choice: the confirmation page's button, a same-origin POST.
    await page.goto(`${gateway.url}/oauth/logout/?everywhere=1`)
    expect(await page.textContent('h1')).toBe('Sign out everywhere?')
    // It says beforehand what it does not end: the provider's own sign-in on the other devices.
    expect(await page.textContent('main, body')).toContain('Other browsers are signed out of this gateway, but not of your provider')
    expect(await sessionStatus(gateway, other)).toBe(200)
    await page.click('button:has-text("Sign out everywhere")')
    await page.waitForLoadState('load')
    expect(await page.textContent('h1')).toBe('You are signed out everywhere')
    expect(await page.textContent('body')).toContain('the next visit there signs in again without asking')
    expect(await sessionStatus(gateway, own)).toBe(401)
    await endedElsewhere(gateway, other)
    await page.close()
  })
})

/** `everywhere` in any letter case, some letters percent-encoded as a query may carry them. */
const spelledKey = fc.array(fc.tuple(fc.boolean(), fc.boolean()), { minLength: 10, maxLength: 10 }).map((flags) =>
  [...'everywhere'].map((letter, i) => {
    const [upper, encoded] = flags[i]!
    const cased = upper ? letter.toUpperCase() : letter
    return encoded ? `%${cased.charCodeAt(0).toString(16).toUpperCase()}` : cased
  }).join(''))

describe('every spelling of everywhere on a GET', () => {
  it('gets the confirmation page and ends no session (property)', async () => {
    const cookie = (await sessionCookie(gateway, 'alice')).slice('gw_session='.length)
    const value = fc.oneof(fc.constantFrom('1', 'true', 'yes', '', 'on', '01'), fc.string({ maxLength: 8 }).map(encodeURIComponent))
    await fc.assert(fc.asyncProperty(spelledKey, value, fc.integer({ min: 1, max: 3 }), async (key, given, times) => {
      const query = Array.from({ length: times }, () => `${key}=${given}`).join('&')
      const answer = await gateway.app.inject({
        method: 'GET',
        url: `/oauth/logout/?${query}`,
        headers: { cookie: `gw_session=${cookie}`, 'sec-fetch-site': 'same-origin', accept: 'text/html' },
      })
      expect(answer.statusCode).toBe(200)
      expect(answer.body).toContain('<form method="post" action="/oauth/logout/">')
    }), { numRuns: 60 })
    expect(await sessionStatus(gateway, cookie)).toBe(200)
  })
})

describe('a page of the same site framing the gateway\'s pages', () => {
  it('sees none of /oauth/\'s buttons in its frame, and the sessions live on', async () => {
    const page = await context.newPage()
    await signInAt(page, `${gateway.url}/app/`, 'carol')
    const other = (await sessionCookie(gateway, 'carol')).slice('gw_session='.length)
    const own = await chromiumCookie()
    await page.goto(`${framingUrl}/?src=${encodeURIComponent(`${gateway.url}/oauth/`)}`, { waitUntil: 'load' })
    const frame = page.frames().find((candidate) => candidate !== page.mainFrame())!
    // Chromium refuses the framed page: the frame holds its error page, not the gateway's buttons.
    const button = frame.locator('button:has-text("Sign out everywhere")')
    expect(await button.count()).toBe(0)
    expect(await sessionStatus(gateway, own)).toBe(200)
    expect(await sessionStatus(gateway, other)).toBe(200)
    await page.close()
  })

  it('every page of the gateway\'s own says no page may frame it', async () => {
    const carol = await sessionCookie(gateway, 'carol')
    const pages = {
      home: await fetch(`${gateway.url}/oauth/`, { headers: { accept: 'text/html', cookie: carol } }),
      refused: await fetch(`${gateway.url}/staff/`, { headers: { accept: 'text/html', cookie: carol } }),
      unauthenticated: await fetch(`${gateway.url}/oauth/userinfo/`, { headers: { accept: 'text/html' } }),
      missing: await fetch(`${gateway.url}/oauth/nothing-here`, { headers: { accept: 'text/html' } }),
      signedOut: await fetch(`${gateway.url}/oauth/logout/`, { method: 'POST', headers: { accept: 'text/html', cookie: carol, 'sec-fetch-site': 'same-origin', origin: gateway.url } }),
      sessions: await fetch(`${gateway.url}/oauth/sessions/`, { headers: { accept: 'text/html', cookie: await sessionCookie(gateway, 'carol') } }),
      confirm: await fetch(`${gateway.url}/oauth/logout/?everywhere=1`, { headers: { accept: 'text/html', 'sec-fetch-site': 'same-origin' } }),
    }
    const seen = Object.fromEntries(Object.entries(pages).map(([name, answer]) => [name, {
      status: answer.status,
      type: answer.headers.get('content-type'),
      framing: [answer.headers.get('content-security-policy')?.includes("frame-ancestors 'none'"), answer.headers.get('x-frame-options')],
    }]))
    const unframed = (status: number) => ({ status, type: 'text/html; charset=utf-8', framing: [true, 'DENY'] })
    expect(seen).toEqual({ home: unframed(200), refused: unframed(403), unauthenticated: unframed(401), missing: unframed(404), signedOut: unframed(200), sessions: unframed(200), confirm: unframed(200) })
  })
})
