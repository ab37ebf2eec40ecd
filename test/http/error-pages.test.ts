// Every error page a person can meet offers a way on that works: a real browser (Debian's Chromium)
// signed in through the real authorization server opens each page, clicks every link on it, and
// never lands on a 404. "Start over" goes back to the page the person came from when that is a safe
// page of the gateway's own origin, else to the home page /oauth/.
import type { Browser, BrowserContext, Page } from 'playwright-core'
import { afterAll, describe, expect } from 'vitest'
import { sharedChromium, signInAt } from '../helpers/chromium.js'
import { cameFrom } from '../../src/http/error-handler.js'
import type { TestGateway } from '../helpers/gateway.js'
import { refusedUrl } from '../helpers/net.js'
import { test as it } from '../helpers/stack.js'

describe('cameFrom: where "start over" may send a person back to', () => {
  const own = 'https://gw.example.test'
  it.each([
    ['a page of the gateway', `${own}/app/reports?month=5`, '/app/reports?month=5'],
    ['the home page', `${own}/oauth/`, '/oauth/'],
    ['no Referer', undefined, undefined],
    ['another site', 'https://evil.example/app/', undefined],
    ['the same host on another port', 'https://gw.example.test:8443/app/', undefined],
    ['the same host over http', 'http://gw.example.test/app/', undefined],
    ['a look-alike host', 'https://gw.example.test.evil.example/app/', undefined],
    ['userinfo in the Referer', 'https://user:pw@gw.example.test/app/', undefined],
    ['the failed page itself (no loop)', `${own}/broken`, undefined],
    ['the sign-in callback (its address holds a code)', `${own}/oauth/authorized/demo/?code=abc&state=x`, undefined],
    ['the login endpoint', `${own}/oauth/login/demo/?next=/app/`, undefined],
    ['the sign-out endpoint', `${own}/oauth/logout/?next=/`, undefined],
    ['a protocol-relative path', `${own}//evil.example/`, undefined],
    ['not a URL', 'javascript:alert(1)', undefined],
    ['garbage', '::::', undefined],
    ['an over-long Referer', `${own}/${'a'.repeat(3000)}`, undefined],
  ])('%s', (_what, referer, expected) => {
    expect(cameFrom(referer, own, '/broken')).toBe(expected)
  })
})

describe('error pages in a real browser', () => {
  let gateway: TestGateway
  let browser: Browser
  let context: BrowserContext

  it.beforeAll(async ({ startStack, upstream }) => {
    gateway = await startStack({
      store: { type: 'memory' },
      // A provider whose discovery cannot be read: nothing listens at its issuer.
      providers: { down: { issuer: await refusedUrl(), clientId: 'c', clientSecret: 's', scope: 'openid' } },
      routes: [
        { path: '/app/', upstream: upstream.url, provider: 'demo' },
        // Only the upstream that never answers has a short timeout: a dropped connection is a
        // bad_gateway however long a busy machine takes to see it.
        { path: '/hangs/', upstream: upstream.url, provider: 'demo', timeout: '300ms' },
        { path: '/admins/', upstream: upstream.url, provider: 'demo', allow: { emails: ['root@example.test'] } },
      ],
    })
    browser = await sharedChromium()
    context = await browser.newContext()
    const page = await context.newPage()
    await signInAt(page, `${gateway.url}/app/hello`, 'alice')
    await page.close()
  })

  afterAll(async () => {
    await context?.close()
  })

  /** Opens `path` (from `referer` when given), checks it is the error page `code`, and returns its links. */
  async function errorPageLinks (page: Page, path: string, code: string, referer?: string): Promise<string[]> {
    const response = await page.goto(`${gateway.url}${path}`, referer ? { referer: `${gateway.url}${referer}` } : {})
    expect(response!.status()).toBeGreaterThanOrEqual(400)
    expect(await page.textContent('body')).toContain(code)
    return await page.locator('a').evaluateAll((links) => links.map((link) => (link as unknown as { href: string }).href))
  }

  /** Clicks the link with that address and returns where the browser ended and with what status. */
  async function follow (page: Page, href: string): Promise<{ status: number, url: string, body: string }> {
    const [response] = await Promise.all([page.waitForNavigation(), page.click(`a[href="${new URL(href).pathname + new URL(href).search}"], a[href="${href}"]`)])
    return { status: response!.status(), url: page.url(), body: await page.textContent('body') ?? '' }
  }

  it.each([
    ['not_found (an address nothing serves)', '/nothing-here', 'not_found'],
    ['invalid_request (a path that cannot be made canonical)', '/app/a%2fb', 'invalid_request'],
    ['bad_gateway (the upstream dropped the connection)', '/app/close', 'bad_gateway'],
    ['gateway_timeout (the upstream did not answer in time)', '/hangs/slow', 'gateway_timeout'],
    ['forbidden (an allow rule refuses the account)', '/admins/', 'forbidden'],
    ['invalid_state (a forged sign-in callback)', '/oauth/authorized/demo/?code=x&state=forged', 'invalid_state'],
    ['unknown_provider (a sign-in at a provider nobody configured)', '/oauth/login/nope/', 'unknown_provider'],
    ['provider_unavailable (a sign-in at a provider that cannot be reached)', '/oauth/login/down/?next=/app/', 'provider_unavailable'],
  ])('%s: every link leads somewhere that exists', async (_what, path, code) => {
    const page = await context.newPage()
    const links = await errorPageLinks(page, path, code)
    expect(links.length).toBeGreaterThan(0)
    for (const href of links) {
      await errorPageLinks(page, path, code)
      const landed = await follow(page, href)
      expect({ href, status: landed.status }).not.toEqual({ href, status: 404 })
      expect(landed.body).not.toContain('not_found')
    }
    await page.close()
  })

  it('"start over" goes back to the safe page the person came from, else to the home page', async () => {
    const page = await context.newPage()
    expect(await errorPageLinks(page, '/nothing-here', 'not_found', '/app/reports?month=5')).toEqual([`${gateway.url}/app/reports?month=5`])
    expect(await page.textContent('a')).toBe('Go back')
    const back = await follow(page, `${gateway.url}/app/reports?month=5`)
    expect(back.status).toBe(200)
    expect(JSON.parse(back.body)).toMatchObject({ url: '/app/reports?month=5' })

    expect(await errorPageLinks(page, '/nothing-here', 'not_found', '/oauth/authorized/demo/?code=abc&state=x')).toEqual([`${gateway.url}/oauth/`])
    expect(await page.textContent('a')).toBe('Start over')
    const home = await follow(page, `${gateway.url}/oauth/`)
    expect(home.status).toBe(200)
    expect(home.body).toContain('Signed in as')
    await page.close()
  })

  // A newcomer's reading: it said "try again shortly" over a lone "Start over".
  it('a sign-in that cannot begin for now offers "Try again" at its own address', async () => {
    const page = await context.newPage()
    expect(await errorPageLinks(page, '/oauth/login/down/?next=/app/', 'provider_unavailable')).toEqual([`${gateway.url}/oauth/login/down/?next=/app/`])
    expect(await page.textContent('a')).toBe('Try again')
    await page.close()
  })

  // A re-reader's finding: the provider's failure is one error, answered alike for seconds, and the
  // first request's address written into it was every other person's "Try again" (their `next`).
  it('each person\'s "Try again" is their own address, though the provider\'s failure is one', async () => {
    const links: string[] = []
    for (const next of ['/app/alice-report', '/app/bob']) {
      const response = await fetch(`${gateway.url}/oauth/login/down/?next=${encodeURIComponent(next)}`, { headers: { accept: 'text/html' } })
      expect(response.status).toBe(502)
      links.push(/<a class="button" href="([^"]+)">Try again<\/a>/.exec(await response.text())?.[1] ?? 'none')
    }
    expect(links).toEqual(['/oauth/login/down/?next=%2Fapp%2Falice-report', '/oauth/login/down/?next=%2Fapp%2Fbob'])
  })

  // An outside tester's finding: a plain sign-out was any GET of the gateway's own origin, so an
  // image in an application's user content signed its every reader out.
  it('an <img> of the sign-out address on an application\'s page signs nobody out', async () => {
    const own = await browser.newContext()
    try {
      const page = await own.newPage()
      await signInAt(page, `${gateway.url}/app/hello`, 'bob')
      // A comment on a page of the application (the gateway's own origin), with an image of its author's choice.
      await page.route(`${gateway.url}/app/comment`, async (route) => { await route.fulfill({ contentType: 'text/html', body: '<p>Nice page!</p><img src="/oauth/logout/" alt="">' }) })
      const signOut = page.waitForResponse((response) => response.url().endsWith('/oauth/logout/'))
      await page.goto(`${gateway.url}/app/comment`)
      // The browser asked for it (as an image: Sec-Fetch-Dest), and was answered the question.
      expect((await signOut).status()).toBe(200)
      await page.goto(`${gateway.url}/oauth/`)
      expect(await page.textContent('body')).toContain('Signed in as')
    } finally {
      await own.close()
    }
  })

  it('the sign-out confirmation (another site sent the browser) offers to stay signed in at the home page', async () => {
    const page = await context.newPage()
    // A link on a page of no origin of the gateway's: the browser marks the navigation cross-site.
    await page.setContent(`<a id="out" href="${gateway.url}/oauth/logout/?next=/app/">sign out</a>`)
    await Promise.all([page.waitForNavigation(), page.click('#out')])
    expect(await page.textContent('h1')).toBe('Sign out?')
    const links = await page.locator('a').evaluateAll((all) => all.map((link) => (link as unknown as { href: string }).href))
    expect(links).toEqual([`${gateway.url}/oauth/`])
    const stay = await follow(page, links[0]!)
    expect(stay.status).toBe(200)
    expect(stay.body).toContain('Signed in as')
    await page.close()
  })
})
