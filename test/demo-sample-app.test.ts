// The demo's sample app in a real browser (Debian's Chromium through playwright-core): the headers
// the gateway added (the bearer token masked, the identity headers, the assertion shortened) are the
// first thing a person sees, above the fold on a laptop and on a phone, without scrolling.
import { createServer, type Server } from 'node:http'
import type { AddressInfo } from 'node:net'
import type { Browser } from 'playwright-core'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { startSampleApp, type SampleApp } from '../demo/sample-app.js'
import { ARTIFACTS, sharedChromium } from './helpers/chromium.js'

let userinfo: Server
let app: SampleApp
let browser: Browser

// A provider's userinfo as generous as real ones are: enough rows to push anything below it off a phone's screen.
const CLAIMS = {
  sub: 'alice',
  name: 'Alice <b>Liddell</b>',
  email: 'alice@example.test',
  email_verified: true,
  preferred_username: 'alice',
  given_name: 'Alice',
  family_name: 'Liddell',
  locale: 'en-GB',
  zoneinfo: 'Europe/London',
  updated_at: 1764000000,
  groups: 'staff,readers',
  website: 'https://example.test/~alice',
  picture: 'https://example.test/alice.png',
}
const ASSERTION = `eyJhbGciOiJFUzI1NiIsImtpZCI6IjEifQ.${'x'.repeat(400)}.${'y'.repeat(86)}`

beforeAll(async () => {
  userinfo = createServer((_req, res) => res.setHeader('content-type', 'application/json').end(JSON.stringify(CLAIMS)))
  await new Promise<void>((resolve) => userinfo.listen(0, '127.0.0.1', resolve))
  app = await startSampleApp({ userinfoUrl: `http://127.0.0.1:${(userinfo.address() as AddressInfo).port}/me` })
  browser = await sharedChromium()
})

afterAll(async () => {
  await app?.close()
  await new Promise<void>((resolve) => userinfo ? userinfo.close(() => resolve()) : resolve())
})

describe('the sample app', () => {
  it.each([
    ['a laptop', { width: 1280, height: 720 }],
    ['a phone', { width: 390, height: 844 }],
  ])('on %s, shows the headers the gateway added above the fold', async (what, viewport) => {
    const context = await browser.newContext({
      viewport,
      extraHTTPHeaders: {
        authorization: 'Bearer secret-access-token-value',
        'x-forwarded-user': 'alice',
        'x-forwarded-email': 'alice@example.test',
        'x-forwarded-groups': 'staff,readers',
        'x-gateway-assertion': ASSERTION,
      },
    })
    const page = await context.newPage()
    await page.goto(`${app.url}/app/`)
    const block = page.locator('#injected')
    const box = await block.boundingBox()
    expect(box).not.toBeNull()
    // Starts within the first screen, and its rows up to the assertion are on it too.
    expect(box!.y).toBeGreaterThanOrEqual(0)
    expect(box!.y).toBeLessThan(viewport.height)
    const assertionRow = await page.locator('#injected tr:has-text("x-gateway-assertion")').boundingBox()
    expect(assertionRow!.y + assertionRow!.height).toBeLessThanOrEqual(viewport.height)
    const text = await block.innerText()
    expect(text).toMatch(/Bearer \[masked: \d+ characters\]/)
    expect(text).not.toContain('secret-access-token-value')
    expect(text).toContain('alice@example.test')
    expect(text).toContain(`[${ASSERTION.length} characters]`)
    // Names a route may change are said to be the defaults (a newcomer's point: renamed ones seemed lost).
    expect(text).toContain('By their default names; a route\'s identityHeaders and headers: may name others')
    // Claims with markup are shown as text.
    expect(await page.locator('h1').innerText()).toBe('Hello, Alice <b>Liddell</b>')
    await page.screenshot({ path: `${ARTIFACTS}/sample-app-${what.replace(' ', '-')}.png` })
    await context.close()
  })
})
