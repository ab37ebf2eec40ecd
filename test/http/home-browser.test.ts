// Pages a person reads, in a real browser (Debian's Chromium through playwright-core): signed in,
// /oauth/ shows the way back to the app and no Sign-in button for the provider already used, and the
// app link opens the app; a sign-in link whose state has expired shows the plain sentence, the code
// for support, and a "Start again" that goes back toward where that sign-in was going.
import { createSecretKey } from 'node:crypto'
import { mkdir } from 'node:fs/promises'
import type { Browser } from 'playwright-core'
import { afterAll, describe, expect } from 'vitest'
import { issueState } from '../../src/oauth/state.js'
import { deriveKey, keyIdOf, Sealer } from '../../src/session/seal.js'
import { stateKey } from '../../src/oauth/signed-state.js'
import { ARTIFACTS, sharedChromium, signInAt } from '../helpers/chromium.js'
import { TEST_SECRET, type TestGateway } from '../helpers/gateway.js'
import { test as it } from '../helpers/stack.js'
import { startUpstream, type Upstream } from '../helpers/upstream.js'

let upstream: Upstream
let gateway: TestGateway
let browser: Browser

it.beforeAll(async ({ startStack }) => {
  await mkdir(ARTIFACTS, { recursive: true })
  upstream = await startUpstream()
  gateway = await startStack({ store: { type: 'memory' }, routes: [{ path: '/app/', upstream: upstream.url, provider: 'demo' }] })
  browser = await sharedChromium()
})

afterAll(async () => {
  await gateway?.close()
  await upstream?.close()
})

describe('pages a person reads, in a real browser', () => {
  it('/oauth/ signed in: the app link and no Sign-in button for that provider; the link opens the app', async () => {
    const context = await browser.newContext()
    const page = await context.newPage()
    await signInAt(page, `${gateway.url}/app/`, 'alice')

    await page.goto(`${gateway.url}/oauth/`)
    expect(await page.locator('body').innerText()).toContain('Signed in as alice with demo')
    expect(await page.locator('a:has-text("Sign in with demo")').count()).toBe(0)
    const app = page.locator('a.app')
    expect(await app.count()).toBe(1)
    expect(await app.isVisible()).toBe(true)
    await page.screenshot({ path: `${ARTIFACTS}/home-signed-in.png`, fullPage: true })
    const seenBefore = upstream.seen.length
    await app.click()
    await page.waitForURL(`${gateway.url}/app/`)
    expect(upstream.seen.length).toBe(seenBefore + 1)
    await context.close()
  })

  it('an expired sign-in link: the plain sentence, the code for support, and Start again toward where it was going', async () => {
    const context = await browser.newContext()
    const page = await context.newPage()
    // The browser's sign-in: its flow cookie, and the state it carried to the provider. That state,
    // signed again as issued ten minutes before now with five minutes to live, for this browser (its
    // binding), so that the page may say where it was going.
    const started = await context.request.get(`${gateway.url}/oauth/login/demo/?next=/app/reports`, { maxRedirects: 0 })
    const claims = JSON.parse(Buffer.from(new URL(started.headers().location!).searchParams.get('state')!.split('.')[1]!, 'base64url').toString('utf8')) as { b: string }
    const expired = issueState(stateKey(keyIdOf(TEST_SECRET), createSecretKey(deriveKey(TEST_SECRET, 'state'))), new Sealer(TEST_SECRET).current, { p: 'demo', next: '/app/reports', n: 'x', b: claims.b, s: 1 }, 300_000, Date.now() - 600_000)
    const response = await page.goto(`${gateway.url}/oauth/authorized/demo/?code=c&state=${expired}`)
    expect(response!.status()).toBe(400)
    const text = await page.locator('body').innerText()
    expect(text.split('This sign-in link has expired or was already used; start again.').length - 1).toBe(1)
    expect(text).not.toMatch(/\bstate\b|JWS|nonce|PKCE/)
    expect(await page.locator('p.code').innerText()).toBe('For support: error code invalid_state')
    const startAgain = page.locator('a:has-text("Start again")')
    expect(await startAgain.getAttribute('href')).toBe(`${gateway.url}/oauth/login/demo/?next=%2Fapp%2Freports`)
    await page.screenshot({ path: `${ARTIFACTS}/stale-sign-in.png`, fullPage: true })
    await startAgain.click()
    // A new sign-in at the provider, toward the same page.
    await page.waitForSelector('input[name="login"]')
    await page.fill('input[name="login"]', 'alice')
    await page.click('button:has-text("Sign in")')
    await page.click('button:has-text("Allow")')
    await page.waitForURL(`${gateway.url}/app/reports`)
    await context.close()
  })
})
