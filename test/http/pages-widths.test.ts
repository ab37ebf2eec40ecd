// The gateway's own pages in a real browser (Debian's Chromium through playwright-core) at a desktop
// width and a phone's: the home page, the sessions list, a revoke's question, a 403 of only this
// request and one of the whole route, the sign-out question and an error page. At each width,
// nothing is wider than the window (no sideways scrolling: the page reads on a phone) and every
// heading, button and link is inside it. Screenshots go to test/artifacts for a person to look at.
import { mkdir } from 'node:fs/promises'
import type { Page } from 'playwright-core'
import { afterAll, describe, expect } from 'vitest'
import { Browser as Client } from '../helpers/browser.js'
import { ARTIFACTS, sharedChromium, signInAt } from '../helpers/chromium.js'
import type { TestGateway } from '../helpers/gateway.js'
import { test as it } from '../helpers/stack.js'

const WIDTHS = [{ name: 'desktop', width: 1280, height: 800 }, { name: 'phone', width: 360, height: 740 }] as const

let gateway: TestGateway

it.beforeAll(async ({ startStack, upstream }) => {
  await mkdir(ARTIFACTS, { recursive: true })
  gateway = await startStack({
    store: { type: 'memory' },
    routes: [
      { path: '/app/', upstream: upstream.url, provider: 'demo', deny: [{ paths: ['/app/admin/*'] }] },
      { path: '/team/', upstream: upstream.url, provider: 'demo', allow: [{ groups: ['admins'] }] },
      { path: '/mcp', upstream: upstream.url, provider: 'demo', agents: true },
    ],
    agents: { deviceFlow: true },
  })
})

afterAll(async () => { await gateway?.close() })

/** What sticks out of the window: the page's own width, and each heading, button, link or cell beyond the right edge. */
async function overflow (page: Page): Promise<{ scrollWidth: number, outside: string[] }> {
  // Run in the page (this project's types have no DOM): the page's width, and what reaches past the window.
  return await page.evaluate(`({
    scrollWidth: document.documentElement.scrollWidth,
    outside: [...document.querySelectorAll('h1, button, a, input, td, dd, code, bdi')]
      .filter((element) => element.getBoundingClientRect().right > window.innerWidth + 0.5)
      .map((element) => element.tagName.toLowerCase() + ': ' + (element.textContent ?? '').trim().slice(0, 60)),
  })`)
}

describe('the pages at a desktop width and a phone\'s', () => {
  it('fit the window at each width: no sideways scrolling, every heading, button and link inside', async () => {
    // A second session, so that the list has another row and a revoke question to show.
    const other = new Client()
    expect((await other.navigate(`${gateway.url}/app/`, { login: 'alice' })).status).toBe(200)
    const context = await (await sharedChromium()).newContext({ viewport: WIDTHS[0] })
    try {
      const page = await context.newPage()
      await signInAt(page, `${gateway.url}/app/`, 'alice')
      await page.goto(`${gateway.url}/oauth/sessions/`)
      const revoke = await page.locator('tr:not(.current) a:has-text("Revoke")').getAttribute('href')
      const pages: Array<[name: string, path: string, status: number, heading: RegExp]> = [
        ['home', '/oauth/', 200, /Gateway/],
        ['sessions', '/oauth/sessions/', 200, /Your sessions/],
        ['revoke-question', revoke!, 200, /Revoke this session\?/],
        ['forbidden-this-request', '/app/admin/users?page=2', 403, /Not allowed/],
        ['forbidden-route', '/team/', 403, /Not allowed/],
        ['sign-out-everywhere-question', '/oauth/logout/?everywhere=1', 200, /./],
        ['error', '/oauth/authorized/demo/?code=x&state=not-a-state', 400, /./],
      ]
      for (const { name: width, ...size } of WIDTHS) {
        await page.setViewportSize(size)
        for (const [name, path, status, heading] of pages) {
          const response = await page.goto(`${gateway.url}${path}`)
          expect(response?.status(), `${name} at ${width}`).toBe(status)
          expect(await page.locator('h1').first().textContent(), `${name}'s heading`).toMatch(heading)
          const { scrollWidth, outside } = await overflow(page)
          expect({ page: name, width, scrollWidth: scrollWidth <= size.width ? 'fits' : scrollWidth, outside }).toEqual({ page: name, width, scrollWidth: 'fits', outside: [] })
          await page.screenshot({ path: `${ARTIFACTS}/page-${name}-${width}.png`, fullPage: true })
        }
      }
    } finally {
      await context.close()
    }
  }, 60_000)
})

// An outside tester's finding: a registered client's name of 100 characters without a space did not
// wrap, so on a phone the page scrolled sideways and the part of the name that gave its author away
// (`...by-mallory`) was outside the window.
describe('a client\'s long name without spaces on a phone', () => {
  it('the device code\'s confirmation shows it whole: no sideways scrolling, the name inside the window', async () => {
    const registered = await fetch(`${gateway.url}/oauth/agents/register`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ client_name: `deploy-cli${'_'.repeat(80)}by-mallory`, grant_types: ['urn:ietf:params:oauth:grant-type:device_code', 'refresh_token'], token_endpoint_auth_method: 'none' }) })
    const { client_id: id } = await registered.json() as { client_id: string }
    const started = await fetch(`${gateway.url}/oauth/agents/device/auth`, { method: 'POST', body: new URLSearchParams({ client_id: id, resource: `${gateway.url}/mcp` }) })
    const { verification_uri_complete: confirm } = await started.json() as { verification_uri_complete: string }
    const context = await (await sharedChromium()).newContext({ viewport: WIDTHS[1] })
    try {
      const page = await context.newPage()
      await page.goto(confirm)
      expect(await page.locator('h1').textContent()).toBe('Is this your code?')
      const { scrollWidth, outside } = await overflow(page)
      expect({ scrollWidth: scrollWidth <= WIDTHS[1].width ? 'fits' : scrollWidth, outside }).toEqual({ scrollWidth: 'fits', outside: [] })
      await page.screenshot({ path: `${ARTIFACTS}/page-device-long-name-phone.png`, fullPage: true })
    } finally {
      await context.close()
    }
  })
})
