// Sign-out in a real browser (Debian's Chromium through playwright-core) against a real
// authorization server that keeps its own sign-in: without a sign-out at the provider the next
// sign-in is silent; after the gateway's sign-out (the provider's own question answered by the
// browser), the next sign-in asks for the user again.
import { mkdir } from 'node:fs/promises'
import type { Browser } from 'playwright-core'
import { describe, expect } from 'vitest'
import { ARTIFACTS, sharedChromium, signInAt } from '../helpers/chromium.js'
import { oidcClient, type TestGateway } from '../helpers/gateway.js'
import type { TestProvider } from '../helpers/oidc.js'
import { test as it } from '../helpers/stack.js'

/** The worker's provider that keeps its sign-in and signs people out (stack.ts's `bcl`). */
let op: TestProvider
let gateway: TestGateway
let browser: Browser

it.beforeAll(async ({ startStack, upstream, bcl }) => {
  await mkdir(ARTIFACTS, { recursive: true })
  op = bcl
  gateway = await startStack({
    providers: { bcl: oidcClient(op.issuer, 'c2', 's', 'openid email') },
    routes: [{ path: '/app/', upstream: upstream.url, provider: 'bcl' }],
  })
  browser = await sharedChromium()
})

describe('sign-out in a real browser', () => {
  it('signs in, signs out at the gateway and the provider, and the next sign-in asks for the user again', async () => {
    const context = await browser.newContext()
    const page = await context.newPage()
    await signInAt(page, `${gateway.url}/app/`, 'alice')
    expect(await page.textContent('body')).toContain('"method":"GET"')

    // The provider remembers alice: with only the gateway's cookie gone, a sign-in is silent.
    await context.clearCookies({ name: 'gw_session' })
    await page.goto(`${gateway.url}/app/`)
    await page.waitForURL(`${gateway.url}/app/`)
    expect(await page.locator('input[name="login"]').count()).toBe(0)

    await page.goto(`${gateway.url}/oauth/`)
    await page.click('button:has-text("Sign out")')
    // The provider's own question, answered by the person.
    await page.waitForSelector('button:has-text("Yes, sign me out")')
    expect(new URL(page.url()).origin).toBe(new URL(op.issuer).origin)
    await page.click('button:has-text("Yes, sign me out")')
    await page.waitForSelector('h1:has-text("You are signed out")')
    expect(new URL(page.url()).origin).toBe(gateway.url)
    expect(new URL(page.url()).pathname).toBe('/oauth/logout/bcl/')
    expect(await context.cookies()).not.toContainEqual(expect.objectContaining({ name: 'gw_session' }))
    await page.screenshot({ path: `${ARTIFACTS}/signed-out-at-provider.png`, fullPage: true })

    await page.goto(`${gateway.url}/app/`)
    await page.waitForSelector('input[name="login"]')
    expect(new URL(page.url()).origin).toBe(new URL(op.issuer).origin)
    await context.close()
  })
})
