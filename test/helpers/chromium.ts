// Debian's Chromium through playwright-core, started the one way every browser test needs: headless,
// no sandbox (tests run as root), and none of the background traffic this machine's closed network
// would refuse. A test file without Chromium fails at once with how to install it.
import { existsSync } from 'node:fs'
import { chromium, type Browser, type Page } from 'playwright-core'

/**
 * Debian's `chromium-headless-shell` when it is there, else its `chromium`. The shell is the same
 * Chromium (Blink, V8, the network stack) without the desktop browser's user interface: what
 * Playwright itself runs for headless tests. On 2 cores the browser tests cost a quarter of the
 * CPU with it: 14 s of the suite's CPU instead of 54 s (measured 2026-11-29, the same pages).
 */
export const CHROMIUM = process.env.CHROMIUM_PATH ?? ['/usr/bin/chromium-headless-shell', '/usr/bin/chromium'].find((path) => existsSync(path)) ?? '/usr/bin/chromium'

/** Where browser tests leave screenshots for a person to look at. */
export const ARTIFACTS = 'test/artifacts'

export async function launchChromium (): Promise<Browser> {
  if (!existsSync(CHROMIUM)) throw new Error(`No Chromium at ${CHROMIUM}: apt-get install -y chromium-headless-shell (or chromium, or set CHROMIUM_PATH)`)
  return await chromium.launch({
    executablePath: CHROMIUM,
    args: ['--no-sandbox', '--disable-gpu', '--disable-background-networking', '--disable-component-update', '--disable-sync', '--no-first-run'],
  })
}

let shared: Promise<Browser> | undefined

/**
 * One Chromium per test worker, for files that each work in their own BrowserContext (cookies and
 * storage apart) and close only that. vitest runs files with isolate: false, so this module, and
 * the browser, outlive a file; starting Chromium was the costly part of each browser test file.
 * Playwright ends the browser when the worker exits.
 */
export async function sharedChromium (): Promise<Browser> {
  shared ??= launchChromium().then((browser) => {
    browser.on('disconnected', () => { shared = undefined })
    return browser
  }, (error: unknown) => {
    shared = undefined
    throw error
  })
  return await shared
}

/**
 * Opens `url` and signs in as `login` at the demo's authorization server (its form, then its
 * consent), until the browser is back at `url`.
 */
export async function signInAt (page: Page, url: string, login: string): Promise<void> {
  await page.goto(url)
  await page.fill('input[name="login"]', login)
  await page.click('button:has-text("Sign in")')
  await page.click('button:has-text("Allow")')
  await page.waitForURL(url)
}
