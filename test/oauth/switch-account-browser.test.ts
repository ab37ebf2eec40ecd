// "Use another account" in a real browser (Debian's Chromium through playwright-core), against real
// authorization servers that keep their own sign-in as Google, GitHub or Entra do: mallory signs in,
// meets the 403 that says what the gateway saw, presses "Use another account", lands at the
// provider's account chooser or sign-in page instead of being signed in as mallory again, signs in
// as alice and reaches the page she asked for. Without a prompt the same provider signs mallory in
// again silently: the loop back to the same 403 that this button ends.
import { mkdir } from 'node:fs/promises'
import type { Browser, BrowserContext, Page } from 'playwright-core'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { ARTIFACTS, sharedChromium } from '../helpers/chromium.js'
import { oidcClient, reserveBaseUrl, startGateway, type TestGateway } from '../helpers/gateway.js'
import { gatewayClient, startOidcProvider, type TestProvider } from '../helpers/oidc.js'
import { startUpstream, type Upstream } from '../helpers/upstream.js'

let upstream: Upstream
/** Remembers its sign-in, lists select_account, offers no sign-out. */
let choose: TestProvider
/** Remembers its sign-in, does not list select_account, offers no sign-out. */
let plain: TestProvider
/** Remembers its sign-in and offers RP-initiated logout. */
let sso: TestProvider
let gateway: TestGateway
let browser: Browser

beforeAll(async () => {
  await mkdir(ARTIFACTS, { recursive: true })
  upstream = await startUpstream()
  const { port, baseUrl } = await reserveBaseUrl()
  choose = await startOidcProvider([gatewayClient(baseUrl, 'choose', 'c1')], { keepSignIn: true, selectAccount: true })
  plain = await startOidcProvider([gatewayClient(baseUrl, 'plain', 'c2')], { keepSignIn: true })
  sso = await startOidcProvider([gatewayClient(baseUrl, 'sso', 'c3')], { logout: true })
  const allow = { emails: ['alice@example.test'] }
  gateway = await startGateway({
    server: { port, baseUrl },
    store: { type: 'memory' },
    providers: {
      choose: oidcClient(choose.issuer, 'c1', 's', 'openid email groups'),
      plain: oidcClient(plain.issuer, 'c2', 's', 'openid email groups'),
      sso: oidcClient(sso.issuer, 'c3', 's', 'openid email groups'),
    },
    routes: [
      { path: '/choose/', upstream: upstream.url, provider: 'choose', allow },
      { path: '/plain/', upstream: upstream.url, provider: 'plain', allow },
      { path: '/sso/', upstream: upstream.url, provider: 'sso', allow },
    ],
  })
  browser = await sharedChromium()
})

afterAll(async () => {
  await gateway?.close()
  await Promise.all([choose?.close(), plain?.close(), sso?.close(), upstream?.close()])
})

/** Signs mallory in on `path` and checks the 403 page she meets: what the gateway saw, and why. */
async function malloryRefused (page: Page, path: string): Promise<void> {
  await page.goto(`${gateway.url}${path}`)
  await page.fill('input[name="login"]', 'mallory')
  await page.click('button:has-text("Sign in")')
  await page.click('button:has-text("Allow")')
  await page.waitForURL(`${gateway.url}${path}`)
  expect(await page.textContent('h1')).toBe('Not allowed')
  const seen = await page.locator('dl.seen').innerText()
  expect(seen).toMatch(/User\s+mallory/)
  expect(seen).toMatch(/E-mail\s+mallory@evil\.test/)
  expect(seen).toMatch(/Groups\s+none/)
  expect(seen).toMatch(/Refused by\s+no allow rule matched/)
  expect(await page.content()).not.toContain('alice@example.test')
}

/** The `prompt` of every authorize request the page makes from now on. */
function promptsSent (page: Page, op: TestProvider): Array<string | null> {
  const prompts: Array<string | null> = []
  page.on('request', (request) => {
    const url = new URL(request.url())
    if (url.origin + url.pathname === `${op.issuer}/auth`) prompts.push(url.searchParams.get('prompt'))
  })
  return prompts
}

/** Alice signs in on the provider's page the browser is on, allows access, and lands on `path`. */
async function aliceReaches (page: Page, path: string): Promise<void> {
  await page.fill('input[name="login"]', 'alice')
  await page.click('button:has-text("Sign in")')
  await page.click('button:has-text("Allow")')
  await page.waitForURL(`${gateway.url}${path}`)
  expect(JSON.parse(await page.textContent('body') ?? '')).toMatchObject({ url: path })
}

describe('"Use another account" in a real browser', () => {
  const contexts: BrowserContext[] = []
  afterAll(async () => { await Promise.all(contexts.map(async (context) => await context.close())) })
  async function newPage (): Promise<Page> {
    const context = await browser.newContext()
    contexts.push(context)
    return await context.newPage()
  }

  it('a provider that lists select_account shows its account chooser, and alice reaches the page', async () => {
    const page = await newPage()
    await malloryRefused(page, '/choose/report')
    await page.screenshot({ path: `${ARTIFACTS}/forbidden-use-another-account.png`, fullPage: true })

    // The loop this ends: signing in again without a prompt brings mallory straight back here.
    await page.goto(`${gateway.url}/oauth/login/choose/?next=/choose/report`)
    await page.waitForURL(`${gateway.url}/choose/report`)
    expect(await page.textContent('h1')).toBe('Not allowed')

    const prompts = promptsSent(page, choose)
    await page.click('button:has-text("Use another account")')
    await page.waitForSelector('h1:has-text("Choose an account")')
    expect(new URL(page.url()).origin).toBe(new URL(choose.issuer).origin)
    expect(prompts).toEqual(['select_account'])
    expect(await page.locator('button:has-text("Continue as mallory")').count()).toBe(1)
    expect(await page.context().cookies(gateway.url)).not.toContainEqual(expect.objectContaining({ name: 'gw_session' }))
    await aliceReaches(page, '/choose/report')
  })

  it('a provider that does not list select_account asks for the sign-in again (prompt=login)', async () => {
    const page = await newPage()
    await malloryRefused(page, '/plain/')
    const prompts = promptsSent(page, plain)
    await page.click('button:has-text("Use another account")')
    await page.waitForSelector('input[name="login"]')
    expect(new URL(page.url()).origin).toBe(new URL(plain.issuer).origin)
    expect(prompts).toEqual(['login'])
    await aliceReaches(page, '/plain/')
  })

  it('a provider with end_session_endpoint signs mallory out there first, then asks for the sign-in', async () => {
    const page = await newPage()
    await malloryRefused(page, '/sso/x')
    const prompts = promptsSent(page, sso)
    await page.click('button:has-text("Use another account")')
    await page.waitForSelector('button:has-text("Yes, sign me out")')
    await page.click('button:has-text("Yes, sign me out")')
    await page.waitForSelector('input[name="login"]')
    expect(prompts).toEqual(['login'])
    await aliceReaches(page, '/sso/x')
  })
})
