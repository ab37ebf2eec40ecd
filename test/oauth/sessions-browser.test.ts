// Your sessions in a real browser (Debian's Chromium through playwright-core): alice signs in in
// Chromium and from a second client, finds the list from the home page's link, sees both (the
// Chromium one marked as this browser, with its operating system and address), presses the other
// one's Revoke button and is asked first (the question names that session; Cancel goes back and
// ends nothing), presses it again and answers "Revoke this session" (a same-origin form POST, as
// Chromium sends it: Origin and Sec-Fetch-Site), lands back on the list with one session left, and
// the other client is signed out.
import { mkdir } from 'node:fs/promises'
import type { Browser } from 'playwright-core'
import { afterAll, describe, expect } from 'vitest'
import { Browser as Client } from '../helpers/browser.js'
import { ARTIFACTS, sharedChromium, signInAt } from '../helpers/chromium.js'
import { oidcClient, sessionStatus, type TestGateway } from '../helpers/gateway.js'
import { test as it } from '../helpers/stack.js'
import { startUpstream, type Upstream } from '../helpers/upstream.js'

let upstream: Upstream
let gateway: TestGateway
let browser: Browser

it.beforeAll(async ({ startStack, op }) => {
  await mkdir(ARTIFACTS, { recursive: true })
  upstream = await startUpstream()
  gateway = await startStack({
    store: { type: 'memory' },
    providers: { demo: oidcClient(op.issuer, 'c', 's', 'openid email') },
    routes: [{ path: '/app/', upstream: upstream.url, provider: 'demo' }],
  })
  browser = await sharedChromium()
})

afterAll(async () => {
  await gateway?.close()
  await upstream?.close()
})

describe('your sessions in a real browser', () => {
  it('lists both sessions with browser, system and address; Revoke asks first, Cancel ends nothing, the answer ends the other one', async () => {
    const other = new Client()
    expect((await other.navigate(`${gateway.url}/app/`, { login: 'alice' })).status).toBe(200)
    const otherCookie = other.cookies.get('gw_session')!.value

    const context = await browser.newContext()
    const page = await context.newPage()
    await signInAt(page, `${gateway.url}/app/`, 'alice')

    await page.goto(`${gateway.url}/oauth/`)
    await page.click('a:has-text("Your sessions")')
    await page.waitForURL(`${gateway.url}/oauth/sessions/`)
    const rows = page.locator('table.sessions tbody tr')
    expect(await rows.count()).toBe(2)
    const current = page.locator('tr.current')
    expect(await current.locator('td').nth(0).textContent()).toBe('Chrome on Linux (this browser)')
    expect(await current.locator('td').nth(1).textContent()).toBe('127.0.0.1')
    await page.screenshot({ path: `${ARTIFACTS}/your-sessions.png`, fullPage: true })

    // Revoke asks first; Cancel ends nothing.
    await page.click('tr:not(.current) a:has-text("Revoke")')
    await page.waitForURL(/\/oauth\/sessions\/[A-Za-z0-9_-]{22}\/revoke$/)
    expect(await page.locator('h1').textContent()).toBe('Revoke this session?')
    expect(await page.locator('dl.seen').textContent()).toContain('127.0.0.1')
    expect(await sessionStatus(gateway, otherCookie)).toBe(200)
    await page.click('a:has-text("Cancel")')
    await page.waitForURL(`${gateway.url}/oauth/sessions/`)
    expect(await rows.count()).toBe(2)
    expect(await sessionStatus(gateway, otherCookie)).toBe(200)

    await page.click('tr:not(.current) a:has-text("Revoke")')
    await page.waitForURL(/\/revoke$/)
    await page.screenshot({ path: `${ARTIFACTS}/revoke-session.png`, fullPage: true })
    await page.click('button:has-text("Revoke this session")')
    await page.waitForURL(`${gateway.url}/oauth/sessions/?revoked=1`)
    expect(await page.locator('p.notice').textContent()).toContain('The session was revoked')
    await page.screenshot({ path: `${ARTIFACTS}/session-revoked.png`, fullPage: true })
    expect(await rows.count()).toBe(1)
    expect(await page.locator('tr.current').count()).toBe(1)
    expect(await sessionStatus(gateway, otherCookie)).toBe(401)
    await context.close()
  })
})
