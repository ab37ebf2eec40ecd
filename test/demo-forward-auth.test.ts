// `npm run demo -- --forward-auth caddy|nginx`, clicked through in a real browser: the sample app
// behind the proxy with docs/forward-auth/'s file as shipped, which asks the gateway before each
// request. A first visit is sent to sign in and comes back to the app's own address; the app sees
// the person and the bearer token, and none of the gateway's cookies; its "Sign out" signs out at
// the gateway; Ctrl-C, twice as under npm, stops the proxy too and leaves no temporary files.
import { readdir } from 'node:fs/promises'
import { createServer, type AddressInfo } from 'node:net'
import { tmpdir } from 'node:os'
import type { Browser } from 'playwright-core'
import { beforeAll, describe, expect, it, onTestFailed } from 'vitest'
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
    // Should a step hang, the failure names it (each waits less than the test's 30 s) and shows what the demo printed.
    onTestFailed(() => { console.error(`the demo printed:\n${demo.output()}`) })
    try {
      expect(demo.url).toMatch(/^http:\/\/localhost:\d+\/$/)
      expect(demo.output()).toContain(`docs/forward-auth/${kind === 'nginx' ? 'nginx.conf' : 'Caddyfile'}, its addresses changed`)
      const context = await browser.newContext()
      context.setDefaultTimeout(10_000)
      const page = await context.newPage()
      await signInAt(page, demo.url, 'alice')
      await page.waitForSelector('h1:has-text("Hello, Alice")')
      const injected = await page.locator('#injected').innerText()
      expect(injected).toMatch(/x-forwarded-user\s+alice/)
      expect(injected).toMatch(/Bearer \[masked: \d+ characters\]/)
      expect(await page.textContent('body')).not.toContain('gw_session')

      // The app is on another origin than the gateway: its "Sign out" goes to the gateway's, which
      // asks first (another site sent the browser there), then to the provider's.
      await page.click('a:has-text("Sign out")')
      await page.click('button:has-text("Sign out")')
      await page.click('button:has-text("Yes, sign me out")')
      await page.waitForSelector('h1:has-text("You are signed out")')
      await page.goto(demo.url)
      await page.waitForSelector('input[name="login"]')
      await context.close()
    } finally {
      expect(await demo.interrupt(true)).toBe(0)
    }
    expect((await readdir(tmpdir())).filter((name) => name.startsWith('gateway-demo-'))).toEqual([])
  })
})

describe('npm run demo -- --forward-auth with its port taken', () => {
  it('stops with the one line saying so, also when the holder shares the port (SO_REUSEPORT, as another demo\'s proxy does)', async () => {
    const holder = createServer()
    await new Promise<void>((resolve) => holder.listen({ port: 0, host: '127.0.0.1', reusePort: true }, resolve))
    const { port } = holder.address() as AddressInfo
    try {
      // A demo that started anyway is stopped before the failure is told.
      const outcome = await startDemo(['--forward-auth', 'caddy'], { DEMO_FRONT_PORT: String(port) }).then(async (demo) => {
        await demo.interrupt()
        return `started at ${demo.url}`
      }, (error: unknown) => String(error))
      expect(outcome).toContain(`demo: port ${port} (caddy) is in use: set DEMO_FRONT_PORT to another (0 picks a free one)`)
    } finally {
      await new Promise<void>((resolve) => holder.close(() => resolve()))
    }
  })
})
