// Attacks on sign-out, back-channel logout and the error pages that the gateway already resists:
// a state of one kind taken for the other, a hostile `next` carried through the providers'
// end-session pages, logout tokens of another client, secrets in the logs, a readable session
// index, the cost of a pending sign-out, and Referer tricks on the error page's "Go back" link.
// Real Redis, the real authorization server (oidc-provider), real sockets.
import { Redis } from 'ioredis'
import { SignJWT } from 'jose'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { cameFrom } from '../../src/http/error-handler.js'
import { BACKCHANNEL_LOGOUT_EVENT } from '../../src/oauth/backchannel.js'
import { Browser } from '../helpers/browser.js'
import { oidcClient, reserveBaseUrl, startGateway, type TestGateway } from '../helpers/gateway.js'
import { gatewayClient, startOidcProvider, walk, type TestProvider } from '../helpers/oidc.js'
import { startRedis, type TestRedis } from '../helpers/redis.js'
import { startUpstream, type Upstream } from '../helpers/upstream.js'

let redis: TestRedis
let client: Redis
let op: TestProvider
let upstream: Upstream
let gateway: TestGateway
let kid: string

beforeAll(async () => {
  redis = await startRedis()
  client = new Redis(redis.url)
  upstream = await startUpstream()
  const { port, baseUrl } = await reserveBaseUrl()
  op = await startOidcProvider([gatewayClient(baseUrl, 'demo', 'c'), gatewayClient(baseUrl, 'second', 'c2')], { logout: true })
  gateway = await startGateway({
    server: { port, baseUrl },
    store: { type: 'redis', url: redis.url },
    providers: {
      demo: oidcClient(op.issuer, 'c', 's', 'openid email'),
      second: oidcClient(op.issuer, 'c2', 's', 'openid email'),
    },
    routes: [
      { path: '/app/', upstream: upstream.url, provider: 'demo' },
      { path: '/second/', upstream: upstream.url, provider: 'second' },
    ],
  })
  kid = ((await (await fetch(`${op.issuer}/jwks`)).json()) as { keys: Array<{ kid: string }> }).keys[0]!.kid
})

afterAll(async () => {
  await gateway?.close()
  client?.disconnect()
  await Promise.all([op?.close(), upstream?.close()])
  await redis?.release()
})

const json = { accept: 'application/json' }

async function signedIn (login = 'alice', path = '/app/'): Promise<{ browser: Browser, cookie: string }> {
  const browser = new Browser()
  expect((await browser.navigate(`${gateway.url}${path}`, { login })).status).toBe(200)
  return { browser, cookie: browser.cookies.get('gw_session')!.value }
}

async function sessionWorks (cookie: string, path = '/app/'): Promise<boolean> {
  const response = await fetch(`${gateway.url}${path}x`, { headers: { ...json, cookie: `gw_session=${cookie}` } })
  await response.arrayBuffer()
  return response.status === 200
}

/** The same-origin sign-out a page's button sends; the response is the first hop. */
function signOut (browser: Browser, next?: string): Promise<Response> {
  return browser.fetch(`${gateway.url}/oauth/logout/`, {
    method: 'POST',
    body: new URLSearchParams(next === undefined ? {} : { next }),
    headers: { 'content-type': 'application/x-www-form-urlencoded', 'sec-fetch-site': 'same-origin' },
  })
}

async function logoutToken (claims: Record<string, unknown>): Promise<string> {
  const now = Math.floor(Date.now() / 1000)
  return await new SignJWT({ iss: op.issuer, aud: 'c', iat: now, exp: now + 120, jti: crypto.randomUUID(), events: { [BACKCHANNEL_LOGOUT_EVENT]: {} }, ...claims })
    .setProtectedHeader({ alg: 'RS256', kid, typ: 'logout+jwt' }).sign(op.signingKey)
}

function backchannel (provider: string, token: string): Promise<Response> {
  return fetch(`${gateway.url}/oauth/backchannel-logout/${provider}/`, {
    method: 'POST', headers: { 'content-type': 'application/x-www-form-urlencoded', accept: 'application/json' }, body: `logout_token=${token}`,
  })
}

describe('sign-in and sign-out states are not interchangeable', () => {
  it('a real sign-in state brought to the sign-out return address is 400 invalid_state, and the session stays', async () => {
    const { browser, cookie } = await signedIn()
    const login = await browser.fetch(`${gateway.url}/oauth/login/demo/?next=/app/`)
    const state = new URL(login.headers.get('location')!).searchParams.get('state')!
    const response = await browser.fetch(`${gateway.url}/oauth/logout/demo/?state=${encodeURIComponent(state)}`, { headers: json })
    expect(response.status).toBe(400)
    expect(await response.json()).toEqual({ error: 'invalid_state', message: 'This sign-out link has expired or was already used; start again.' })
    expect(await sessionWorks(cookie)).toBe(true)
  })

  it('a real sign-out state brought to the sign-in callback is 400 invalid_state, and signs nobody in', async () => {
    const { browser } = await signedIn()
    const state = new URL((await signOut(browser)).headers.get('location')!).searchParams.get('state')!
    const response = await browser.fetch(`${gateway.url}/oauth/authorized/demo/?code=x&state=${encodeURIComponent(state)}`, { headers: json })
    expect(response.status).toBe(400)
    expect(((await response.json()) as { error: string }).error).toBe('invalid_state')
    expect(browser.cookies.has('gw_session')).toBe(false)
  })
})

describe('the provider walk of a sign-out', () => {
  it.each([
    ['protocol-relative', '//evil.example/'],
    ['absolute', 'https://evil.example/'],
    ['backslash', '/\\evil.example'],
    ['encoded CRLF (header injection)', '/app/%0d%0aSet-Cookie:%20gw_session=planted'],
  ])('carries a hostile next (%s) nowhere: the end-session URL names only the gateway, and the walk ends at /oauth/', async (_name, next) => {
    const { browser } = await signedIn()
    const first = await signOut(browser, next)
    expect(first.status).toBe(302)
    const endSession = new URL(first.headers.get('location')!)
    expect(endSession.origin).toBe(new URL(op.issuer).origin)
    expect(endSession.searchParams.get('post_logout_redirect_uri')).toBe(`${gateway.url}/oauth/logout/demo/`)
    expect(endSession.href).not.toContain('evil')
    expect(endSession.href).not.toContain('planted')
    const end = await walk(browser, endSession.href)
    const last = browser.hops.at(-1)!
    const back = browser.hops.find((hop) => hop.url.startsWith(`${gateway.url}/oauth/logout/demo/`))!
    expect(back.location).toBe('/oauth/')
    for (const hop of browser.hops) expect(hop.location ?? '').not.toMatch(/evil|[\r\n]/)
    expect(end.response.headers.getSetCookie().join('\n')).not.toContain('planted')
    expect(last.status).toBeLessThan(500)
  })

  it('a pending sign-out costs the store one key, sealed (no ID token in clear), expiring with the state', async () => {
    const { browser } = await signedIn()
    const before = new Set(await client.keys('*signout:*'))
    const first = await signOut(browser)
    const idToken = new URL(first.headers.get('location')!).searchParams.get('id_token_hint')!
    const added = (await client.keys('*signout:*')).filter((key) => !before.has(key))
    expect(added).toHaveLength(1)
    const ttl = await client.pttl(added[0]!)
    expect(ttl).toBeGreaterThan(0)
    expect(ttl).toBeLessThanOrEqual(gateway.config.state.ttlMs)
    const value = (await client.get(added[0]!))!
    expect(value).not.toContain(idToken.split('.')[1]!)
    expect(value).not.toContain(idToken.split('.')[2]!)
  })
})

describe('back-channel logout cannot be pointed at someone else', () => {
  it('a token the provider signed for another client (second) is refused at demo\'s address, and a demo session stays', async () => {
    const { cookie } = await signedIn('erin')
    const response = await backchannel('demo', await logoutToken({ aud: 'c2', sub: 'erin' }))
    expect(response.status).toBe(400)
    expect(((await response.json()) as { message: string }).message).toBe('The logout token is meant for another client (aud).')
    expect(await sessionWorks(cookie)).toBe(true)
  })

  it('a token of second ends second\'s sessions only: a session signed in with demo alone stays', async () => {
    const demoOnly = await signedIn('frank')
    const secondOnly = await signedIn('frank', '/second/')
    expect((await backchannel('second', await logoutToken({ aud: 'c2', sub: 'frank' }))).status).toBe(200)
    expect(await sessionWorks(secondOnly.cookie, '/second/')).toBe(false)
    expect(await sessionWorks(demoOnly.cookie)).toBe(true)
  })

  it('keeps no user id in clear in the store: the index keys are hashed and hold session ids, never cookies', async () => {
    const { cookie } = await signedIn('grace-unique-login')
    const keys = await client.keys('*logout:*')
    expect(keys.length).toBeGreaterThan(0)
    for (const key of keys) {
      expect(key).not.toContain('grace')
      // Each entry is a set of session ids (see src/oauth/session-index.ts).
      const members = await client.smembers(key)
      expect(members.length).toBeGreaterThan(0)
      for (const value of members) {
        expect(value).not.toContain('grace')
        expect(value).not.toContain(cookie)
      }
    }
  })
})

describe('no token, logout token, state or cookie in any log line', () => {
  it('through a sign-out walk, a refused state, and refused and accepted logout tokens', async () => {
    const { browser, cookie } = await signedIn('heidi')
    const first = await signOut(browser, '/app/')
    const endSession = new URL(first.headers.get('location')!)
    const secrets = [cookie, endSession.searchParams.get('id_token_hint')!, endSession.searchParams.get('state')!, browser.cookies.get('gw_session_signout')!.value]
    await walk(browser, endSession.href)
    const replay = await browser.fetch(`${gateway.url}/oauth/logout/demo/?state=${endSession.searchParams.get('state')!}`, { headers: json })
    expect(replay.status).toBe(400)
    for (const claims of [{ sub: 'heidi', aud: 'nobody' }, { sub: 'heidi', nonce: 'n' }, { sub: 'heidi' }]) {
      const token = await logoutToken(claims)
      secrets.push(token.split('.')[1]!, token.split('.')[2]!)
      await (await backchannel('demo', token)).arrayBuffer()
    }
    // Lines are written in batches: wait for the last one.
    await new Promise((resolve) => setTimeout(resolve, 100))
    const logs = gateway.logs.join('\n')
    expect(logs).toContain('back-channel logout')
    for (const secret of secrets) expect(logs).not.toContain(secret)
  })
})

describe('the error page\'s "Go back" link from the Referer', () => {
  async function errorPage (referer: string): Promise<string> {
    const response = await fetch(`${gateway.url}/nothing-here`, { headers: { accept: 'text/html', referer } })
    expect(response.status).toBe(404)
    return await response.text()
  }

  const link = (page: string) => /<a class="button" href="([^"]*)">([^<]*)<\/a>/.exec(page)

  it.each([
    ['markup in the query', '/app/x?q="><svg/onload=alert(1)>'],
    ['markup in the path', '/app/"><img src=x onerror=alert(1)>'],
    ['an apostrophe and an ampersand', "/app/x?a=1&b='x'"],
  ])('%s is escaped or percent-encoded, never markup', async (_name, path) => {
    const page = await errorPage(`${gateway.url}${path}`)
    // The handler names may survive as inert text inside the percent-encoded href; a tag may not.
    expect(page).not.toMatch(/<svg|<img/i)
    const [, href, label] = link(page)!
    expect(label).toBe('Go back')
    expect(href).toMatch(/^\/app\//)
    expect(href).not.toMatch(/["<>']/)
  })

  it.each([
    ['javascript:', 'javascript:alert(document.cookie)'],
    ['data:', 'data:text/html,<script>alert(1)</script>'],
    ['another origin', 'https://evil.example/app/'],
    ['an encoded newline in the host part', 'OWN%0d%0a/app/'],
    ['a path that reads as another host', 'OWN/\\evil.example/'],
    ['a dot-segment climb to a protocol-relative path', 'OWN/a/..//evil.example/'],
  ])('%s: the page offers the home page instead', async (_name, referer) => {
    // OWN: the gateway's origin (known only once it runs).
    const [, href, label] = link(await errorPage(referer.replace('OWN', gateway.url)))!
    expect([href, label]).toEqual(['/oauth/', 'Start over'])
  })

  it('an encoded letter after /oauth/ is still the sign-out endpoint to cameFrom', () => {
    expect(cameFrom('https://gw.example.test/oauth/logou%74/demo/?state=x', 'https://gw.example.test', '/broken')).toBeUndefined()
  })
})
