// One route for the people of two providers (`providers: [demo, partner]`), with two real
// authorization servers (the worker's and a second oidc-provider): Chromium meets the chooser, signs
// in at each provider through it, and reaches the application with that provider's token; rules
// name the provider; an API client's 401 names each provider's sign-in; the home page lists the
// route once; a form submitted without a session is kept through the chooser and the sign-in.
import { mkdir } from 'node:fs/promises'
import type { Browser } from 'playwright-core'
import { expect } from 'vitest'
import { ARTIFACTS, sharedChromium } from '../helpers/chromium.js'
import { startFormUpstream, type FormUpstream } from '../helpers/form-upstream.js'
import { oidcClient, type TestGateway } from '../helpers/gateway.js'
import { gatewayClient, startOidcProvider, type TestProvider } from '../helpers/oidc.js'
import { test as it } from '../helpers/stack.js'
import type { Upstream } from '../helpers/upstream.js'

let gateway: TestGateway
let upstream: Upstream
let partner: TestProvider
let browser: Browser
let forms: FormUpstream

it.beforeAll(async ({ startStack, upstream: echo, gatewayAddress }) => {
  await mkdir(ARTIFACTS, { recursive: true })
  upstream = echo
  partner = await startOidcProvider([gatewayClient(gatewayAddress.baseUrl, 'partner', 'p2')])
  forms = await startFormUpstream()
  gateway = await startStack({
    server: { trustProxy: ['127.0.0.1'] },
    providers: { partner: oidcClient(partner.issuer, 'p2', 's') },
    forwardAuth: { hosts: { 'staff.example.com': { allow: [{ providers: ['demo'] }] }, 'outside.example.com': { deny: [{ providers: ['demo'] }] } } },
    routes: [{ path: '/forms/', upstream: forms.url, providers: ['demo', 'partner'], preserveBody: '64KiB' }, {
      path: '/app/',
      upstream: echo.url,
      providers: ['demo', 'partner'],
      // The staff (demo) everywhere; partners only their documents.
      allow: [{ providers: ['demo'] }, { providers: ['partner'], paths: ['/app/docs/*'] }, { users: ['partner:ann'] }],
    }],
  })
  browser = await sharedChromium()
})

it.afterAll(async () => {
  await gateway?.close()
  await Promise.all([partner?.close(), forms?.close()])
})

/** Whether `token` is an access token `op` issued: its userinfo endpoint answers it. */
async function issuedBy (op: TestProvider, token: string): Promise<boolean> {
  return (await fetch(`${op.issuer}/me`, { headers: { authorization: `Bearer ${token}` } })).ok
}

/** Signs in at the provider's form the chooser's button led to, back to `back`. */
async function signInThere (page: import('playwright-core').Page, login: string, back: string): Promise<void> {
  await page.fill('input[name="login"]', login)
  await page.click('button:has-text("Sign in")')
  await page.click('button:has-text("Allow")')
  await page.waitForURL(back)
}

it('a browser meets the chooser, signs in at the partner through it, and the partner\'s token is the one injected', async () => {
  const context = await browser.newContext()
  const page = await context.newPage()
  const target = `${gateway.url}/app/docs/guide`
  await page.goto(target)
  expect(new URL(page.url()).pathname).toBe('/oauth/choose/')
  expect(await page.locator('h1').textContent()).toBe('Sign in to /app/')
  expect(await page.locator('a.button').allTextContents()).toEqual(['Sign in with demo', 'Sign in with partner'])
  await page.screenshot({ path: `${ARTIFACTS}/several-providers-chooser.png`, fullPage: true })
  const seen = upstream.seen.length
  const toPartner = page.waitForRequest((request) => request.url().startsWith(partner.issuer))
  await page.click('a:has-text("Sign in with partner")')
  expect(page.url().startsWith(partner.issuer)).toBe(true)
  // The chooser's address holds `next` (its query too): the provider is not told it, nor the gateway's origin.
  expect((await toPartner).headers().referer).toBeUndefined()
  await signInThere(page, 'pat', target)
  const reached = upstream.seen.slice(seen)
  expect(reached.map((request) => request.url)).toEqual(['/app/docs/guide'])
  const token = String(reached[0]!.headers.authorization).replace(/^Bearer /, '')
  expect(await issuedBy(partner, token)).toBe(true)
  // Another provider's people are another name space: never the first provider's `pat`.
  expect(reached[0]!.headers['x-forwarded-user']).toBe('partner:pat')

  // The rules name the provider: a partner is refused outside their documents, and told which rule.
  await page.goto(`${gateway.url}/app/admin`)
  expect(await page.locator('dd.rule').textContent()).toBe('no allow rule matched')
  expect(await page.locator('dl.seen').textContent()).toContain('Signed in withpartner')
  await page.screenshot({ path: `${ARTIFACTS}/several-providers-forbidden.png`, fullPage: true })

  // Signed in at demo as well (the route's first provider), the same browser passes everywhere, with demo's token.
  await page.goto(`${gateway.url}/oauth/login/demo/?next=%2Fapp%2Fadmin`)
  await signInThere(page, 'alice', `${gateway.url}/app/admin`)
  const last = upstream.seen.at(-1)!
  expect(last.url).toBe('/app/admin')
  expect(last.headers['x-forwarded-user']).toBe('alice')
  expect(await issuedBy(partner, String(last.headers.authorization).replace(/^Bearer /, ''))).toBe(false)

  // The home page lists the route once.
  await page.goto(`${gateway.url}/oauth/`)
  expect(await page.locator('ul.apps a.app').allTextContents()).toEqual(['/forms/', '/app/'])
  await context.close()
})

it('a users rule names another provider\'s person as <provider>:<subject>; the first provider\'s person of that name is someone else', async () => {
  const context = await browser.newContext()
  const page = await context.newPage()
  await page.goto(`${gateway.url}/app/admin`)
  await page.click('a:has-text("Sign in with partner")')
  await signInThere(page, 'ann', `${gateway.url}/app/admin`)
  expect(upstream.seen.at(-1)!.headers['x-forwarded-user']).toBe('partner:ann')
  await context.close()
  // The first provider's account named partner:ann (a directory may allow `:` in names) is demo:partner:ann.
  const other = await browser.newContext()
  const second = await other.newPage()
  await second.goto(`${gateway.url}/app/x`)
  await second.click('a:has-text("Sign in with demo")')
  await signInThere(second, 'partner:ann', `${gateway.url}/app/x`)
  expect(upstream.seen.at(-1)!.headers['x-forwarded-user']).toBe('demo:partner:ann')
  await other.close()
})

it('a browser signs in at the first provider through the chooser too', async () => {
  const context = await browser.newContext()
  const page = await context.newPage()
  await page.goto(`${gateway.url}/app/x?y=1`)
  await page.click('a:has-text("Sign in with demo")')
  await signInThere(page, 'bob', `${gateway.url}/app/x?y=1`)
  expect(upstream.seen.at(-1)!.headers['x-forwarded-user']).toBe('bob')
  await context.close()
})

it('an API client without a session gets 401 naming the chooser and each provider\'s sign-in', async () => {
  const response = await fetch(`${gateway.url}/app/x?y=1`, { headers: { accept: 'application/json' } })
  expect(response.status).toBe(401)
  const next = encodeURIComponent('/app/x?y=1')
  expect(await response.json()).toMatchObject({
    error: 'unauthenticated',
    login_url: `${gateway.url}/oauth/choose/?next=${next}`,
    login_urls: { demo: `${gateway.url}/oauth/login/demo/?next=${next}`, partner: `${gateway.url}/oauth/login/partner/?next=${next}` },
  })
})

it('the chooser takes only a same-origin next, and a next no route of several providers serves goes elsewhere', async () => {
  const chooser = async (query: string): Promise<[number, string | null]> => {
    const response = await fetch(`${gateway.url}/oauth/choose/${query}`, { redirect: 'manual' })
    return [response.status, response.headers.get('location')]
  }
  expect(await chooser('?next=https%3A%2F%2Fevil.example%2Fapp%2F')).toEqual([302, '/oauth/'])
  expect(await chooser('?next=%2F%2Fevil.example%2Fapp%2F')).toEqual([302, '/oauth/'])
  expect(await chooser('?next=%2Fnot-a-route')).toEqual([302, '/oauth/'])
  expect(await chooser('')).toEqual([302, '/oauth/'])
  const page = await fetch(`${gateway.url}/oauth/choose/?next=%2Fapp%2F%22%3E%3Cscript%3E&form=bad%22`)
  const html = await page.text()
  expect(html).not.toContain('<script>')
  expect(html).not.toContain('form=bad')
})

it('forward-auth judges a host\'s providers rule by the provider its URL names', async () => {
  const context = await browser.newContext()
  const page = await context.newPage()
  await page.goto(`${gateway.url}/oauth/login/demo/?next=%2Foauth%2F`)
  await signInThere(page, 'carol', `${gateway.url}/oauth/`)
  const cookie = (await context.cookies()).map(({ name, value }) => `${name}=${value}`).join('; ')
  await context.close()
  const ask = async (host: string): Promise<number> => (await fetch(`${gateway.url}/oauth/auth/demo/`, { headers: { cookie, accept: 'application/json', 'x-forwarded-host': host, 'x-forwarded-uri': '/x' } })).status
  expect(await ask('staff.example.com')).toBe(200)
  expect(await ask('outside.example.com')).toBe(403)
})

it('a form submitted without a session is kept through the chooser and the sign-in, and delivered once', async () => {
  const context = await browser.newContext()
  const page = await context.newPage()
  await page.goto(`${gateway.url}/forms/form`)
  await page.click('a:has-text("Sign in with partner")')
  await signInThere(page, 'pat', `${gateway.url}/forms/form`)
  await page.fill('input[name="title"]', 'Hello')
  await page.fill('textarea[name="comment"]', 'from a partner')
  // The session is gone (another browser's sign-out, an expiry): the submit meets the chooser.
  await context.clearCookies()
  await page.click('button:has-text("Send")')
  await page.waitForURL((url) => url.pathname === '/oauth/choose/')
  await page.click('a:has-text("Sign in with partner")')
  await signInThere(page, 'pat', `${gateway.url}/forms/form?draft=1`)
  expect(await page.textContent('h1')).toBe('Received')
  expect(forms.posts.map((post) => [post.url, post.body.toString('utf8')])).toEqual([['/forms/form?draft=1', 'title=Hello&comment=from+a+partner']])
  await context.close()
})
