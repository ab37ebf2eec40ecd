// `__Host-` cookie names end to end: every cookie the gateway sets (session and flow) has Path=/,
// Secure and no Domain, so a sibling host cannot plant or shadow one (RFC 6265bis §4.1.3.2); and
// config refuses `__Host-`/`__Secure-` names that browsers would drop for want of Secure.
import { describe, expect } from 'vitest'
import { stringify } from 'yaml'
import { ConfigError, parseConfig } from '../../src/config/config.js'
import { Browser } from '../helpers/browser.js'
import type { TestGateway } from '../helpers/gateway.js'
import { test as it } from '../helpers/stack.js'

/** A browser that also keeps every Set-Cookie line the gateway sent. */
class RecordingBrowser extends Browser {
  readonly setCookies: string[] = []
  constructor (private readonly gatewayUrl: () => string) { super() }

  override async fetch (url: string, init: RequestInit = {}): Promise<Response> {
    const response = await super.fetch(url, init)
    if (url.startsWith(this.gatewayUrl())) this.setCookies.push(...response.headers.getSetCookie())
    return response
  }
}

describe('__Host- cookies through a whole sign-in', () => {
  let gateway: TestGateway

  it.beforeAll(async ({ startStack, upstream }) => {
    gateway = await startStack({
      // Allowed on the test's http://127.0.0.1 baseUrl because cookieSecure is explicit.
      session: { cookieName: '__Host-gw', cookieSecure: true },
      routes: [{ path: '/app/', upstream: upstream.url, provider: 'demo' }],
    })
  })

  function expectHostCookie (line: string): void {
    const attributes = line.split(';').slice(1).map((a) => a.trim().toLowerCase())
    expect(line).toMatch(/^__Host-gw(_flow)?=/)
    expect(attributes).toContain('path=/')
    expect(attributes).toContain('secure')
    expect(attributes.some((a) => a.startsWith('domain'))).toBe(false)
  }

  it('sets every cookie with Path=/, Secure and no Domain, and the proxied request then works', async ({ upstream }) => {
    const browser = new RecordingBrowser(() => gateway.url)
    const response = await browser.navigate(`${gateway.url}/app/page`)
    expect(response.status).toBe(200)
    const names = browser.setCookies.map((line) => line.slice(0, line.indexOf('=')))
    expect(new Set(names)).toEqual(new Set(['__Host-gw_flow', '__Host-gw']))
    for (const line of browser.setCookies) expectHostCookie(line)
    // The upstream got the bearer token, and none of the gateway's cookies.
    const seen = upstream.seen.at(-1)!
    expect(seen.url).toBe('/app/page')
    expect(seen.headers.authorization).toMatch(/^Bearer /)
    expect(seen.headers.cookie ?? '').not.toContain('__Host-gw')
  })

  it('clears the session cookie on sign-out with the same Path=/ and Secure (or the browser would keep it)', async () => {
    const browser = new RecordingBrowser(() => gateway.url)
    await browser.navigate(`${gateway.url}/app/`)
    browser.setCookies.length = 0
    const response = await browser.fetch(`${gateway.url}/oauth/logout/?next=/app/`)
    expect(response.status).toBe(302)
    expect(browser.setCookies).toHaveLength(1)
    expect(browser.setCookies[0]).toMatch(/^__Host-gw=; Max-Age=0;/)
    expectHostCookie(browser.setCookies[0]!)
    expect(browser.cookies.has('__Host-gw')).toBe(false)
  })
})

describe('config: cookie name prefixes need a Secure cookie', () => {
  const parse = (session: Record<string, unknown>, baseUrl = 'http://127.0.0.1:8080') =>
    parseConfig(stringify({ server: { baseUrl }, session }), {}, 'test.yaml').session

  it.each([
    ['__Host-gw', {}, 'http://127.0.0.1:8080'],
    ['__Secure-gw', {}, 'http://gateway.example'],
    ['__Host-gw', { cookieSecure: false }, 'https://gateway.example'],
    ['__host-gw', { cookieSecure: 'auto' }, 'http://gateway.example'],
  ])('refuses %s with %j on %s, naming session.cookieName', (cookieName, extra, baseUrl) => {
    let issues: string[] = []
    try {
      parse({ cookieName, ...extra }, baseUrl)
    } catch (error) {
      expect(error).toBeInstanceOf(ConfigError)
      issues = (error as ConfigError).issues
    }
    const prefix = cookieName.startsWith('__Secure') ? '__Secure-' : '__Host-'
    // toContain: other checks (cookieSecure: false with an https baseUrl) may add their own line.
    expect(issues).toContain(
      `session.cookieName: a "${prefix}" cookie name needs a Secure cookie, which browsers otherwise drop: use an https baseUrl or set session.cookieSecure: true (line 4)`)
  })

  it.each([
    ['__Host-gw', {}, 'https://gateway.example'],
    ['__Host-gw', { cookieSecure: true }, 'http://127.0.0.1:8080'],
    ['__Secure-gw', { cookieSecure: 'true' }, 'http://127.0.0.1:8080'],
    ['gw_session', {}, 'http://127.0.0.1:8080'],
  ])('accepts %s with %j on %s', (cookieName, extra, baseUrl) => {
    expect(parse({ cookieName, ...extra }, baseUrl).cookieName).toBe(cookieName)
  })
})
