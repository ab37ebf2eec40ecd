// A real browser (Debian's Chromium through playwright-core) clicks through `npm run demo`: sign
// in, consent, see the sample app as the signed-in user, sign out (at the authorization server too,
// which keeps its sign-in), be asked to sign in again; and
// reject consent to see the access_denied page. Screenshots of each final page go to
// test/artifacts/ for a person to look at.
import { mkdir } from 'node:fs/promises'
import type { Browser, Page } from 'playwright-core'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { ARTIFACTS, sharedChromium } from './helpers/chromium.js'
import { startDemo, type RunningDemo } from './helpers/demo.js'

let demo: RunningDemo
let demoUrl: string
let browser: Browser

beforeAll(async () => {
  await mkdir(ARTIFACTS, { recursive: true })
  demo = await startDemo()
  demoUrl = demo.url
  browser = await sharedChromium()
})

afterAll(async () => {
  // Ctrl-C stops every process the demo started and exits 0.
  if (demo) expect(await demo.interrupt()).toBe(0)
})

async function signInAs (page: Page, name: string): Promise<void> {
  await page.goto(demoUrl)
  await expect.poll(() => page.locator('input[name="login"]').count()).toBe(1)
  await page.fill('input[name="login"]', name)
  await page.click('button:has-text("Sign in")')
  await page.waitForSelector('button:has-text("Allow")')
}

describe('the demo in a real browser', () => {
  it('signs in, shows the signed-in user, signs out, and asks to sign in again on the next visit', async () => {
    const context = await browser.newContext()
    const page = await context.newPage()
    await signInAs(page, 'alice')
    await page.click('button:has-text("Allow")')

    await page.waitForSelector('h1:has-text("Hello, Alice")')
    expect(new URL(page.url()).pathname).toBe('/app/')
    const body = await page.textContent('body')
    expect(body).toContain('alice@example.test')
    expect(body).toMatch(/Bearer \[masked: \d+ characters\]/)
    // The authorization server's own cookies (oidc-provider's _session, _interaction) stay on its host.
    expect(body).not.toMatch(/_session|_interaction/)
    await page.screenshot({ path: `${ARTIFACTS}/signed-in.png`, fullPage: true })

    await page.click('a:has-text("Sign out")')
    // The demo's authorization server keeps its sign-in, as real ones do: it asks before signing out there too.
    await page.click('button:has-text("Yes, sign me out")')
    await page.waitForSelector('h1:has-text("You are signed out")')
    expect(new URL(page.url()).origin).toBe(new URL(demoUrl).origin)
    expect(await context.cookies()).not.toContainEqual(expect.objectContaining({ name: 'gw_session' }))
    await page.screenshot({ path: `${ARTIFACTS}/signed-out.png`, fullPage: true })

    await page.goto(demoUrl)
    await page.waitForSelector('input[name="login"]')
    expect(new URL(page.url()).origin).not.toBe(new URL(demoUrl).origin)
    await page.screenshot({ path: `${ARTIFACTS}/sign-in-again.png`, fullPage: true })
    await context.close()
  })

  it('shows the access_denied page with a way to sign in again when consent is rejected', async () => {
    const context = await browser.newContext()
    const page = await context.newPage()
    await signInAs(page, 'bob')
    await page.click('a:has-text("Deny")')

    await page.waitForSelector('h1:has-text("Access was not granted")')
    const body = await page.textContent('body')
    expect(body).toContain('access_denied')
    expect(await page.getAttribute('a.button', 'href')).toMatch(/\/oauth\/login\/demo\/\?next=/)
    await page.screenshot({ path: `${ARTIFACTS}/access-denied.png`, fullPage: true })
    await context.close()
  })
})
