// Query-string values never reach the logs (docs/security.md): on every route a logged URL
// keeps its path and the query's names, not their values. A real gateway, echo upstream and
// authorization server; every captured line is searched for the values sent.
import { afterAll, describe, expect } from 'vitest'
import { loggableUrl } from '../../src/ops/logger.js'
import { Browser } from '../helpers/browser.js'
import type { TestGateway } from '../helpers/gateway.js'
import { test as it } from '../helpers/stack.js'
import { startUpstream, type Upstream } from '../helpers/upstream.js'

/** Secret-looking values, each sent once in a query string. */
const VALUES = {
  proxied: 'Tk1proxiedQueryValue9f8e7d6c5b4a',
  notFound: 'Tk2notFoundQueryValue1a2b3c4d5e6f',
  badGateway: 'Tk3badGatewayQueryValue7a8b9c0d1e',
  signIn: 'Tk4protectedQueryValue2f3e4d5c6b7a',
  next: 'Tk5nextQueryValue8c7b6a5f4e3d2c1b',
}

let upstream: Upstream
let gateway: TestGateway

it.beforeAll(async ({ startStack }) => {
  upstream = await startUpstream()
  gateway = await startStack({
    store: { type: 'memory' },
    routes: [
      { path: '/app/', upstream: upstream.url, provider: 'demo' },
      { path: '/open/', upstream: upstream.url, auth: 'none' },
    ],
  })
})

afterAll(async () => {
  await gateway?.close()
  await upstream?.close()
})

/** The `url` of every request line logged. */
const loggedUrls = () => gateway.logs.map((line) => (JSON.parse(line) as { url?: string, req?: { url?: string } })).flatMap((line) => [line.url, line.req?.url]).filter(Boolean)

describe('logged URLs keep the path and the query names, never the values', () => {
  it('drops values on a proxied request, a 404 and a 502', async () => {
    expect((await fetch(`${gateway.url}/open/x?access_token=${VALUES.proxied}&b=2`)).status).toBe(200)
    expect((await fetch(`${gateway.url}/nowhere?token=${VALUES.notFound}`)).status).toBe(404)
    // The echo upstream drops the connection for URLs ending in /close, query included.
    expect((await fetch(`${gateway.url}/open/x?sig=${VALUES.badGateway}&then=/close`)).status).toBe(502)

    expect(loggedUrls()).toEqual(expect.arrayContaining(['/open/x?access_token&b', '/nowhere?token', '/open/x?sig&then']))
    const logs = gateway.logs.join('\n')
    for (const value of [VALUES.proxied, VALUES.notFound, VALUES.badGateway]) expect(logs).not.toContain(value)
  })

  it('drops values through a whole sign-in: the protected request, login, callback (code, state) and return', async () => {
    const browser = new Browser()
    const response = await browser.navigate(`${gateway.url}/app/hello?q=${VALUES.signIn}&next=${VALUES.next}`, { login: 'alice' })
    expect(response.status).toBe(200)
    expect((await response.json() as { url: string }).url).toBe(`/app/hello?q=${VALUES.signIn}&next=${VALUES.next}`)

    const callback = new URL(browser.hops.find((hop) => hop.url.includes('/oauth/authorized/'))!.url)
    const values = [VALUES.signIn, VALUES.next, callback.searchParams.get('code')!, callback.searchParams.get('state')!]
    const logs = gateway.logs.join('\n')
    for (const value of values) expect(logs).not.toContain(value)
    expect(loggedUrls()).toEqual(expect.arrayContaining(['/app/hello?q&next', '/oauth/login/demo/?next']))
    expect(loggedUrls().some((url) => url!.startsWith('/oauth/authorized/demo/?') && url!.includes('code') && url!.includes('state'))).toBe(true)
  })
})

describe('loggableUrl', () => {
  it.each([
    ['/app/x', '/app/x'],
    ['/app/x?access_token=abc&b=2', '/app/x?access_token&b'],
    ['/app/x?', '/app/x?'],
    ['/app/x?flag=&=v&a=1=2', '/app/x?flag&&a'],
    ['/app/x?sk_live_SECRETNAME12345', '/app/x?…'],
    ['/app/x?a=b&SECRETFLAG', '/app/x?a&…'],
    ['/oauth/authorized/demo/?code=c&state=s&iss=https%3A%2F%2Fop', '/oauth/authorized/demo/?code&state&iss'],
    ['/pub/callback#access_token=SECRET', '/pub/callback#…'],
    ['/pub/callback#x?access_token=SECRET', '/pub/callback#…'],
    ['/pub/account;jsessionid=SECRET', '/pub/account;jsessionid=…'],
    ['/pub/a;jsessionid=SECRET/b;v=1?t=SECRET', '/pub/a;jsessionid=…/b;v=…?t'],
    ['/pub/a;eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJhbGljZSJ9x=SECRET', '/pub/a;…'],
    ['/pub/a;flag', '/pub/a;…'],
    ['/app;sk_live_SECRET/x', '/app;…/x'],
    ['/app%3Bjsessionid=SECRET', '/app;jsessionid=…'],
    ['/app;jsessionid%3DSECRET', '/app;jsessionid=…'],
    ['/app%3bjsessionid%3dSECRET/x?y=1', '/app;jsessionid=…/x?y'],
    ['/app/100%25/x', '/app/100%25/x'],
    ['http://u:SECRETPW@127.0.0.1/app/x', 'http://…@127.0.0.1/app/x'],
    ['http://SECRETTOKEN@127.0.0.1/app/x?y=1', 'http://…@127.0.0.1/app/x?y'],
    ['http://127.0.0.1/app/x@y', 'http://127.0.0.1/app/x@y'],
  ])('%s is logged as %s', (url, logged) => {
    expect(loggableUrl(url)).toBe(logged)
  })

  it('a query "name" that is really a long value is not kept either', () => {
    expect(loggableUrl('/app/x?eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJhbGljZSJ9.c2lnbmF0dXJl')).toBe('/app/x?…')
  })
})
