// An upstream's answer must not reach past its route in a real browser (tester's finding, round 4).
// Two routes on one gateway share its origin with the gateway's own pages: `/a/` (a hostile or
// compromised tenant's application) and `/b/` (another's). Its Service-Worker-Allowed would let a
// worker of `/a/` serve `/b/` and `/oauth/` for as long as it stays installed; its Clear-Site-Data
// "cookies" would delete the gateway's session cookie. What the gateway passes on of each header:
// test/proxy/set-cookie-names.test.ts.
import { createServer, type Server } from 'node:http'
import type { Browser } from 'playwright-core'
import { afterAll, describe, expect } from 'vitest'
import { sharedChromium, signInAt } from '../helpers/chromium.js'
import type { TestGateway } from '../helpers/gateway.js'
import { close, listen } from '../helpers/net.js'
import { test as it } from '../helpers/stack.js'

/** A worker that answers every page outside /a/ itself, once it controls them. */
const WORKER = `
self.addEventListener('install', () => self.skipWaiting())
self.addEventListener('activate', (event) => event.waitUntil(self.clients.claim()))
self.addEventListener('fetch', (event) => {
  const path = new URL(event.request.url).pathname
  if (path.startsWith('/a/')) return
  event.respondWith(new Response('<h1>served by the service worker of /a/ for ' + path + '</h1>', { headers: { 'content-type': 'text/html' } }))
})
`

/** Registers the worker for the whole origin; the title says how that went. */
const REGISTER = `<!doctype html><title>a</title><script>
navigator.serviceWorker.register('/a/sw.js', { scope: '/' })
  .then(() => navigator.serviceWorker.ready)
  .then(() => { document.title = 'registered' }, (error) => { document.title = 'refused: ' + error.name })
</script>`

/** The hostile tenant's application. */
function hostile (): Server {
  return createServer((request, response) => {
    if (request.url === '/a/sw.js') response.writeHead(200, { 'content-type': 'text/javascript', 'service-worker-allowed': '/' }).end(WORKER)
    else if (request.url === '/a/register') response.writeHead(200, { 'content-type': 'text/html' }).end(REGISTER)
    else if (request.url === '/a/clear') response.writeHead(200, { 'content-type': 'text/html', 'clear-site-data': '"cookies"' }).end('<title>cleared</title>')
    else response.writeHead(200, { 'content-type': 'text/html' }).end('<title>a</title>page of a')
  })
}

let a: Server
let b: Server
let gateway: TestGateway
let browser: Browser

it.beforeAll(async ({ startStack }) => {
  a = hostile()
  b = createServer((_request, response) => { response.writeHead(200, { 'content-type': 'text/html' }).end('<title>b</title>the real page of b') })
  const [aUrl, bUrl] = await Promise.all([listen(a), listen(b)])
  gateway = await startStack({
    routes: [
      { path: '/a/', upstream: aUrl, provider: 'demo' },
      { path: '/b/', upstream: bUrl, provider: 'demo' },
    ],
  })
  browser = await sharedChromium()
})

afterAll(async () => {
  await gateway?.close()
  await Promise.all([close(a), close(b)])
})

describe('what /a/\'s upstream may do beyond /a/, in Chromium', () => {
  it('its service worker cannot take over /b/ or the gateway\'s own pages (Service-Worker-Allowed)', async () => {
    const context = await browser.newContext()
    try {
      const page = await context.newPage()
      await signInAt(page, `${gateway.url}/b/`, 'alice')
      await page.goto(`${gateway.url}/a/register`)
      // The browser refuses the scope: the script's directory (/a/) is as far as it may reach.
      await page.waitForFunction('document.title !== "a"')
      expect(await page.title()).toBe('refused: SecurityError')
      await page.goto(`${gateway.url}/b/`)
      expect(await page.textContent('body')).toContain('the real page of b')
      await page.goto(`${gateway.url}/oauth/`)
      expect(await page.textContent('body')).not.toContain('served by the service worker')
    } finally {
      await context.close()
    }
  })

  it('it cannot delete the gateway\'s session cookie (Clear-Site-Data "cookies")', async () => {
    const context = await browser.newContext()
    try {
      const page = await context.newPage()
      await signInAt(page, `${gateway.url}/b/`, 'alice')
      await page.goto(`${gateway.url}/a/clear`)
      expect(await page.title()).toBe('cleared')
      expect((await context.cookies()).map((cookie) => cookie.name)).toContain('gw_session')
      await page.goto(`${gateway.url}/b/`)
      expect(await page.textContent('body')).toContain('the real page of b')
    } finally {
      await context.close()
    }
  })
})
