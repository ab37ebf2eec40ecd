// Your sessions in a real browser (Debian's Chromium through playwright-core): alice signs in in
// Chromium and from a second client, finds the list from the home page's link, sees both (the
// Chromium one marked as this browser), presses the other one's Revoke button (a same-origin form
// POST, as Chromium sends it: Origin and Sec-Fetch-Site), lands back on the list with one session
// left, and the other client is signed out.
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
  it('lists both sessions, and the Revoke button ends the other one', async () => {
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
    expect(await current.textContent()).toContain('Chrome')
    expect(await current.textContent()).toContain('(this browser)')
    await page.screenshot({ path: `${ARTIFACTS}/your-sessions.png`, fullPage: true })

    await page.click('tr:not(.current) button:has-text("Revoke")')
    await page.waitForURL(`${gateway.url}/oauth/sessions/`)
    expect(await rows.count()).toBe(1)
    expect(await page.locator('tr.current').count()).toBe(1)
    expect(await sessionStatus(gateway, otherCookie)).toBe(401)
    await context.close()
  })
})
