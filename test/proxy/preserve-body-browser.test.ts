// Forms that survive a sign-in, in a real browser (Debian's Chromium through playwright-core), a real
// Redis and a real authorization server: alice opens a form, her session ends in the store while she
// types, she submits, signs in again at the provider, and lands on the form's own address with the
// upstream's answer; the upstream saw exactly one POST with the bytes she typed (a urlencoded form,
// and a multipart one with a file), and a reload does not post again.
import { Redis } from 'ioredis'
import type { Browser, BrowserContext, Page } from 'playwright-core'
import { afterAll, describe, expect } from 'vitest'
import { sharedChromium } from '../helpers/chromium.js'
import { startFormUpstream, type FormUpstream } from '../helpers/form-upstream.js'
import { type TestGateway } from '../helpers/gateway.js'
import { test as it } from '../helpers/stack.js'
import type { TestRedis } from '../helpers/redis.js'

let redis: TestRedis
let client: Redis
let upstream: FormUpstream
let gateway: TestGateway
let browser: Browser
let context: BrowserContext

it.beforeAll(async ({ startStack, redis: fileRedis }) => {
  redis = fileRedis
  client = new Redis(redis.url)
  upstream = await startFormUpstream()
  gateway = await startStack({
    store: { type: 'redis', url: redis.url },
    // Read from the store on every request: a session ended there is gone at once.
    session: { cacheTtl: 0 },
    routes: [{ path: '/app/', upstream: upstream.url, provider: 'demo', preserveBody: '64KiB' }],
  })
  browser = await sharedChromium()
  context = await browser.newContext()
})

afterAll(async () => {
  // The Chromium context first: a connection it keeps open to the gateway would hold the gateway's close.
  await context?.close()
  await gateway?.close()
  client?.disconnect()
  await upstream?.close()
})

/** Signs in as alice on the provider's pages the browser is on (consenting the first time: the provider remembers it). */
async function signIn (page: Page, consent: boolean): Promise<void> {
  await page.fill('input[name="login"]', 'alice')
  await page.click('button:has-text("Sign in")')
  if (consent) await page.click('button:has-text("Allow")')
}

/** Ends every session in the store, as an expiry or a sign-out elsewhere would. */
async function endSessions (): Promise<void> {
  const keys = await client.keys('gw:session:*')
  expect(keys.length).toBeGreaterThan(0)
  await client.del(...keys)
}

describe('a form submitted after the session ended', () => {
  it('reaches the upstream once, with the bytes typed, after the sign-in; a reload does not post again', async () => {
    const page = await context.newPage()
    await page.goto(`${gateway.url}/app/form`)
    await signIn(page, true)
    await page.waitForURL(`${gateway.url}/app/form`)
    expect(await page.textContent('h1')).toBe('Comment')

    await page.fill('input[name="title"]', 'Hello')
    await page.fill('textarea[name="comment"]', 'café & more')
    await endSessions()
    await page.click('button:has-text("Send")')
    await signIn(page, false)
    await page.waitForURL(`${gateway.url}/app/form?draft=1`)
    expect(await page.textContent('h1')).toBe('Received')
    expect(upstream.posts).toHaveLength(1)
    expect(upstream.posts[0]!.url).toBe('/app/form?draft=1')
    expect(upstream.posts[0]!.contentType).toBe('application/x-www-form-urlencoded')
    expect(upstream.posts[0]!.body.toString('utf8')).toBe('title=Hello&comment=caf%C3%A9+%26+more')
    // The gateway's origin, as the person's own submission carried (an application's CSRF check
    // accepts it), and never the callback's address with its code and state.
    expect(upstream.posts[0]!.origin).toBe(new URL(gateway.url).origin)
    expect(upstream.posts[0]!.referer ?? '').not.toContain('code=')
    expect(await client.keys('gw:preserved-body:*')).toEqual([])

    // Reloading the answer re-submits what the page posted: the marker, which finds nothing now.
    await page.reload()
    expect(await page.textContent('body')).toContain('already delivered')
    expect(upstream.posts).toHaveLength(1)
    await page.close()
  })

  it('keeps a multipart form with a file byte for byte', async () => {
    const page = await context.newPage()
    // Still signed in from the first test.
    await page.goto(`${gateway.url}/app/upload`)
    expect(await page.textContent('h1')).toBe('Upload')
    const file = Buffer.from([0x00, 0xff, 0xfe, 0x0d, 0x0a, 0x80, 0x41, 0x2d, 0x2d])
    await page.fill('input[name="title"]', 'report')
    await page.setInputFiles('input[name="file"]', { name: 'a.bin', mimeType: 'application/octet-stream', buffer: file })
    await endSessions()
    const before = upstream.posts.length
    await page.click('button:has-text("Upload")')
    await signIn(page, false)
    await page.waitForURL(`${gateway.url}/app/upload`)
    expect(await page.textContent('h1')).toBe('Received')
    expect(upstream.posts).toHaveLength(before + 1)
    const seen = upstream.posts.at(-1)!
    const boundary = /^multipart\/form-data; boundary=(.+)$/.exec(seen.contentType ?? '')?.[1]
    expect(boundary).toBeDefined()
    const expected = Buffer.concat([
      Buffer.from(`--${boundary}\r\nContent-Disposition: form-data; name="title"\r\n\r\nreport\r\n--${boundary}\r\nContent-Disposition: form-data; name="file"; filename="a.bin"\r\nContent-Type: application/octet-stream\r\n\r\n`),
      file,
      Buffer.from(`\r\n--${boundary}--\r\n`),
    ])
    expect(seen.body.equals(expected)).toBe(true)
    expect(await client.keys('gw:preserved-body:*')).toEqual([])
    await page.close()
  })
})
