// `npm run demo -- --forward-auth caddy|nginx`, clicked through in a real browser: the sample app
// behind the proxy with docs/forward-auth/'s file as shipped, which asks the gateway before each
// request. A first visit is sent to sign in and comes back to the app's own address; the app sees
// the person and the bearer token, and none of the gateway's cookies; Ctrl-C stops the proxy too.
import type { Browser } from 'playwright-core'
import { beforeAll, describe, expect, it } from 'vitest'
import type { FrontKind } from '../demo/front-proxy.js'
import { sharedChromium, signInAt } from './helpers/chromium.js'
import { startDemo } from './helpers/demo.js'

const KINDS: FrontKind[] = ['caddy', 'nginx']

let browser: Browser

beforeAll(async () => {
  browser = await sharedChromium()
})

describe.each(KINDS)('npm run demo -- --forward-auth %s', (kind) => {
  it('signs a person in at the app\'s own address and passes who they are, not the gateway\'s cookies', async () => {
    const demo = await startDemo(['--forward-auth', kind])
    try {
      expect(demo.url).toMatch(/^http:\/\/localhost:\d+\/$/)
      expect(demo.output()).toContain(`docs/forward-auth/${kind === 'nginx' ? 'nginx.conf' : 'Caddyfile'} as shipped`)
      const context = await browser.newContext()
      const page = await context.newPage()
      await signInAt(page, demo.url, 'alice')
      await page.waitForSelector('h1:has-text("Hello, Alice")')
      const injected = await page.locator('#injected').innerText()
      expect(injected).toMatch(/x-forwarded-user\s+alice/)
      expect(injected).toMatch(/Bearer \[masked: \d+ characters\]/)
      expect(await page.textContent('body')).not.toContain('gw_session')
      await context.close()
    } finally {
      expect(await demo.interrupt()).toBe(0)
    }
  })
})
